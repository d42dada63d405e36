"""The `cpu` backend (Numba kernels): exact dtype conversions, op semantics equal to the numpy
reference backend, variants, threads, the buffer cache, debug output."""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import braze.core as mx
from braze._src import config
from braze._src import memory as M
from braze._src.backends import base as B

numba = pytest.importorskip("numba")

from braze._src import threads  # noqa: E402
from braze._src.backends.cpu import CpuBackend  # noqa: E402
from braze._src.backends.cpu.lib import scalar  # noqa: E402
from braze._src.backends.cpu.render import CpuVariant  # noqa: E402

BF16 = ml_dtypes.bfloat16


def _cpu():
    if "cpu" not in B.registered():
        B.register("cpu", CpuBackend)
    return B.get("cpu")


@pytest.fixture
def cpu():
    be = _cpu()
    with config.override(backend="cpu"):
        yield be


def run_both(f, *args):
    """f compiled, evaluated on the cpu backend and on the numpy backend: NumPy results."""
    out = {}
    for name in ("cpu", "numpy"):
        _cpu()
        with config.override(backend=name):
            r = mx.compile(f)(*args)
            mx.eval(r)
            out[name] = np.asarray(r)
    return out["cpu"], out["numpy"]


def same(a, b, exact=True, rtol=0.0, scale=1e-3):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind in "biu":
        np.testing.assert_array_equal(a, b)
        return
    x, y = a.astype(np.float64), b.astype(np.float64)
    assert np.array_equal(np.isnan(x), np.isnan(y)), (a, b)
    m = ~np.isnan(x)
    if exact:
        assert np.array_equal(x[m], y[m]), (a, b)  # +0 == -0: max/min ties differ in NumPy
    else:
        fin = m & np.isfinite(y)
        assert np.array_equal(x[m & ~fin], y[m & ~fin]), (a, b)
        np.testing.assert_allclose(x[fin], y[fin], rtol=rtol, atol=rtol * scale)


# -- conversions ---------------------------------------------------------------------------------
@numba.njit(error_model="numpy")
def _down(x, h, b):
    for i in range(x.shape[0]):
        h[i] = scalar.f32_to_f16(x[i])
        b[i] = scalar.f32_to_bf16(x[i])


@numba.njit(error_model="numpy")
def _up(h, f, g):
    for i in range(h.shape[0]):
        f[i] = scalar.f16_to_f32(h[i])
        g[i] = scalar.bf16_to_f32(h[i])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_half_conversions_bit_exact():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 300_000, dtype=np.uint64).astype(np.uint32)
    edge = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00001, 0x7FA00000,
                     0x477FF000, 0x477FEFFF, 0x38800000, 0x387FFFFF, 0x33000000, 0x33000001,
                     0x32FFFFFF, 1, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F808000, 0x3F818000],
                    np.uint32)
    x = np.concatenate([bits, edge]).view(np.float32)
    h = np.empty(x.size, np.uint16)
    b = np.empty(x.size, np.uint16)
    _down(x, h, b)
    # numbers: bit-exact round to nearest even, as NumPy's and ml_dtypes' conversions; NaN:
    # the helpers' documented NaNs (NumPy and ml_dtypes leave NaN bits unspecified)
    nan = np.isnan(x)
    np.testing.assert_array_equal(h[~nan], x[~nan].astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(b[~nan], x[~nan].astype(BF16).view(np.uint16))
    xb = x[nan].view(np.uint32)
    h_nan = (xb >> 16) & 0x8000 | 0x7C00 | (xb & 0x7FFFFF) >> 13  # payload truncated ...
    h_nan[(h_nan & 0x3FF) == 0] |= 1  # ... but kept a NaN
    np.testing.assert_array_equal(h[nan], h_nan.astype(np.uint16))
    np.testing.assert_array_equal(b[nan], ((xb >> 16) & 0x8000 | 0x7FC0).astype(np.uint16))
    every = np.arange(65536, dtype=np.uint16)
    f = np.empty(65536, np.float32)
    g = np.empty(65536, np.float32)
    _up(every, f, g)
    np.testing.assert_array_equal(f.view(np.uint32),
                                  every.view(np.float16).astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(g.view(np.uint32), (every.astype(np.uint32) << 16))


CAST_VALUES = [np.nan, -np.nan, np.inf, -np.inf, 300.7, -300.7, 3e9, -3e9, 1e19, -1e19, 2.0**63,
               1.8e19, -0.9, 65535.5, 4294967296.5, 0.0, -0.0, 1.5, 127.9, -128.9,
               1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-40, 65519.99999999]


@pytest.mark.parametrize("src", ["float32", "float64", "float16", "bfloat16"])
def test_casts_follow_braze_definition(cpu, src):
    """Kernel casts equal the reference backend's, and float -> integer casts equal braze's
    definition (tests/test_casts.py, which covers every edge value; NumPy's and ml_dtypes' own
    out-of-range results are not the reference)."""
    from test_casts import expected

    v = np.array(CAST_VALUES, dtype=np.float64)
    x = mx.array(v, dtype=mx.float64).astype(getattr(mx, src))
    exact = np.asarray(x.astype(mx.float64))  # the values as `src` holds them
    for dst in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool",
                "float16", "bfloat16", "float32", "float64"):
        dt = getattr(mx, "bool_" if dst == "bool" else dst)
        a, b = run_both(lambda v, d=dt: (v * 1).astype(d), x)
        same(a, b)
        if dt.kind in "biu":
            want = [expected(float(e), "bool_" if dst == "bool" else dst) for e in exact]
            np.testing.assert_array_equal(a, np.array(want, dtype=a.dtype), err_msg=dst)


def test_int_semantics_match_numpy(cpu):
    rng = np.random.default_rng(1)
    for dt in ("int8", "int32", "int64", "uint8", "uint32", "uint64"):
        info = np.iinfo(dt)
        vals = np.concatenate([rng.integers(info.min, info.max, 200, dtype=dt, endpoint=True),
                               np.array([0, 1, info.max, info.min, 7], dtype=dt)])
        if info.min < 0:
            vals = np.concatenate([vals, np.array([-1, -7], dtype=dt)])
        a = mx.array(vals)
        b = mx.array(vals[::-1].copy())
        for f in (lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x * y + x - y,
                  lambda x, y: mx.maximum(x, y) - mx.minimum(x, y), lambda x, y: -x + abs(y),
                  lambda x, y: (x << (y & 15)) ^ (x >> (y & 7)), lambda x, y: x ** (y & 7),
                  lambda x, y: (x < y) | (x == y)):
            same(*run_both(f, a, b))
        sh = mx.array(np.array([-1, 0, 1, 7, 8, 31, 63, 64, 100] * 3).astype(dt))
        base = mx.array(np.array([1, -5 if info.min < 0 else 5, 3] * 9).astype(dt))
        same(*run_both(lambda x, y: (x << y) + (x >> y), base, sh))


def test_float_semantics_match_numpy(cpu):
    v = np.array([np.nan, -np.inf, -3.5, -1.0, -0.0, 0.0, 0.5, 1.0, 2.5, np.inf, 7.0, -7.25],
                 dtype=np.float32)
    a = mx.array(v)
    b = mx.array(v[::-1].copy())
    for dt in (mx.float32, mx.float16, mx.bfloat16, mx.float64):
        x, y = a.astype(dt), b.astype(dt)
        for f in (lambda x, y: mx.maximum(x, y) + mx.minimum(x, y) * 2,
                  lambda x, y: x % y + x // y, lambda x, y: (x < y) | (x != y),
                  lambda x, y: mx.where(x > y, x * y, x / y), lambda x, y: mx.sign(x) - y,
                  lambda x, y: mx.round(x * 3.3) + mx.floor(y) - mx.ceil(x),
                  lambda x, y: mx.sqrt(abs(x)) * mx.rsqrt(abs(y) + 1) - x * x):
            same(*run_both(f, x, y))


TRANSCENDENTAL = [mx.exp, mx.log, mx.sin, mx.cos, mx.tanh, mx.erf, mx.sigmoid, mx.log1p,
                  mx.expm1, mx.arctan, mx.sinh, mx.arcsinh]


def test_transcendentals_within_ulps(cpu):
    x = mx.array(np.linspace(-5, 5, 1001, dtype=np.float32))
    for f in TRANSCENDENTAL:
        a, b = run_both(lambda v, f=f: f(v) * 1.5, x)
        same(a, b, exact=False, rtol=4e-6 if f is not mx.sinh else 1e-5)
    a, b = run_both(lambda p, q: mx.power(abs(p), q) + mx.arctan2(p, q), x, x[::-1])
    same(a, b, exact=False, rtol=2e-5)


# -- random graphs: cpu vs numpy ----------------------------------------------------------------
_DTYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int8", "uint8", "bool"]
_ARITH = {
    "f": ["add", "subtract", "multiply", "divide", "maximum", "minimum", "floor_divide",
          "remainder"],
    "i": ["add", "subtract", "multiply", "maximum", "minimum", "floor_divide", "remainder",
          "bitwise_and", "bitwise_xor"],
    "b": ["logical_and", "logical_or", "not_equal", "equal", "maximum", "minimum"],
}
_UN = {"f": ["negative", "abs", "square", "floor", "sign"], "i": ["negative", "abs", "square"],
       "b": ["logical_not"]}
_MATH = ["exp", "sin", "tanh", "sigmoid", "log1p"]
_SHAPES = [((5, 4), (4,)), ((5, 4), (5, 1)), ((3, 1, 4), (2, 4)), ((7,), ()), ((4, 6), (4, 6)),
           ((1,), (3, 2))]


@st.composite
def graphs(draw):
    dt = draw(st.sampled_from(_DTYPES))
    kind = "b" if dt == "bool" else ("f" if "float" in dt else "i")
    shapes = draw(st.sampled_from(_SHAPES))
    layout = draw(st.sampled_from(["plain", "reversed", "transposed"]))
    n_ops = draw(st.integers(2, 5))
    ops = []
    for _ in range(n_ops):
        r = draw(st.integers(0, 9))
        if kind == "f" and r == 0:
            ops.append(("m", draw(st.sampled_from(_MATH))))
        elif r < 4:
            ops.append(("u", draw(st.sampled_from(_UN[kind]))))
        else:
            c = None
            if draw(st.booleans()):
                if kind == "f":
                    c = draw(st.sampled_from([2.0, -0.5, math.nan, math.inf, -math.inf,
                                              0.1, 3.0]))
                elif kind == "i":
                    c = draw(st.sampled_from([3, -2, 0, 1])) if dt != "uint8" else 3
                else:
                    c = draw(st.booleans())
            ops.append(("b", draw(st.sampled_from(_ARITH[kind])), c))
    seed = draw(st.integers(0, 3))
    return dt, shapes, layout, ops, seed


def _make_inputs(dt, shapes, layout, seed):
    rng = np.random.default_rng(seed)
    xs = []
    for shp in shapes:
        v = rng.standard_normal(shp) * 4
        if dt in ("int8", "int32"):
            v = np.round(v * 10)
        elif dt == "uint8":
            v = np.abs(np.round(v * 10))
        elif dt == "bool":
            v = v > 0
        v = v.astype(BF16 if dt == "bfloat16" else dt)
        if v.ndim and v.size > 1:
            v[(0,) * v.ndim] = v.flat[-1]  # keep ties around
        x = mx.array(v)
        if layout == "reversed" and x.ndim:
            x = x[::-1]
        elif layout == "transposed" and x.ndim >= 2:
            x = mx.array(np.ascontiguousarray(np.swapaxes(v, 0, 1))).swapaxes(0, 1)
        xs.append(x)
    return xs


def _build(ops):
    def f(x, y):
        vals = [x, y]
        for op in ops:
            a = vals[-1]
            if op[1] == "log1p":  # near -1 it turns a last-ulp difference of its input
                vals.append(mx.log1p(mx.abs(a)))  # into any error (log1p(tanh(-6)))
            elif op[0] in "um":
                vals.append(getattr(mx, op[1])(a))
            else:
                b = vals[-2] if op[2] is None else op[2]
                vals.append(getattr(mx, op[1])(a, b))
        return vals[-1], vals[-2]
    return f


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(graphs())
def test_random_elementwise_graphs_cpu_equals_numpy(g):
    dt, shapes, layout, ops, seed = g
    xs = _make_inputs(dt, shapes, layout, seed)
    f = _build(ops)
    approx = any(op[0] == "m" for op in ops)
    outs = {}
    for name in ("cpu", "numpy"):
        _cpu()
        with config.override(backend=name):
            r = mx.compile(f)(*xs)
            mx.eval(r)
            outs[name] = [np.asarray(v) for v in r]
    # mathlib results are within 2 ulp of NumPy's; later ops in a random chain can amplify that
    # (a difference of two close values; sin of exp(y) = 326 turns exp's last ulp into 3e-5),
    # so float32 gets a few hundred ulp of headroom, absolute in the magnitude of the values
    tol = {"float16": 4e-3, "bfloat16": 3e-2}.get(dt, 1e-4)
    ref = [b.astype(np.float64) for b in outs["numpy"]]
    scale = max([1e-3] + [float(np.max(np.abs(r[np.isfinite(r)]), initial=0)) for r in ref])
    for a, b in zip(outs["cpu"], outs["numpy"]):
        if approx and a.dtype.kind == "f" or (a.dtype.kind == "V"):
            same(a.astype(np.float64) if a.dtype.kind == "V" else a,
                 b.astype(np.float64) if b.dtype.kind == "V" else b,
                 exact=not approx, rtol=tol, scale=scale)
        else:
            same(a, b)


# -- variants ------------------------------------------------------------------------------------
def _variants(be, f, *xs):
    c = mx.compile(f)
    r = c(*xs)
    mx.eval(r)
    seen = set()
    for e in be._entries.values():
        seen |= set(e.programs)
    return r, seen


def test_variant_selection(cpu):
    f = lambda x, y: x * y + 1.0  # noqa: E731
    x = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    _, seen = _variants(cpu, f, x, x + 0)
    assert CpuVariant("contiguous", 0, "VV") in seen
    _, seen = _variants(cpu, f, x, mx.array(2.0))
    assert CpuVariant("contiguous", 0, "VS") in seen
    r, seen = _variants(cpu, f, x, mx.array(np.arange(4, dtype=np.float32)))
    assert CpuVariant("strided", 2, "VV") in seen
    np.testing.assert_array_equal(np.asarray(r), np.arange(12).reshape(3, 4) * np.arange(4) + 1)
    # negative strides go strided; collapsed dims: (2, 3, 4) reversed on axis 0 is rank 2
    z = mx.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    r, seen = _variants(cpu, f, z[::-1], z)
    assert CpuVariant("strided", 2, "VV") in seen
    zn = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(np.asarray(r), zn[::-1] * zn + 1)
    # column-major inputs stay contiguous (F order)
    xt = mx.array(np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)))
    r, seen = _variants(cpu, f, xt, xt + 0)
    np.testing.assert_array_equal(np.asarray(r), np.arange(12).reshape(3, 4) ** 2 + 1)


def test_a_kept_flat_layout_is_checked_on_every_call(cpu):
    # the launcher keeps one FLAT layout per shape, and strided ones per input strides;
    # inputs of that shape in another memory order, transposed, broadcast or sliced must not
    # run with a layout kept for others
    f = mx.compile(lambda x, y: x * y + 1.0)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = a[::-1] - 5
    c, ct = mx.array(a), mx.array(np.ascontiguousarray(a.T))  # C order; ct.T: F order
    d, dt = mx.array(b), mx.array(np.ascontiguousarray(b.T))
    one = mx.array(np.float32(3.0)).reshape(1, 1)  # broadcasts: a single element
    cases = [  # (x, y, the FLAT layout the call keeps: its memory order and scalars)
        (c, d, "C VV"),
        (ct.T, dt.T, "F VV"),  # both F order: FLAT in F order
        (c, one, "C VS"),
        (c, mx.array(np.float32(-2.0)).reshape(1, 1), "C VS"),  # another scalar, same slot
        (c, dt.T, None),  # mixed orders: strided
        (mx.broadcast_to(c[:1], (3, 4)), d, None),  # broadcast: strided
        (mx.array(np.arange(24, dtype=np.float32).reshape(6, 4))[::2], d, None),  # sliced
        (mx.array(np.arange(36, dtype=np.float32).reshape(9, 4))[::3], d, None),  # other strides
        (dt.T, mx.array(np.arange(24, dtype=np.float32).reshape(6, 4))[::2], None),
        (one, d, "C SV"),
        (c, d, "C VV"),
    ]
    for x, y, kept in cases * 2:
        mx.eval(x, y)
        want = np.asarray(x).astype(np.float64) * np.asarray(y) + 1.0
        np.testing.assert_array_equal(np.asarray(f(x, y)), want)
        if kept is not None:
            lays = [e.layouts.get((3, 4)) for e in cpu._entries.values()]
            assert kept in [f"{k.order} {k.scalars}" for k in lays if k is not None]


def test_a_kept_flat_layout_donates_as_the_general_path(cpu):
    """A call with a kept FLAT layout (the lean path) picks the donors the general path picks
    (inputs in order, one output cursor, dtypes matching: the int region's float input is
    passed over) and computes the same values; a read-only input is never written."""
    from braze._src.backends.cpu import launch

    def fun(g, k, m, s):
        return m * s + g, m - (m * s + g) * g, (g > 0).astype(mx.int32) + k

    rng = np.random.default_rng(3)
    n0 = len(cpu._entries)
    args = [rng.standard_normal((4, 5)).astype(np.float32),
            rng.integers(-9, 9, (4, 5)).astype(np.int32),
            rng.standard_normal((4, 5)).astype(np.float32), np.float32(2.0)]
    mx.eval(mx.compile(fun)(*map(mx.array, args)))
    entries = list(cpu._entries.values())[n0:]
    assert sorted(len(e.ir.output_dtypes) for e in entries) == [1, 2]
    for e in entries:
        def call(donatable, kept, writeable=True):
            ins = []
            for x in e.ir.inputs:  # fresh values of each input's dtype (constants: scalars)
                v = rng.standard_normal((4, 5)) * 9 if not x.const else np.ones((1, 1))
                ins.append(np.asarray(v, x.dtype.np_dtype))
                ins[-1].flags.writeable = writeable
            if kept:
                outs = launch.FLAT.run_kept(e, ins, [ins[k] for k in e.run], (4, 5), donatable,
                                            e.layouts[(4, 5)])
            else:  # the general path: forget the kept layout for this call
                e.layouts.pop((4, 5))
                outs = launch.run(cpu, e.ir, e, ins, (4, 5), donatable)
            return [next((k for k, x in enumerate(ins) if x is o), None) for o in outs]

        n = e.ir.n_inputs
        for flags in [None, [True] * n, [False] + [True] * (n - 1), [True] + [False] * (n - 1)]:
            want = call(flags, kept=False)  # builds the kernel of its donors
            assert call(flags, kept=True) == want, (e.ir.name, flags)
        call([True] * n, kept=False, writeable=False)
        assert call([True] * n, kept=True, writeable=False) == [None] * len(e.out_np)
    f = mx.compile(fun)
    for _ in range(3):  # kept layouts from here on: the values stay the uncompiled ones
        for g, w in zip(f(*map(mx.array, args)), fun(*map(mx.array, args))):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_a_strided_layout_seen_before_skips_the_flat_attempt(cpu, monkeypatch):
    """A per-channel scale (a vision model's, every call) finds its kept strided layout first;
    dense inputs of the same shape still run FLAT; values are NumPy's."""
    from braze._src.backends.cpu import launch

    tried = []
    flat_layout = launch.FLAT.layout
    monkeypatch.setattr(launch.FLAT, "layout", lambda *a: tried.append(1) or flat_layout(*a))
    f = mx.compile(lambda x, s: x * s + 1.0)
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    s = np.array([0.5, -1.0, 2.0, 3.0], np.float32)
    for k in range(3):
        np.testing.assert_array_equal(np.asarray(f(mx.array(x), mx.array(s))), x * s + 1)
    assert len(tried) == 1
    dense = np.broadcast_to(s, x.shape).copy()
    np.testing.assert_array_equal(np.asarray(f(mx.array(x), mx.array(dense))), x * s + 1)
    assert any("C VV" == f"{lay.order} {lay.scalars}" for e in cpu._entries.values()
               for key, lay in e.layouts.items() if key == (2, 3, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(4, 16, 16, 4), (5, 7, 3), (13, 3), (2, 3, 200)])
def test_short_strided_rows_merge_with_their_row_vectors_repeated(cpu, shape, dtype):
    """An NHWC tensor times per-channel vectors (one with an offset into a larger buffer)
    plus a scalar: rows shorter than SHORT_ROW are merged (the vectors repeated per call),
    long rows are not; the values are NumPy's, the inputs unchanged, every call."""
    from braze._src.backends.cpu import launch

    rng = np.random.default_rng(7)
    c = shape[-1]
    x = rng.standard_normal(shape).astype(dtype)
    big = rng.standard_normal(c + 5).astype(dtype)
    v = rng.standard_normal(c).astype(dtype)
    f = mx.compile(lambda x, a, b, s: (x * a - b) * s)
    for _ in range(3):
        before = (x.copy(), big.copy())
        got = f(mx.array(x), mx.array(big)[2:2 + c], mx.array(v), mx.array(dtype(1.5)))
        want = (x * big[2:2 + c] - v) * dtype(1.5)
        np.testing.assert_array_equal(np.asarray(got), want)
        np.testing.assert_array_equal(x, before[0])
        np.testing.assert_array_equal(big, before[1])
    lays = [lay for e in cpu._entries.values() for key, lay in e.layouts.items()
            if isinstance(lay, launch._Strided.Layout) and key[0] == shape]
    assert lays and all(bool(lay.tiled) == (c < launch.SHORT_ROW) for lay in lays)


def test_one_strided_kernel_serves_every_shape_of_a_rank(cpu):
    f = mx.compile(lambda x, y: x - y * 2.0, shapeless=True)
    n0 = len(cpu._entries)
    for shp in [(3, 4), (5, 7), (2, 9)]:
        x = mx.array(np.ones(shp, np.float32))
        y = mx.array(np.arange(shp[1], dtype=np.float32))
        r = f(x, y)
        np.testing.assert_array_equal(np.asarray(r), 1 - 2 * np.arange(shp[1])[None] + 0 * x)
    progs = [p for e in list(cpu._entries.values())[n0:] for p in e.programs]
    assert progs.count(CpuVariant("strided", 2, "VV")) == 1


def test_zero_d_and_empty_inputs(cpu):
    f = lambda x, y: x * y + 1.0  # noqa: E731
    same(*run_both(f, mx.array(3.0), mx.array(np.arange(5, dtype=np.float32))))
    same(*run_both(f, mx.array(3.0), mx.array(2.0)))
    same(*run_both(f, mx.array(np.zeros((0, 3), np.float32)), mx.array(2.0)))


def test_constants_exact_in_source(cpu):
    # baked: integral floats (2**70 needs all its digits), infinities, NaN
    f = mx.compile(lambda x: mx.where(x > 0, x * 2.0 ** 70, math.nan) + mx.array(-math.inf))
    x = mx.array(np.array([1.0, -1.0])).astype(mx.float64)
    r = np.asarray(f(x))
    assert r[0] == -math.inf and math.isnan(r[1])
    src = [p.source for e in cpu._entries.values() for p in e.programs.values()]
    assert any(f"np.float64({2.0 ** 70!r})" in s and "float('-inf')" in s for s in src)


def test_debug_4_prints_kernel_source(cpu, capfd):
    with config.override(debug=4):
        f = mx.compile(lambda x: mx.exp(x) * 3.25 - 1.0)
        mx.eval(f(mx.array(np.arange(3, dtype=np.float32))))
    err = capfd.readouterr().err
    assert "def kernel(" in err and "Exp" in err and "# t0: float32" in err


# -- threads -------------------------------------------------------------------------------------
def test_threads_give_identical_results(cpu):
    x = mx.array(np.random.default_rng(0).standard_normal(300_001).astype(np.float32))
    f = mx.compile(lambda v: mx.sigmoid(v) * v + 2.0)
    prev = threads.set_split_cost(float("inf"))
    try:
        one = np.asarray(f(x))
        threads.set_split_cost(0)
        with config.override(num_threads=3):
            n = threads.POOL.launches
            many = np.asarray(f(x))
            assert threads.POOL.launches == n + 1
    finally:
        threads.set_split_cost(prev)
    np.testing.assert_array_equal(one, many)


def test_small_kernels_stay_on_the_calling_thread(cpu):
    n = threads.POOL.launches
    f = mx.compile(lambda v: v * 2.0 + 1.0)
    mx.eval(f(mx.array(np.ones(100, np.float32))))
    assert threads.POOL.launches == n


# -- buffer cache --------------------------------------------------------------------------------
def test_buffer_cache_reuses_freed_buffers(cpu):
    M.clear_cache()
    nbytes = 1 << 20
    M._pool_state()  # started (else by the first START_BYTES of large buffers)
    a = M.empty((nbytes // 4,), np.float32)
    assert a.base is None and a.flags.owndata
    if not M._pool["state"]:
        pytest.skip("allocator hook unavailable")
    assert M.get_cache_memory() == 0
    addr = a.__array_interface__["data"][0]
    del a
    assert M.get_cache_memory() == nbytes
    hits = M.cache_stats()["hits"]
    b = M.empty((nbytes // 4,), np.float32)
    assert b.__array_interface__["data"][0] == addr
    assert M.cache_stats()["hits"] == hits + 1 and M.get_cache_memory() == 0
    del b
    prev = M.set_cache_limit(0)
    try:
        assert M.get_cache_memory() == 0
        c = M.empty((nbytes // 4,), np.float32)
        del c
        assert M.get_cache_memory() == 0  # over the limit: released
    finally:
        M.set_cache_limit(prev)
    d = M.empty((nbytes // 4,), np.float32)
    del d
    assert M.get_cache_memory() == nbytes
    M.clear_cache()
    assert M.get_cache_memory() == 0


def test_kernel_outputs_come_from_the_buffer_cache(cpu):
    f = mx.compile(lambda v: v * 2.0 + 1.0)
    x = mx.array(np.ones(1 << 18, np.float32))
    mx.eval(f(x))  # compile
    if not M._pool_state():
        pytest.skip("allocator hook unavailable")
    M.clear_cache()
    y = f(x)
    mx.eval(y)
    addr = np.asarray(y).__array_interface__["data"][0]
    del y
    assert M.get_cache_memory() >= (1 << 20)
    active = mx.get_active_memory()
    z = f(x)
    mx.eval(z)
    assert np.asarray(z).__array_interface__["data"][0] == addr
    assert mx.get_active_memory() == active + (1 << 20)
    np.testing.assert_array_equal(np.asarray(z), 3.0)


def test_donation_on_cpu(cpu):
    f = mx.compile(lambda v: mx.sin(v) + 1.0)
    x = mx.arange(16, dtype=mx.float32)
    mx.eval(x)
    addr = np.asarray(x).__array_interface__["data"][0]
    out = f(x)
    del x
    mx.eval(out)
    assert np.asarray(out).__array_interface__["data"][0] == addr


def test_donated_multi_output_kernel_matches_reference(cpu):
    """An Adam-like step written over its own inputs: each output goes into a donated input
    buffer (the kernel's pointer arguments are `noalias`, so the loop stays vectorized) and
    the values equal the numpy reference's."""
    def step(p, m, v, g):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * mx.square(g)
        return p - 1e-3 * m / (mx.sqrt(v) + 1e-8), m, v

    rng = np.random.default_rng(0)
    n = 4099  # vector body + remainder
    init = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    init[2] = np.abs(init[2])
    g_np = rng.standard_normal(n).astype(np.float32)
    with config.override(backend="numpy"):
        ref = mx.compile(step)(*(mx.array(a) for a in init), mx.array(g_np))
        mx.eval(ref)
        ref = [np.asarray(r).copy() for r in ref]
    f = mx.compile(step)
    p, m, v = (mx.array(a) for a in init)
    g = mx.array(g_np)
    mx.eval(p, m, v, g)
    before = sorted(np.asarray(a).__array_interface__["data"][0] for a in (p, m, v))
    p, m, v = f(p, m, v, g)
    mx.eval(p, m, v)
    assert sorted(np.asarray(a).__array_interface__["data"][0] for a in (p, m, v)) == before
    for got, want in zip((p, m, v), ref):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_kernels_compile_with_noalias_arguments(cpu):
    f = mx.compile(lambda v: v * 2.0 + 1.0)
    mx.eval(f(mx.arange(8, dtype=mx.float32)))
    sources = [prog.source for e in cpu._entries.values() for prog in e.programs.values()]
    assert sources
    for src in sources:  # the printed module is the compiled one: it imports kernel_njit
        assert "from braze._src.backends.cpu.compiler import kernel_njit as njit" in src
        assert "from numba import njit" not in src


def test_complex_regions_run_on_the_reference(cpu):
    x = mx.array(np.array([1 + 2j, 3 - 1j], np.complex64))
    same(*run_both(lambda v: v * v + 1.0, x))


@pytest.mark.parametrize("dt", [mx.float32, mx.float64, mx.float16, mx.bfloat16])
def test_square_power_is_a_multiply_with_pow_semantics(cpu, dt):
    """`x ** 2` (a Power by the broadcast constant 2) becomes Square (the square_powers pass),
    rendered as x * x: bit-identical to the reference (NaN, infinities, -0, overflow; the sign
    of a NaN is not part of the semantics), elementwise and inside a row kernel."""
    vals = np.array([0, -0.0, 1.5, -3, np.inf, -np.inf, np.nan, 1e20, 1e-30, 65504, 3e38,
                     -2.5e-20], np.float32)
    x = mx.array(vals).astype(dt)
    cpu._entries.clear()  # a cache: only this test's kernels are looked at below
    got, ref = run_both(lambda a: (a + 0) ** 2, x)
    same(got, ref)
    g64, r64 = got.astype(np.float64), ref.astype(np.float64)
    num = ~np.isnan(r64)
    assert np.array_equal(np.signbit(g64[num]), np.signbit(r64[num]))
    got, ref = run_both(lambda a: mx.sum((a - 1) ** 2, axis=-1, keepdims=True), x)
    same(got, ref, exact=False, rtol=1e-6 if dt in (mx.float32, mx.float64) else 1e-2)
    names = [p.name for e in cpu._entries.values() for p in e.programs.values()]
    assert any("Square" in n for n in names) and not any("Power" in n for n in names)
    assert not any("power_f" in p.source for e in cpu._entries.values()
                   for p in e.programs.values())


def test_float_constants_are_inputs_one_kernel_serves_every_value(cpu):
    """A Python float (a learning rate, a scale) is a run-time scalar input of the kernel, not
    a literal: every value after the first reuses the same kernel; integral constants are
    still literals."""
    f = mx.compile(lambda x, c: x * c + 2.0)
    x = mx.arange(8, dtype=mx.float32)
    cpu._entries.clear()  # a cache: only this test's kernels are looked at below
    mx.eval(f(x, 0.1))
    before = {k for k in cpu._entries}
    for c in (0.25, 0.3, 1e-3):
        np.testing.assert_array_equal(np.asarray(f(x, c)),
                                      np.arange(8, dtype=np.float32) * np.float32(c) + 2)
    assert {k for k in cpu._entries} == before
    sources = [p.source for e in cpu._entries.values() for p in e.programs.values()
               if "Multiply" in p.name and "Add" in p.name]
    assert sources and all("np.float32(2.0)" in s and "0.1" not in s.split('"""')[2]
                           for s in sources)
