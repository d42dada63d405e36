"""Casts: braze's definition of float -> integer/bool and of -> float16/bfloat16 conversions
(braze/_src/casts.py, docs/architecture.md "Casts"), checked eager, compiled on the `numpy`
reference backend and compiled on the `cpu` (Numba) backend, and against MLX when installed.

The expected values are computed by `expected` below, a pure-Python transcription of the
definition (Python's int(float) truncates exactly; float/int comparisons are exact), and the
literal table `TABLE` pins the definition itself. Nothing here asks NumPy or ml_dtypes how they
convert out-of-range values.
"""
import importlib.util
import math

import ml_dtypes
import numpy as np
import pytest

import braze.core as mx
from braze._src import casts, config
from braze._src.backends import base as B

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
BACKENDS = ["numpy", pytest.param("cpu", marks=pytest.mark.skipif(not HAVE_NUMBA,
                                                                   reason="needs numba"))]
BF16 = ml_dtypes.bfloat16
FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]
NP = {"float16": np.float16, "bfloat16": BF16, "float32": np.float32, "float64": np.float64,
      "bool_": np.bool_, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
      "uint64": np.uint64, "int8": np.int8, "int16": np.int16, "int32": np.int32,
      "int64": np.int64}
BITS = {"float16": np.uint16, "bfloat16": np.uint16, "float32": np.uint32, "float64": np.uint64}
NAN, INF = math.nan, math.inf


# -- the definition ---------------------------------------------------------------------------
def _signed(x: float, bits: int) -> int:
    """Truncation to a signed `bits`-bit integer; outside [-2**(bits-1), 2**(bits-1)) and NaN
    give -2**(bits-1)."""
    lim = 2 ** (bits - 1)
    return int(x) if -lim <= x < lim else -lim  # NaN fails the comparison


def _low(v: int, bits: int, signed: bool) -> int:
    v %= 2 ** bits
    return v - 2 ** bits if signed and v >= 2 ** (bits - 1) else v


def expected(x: float, dst: str):
    """The value of float `x` cast to integer dtype `dst` by braze's definition."""
    if dst == "bool_":
        return x != 0  # NaN is True
    if dst in ("int8", "int16", "uint8", "uint16"):  # through int32, then the low bits
        return _low(_signed(x, 32), int(dst.lstrip("uint")), dst.startswith("int"))
    if dst == "int32":
        return _signed(x, 32)
    if dst == "int64":
        return _signed(x, 64)
    if dst == "uint32":  # through int64, then the low 32 bits
        return _low(_signed(x, 64), 32, False)
    assert dst == "uint64"
    if x >= 2 ** 64:
        return 0
    if x >= 2 ** 63:
        return int(x)
    return _low(_signed(x, 64), 64, False)


#: value -> (bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64), written by hand
#: from the definition (the rows of issue 19 first: MLX's bfloat16 -> int8/uint8/int32 numbers)
TABLE = [
    (300.0, (True, 44, 300, 300, 300, 44, 300, 300, 300)),
    (-300.0, (True, 212, 65236, 4294966996, 2**64 - 300, -44, -300, -300, -300)),
    (1e10, (True, 0, 0, 1410065408, 10**10, 0, 0, -2**31, 10**10)),
    (-1e10, (True, 0, 0, 2884901888, 2**64 - 10**10, 0, 0, -2**31, -10**10)),
    (NAN, (True, 0, 0, 0, 2**63, 0, 0, -2**31, -2**63)),
    (INF, (True, 0, 0, 0, 0, 0, 0, -2**31, -2**63)),
    (-INF, (True, 0, 0, 0, 2**63, 0, 0, -2**31, -2**63)),
    (127.9, (True, 127, 127, 127, 127, 127, 127, 127, 127)),
    (-128.9, (True, 128, 65408, 2**32 - 128, 2**64 - 128, -128, -128, -128, -128)),
    (0.0, (False, 0, 0, 0, 0, 0, 0, 0, 0)),
    (-0.0, (False, 0, 0, 0, 0, 0, 0, 0, 0)),
    (-0.9, (True, 0, 0, 0, 0, 0, 0, 0, 0)),
    (-1.5, (True, 255, 65535, 2**32 - 1, 2**64 - 1, -1, -1, -1, -1)),
    (255.5, (True, 255, 255, 255, 255, -1, 255, 255, 255)),
    (65536.0, (True, 0, 0, 65536, 65536, 0, 0, 65536, 65536)),
    (2.0**31, (True, 0, 0, 2**31, 2**31, 0, 0, -2**31, 2**31)),
    (-2.0**31, (True, 0, 0, 2**31, 2**64 - 2**31, 0, 0, -2**31, -2**31)),
    (2.0**32, (True, 0, 0, 0, 2**32, 0, 0, -2**31, 2**32)),
    (2.0**63, (True, 0, 0, 0, 2**63, 0, 0, -2**31, -2**63)),
    (-2.0**63, (True, 0, 0, 0, 2**63, 0, 0, -2**31, -2**63)),
    (2.0**64, (True, 0, 0, 0, 0, 0, 0, -2**31, -2**63)),
    (1.8e19, (True, 0, 0, 0, 18000000000000000000, 0, 0, -2**31, -2**63)),
]


def test_the_table_is_the_definition():
    for x, row in TABLE:
        assert tuple(expected(x, d) for d in INTS) == row, x


def edge_values(src: str) -> np.ndarray:
    """Edge values representable in `src` (deduplicated by bits): NaN of both signs, +-inf,
    +-0, fractions, both sides of every integer range bound and their neighbours in `src`,
    huge values, the largest finite value and the smallest subnormal."""
    base = [NAN, -NAN, INF, -INF, 0.0, -0.0, 0.5, -0.5, 0.9999, -0.9999, 1.5, -1.5, 2.7, -2.7,
            127.9, -128.9, 255.5, 300.7, -300.7, 65535.5, 1e10, -1e10, 1.8e19, 3e38, -3e38,
            1e300, -1e300]
    for b in (7, 8, 15, 16, 31, 32, 63, 64):
        for v in (2.0 ** b, -2.0 ** b):
            base += [v, v - 1, v + 1, v - 0.5, v + 0.5]
    t = NP[src]
    with np.errstate(over="ignore", invalid="ignore"):
        # float64 -> src once (float16 rounds directly; bfloat16 from float32)
        vals = np.array(base, np.float64)
        vals = vals.astype(np.float32).astype(t) if src == "bfloat16" else vals.astype(t)
        bits = vals.view(BITS[src])
        fin = np.isfinite(vals.astype(np.float64)) & (vals.astype(np.float64) != 0)
        nb = np.concatenate([bits, bits[fin] + 1, bits[fin] - 1])  # the neighbours in `src`
        fi = ml_dtypes.finfo(t) if src == "bfloat16" else np.finfo(t)
        extra = np.array([fi.max, -fi.max, fi.smallest_subnormal], t).view(BITS[src])
    nb = np.concatenate([nb, extra]).astype(BITS[src])
    _, first = np.unique(nb, return_index=True)
    return nb[np.sort(first)].view(t)


def to_f64(v: np.ndarray) -> np.ndarray:
    """Exact widening (bfloat16 from its bits)."""
    if v.dtype == BF16:
        return (v.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return v.astype(np.float64)


def expected_array(v: np.ndarray, dst: str) -> np.ndarray:
    return np.array([expected(float(x), dst) for x in to_f64(v)], dtype=NP[dst])


def check(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape)
    bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    assert bad.size == 0, (what, [(i, got.reshape(-1)[i], want.reshape(-1)[i]) for i in bad[:8]])


def _braze(v: np.ndarray) -> mx.array:
    return mx.array(v, dtype=mx.float64) if v.dtype == np.float64 else mx.array(v)


def _register_cpu():
    if "cpu" not in B.registered():  # as tests/test_cpu_backend.py
        from braze._src.backends.cpu import CpuBackend
        B.register("cpu", CpuBackend)


def _on(backend):
    if backend == "cpu":
        _register_cpu()
    return config.override(backend=backend)


# -- eager ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("src", FLOATS)
def test_eager_float_to_int_follows_the_definition(src):
    v = edge_values(src)
    x = _braze(v)
    assert x.dtype == getattr(mx, src)
    for dst in INTS:
        check(x.astype(getattr(mx, dst)), expected_array(v, dst), (src, dst))
        # the NumPy-level helper every construction path uses
        check(casts.cast(v, np.dtype(NP[dst])), expected_array(v, dst), (src, dst, "cast"))
        # one element at a time (0-d arrays: the scalar path) and the empty array
        want = expected_array(v, dst)
        for i in range(v.size):
            check(casts.cast(v[i:i + 1].reshape(()), np.dtype(NP[dst])), want[i].reshape(()),
                  (src, dst, "0-d", v[i]))
        check(x[:0].astype(getattr(mx, dst)), want[:0], (src, dst, "empty"))
        # only values that truncate into the target's range (no NaN): NumPy's own cast
        if dst != "bool_":
            info = np.iinfo(NP[dst])
            x64 = to_f64(v)
            inside = (x64 > info.min - 1.0) & (x64 < info.max + 1.0)
            check(casts.cast(v[inside], np.dtype(NP[dst])), want[inside], (src, dst, "inside"))


def test_eager_literal_table_for_every_float_dtype():
    for src in FLOATS:
        vals = np.array([x for x, _ in TABLE])
        with np.errstate(over="ignore"):
            v = vals.astype(np.float32).astype(BF16) if src == "bfloat16" else vals.astype(NP[src])
        rep = to_f64(v)
        x = _braze(v)
        for j, dst in enumerate(INTS):
            got = np.asarray(x.astype(getattr(mx, dst)))
            for i, (val, row) in enumerate(TABLE):
                if rep[i] == val or (math.isnan(val) and math.isnan(rep[i])):
                    assert got[i] == row[j], (src, dst, val, got[i], row[j])


def test_complex_to_int_uses_the_real_part():
    c = np.array([1e10 + 1j, complex(NAN, 0), 300.7 - 2j, -1e10, 0j, 1j, -1.5 + 0j], np.complex64)
    x = mx.array(c)
    for dst in INTS:
        got = np.asarray(x.astype(getattr(mx, dst)))
        if dst == "bool_":
            check(got, c != 0, dst)
        else:
            check(got, expected_array(c.real.copy(), dst), dst)


def test_construction_and_assignment_follow_the_definition():
    vals = [300.7, -300.7, 1e10, -1e10, NAN, INF, -1.5, 127.9, -128.9]
    v64 = np.array(vals)
    for dst in INTS:
        dt = getattr(mx, dst)
        want = expected_array(v64, dst)
        check(mx.array(v64, dtype=dt), want, ("array(float64 ndarray)", dst))
        check(mx.array(v64.astype(np.float32), dtype=dt), expected_array(
            v64.astype(np.float32), dst), ("array(float32 ndarray)", dst))
        check(mx.array(vals, dtype=dt), want, ("array(list)", dst))
        for i, x in enumerate(vals):
            check(mx.array(x, dtype=dt), want[i].reshape(()), ("array(scalar)", dst, x))
            a = mx.zeros((2,), dt)
            a[1] = x
            check(a, np.array([0, want[i]], NP[dst]), ("setitem", dst, x))
        check(mx.full((len(vals),), mx.array(v64, dtype=mx.float64), dtype=dt), want,
              ("full", dst))


def test_linspace_and_arange_to_int_follow_the_definition():
    lin = np.asarray(mx.linspace(0, 1e10, 3, dtype=mx.int32))
    check(lin, np.array([0, -2**31, -2**31], np.int32), "linspace")
    # start and start + step are cast (int32: 4e9 -> -2**31), then the range wraps like int32
    check(mx.arange(0, 1e10, 4e9, dtype=mx.int32), np.array([0, -2**31, 0], np.int32), "arange")


# -- compiled ------------------------------------------------------------------------------------
def _all_casts(v):
    y = v * 1  # a second op, so the casts fuse into one kernel
    return tuple(y.astype(getattr(mx, d)) for d in INTS)


def _row_casts(v):
    """Each cast inside a row region (a reduction over the last axis with its producers)."""
    out = []
    for d in INTS:
        y = (v * 1).astype(getattr(mx, d))
        out += [y, mx.max(y, axis=-1), mx.min(y, axis=-1)]
    return tuple(out)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src", FLOATS)
def test_compiled_float_to_int_follows_the_definition(backend, src):
    v = edge_values(src)
    want = [expected_array(v, d) for d in INTS]
    with _on(backend):
        # contiguous kernel, one launch for all targets
        f = mx.compile(_all_casts)
        got = f(_braze(v))
        mx.eval(got)
        assert f.stats()["fused_kernels"] == 1
        for d, g, w in zip(INTS, got, want):
            check(g, w, (backend, src, d, "contiguous"))
        # strided kernel: a transposed 2-D view
        n = v.size - v.size % 2
        v2 = v[:n].reshape(2, -1)
        got = mx.compile(_all_casts)(mx.transpose(_braze(v2.T.copy())))
        mx.eval(got)
        for d, g, w in zip(INTS, got, want):
            check(g, w[:n].reshape(2, -1), (backend, src, d, "strided"))
        # single-element launches (the all-scalar variant)
        f1 = mx.compile(_all_casts)
        for i in range(0, v.size, 7):
            got = f1(_braze(v[i:i + 1]))
            mx.eval(got)
            for d, g, w in zip(INTS, got, want):
                check(g, w[i:i + 1], (backend, src, d, "scalar", v[i]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src", FLOATS)
def test_compiled_row_kernels_cast_like_the_definition(backend, src):
    v = edge_values(src)
    n = v.size - v.size % 3
    v2 = v[:n].reshape(3, -1)
    with _on(backend):
        f = mx.compile(_row_casts)
        got = f(_braze(v2))
        mx.eval(got)
        assert f.stats()["row_kernels"] >= 1
    for j, d in enumerate(INTS):
        w = expected_array(v[:n], d).reshape(3, -1)
        y, mxv, mnv = got[3 * j: 3 * j + 3]
        check(y, w, (backend, src, d, "rows"))
        check(mxv, w.max(axis=-1), (backend, src, d, "row max"))
        check(mnv, w.min(axis=-1), (backend, src, d, "row min"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_constants_cast_like_the_definition(backend):
    """Casts of scalar constants inside a kernel (literals, folded before the loop)."""
    for c in (1e10, -1e10, NAN, INF, 300.7, -1.5, 2.0**63):
        def f(v, c=c):
            return tuple((v * 0 + c).astype(getattr(mx, d)) for d in INTS)
        with _on(backend):
            got = mx.compile(f)(mx.zeros((3,), dtype=mx.float32))
            mx.eval(got)
        for d, g in zip(INTS, got):
            want = expected(float(np.float32(c)), d)
            check(g, np.full(3, want, NP[d]), (backend, c, d))


# -- to float16 / bfloat16: through float32 ------------------------------------------------------
#: (float64 value, its float16 value, its bfloat16 value), rounded through float32: each value
#: is a tie once rounded to float32, so a single rounding would give the other neighbour
HALF_TIES = [
    (1 + 2**-8 + 2**-30, 1 + 2**-8, 1.0),
    (1 + 2**-11 + 2**-40, 1.0, 1.0),
    (-(1 + 2**-11 + 2**-40), -1.0, -1.0),
    (65519.99999999, INF, 65536.0),  # 65520.0 in float32: float16 overflows
]
#: int64 values whose conversion through float32 rounds twice
INT_TIES = [(2**40 + 2**32 + 1, 2.0**40), (2**24 + 1, 2.0**24), (-(2**40 + 2**32 + 1), -2.0**40)]


@pytest.mark.parametrize("backend", [None] + BACKENDS)
def test_float64_and_int_to_half_round_through_float32(backend):
    x = np.array([t[0] for t in HALF_TIES])
    i = np.array([t[0] for t in INT_TIES], np.int64)

    def f(a, b):
        return ((a * 1).astype(mx.float16), (a * 1).astype(mx.bfloat16),
                (b * 1).astype(mx.bfloat16), (b * 1).astype(mx.float16))

    args = (mx.array(x, dtype=mx.float64), mx.array(i))
    if backend is None:
        got = f(*args)
    else:
        with _on(backend):
            got = mx.compile(f)(*args)
    mx.eval(got)
    h, b, ib, ih = (np.asarray(g).astype(np.float64) for g in got)
    np.testing.assert_array_equal(h, [t[1] for t in HALF_TIES])
    np.testing.assert_array_equal(b, [t[2] for t in HALF_TIES])
    np.testing.assert_array_equal(ib, [t[1] for t in INT_TIES])
    np.testing.assert_array_equal(ih, [INF, INF, -INF])


# -- MLX -----------------------------------------------------------------------------------------
def _mlx_array(mlx, v: np.ndarray, src: str):
    if src == "float64":
        return mlx.array(v, dtype=mlx.float64)
    return mlx.array(to_f64(v).astype(np.float32)).astype(getattr(mlx, src))  # exact


def _mlx_vector_uint32(x: float) -> int:
    """MLX's vectorised float -> uint32 loop (x86-64): x >= 2**31 converts x - 2**31 with the top
    bit set, smaller x convert directly, out of int32 range (and NaN) giving 2**31."""
    if x >= 2 ** 31:
        return _low(_signed(x - 2 ** 31, 32) ^ -2**31, 32, False)
    return _low(_signed(x, 32), 32, False)


def not_mlx_defined(x64: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Where MLX's result depends on the element's position (MLX's vectorised uint32 loop)."""
    if dst == "uint32" and src != "float16":
        return np.isnan(x64) | (x64 < -2.0**31) | (x64 >= 2.0**32)
    return np.zeros(x64.shape, bool)


@pytest.mark.parametrize("src", FLOATS)
def test_float_to_int_matches_mlx(src):
    mlx = pytest.importorskip("mlx.core")
    v = edge_values(src)
    x64 = to_f64(v)
    mv = _mlx_array(mlx, v, src)
    for dst in INTS:
        ours = np.asarray(_braze(v).astype(getattr(mx, dst)))
        # element by element: MLX's scalar loop
        theirs = np.array([np.array(mv[i].astype(getattr(mlx, dst))) for i in range(v.size)])
        check(ours, theirs.astype(ours.dtype), (src, dst, "MLX one element at a time"))
        # the whole vector: equal except where MLX's vectorised uint32 loop differs
        vec = np.array(mv.astype(getattr(mlx, dst)))
        free = not_mlx_defined(x64, src, dst)
        if free.any():
            for i in np.flatnonzero(free):
                assert vec[i] in (ours[i], _mlx_vector_uint32(x64[i])), (src, x64[i], vec[i])
        check(ours[~free], vec[~free], (src, dst, "MLX vector"))


def test_half_casts_match_mlx():
    mlx = pytest.importorskip("mlx.core")
    x = np.array([t[0] for t in HALF_TIES] + [1e6, -1e39, 3.5e38, 1e-10, NAN, INF])
    i = np.array([t[0] for t in INT_TIES] + [65519, 65520, -70000, 2**31 - 1], np.int64)
    for dst in ("float16", "bfloat16"):
        for ours, theirs in (
                (_braze(x).astype(getattr(mx, dst)),
                 mlx.array(x, dtype=mlx.float64).astype(getattr(mlx, dst))),
                (mx.array(i).astype(getattr(mx, dst)), mlx.array(i).astype(getattr(mlx, dst)))):
            got = np.asarray(ours).astype(np.float64)
            want = np.array(theirs.astype(mlx.float32)).astype(np.float64)
            np.testing.assert_array_equal(got, want, err_msg=dst)


def test_construction_matches_mlx():
    mlx = pytest.importorskip("mlx.core")
    vals = [300.7, -300.7, 1e10, -1e10, NAN, -1.5, 127.9, -128.9]
    for dst in INTS:
        ours = np.asarray(mx.array(vals, dtype=getattr(mx, dst)))
        theirs = np.array(mlx.array(vals, dtype=getattr(mlx, dst)))
        ok = ~not_mlx_defined(np.array(vals), "float32", dst)
        check(ours[ok], theirs[ok], dst)
        a, b = mx.zeros((len(vals),), getattr(mx, dst)), mlx.zeros((len(vals),),
                                                                    getattr(mlx, dst))
        for k, x in enumerate(vals):
            a[k] = x
            b[k] = x
        check(a, np.array(b), ("setitem", dst))
    check(mx.linspace(0, 1e10, 3, dtype=mx.int32),
          np.array(mlx.linspace(0, 1e10, 3, dtype=mlx.int32)), "linspace")
    check(mx.arange(0, 1e10, 4e9, dtype=mx.int32),
          np.array(mlx.arange(0, 1e10, 4e9, dtype=mlx.int32)), "arange")
