"""Reduction ("row") fusion: `fuse_rows` groups a reduction over the trailing axes with its
elementwise producers and consumers into one `Compiled` row kernel (docs/kernels.md).

Checked here: that the fusion happens (and `BRAZE_COMPILE_MODE=no_reduce_fusion` switches it
off), that compiled results equal the uncompiled graph and a float64 NumPy oracle on both the
`numpy` (reference) and `cpu` (Numba row kernels) backends, random reduction graphs (`cpu` vs
`numpy`), gradients through fused reductions, shapeless compile, summation accuracy, donation,
threads, errors, and MLX when it is installed.

Every cpu row kernel costs a Numba build (~0.3-1 s), so the cpu cases reuse a few kernel
shapes: the kernel cache is keyed by the region's IR, so compiling the same function body again
(same dtypes, same constants) reuses the kernel, and shapes of one rank share it.
"""
import contextlib
import importlib.util
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

import braze.core as mx
import braze.nn as nn
from braze._src import config
from braze._src.backends import base as B

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
BACKENDS = ["numpy", pytest.param("cpu", marks=pytest.mark.skipif(not HAVE_NUMBA,
                                                                   reason="needs numba"))]
BF16 = ml_dtypes.bfloat16
NP = {mx.float32: np.float32, mx.float16: np.float16, mx.bfloat16: BF16, mx.float64: np.float64,
      mx.int32: np.int32, mx.bool_: np.bool_}
#: tolerance of a result against the float64 oracle / the uncompiled graph, relative to the
#: magnitude of the expected values (a few ulp of the dtype; float32 transcendentals of the
#: cpu math library are within 4 ulp, sums are reordered)
RTOL = {mx.float64: 1e-11, mx.float32: 2e-5, mx.float16: 2e-3, mx.bfloat16: 1.6e-2}
EPS = 1e-5


# -- helpers ------------------------------------------------------------------------------------
def _register_cpu():
    if "cpu" not in B.registered():  # as tests/test_cpu_backend.py
        from braze._src.backends.cpu import CpuBackend
        B.register("cpu", CpuBackend)


@contextlib.contextmanager
def on(backend, mode=""):
    """Compiled kernels run on `backend`, traces use compile mode `mode`."""
    if backend == "cpu":
        _register_cpu()
    with config.override(backend=backend, compile_mode=mode):
        yield


_MX = {np.dtype(v): k for k, v in NP.items()}


def arr(a, dtype=None):
    """A fresh braze array holding NumPy data with its dtype (or converted to the braze
    `dtype` first): float64 stays float64."""
    a = np.asarray(a)
    if dtype is not None:
        a = a.astype(NP[dtype])
    out = mx.array(a, dtype=_MX[a.dtype]) if a.dtype in _MX else mx.array(a)
    assert np.dtype(NP.get(out.dtype, a.dtype)) == a.dtype, (out.dtype, a.dtype)
    return out


def as_np(r):
    if isinstance(r, (list, tuple)):
        return [as_np(x) for x in r]
    mx.eval(r)
    return np.array(r)


def fresh(f, **kw):
    """mx.compile of a new function object calling f: compile caches traces by the function's
    identity (as MLX), so a trace made under another compile mode is never reused."""
    return mx.compile(lambda *a: f(*a), **kw)


def run(f, args, backend="numpy", compiled=True, mode="", **kw):
    """f(*args) (compiled, or not), evaluated with kernels on `backend`: NumPy results."""
    with on(backend, mode):
        g = fresh(f, **kw) if compiled else f
        return as_np(g(*args))


def check(got, want, rtol, scale=None):
    """got (any dtype) against want (float64): same shape, NaN exactly where want is NaN, the
    same infinities, finite values within rtol * (|want| + scale), scale (broadcastable to
    want) defaulting to the largest finite |want| (at least 1)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), (g, w)
    inf = np.isinf(w)
    assert np.array_equal(g[inf], w[inf]), (g[inf], w[inf])
    fin = np.isfinite(w)
    if scale is None:
        scale = max(1.0, float(np.abs(w[fin]).max(initial=0.0)))
    tol = rtol * (np.abs(w) + np.broadcast_to(np.asarray(scale, np.float64), w.shape))
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite: checked above
        bad = fin & ~(np.abs(g - w) <= tol)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{bad.sum()} of {bad.size} differ; first at {i}: got {g[i]!r}, "
                             f"want {w[i]!r}, tolerance {tol[i]!r}\ngot {g}\nwant {w}")


def after_fusion(cf):
    return cf.stats()["primitive_counts_after_fusion"]


def row_kernel_names(cf):
    """Names (with multiplicity) of the Compiled nodes holding a reduction."""
    out = []
    for k, v in after_fusion(cf).items():
        if k.startswith("Compiled") and "Reduce" in k:
            out += [k] * v
    return out


# float64 oracles --------------------------------------------------------------------------------
def softmax64(x, axis=-1):
    x = np.asarray(x, np.float64)
    m = x.max(axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis, keepdims=True)


def logsumexp64(x, axis=-1):
    x = np.asarray(x, np.float64)
    m = x.max(axis, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)
    return np.squeeze(np.log(np.exp(x - m).sum(axis, keepdims=True)) + m, axis)


def layer_norm64(x, w=None, b=None, eps=EPS):
    x = np.asarray(x, np.float64)
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    if w is not None:
        y = y * np.asarray(w, np.float64)
    if b is not None:
        y = y + np.asarray(b, np.float64)
    return y


def rms_norm64(x, w=None, eps=EPS):
    x = np.asarray(x, np.float64)
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y if w is None else y * np.asarray(w, np.float64)


def cross_entropy64(x, t):
    x = np.asarray(x, np.float64)
    return logsumexp64(x) - np.take_along_axis(x, t[..., None].astype(np.int64), -1)[..., 0]


# the functions under test ----------------------------------------------------------------------
def f_softmax(x):
    return mx.softmax(x, axis=-1)


def f_logsumexp(x):
    return mx.logsumexp(x, axis=-1)


def f_layer_norm(x, w, b):
    return mx.fast.layer_norm(x, w, b, EPS)


def f_rms_norm(x, w):
    return mx.fast.rms_norm(x, w, EPS)


def f_meanvar(x):
    mu = mx.mean(x, axis=-1, keepdims=True)
    var = mx.mean(mx.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) * mx.rsqrt(var + EPS)


def f_cross_entropy(x, t):
    return nn.losses.cross_entropy(x, t)


# -- 1. fusion happens ---------------------------------------------------------------------------
_X = (6, 50)
FUSION_CASES = {
    # name: (function, input makers, expected reductions inside the row kernel(s))
    "softmax": (f_softmax, ["x"], 2),
    "logsumexp": (f_logsumexp, ["x"], 2),
    "layer_norm": (f_layer_norm, ["x", "w", "w"], 2),
    "layer_norm_formula": (f_meanvar, ["x"], 2),
    "rms_norm": (f_rms_norm, ["x", "w"], 1),
    "cross_entropy": (f_cross_entropy, ["x", "t"], 3),
    "sum": (lambda x, w: mx.sum(mx.exp(x) * w, axis=-1) + 1.0, ["x", "w"], 1),
    "max": (lambda x, w: x - mx.max(x * w, axis=-1, keepdims=True), ["x", "w"], 1),
    "min": (lambda x: mx.exp(x - mx.min(mx.abs(x), axis=-1, keepdims=True)), ["x"], 1),
    "prod": (lambda x: mx.prod(x * 0.5 + 1.0, axis=-1), ["x"], 1),
    "mean": (lambda x: x * mx.mean(mx.square(x), axis=-1, keepdims=True), ["x"], 1),
    "argmax": (lambda x, w: mx.argmax(x * w, axis=-1), ["x", "w"], 1),
    "argmin": (lambda x: mx.argmin(mx.abs(x - 0.5), axis=-1), ["x"], 1),
    "any": (lambda x: mx.any(x > 1.0, axis=-1), ["x"], 1),
    "all": (lambda x: mx.all(mx.abs(x) < 2.0, axis=-1), ["x"], 1),
    "sum_last2": (lambda x: mx.sum(mx.exp(x.reshape(2, 3, 50)), axis=(1, 2)), ["x"], 1),
    "max_last2_consumer": (lambda x: x.reshape(2, 3, 50) / mx.max(
        mx.abs(x.reshape(2, 3, 50)), axis=(-2, -1), keepdims=True), ["x"], 1),
}


def _fusion_inputs(kinds, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for k in kinds:
        if k == "x":
            out.append(arr(rng.standard_normal(_X).astype(np.float32)))
        elif k == "w":
            out.append(arr(rng.standard_normal(_X[-1:]).astype(np.float32)))
        else:
            out.append(arr(rng.integers(0, _X[-1], _X[:1]).astype(np.int32)))
    return out


@pytest.mark.parametrize("name", sorted(FUSION_CASES))
def test_reduction_is_fused_with_producers_and_consumers(name):
    f, kinds, n_red = FUSION_CASES[name]
    args = _fusion_inputs(kinds)
    with on("numpy"):
        cf = fresh(f)
        fused = as_np(cf(*args))
        eager = as_np(f(*args))
    names = row_kernel_names(cf)
    assert len(names) == 1, after_fusion(cf)
    s = cf.stats()
    assert s["row_kernels"] == 1
    # every reduction primitive inside a Compiled node counts once ("ArgReduce" too)
    assert s["fused_reductions"] == names[0].count("Reduce") == n_red, names
    assert s["fused_kernels"] >= 1
    with on("numpy", "no_reduce_fusion"):
        cn = fresh(f)
        unfused = as_np(cn(*args))
    sn = cn.stats()
    assert not row_kernel_names(cn), after_fusion(cn)
    assert sn["row_kernels"] == 0 and sn["fused_reductions"] == 0
    assert not any("Reduce" in k for k in after_fusion(cn) if k.startswith("Compiled"))
    for a, b, c in zip(*(r if isinstance(r, list) else [r] for r in (fused, eager, unfused))):
        assert a.dtype == b.dtype == c.dtype
        check(a, b, 1e-6)
        check(c, b, 1e-6)


def test_stats_count_row_kernels_over_several_regions():
    # softmax of one input and layernorm of another: two row kernels, four reductions
    def f(x, y):
        return f_softmax(x), f_meanvar(y)

    rng = np.random.default_rng(1)
    x, y = (arr(rng.standard_normal((4, 9)).astype(np.float32)) for _ in range(2))
    with on("numpy"):
        cf = fresh(f)
        as_np(cf(x, y))
    s = cf.stats()
    assert s["row_kernels"] == 2 and s["fused_reductions"] == 4, after_fusion(cf)
    assert len(row_kernel_names(cf)) == 2


def test_reduction_over_leading_axis_is_not_row_fused():
    rng = np.random.default_rng(2)
    x = arr(rng.standard_normal((5, 7)).astype(np.float32))
    with on("numpy"):
        cf = mx.compile(lambda v: mx.sum(mx.exp(v), axis=0))
        got = as_np(cf(x))
    assert cf.stats()["row_kernels"] == 0 and not row_kernel_names(cf)
    check(got, np.exp(np.asarray(x, np.float64)).sum(0), 1e-6)


def test_no_reduce_fusion_environment_variable(monkeypatch):
    monkeypatch.setenv("BRAZE_COMPILE_MODE", "no_reduce_fusion")
    assert config.from_env().compile_mode == "no_reduce_fusion"


# -- 2. correctness on both backends -----------------------------------------------------------
ROW_SHAPES = [(5, 1), (4, 3), (3, 1000), (2, 4096), (2, 5000), (70, 33)]


def row_shapes(backend, dtype=mx.float32, uses_mean=False):
    """The row shapes a case runs on. A mean bakes 1/C into the kernel, so on the cpu backend
    every row length is a Numba build (~1 s): there, only float32 runs every length (rows of
    one element do not fuse and are tested on their own)."""
    if backend == "numpy":
        return ROW_SHAPES
    if dtype == mx.float32 and not uses_mean:
        return ROW_SHAPES[1:]
    if dtype == mx.float32:
        return [(4, 3), (3, 1000), (2, 4096), (2, 5000)]
    return [(4, 3), (2, 5000)]


def _data(rng, shape, dtype, lo=-3.0, hi=3.0):
    if dtype == mx.bool_:
        return rng.random(shape) < 0.5
    if dtype == mx.int32:
        return rng.integers(-20, 20, shape).astype(np.int32)
    return rng.uniform(lo, hi, shape).astype(NP[dtype])


def _three_ways(f, args, backend, oracle, rtol, shapes_dtypes_equal=True, scale=None):
    """compiled (on `backend`) vs uncompiled vs the float64 oracle."""
    got = run(f, args, backend)
    eager = run(f, args, backend, compiled=False)
    got = got if isinstance(got, list) else [got]
    eager = eager if isinstance(eager, list) else [eager]
    want = oracle if isinstance(oracle, list) else [oracle]
    for g, e, w in zip(got, eager, want):
        assert g.dtype == e.dtype and g.shape == e.shape
        check(g, e, rtol, scale)
        check(g, w, rtol, scale)


# which (function, dtype) pairs run: every dtype on numpy, a subset on cpu (each is a build)
_ALL_FLOATS = [mx.float32, mx.float16, mx.bfloat16, mx.float64]
NORM_DTYPES = {  # on cpu (each pair is a build)
    "softmax": _ALL_FLOATS,
    "logsumexp": [mx.float32, mx.bfloat16],
    "layer_norm": [mx.float32, mx.float16, mx.float64],
    "rms_norm": [mx.float32, mx.bfloat16],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,dtype", [(n, d) for n in NORM_DTYPES for d in _ALL_FLOATS],
                         ids=lambda v: getattr(v, "name", v))
def test_norms_match_eager_and_float64(backend, name, dtype):
    if backend == "cpu" and dtype not in NORM_DTYPES[name]:
        pytest.skip("covered on the numpy backend (a Numba build per dtype)")
    rng = np.random.default_rng(10)
    rtol = RTOL[dtype]
    for shape in row_shapes(backend, dtype, name in ("layer_norm", "rms_norm")):
        x = _data(rng, shape, dtype)
        w = _data(rng, shape[-1:], dtype, 0.5, 1.5)
        b = _data(rng, shape[-1:], dtype)
        if name == "softmax":
            f, args, want = f_softmax, (arr(x),), softmax64(x)
        elif name == "logsumexp":
            f, args, want = f_logsumexp, (arr(x),), logsumexp64(x)
        elif name == "layer_norm":
            f, args, want = f_layer_norm, (arr(x), arr(w), arr(b)), layer_norm64(x, w, b)
        else:
            f, args, want = f_rms_norm, (arr(x), arr(w)), rms_norm64(x, w)
        # layernorm of a row of 1 is b exactly; of a row of 3 (x-mu small) needs eps-aware
        # scaling: the comparison scale is the output magnitude, which is what the kernels keep
        _three_ways(f, args, backend, want, rtol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_three_dimensional_inputs_reduce_last_one_and_two_axes(backend):
    rng = np.random.default_rng(11)
    for shape in [(2, 3, 40), (3, 1, 5000), (1, 4, 1)]:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.uniform(0.5, 1.5, shape[-1:]).astype(np.float32)
        b = rng.standard_normal(shape[-1:]).astype(np.float32)
        _three_ways(f_softmax, (arr(x),), backend, softmax64(x), RTOL[mx.float32])
        _three_ways(f_layer_norm, (arr(x), arr(w), arr(b)), backend, layer_norm64(x, w, b),
                    RTOL[mx.float32])
        x64 = x.astype(np.float64)

        def last2(v):
            e = mx.exp(v)
            return mx.sum(e, axis=(1, 2)), e / mx.sum(e, axis=(-2, -1), keepdims=True)

        e = np.exp(x64)
        _three_ways(last2, (arr(x),), backend,
                    [e.sum((1, 2)), e / e.sum((1, 2), keepdims=True)], RTOL[mx.float32])


def _reduce_cases():
    """name -> (function of (x, w), float64 oracle of (x, w))."""
    return {
        "sum": (lambda x, w: mx.sum(mx.exp(x) * w, axis=-1) * 0.5,
                lambda x, w: (np.exp(x) * w).sum(-1) * 0.5),
        "max": (lambda x, w: x - mx.max(x * w, axis=-1, keepdims=True),
                lambda x, w: x - (x * w).max(-1, keepdims=True)),
        "min": (lambda x, w: mx.min(mx.abs(x) + w, axis=-1),
                lambda x, w: (np.abs(x) + w).min(-1)),
        "prod": (lambda x, w: mx.prod(x * 0.25 + w, axis=-1),
                 lambda x, w: (x * 0.25 + w).prod(-1)),
        "mean": (lambda x, w: x * mx.mean(mx.square(x) * w, axis=-1, keepdims=True),
                 lambda x, w: x * (x * x * w).mean(-1, keepdims=True)),
        "argmax": (lambda x, w: mx.argmax(x * w, axis=-1),
                   lambda x, w: np.argmax(x * w, -1)),
        "argmin": (lambda x, w: mx.argmin(x - w, axis=-1),
                   lambda x, w: np.argmin(x - w, -1)),
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(_reduce_cases()))
def test_reductions_with_producers_and_consumers(backend, name):
    f, oracle = _reduce_cases()[name]
    rng = np.random.default_rng(12)
    for shape in row_shapes(backend, uses_mean=name == "mean"):
        x = rng.standard_normal(shape).astype(np.float32)
        # prod: factors near 1 so long rows neither overflow nor underflow
        w = (rng.uniform(0.9, 1.1, shape[-1:]) if name == "prod" else
             rng.uniform(0.5, 1.5, shape[-1:])).astype(np.float32)
        if name == "prod":
            x *= 0.01
        want = oracle(x.astype(np.float64), w.astype(np.float64))
        got = run(f, (arr(x), arr(w)), backend)
        eager = run(f, (arr(x), arr(w)), backend, compiled=False)
        assert got.dtype == eager.dtype and got.shape == eager.shape
        if name.startswith("arg"):
            assert got.dtype == np.uint32
            np.testing.assert_array_equal(got, eager)
            np.testing.assert_array_equal(got, want)  # no ties in random data
            continue
        # sums: the error scale is the sum of |terms|
        scale = None
        if name in ("sum", "mean"):
            t = np.abs(np.exp(x) * w) if name == "sum" else np.abs(x * x * w)
            scale = t.sum(-1) if name == "sum" else t.mean(-1, keepdims=True) * np.abs(x)
            scale = np.maximum(scale, 1e-30)
        check(got, eager, RTOL[mx.float32], scale)
        check(got, want, RTOL[mx.float32], scale)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_and_bool_reductions(backend):
    rng = np.random.default_rng(13)

    def ints(x, y):
        return (mx.sum(x * y + 3, axis=-1), y - mx.max(x - y, axis=-1, keepdims=True),
                mx.prod(mx.abs(x) % 3 + 1, axis=-1), mx.argmin(x * y, axis=-1))

    def bools(x, y):
        return mx.any(mx.logical_and(x, y), axis=-1), mx.all(mx.logical_or(x, y), axis=-1)

    shapes = [(4, 3), (3, 1000), (2, 5000)] + ([(2, 3, 7)] if backend == "numpy" else [])
    for shape in shapes:
        x, y = _data(rng, shape, mx.int32), _data(rng, shape[-1:], mx.int32)
        got = run(ints, (arr(x), arr(y)), backend)
        eager = run(ints, (arr(x), arr(y)), backend, compiled=False)
        x64, y64 = x.astype(np.int64), y.astype(np.int64)
        want = [(x64 * y64 + 3).sum(-1).astype(np.int32), y - (x - y).max(-1, keepdims=True),
                # wraps like int32 arithmetic
                (np.abs(x) % 3 + 1).astype(np.int32).prod(-1, dtype=np.int32),
                np.argmin(x64 * y64, -1)]
        for g, e, w in zip(got, eager, want):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_array_equal(g, e)
            np.testing.assert_array_equal(g, w)
        bx, by = _data(rng, shape, mx.bool_), _data(rng, shape, mx.bool_)
        by[0] = True  # an all-true row for `all`
        got = run(bools, (arr(bx), arr(by)), backend)
        eager = run(bools, (arr(bx), arr(by)), backend, compiled=False)
        want = [(bx & by).any(-1), (bx | by).all(-1)]
        for g, e, w in zip(got, eager, want):
            assert g.dtype == e.dtype == np.bool_
            np.testing.assert_array_equal(g, e)
            np.testing.assert_array_equal(g, w)


def _bcast(x, w, r, s):
    """Inputs broadcast per column (w), per row (r) and a scalar (s)."""
    y = (x * w + r) * s
    return mx.softmax(y, axis=-1), mx.sum(y, axis=-1, keepdims=True) * r - s


def _bcast64(x, w, r, s):
    y = (x * w + r) * s
    return [softmax64(y), y.sum(-1, keepdims=True) * r - s]


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_broadcast_per_column_per_row_and_scalars(backend):
    rng = np.random.default_rng(14)
    for shape in [(3, 1000), (5, 3), (2, 5000)]:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.uniform(0.5, 1.5, shape[-1:]).astype(np.float32)
        r = rng.standard_normal(shape[:1] + (1,)).astype(np.float32)
        s = np.float32(0.75)
        args = (arr(x), arr(w), arr(r), arr(s))
        want = _bcast64(*(v.astype(np.float64) for v in (x, w, r, s)))
        scale = [None, np.abs((x * w + r) * s).sum(-1, keepdims=True) * np.abs(r) + 1]
        got = run(_bcast, args, backend)
        eager = run(_bcast, args, backend, compiled=False)
        for g, e, wnt, sc in zip(got, eager, want, scale):
            check(g, e, RTOL[mx.float32], sc)
            check(g, wnt, RTOL[mx.float32], sc)
    # a Python scalar and a baked constant array (captured, not an argument)
    c = arr(np.float32(2.0))
    x = rng.standard_normal((4, 77)).astype(np.float32)
    got = run(lambda v: mx.softmax(v * c - 1.5, axis=-1), (arr(x),), backend)
    check(got, softmax64(x.astype(np.float64) * 2 - 1.5), RTOL[mx.float32])


def _views(rng):
    """name -> (braze view, the same values as NumPy): every view is (60, 90), so the kernels
    differ only in their input layout."""
    def base(*shape):
        x = rng.standard_normal(shape).astype(np.float32)
        return arr(x), x

    out = {}
    a, x = base(90, 60)
    out["transposed"] = (a.T, x.T)
    a, x = base(60, 180)
    out["sliced_columns"] = (a[:, ::2], x[:, ::2])
    a, x = base(120, 90)
    out["sliced_rows"] = (a[1::2], x[1::2])
    a, x = base(60, 90)
    out["negative_rows"] = (a[::-1], x[::-1])
    out["negative_columns"] = (a[:, ::-1], x[:, ::-1])
    a, x = base(120, 270)
    out["both_negative"] = (a[::-2, ::-3], x[::-2, ::-3])
    a, x = base(60, 100)
    out["column_window"] = (a[:, 5:95], x[:, 5:95])
    a, x = base(3, 60, 90)
    out["3d_slice"] = (a[1], x[1])
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_inputs(backend):
    rng = np.random.default_rng(15)
    for name, (v, xn) in _views(rng).items():
        assert v.shape == xn.shape == (60, 90)
        mx.eval(v)
        x64 = xn.astype(np.float64)
        w = rng.uniform(0.5, 1.5, xn.shape[-1:]).astype(np.float32)
        b = rng.standard_normal(xn.shape[-1:]).astype(np.float32)
        got = run(f_softmax, (v,), backend)
        check(got, softmax64(x64), RTOL[mx.float32])
        got = run(f_layer_norm, (v, arr(w), arr(b)), backend)
        check(got, layer_norm64(x64, w, b), RTOL[mx.float32])
        f, oracle = _reduce_cases()["argmax"]
        got = run(f, (v, arr(w)), backend)
        np.testing.assert_array_equal(got, oracle(x64, w.astype(np.float64)), err_msg=name)
    # a 3-D view reducing the last two axes, and a view broadcast as the per-column weight
    x3 = rng.standard_normal((4, 6, 10)).astype(np.float32)
    v3 = arr(x3).transpose(2, 0, 1)[::-1]
    got = run(lambda t: mx.sum(mx.exp(t), axis=(1, 2)), (v3,), backend)
    check(got, np.exp(x3.transpose(2, 0, 1)[::-1].astype(np.float64)).sum((1, 2)),
          RTOL[mx.float32])
    wv = arr(rng.standard_normal(80).astype(np.float32))[::-2]
    xs = rng.standard_normal((3, 40)).astype(np.float32)
    f, oracle = _reduce_cases()["sum"]
    got = run(f, (arr(xs), wv), backend)
    wn = np.asarray(wv).astype(np.float64)
    check(got, oracle(xs.astype(np.float64), wn), RTOL[mx.float32],
          np.abs(np.exp(xs) * wn).sum(-1))


def _special_rows(c):
    """Rows with NaN, +-Inf, ties: float32 (R, c)."""
    rng = np.random.default_rng(16)
    x = rng.standard_normal((10, c)).astype(np.float32)
    x[0, c // 2] = np.nan
    x[1, 0] = np.nan
    x[1, c - 1] = np.nan
    x[2, c // 3] = np.inf
    x[3, c // 4] = -np.inf
    x[4, :] = -np.inf
    x[5, :] = np.inf
    x[6, :] = 1.0  # all ties: the first index
    x[7, [c // 5, c - 1]] = 50.0  # a tie of the maximum
    x[8, [c // 5, c - 1]] = -50.0
    x[9, c - 1] = np.nan
    x[9, 0] = np.inf
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_inf_rows(backend):
    def reds(x):
        y = x * 1.5
        return (mx.max(y, axis=-1), mx.min(y + 0.0, axis=-1) * 2.0, mx.argmax(y - 1.0, axis=-1),
                mx.argmin(y * 2.0, axis=-1), mx.sum(mx.abs(y), axis=-1))

    for c in (7, 1000, 4096, 5000) if backend == "numpy" else (7, 5000):
        x = _special_rows(c)
        got = run(reds, (arr(x),), backend)
        eager = run(reds, (arr(x),), backend, compiled=False)
        y = x.astype(np.float64) * 1.5
        with np.errstate(invalid="ignore"):
            want = [y.max(-1), y.min(-1) * 2.0, np.argmax(y - 1, -1), np.argmin(y * 2, -1),
                    np.abs(y).sum(-1)]
        for i, (g, e, w) in enumerate(zip(got, eager, want)):
            assert g.dtype == e.dtype, i
            if i in (2, 3):  # argmax/argmin: the first extremum, the first NaN
                np.testing.assert_array_equal(g, w, err_msg=f"{i} {c}")
                np.testing.assert_array_equal(g, e)
            else:
                check(g, e, RTOL[mx.float32], np.abs(y).sum(-1) if i == 4 else None)
                check(g, w, RTOL[mx.float32], np.abs(y).sum(-1) if i == 4 else None)
        # softmax / logsumexp / layernorm on such rows: exactly what the uncompiled graph gives
        for f in (f_softmax, f_logsumexp, f_meanvar):
            with np.errstate(all="ignore"):
                got = run(f, (arr(x),), backend)
                eager = run(f, (arr(x),), backend, compiled=False)
            check(got, eager, RTOL[mx.float32])
        with np.errstate(all="ignore"):
            lse = run(f_logsumexp, (arr(x),), backend)
            sm = run(f_softmax, (arr(x),), backend)
        assert lse[4] == -np.inf and lse[5] == np.inf and np.isnan(lse[0])
        assert np.isnan(sm[4]).all()  # all -inf: 0/0, as the uncompiled graph
        check(lse[6:9], logsumexp64(x[6:9]), RTOL[mx.float32])


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_rows_and_single_element_rows(backend):
    # rows of 0 elements: sums are 0, max raises (the cpu backend falls back to the reference)
    f = mx.compile(lambda v: (mx.sum(mx.exp(v), axis=-1), mx.exp(v) * 2.0), shapeless=True)
    g = mx.compile(lambda v: mx.max(v * 2.0, axis=-1), shapeless=True)
    with on(backend):
        as_np(f(arr(np.ones((3, 4), np.float32))))
        as_np(g(arr(np.ones((3, 4), np.float32))))
        s, e = as_np(f(arr(np.ones((3, 0), np.float32))))
        assert s.shape == (3,) and (s == 0).all() and e.shape == (3, 0)
        with pytest.raises(ValueError):
            as_np(g(arr(np.ones((3, 0), np.float32))))
    # rows of one element: each output is the element's own value
    x = np.random.default_rng(17).standard_normal((6, 1)).astype(np.float32)
    check(run(f_softmax, (arr(x),), backend), np.ones_like(x), 0)
    check(run(f_logsumexp, (arr(x),), backend), x[:, 0], 1e-7)



@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_softmax_over_axes_of_size_one_is_one_elementwise_kernel(backend, dtype):
    # each row's max and sum are its element: exp(x - x) / exp(x - x), fused elementwise
    # (1, or NaN where x is not finite, as uncompiled and as MLX), no Softmax left
    x = np.array([[1.5], [np.nan], [np.inf], [-np.inf], [-3.0], [0.0]], np.float32)
    for axes, shape in ((-1, (6, 1)), ((1, 2), (6, 1, 1))):
        def f(v):
            return mx.softmax(v * 2.0, axis=axes)
        with on(backend):
            a = arr(x.reshape(shape)).astype(getattr(mx, dtype))
            cf = fresh(f)
            got = cf(a)
            want = f(a)
            assert got.dtype == want.dtype == a.dtype
            counts = after_fusion(cf)
            assert not any("Softmax" in k for k in counts), counts
            assert sum(v for k, v in counts.items() if k.startswith("Compiled")) == 1, counts
            g, w = as_np(got.astype(mx.float32)), as_np(want.astype(mx.float32))
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g.ravel(), [1, np.nan, np.nan, np.nan, 1, 1])

# -- 3. random reduction graphs --------------------------------------------------------------------
_UN = {
    "exp": (mx.exp, np.exp, lambda v, m: np.exp(v) * (1 + m)),
    "square": (mx.square, np.square, lambda v, m: 2 * m * m + m),
    "abs": (mx.abs, np.abs, lambda v, m: m),
    "neg": (mx.negative, np.negative, lambda v, m: m),
    "tanh": (mx.tanh, np.tanh, lambda v, m: m + 1),
    "sin": (mx.sin, np.sin, lambda v, m: m + 1),
}
_BIN = {
    "add": (mx.add, np.add, lambda a, b, ma, mb: ma + mb),
    "sub": (mx.subtract, np.subtract, lambda a, b, ma, mb: ma + mb),
    "mul": (mx.multiply, np.multiply, lambda a, b, ma, mb: ma * mb + ma + mb),
    "maximum": (mx.maximum, np.maximum, lambda a, b, ma, mb: ma + mb),
    "minimum": (mx.minimum, np.minimum, lambda a, b, ma, mb: ma + mb),
}
_RED = ("sum", "max", "min", "prod", "mean")
_KINDS = ("full", "col", "row", "scalar")


@st.composite
def row_graphs(draw):
    """A program: inputs (kinds), producer steps, a reduction, consumer steps, outputs."""
    R = draw(st.sampled_from([1, 2, 5]))
    C = draw(st.sampled_from([1, 2, 3, 7, 33, 64]))
    kinds = ["full"] + draw(st.lists(st.sampled_from(_KINDS), min_size=0, max_size=2))
    n_in = len(kinds)

    def step(n_vals):
        if draw(st.booleans()):
            return ("un", draw(st.sampled_from(sorted(_UN))),
                    draw(st.integers(0, n_vals - 1)))
        return ("bin", draw(st.sampled_from(sorted(_BIN))), draw(st.integers(0, n_vals - 1)),
                draw(st.integers(0, n_vals - 1)))

    prod = []
    for _ in range(draw(st.integers(0, 3))):
        prod.append(step(n_in + len(prod)))
    # the reduction's operand: the last producer, a binary op with the full input (so it has
    # the full shape)
    last = n_in + len(prod) - 1
    prod.append(("bin", draw(st.sampled_from(sorted(_BIN))), last, 0)
                if draw(st.booleans()) else ("bin", draw(st.sampled_from(sorted(_BIN))), 0, last))
    red = (draw(st.sampled_from(_RED)), n_in + len(prod) - 1)
    cons = []
    for _ in range(draw(st.integers(0, 3))):
        # value n_in + len(prod) is the reduced value (keepdims)
        n = n_in + len(prod) + 1 + len(cons)
        s = step(n)
        if draw(st.booleans()) and s[0] == "bin":  # combine the reduced value with a full one
            s = (s[0], s[1], n_in + len(prod), s[3])
        cons.append(s)
    outs = [n_in + len(prod) + len(cons)]
    if draw(st.booleans()):
        outs.append(n_in + len(prod))  # the reduced value too
    if draw(st.booleans()):
        outs.append(draw(st.integers(n_in, n_in + len(prod) - 1)))  # a producer value
    seed = draw(st.integers(0, 2 ** 16))
    return R, C, kinds, prod, red, cons, sorted(set(outs)), seed


def _graph_inputs(R, C, kinds, seed):
    rng = np.random.default_rng(seed)
    shapes = {"full": (R, C), "col": (C,), "row": (R, 1), "scalar": ()}
    return [rng.uniform(-1.5, 1.5, shapes[k]).astype(np.float32) for k in kinds]


def _interpret(prog, xs, lib):
    """Run a program with `lib` = "mx" (braze ops), "np" (float64 values) or "mag" (an error
    scale: |error| <~ eps * mag for a float32 evaluation)."""
    R, C, kinds, prod, red, cons, outs, _ = prog
    if lib == "mag":
        vals = [(np.asarray(x, np.float64), np.abs(np.asarray(x, np.float64))) for x in xs]
    else:
        vals = list(xs)

    def apply(s):
        if s[0] == "un":
            f_mx, f_np, f_mag = _UN[s[1]]
            a = vals[s[2]]
            if lib == "mx":
                return f_mx(a)
            if lib == "np":
                return f_np(a)
            return f_np(a[0]), f_mag(a[0], a[1])
        f_mx, f_np, f_mag = _BIN[s[1]]
        a, b = vals[s[2]], vals[s[3]]
        if lib == "mx":
            return f_mx(a, b)
        if lib == "np":
            return f_np(a, b)
        return f_np(a[0], b[0]), f_mag(a[0], b[0], a[1], b[1])

    for s in prod:
        vals.append(apply(s))
    kind, src = red
    v = vals[src]
    if lib == "mx":
        fn = {"sum": mx.sum, "max": mx.max, "min": mx.min, "prod": mx.prod, "mean": mx.mean}[kind]
        vals.append(fn(v, axis=-1, keepdims=True))
    else:
        fn = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod,
              "mean": np.mean}[kind]
        if lib == "np":
            vals.append(fn(np.broadcast_to(v, (R, C)), axis=-1, keepdims=True))
        else:
            val, mag = (np.broadcast_to(t, (R, C)) for t in v)
            rv = fn(val, axis=-1, keepdims=True)
            if kind in ("sum", "mean"):
                rm = fn(mag, axis=-1, keepdims=True) * 4
            elif kind == "prod":
                rm = np.prod(mag + np.abs(val), axis=-1, keepdims=True) * 2 * C
            else:
                rm = np.max(mag, axis=-1, keepdims=True)
            vals.append((rv, rm))
    for s in cons:
        vals.append(apply(s))
    return [vals[o] for o in outs]


def _reduction_is_live(prog):
    """Whether an output depends on the reduced value (else the trace drops it)."""
    _, _, kinds, prod, _, cons, outs, _ = prog
    red = len(kinds) + len(prod)
    need = set(outs)
    for i in range(len(cons) - 1, -1, -1):
        if red + 1 + i in need:
            need.update(cons[i][2:])
    return red in need


def _graph_fn(prog):
    def f(*xs):
        return tuple(_interpret(prog, xs, "mx"))
    return f


def _oracle(prog, xs):
    with np.errstate(all="ignore"):
        want = _interpret(prog, [x.astype(np.float64) for x in xs], "np")
        mags = _interpret(prog, xs, "mag")
    return want, [m[1] for m in mags]


def _check_graph(got, want, mags):
    assert len(got) == len(want) == len(mags)
    for g, w, m in zip(got, want, mags):
        w = np.asarray(w, np.float64)
        check(g, w, 1e-5, np.maximum(np.broadcast_to(m, w.shape), 1e-30))


_HYP = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=80, **_HYP)
@given(row_graphs())
def test_random_row_graphs_compiled_vs_uncompiled(prog):
    xs = _graph_inputs(prog[0], prog[1], prog[2], prog[7])
    want, mags = _oracle(prog, xs)
    assume(all(np.all(np.isfinite(m)) and np.max(m, initial=0) < 1e25 for m in mags))
    f = _graph_fn(prog)
    with on("numpy"):
        cf = fresh(f)
        got = as_np(cf(*(arr(x) for x in xs)))
        eager = as_np(f(*(arr(x) for x in xs)))
    for g, e in zip(got, eager):
        assert g.dtype == e.dtype and g.shape == e.shape
    _check_graph(got, want, mags)
    _check_graph(eager, want, mags)
    _check_graph(got, eager, mags)
    # the reduction's operand is an elementwise value of the full shape: it always fuses when
    # the rows have more than one element
    if prog[1] > 1 and _reduction_is_live(prog):
        assert cf.stats()["row_kernels"] == 1, after_fusion(cf)


@settings(max_examples=12, phases=[Phase.explicit, Phase.reuse, Phase.generate], **_HYP)
@given(row_graphs())
@pytest.mark.skipif(not HAVE_NUMBA, reason="needs numba")
def test_random_row_graphs_cpu_vs_numpy(prog):
    xs = _graph_inputs(prog[0], prog[1], prog[2], prog[7])
    want, mags = _oracle(prog, xs)
    assume(all(np.all(np.isfinite(m)) and np.max(m, initial=0) < 1e25 for m in mags))
    f = _graph_fn(prog)
    cf = fresh(f)
    with on("numpy"):
        ref = as_np(cf(*(arr(x) for x in xs)))
    with on("cpu"):
        got = as_np(cf(*(arr(x) for x in xs)))
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
    _check_graph(got, ref, mags)
    _check_graph(got, want, mags)


# -- 4. gradients through fused reductions ---------------------------------------------------------
def _grad_cases():
    """name -> (loss, float64 oracle loss, argnums, input makers)."""
    return {
        "softmax": (lambda x, c: mx.sum(mx.softmax(x, axis=-1) * c),
                    lambda x, c: (softmax64(x) * c).sum(), (0,), ["x", "x"]),
        "layer_norm": (lambda x, w, b, c: mx.sum(mx.fast.layer_norm(x, w, b, EPS) * c),
                       lambda x, w, b, c: (layer_norm64(x, w, b) * c).sum(), (0, 1, 2),
                       ["x", "w", "w", "x"]),
        "layer_norm_formula": (lambda x, c: mx.sum(f_meanvar(x) * c),
                               lambda x, c: (layer_norm64(x) * c).sum(), (0,), ["x", "x"]),
        "rms_norm": (lambda x, w, c: mx.sum(mx.fast.rms_norm(x, w, EPS) * c),
                     lambda x, w, c: (rms_norm64(x, w) * c).sum(), (0, 1), ["x", "w", "x"]),
        "logsumexp": (lambda x, c: mx.sum(mx.logsumexp(x, axis=-1) * c),
                      lambda x, c: (logsumexp64(x) * c).sum(), (0,), ["x", "r"]),
        "cross_entropy": (lambda x, t: mx.mean(nn.losses.cross_entropy(x, t)),
                          lambda x, t: cross_entropy64(x, t).mean(), (0,), ["x", "t"]),
    }


_G = (3, 7)
#: reductions over the last axis in compile(grad(loss)) (forward and backward), all fused
GRAD_FUSED_REDUCTIONS = {"softmax": 3, "layer_norm": 4, "layer_norm_formula": 5, "rms_norm": 2,
                         "logsumexp": 2, "cross_entropy": 3}


def _grad_inputs(kinds):
    rng = np.random.default_rng(20)
    out = []
    for k in kinds:
        if k == "x":
            out.append(rng.standard_normal(_G))
        elif k == "w":
            out.append(rng.uniform(0.5, 1.5, _G[-1:]))
        elif k == "r":
            out.append(rng.standard_normal(_G[:1]))
        else:
            out.append(rng.integers(0, _G[-1], _G[:1]).astype(np.int32))
    return out


def _finite_differences(loss, args, argnums, h=1e-6):
    grads = []
    for i in argnums:
        a = args[i]
        g = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            up, dn = [x.copy() for x in args], [x.copy() for x in args]
            up[i][j] += h
            dn[i][j] -= h
            g[j] = (loss(*up) - loss(*dn)) / (2 * h)
        grads.append(g)
    return grads


def _listify(g):
    return list(g) if isinstance(g, (list, tuple)) else [g]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(_grad_cases()))
def test_gradients_through_fused_reductions(backend, name):
    if backend == "cpu" and name in ("layer_norm_formula", "logsumexp", "rms_norm"):
        pytest.skip("covered on the numpy backend (Numba builds)")
    f, oracle, argnums, kinds = _grad_cases()[name]
    xs = _grad_inputs(kinds)
    args = [arr(x) for x in xs]
    fd = _finite_differences(oracle, xs, argnums)
    loss64 = oracle(*xs)
    with on(backend):
        eager = [np.array(g) for g in _listify(mx.grad(f, argnums=argnums)(*args))]
        cg = mx.compile(mx.grad(f, argnums=argnums))
        ways = {
            "compile(grad)": _listify(cg(*args)),
            "grad(compile)": _listify(mx.grad(mx.compile(f), argnums=argnums)(*args)),
        }
        v1, g1 = mx.value_and_grad(mx.compile(f), argnums=argnums)(*args)
        cvg = mx.compile(mx.value_and_grad(f, argnums=argnums))
        v2, g2 = cvg(*args)
        ways["value_and_grad(compile)"] = _listify(g1)
        ways["compile(value_and_grad)"] = _listify(g2)
        for v in (v1, v2):
            assert v.shape == () and abs(float(v) - loss64) <= 1e-12 * max(1, abs(loss64))
        for way, gs in ways.items():
            gs = [np.array(g) for g in gs]
            assert len(gs) == len(argnums) == len(eager), way
            for g, e, d in zip(gs, eager, fd):
                assert g.dtype == np.float64 and g.shape == e.shape, way
                np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12, err_msg=way)
                np.testing.assert_allclose(g, d, rtol=1e-6, atol=1e-7, err_msg=way)
    # the backward graph is made of row kernels too: the backward's trailing reductions (e.g.
    # softmax's sum(g * s), layernorm's sum(g) and sum(g * xhat)) fuse with the forward's
    for c in (cg, cvg):
        s = c.stats()
        assert s["row_kernels"] >= 1, after_fusion(c)
        assert s["fused_reductions"] >= GRAD_FUSED_REDUCTIONS[name], after_fusion(c)
    with on("numpy", "no_reduce_fusion"):
        cn = fresh(mx.grad(f, argnums=argnums))
        gn = _listify(cn(*args))
        assert cn.stats()["row_kernels"] == 0 and cn.stats()["fused_reductions"] == 0
        for g, e in zip(gn, eager):
            np.testing.assert_allclose(np.array(g), e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_gradients_of_layer_norm_rows_crossing_chunks(backend):
    # rows of 5000 (several 1024-element chunks): compile(grad) equals the uncompiled grad
    rng = np.random.default_rng(21)
    x = arr(rng.standard_normal((3, 5000)).astype(np.float32))
    w = arr(rng.uniform(0.5, 1.5, 5000).astype(np.float32))
    b = arr(rng.standard_normal(5000).astype(np.float32))
    c = arr(rng.standard_normal((3, 5000)).astype(np.float32))

    def loss(x, w, b):
        return mx.sum(mx.fast.layer_norm(x, w, b, EPS) * c)

    with on(backend):
        eager = [np.array(g) for g in mx.grad(loss, argnums=(0, 1, 2))(x, w, b)]
        got = [np.array(g) for g in mx.compile(mx.grad(loss, argnums=(0, 1, 2)))(x, w, b)]
    for g, e in zip(got, eager):
        check(g, e, 1e-4)


# -- 5. shapeless --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_shapeless_one_trace_serves_every_row_length(backend):
    rng = np.random.default_rng(30)
    with on(backend):
        cs = fresh(f_softmax, shapeless=True)
        cl = fresh(f_layer_norm, shapeless=True)
        cr = mx.compile(lambda x: (mx.sum(mx.exp(x), axis=-1), mx.argmax(x * 2.0, axis=-1)),
                        shapeless=True)
        shapes = [(4, 10), (7, 33), (2, 5000), (1, 3)]
        if backend == "numpy":  # on cpu: other kernel variants (R inputs, long rows), builds
            shapes += [(64, 1), (1, 70000)]
        for shape in shapes:
            x = rng.standard_normal(shape).astype(np.float32)
            w = rng.uniform(0.5, 1.5, shape[-1:]).astype(np.float32)
            b = rng.standard_normal(shape[-1:]).astype(np.float32)
            check(as_np(cs(arr(x))), softmax64(x), RTOL[mx.float32])
            check(as_np(cl(arr(x), arr(w), arr(b))), layer_norm64(x, w, b), RTOL[mx.float32])
            s, a = as_np(cr(arr(x)))
            check(s, np.exp(x.astype(np.float64)).sum(-1), RTOL[mx.float32],
                  np.exp(x.astype(np.float64)).sum(-1))
            np.testing.assert_array_equal(a, np.argmax(x, -1))
        # a 3-D input is another rank: a second trace
        x3 = rng.standard_normal((2, 3, 9)).astype(np.float32)
        check(as_np(cs(arr(x3))), softmax64(x3), RTOL[mx.float32])
    assert cl.stats()["traces"] == 1 and cr.stats()["traces"] == 1
    assert cs.stats()["traces"] == 2
    for c in (cs, cl, cr):
        assert c.stats()["row_kernels"] >= 1


def _row_kernel_contents(cf):
    """The primitives inside the row kernels (name parts, broadcasts aside), sorted."""
    parts = []
    for name in row_kernel_names(cf):
        parts += [p for p in re.findall(r"[A-Z][a-z0-9]*", name[len("Compiled"):])
                  if p != "Broadcast"]
    return sorted(parts)


@pytest.mark.parametrize("name", sorted(FUSION_CASES))
def test_shapeless_fuses_like_static(name):
    f, kinds, _ = FUSION_CASES[name]
    args = _fusion_inputs(kinds)
    with on("numpy"):
        cs, cd = fresh(f), fresh(f, shapeless=True)
        a, b = as_np(cs(*args)), as_np(cd(*args))
    for u, v in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
        check(v, u, 1e-6)
    ss, sd = cs.stats(), cd.stats()
    assert (sd["row_kernels"], sd["fused_reductions"], _row_kernel_contents(cd)) == (
        ss["row_kernels"], ss["fused_reductions"], _row_kernel_contents(cs)), (
        after_fusion(cs), after_fusion(cd))


@pytest.mark.parametrize("backend", BACKENDS)
def test_shapeless_call_that_breaks_the_per_row_structure(backend):
    # traced with a per-row factor r of shape (R, 1); called with r of the full shape, the
    # per-row product becomes a full value: the cpu backend falls back to the reference
    def f(x, r):
        return mx.sum(mx.exp(x), axis=-1, keepdims=True) * r + x

    rng = np.random.default_rng(31)
    with on(backend):
        cf = fresh(f, shapeless=True)
        for rshape in [(3, 1), (3, 5), (1, 5), (3, 1)]:
            x = rng.standard_normal((3, 5)).astype(np.float32)
            r = rng.standard_normal(rshape).astype(np.float32)
            x64 = x.astype(np.float64)
            want = np.exp(x64).sum(-1, keepdims=True) * r + x64
            got = as_np(cf(arr(x), arr(r)))
            assert got.shape == (3, 5)
            check(got, want, RTOL[mx.float32])
    assert cf.stats()["traces"] == 1


# -- 6. numerics -----------------------------------------------------------------------------------
@pytest.mark.skipif(not HAVE_NUMBA, reason="needs numba")
def test_float32_sum_of_ten_million_is_as_accurate_as_numpy():
    rng = np.random.default_rng(40)
    x = rng.uniform(0.0, 1.0, (1, 10 ** 7)).astype(np.float32)
    exact = x.astype(np.float64).sum(-1)
    np_err = float(np.abs(x.sum(-1, dtype=np.float32).astype(np.float64) - exact)[0])
    with on("cpu"):
        cf = mx.compile(lambda v: (mx.sum(mx.abs(v), axis=-1), mx.mean(mx.abs(v), axis=-1)))
        s, m = as_np(cf(arr(x)))
    assert cf.stats()["row_kernels"] >= 1
    ulp = float(np.spacing(np.float32(exact[0])))
    assert abs(float(s[0]) - exact[0]) <= max(2 * np_err, ulp), (s, exact, np_err)
    mean = exact[0] / 10 ** 7
    assert abs(float(m[0]) - mean) <= max(2 * np_err / 10 ** 7, 2 * float(np.spacing(
        np.float32(mean)))), (m, mean, np_err)
    # and a naive float32 loop would be far worse: the bound above is meaningful
    assert np_err < 1e-5 * exact[0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16], ids=lambda d: d.name)
def test_half_precision_rows_accumulate_in_float32(backend, dtype):
    rng = np.random.default_rng(41)
    x = rng.uniform(0.0, 1.0, (8, 4096)).astype(NP[dtype])
    with on(backend):
        got = as_np(mx.compile(lambda v: mx.sum(mx.abs(v), axis=-1))(arr(x)))
    assert got.dtype == NP[dtype]
    want = x.astype(np.float32).sum(-1).astype(NP[dtype])
    # within one ulp of the float32-accumulated sum rounded once (positive values: the bit
    # patterns are ordered)
    gb = got.view(np.uint16).astype(np.int64)
    wb = want.view(np.uint16).astype(np.int64)
    assert np.abs(gb - wb).max() <= 1, (got, want)
    # so within one ulp of the exact sum (a half-precision accumulator is off by hundreds)
    exact = x.astype(np.float64).sum(-1)
    ulp = 2.0 ** (np.floor(np.log2(exact)) - (10 if dtype == mx.float16 else 7))
    assert np.all(np.abs(got.astype(np.float64) - exact) <= ulp), (got, exact)


# -- 7. donation -----------------------------------------------------------------------------------
def _centered_and_norm(x):
    d = x - mx.mean(x, axis=-1, keepdims=True)  # full, written in an early pass
    return d, d * mx.rsqrt(mx.mean(mx.square(d), axis=-1, keepdims=True) + EPS)


def _norm_and_centered(x):
    d, n = _centered_and_norm(x)
    return n, d


def _centered_and_scaled(x):
    """Three passes: the mean; the centered values (an output) and max |d|; the scaled
    values, which read x again."""
    d = x - mx.mean(x, axis=-1, keepdims=True)
    return d, d / mx.max(mx.abs(d), axis=-1, keepdims=True)


def _scaled_and_centered(x):
    d, s = _centered_and_scaled(x)
    return s, d


def _twice_and_sum(x):
    return x * 2.0, mx.sum(x, axis=-1) + 1.0


def _step(x, w, b, t):
    def loss_fn(w, b):
        return mx.mean(nn.losses.cross_entropy(mx.fast.layer_norm(x, w, b, EPS) * 3.0, t))

    loss, (gw, gb) = mx.value_and_grad(loss_fn, argnums=(0, 1))(w, b)
    return loss, w - 0.1 * gw, b - 0.1 * gb


def _ptr(a):
    return np.asarray(a).__array_interface__["data"][0]


def _call(cf, np_args, keep):
    """cf on fresh arrays; keep=False: nothing but the graph references them (donated);
    returns (results, data pointers of the inputs)."""
    xs = [arr(a) for a in np_args]
    mx.eval(*xs)
    ptrs = [_ptr(x) for x in xs]
    out = cf(*xs)
    if not keep:
        del xs
    res = as_np(list(out) if isinstance(out, (list, tuple)) else [out])
    return res, ptrs, out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(6, 1000), (3, 70000)], ids=["stash", "long_rows"])
def test_donated_inputs_give_the_same_results(backend, shape):
    rng = np.random.default_rng(50)
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    x64 = x.astype(np.float64)
    d64 = x64 - x64.mean(-1, keepdims=True)
    n64 = layer_norm64(x64)
    s64 = d64 / np.abs(d64).max(-1, keepdims=True)
    cases = [(_centered_and_scaled, [d64, s64]), (_scaled_and_centered, [s64, d64]),
             (_centered_and_norm, [d64, n64]), (_norm_and_centered, [n64, d64]),
             (f_softmax, [softmax64(x64)]), (_twice_and_sum, [x64 * 2, x64.sum(-1) + 1])]
    with on(backend):
        for f, want in cases:
            cf = fresh(f)
            kept, _, _ = _call(cf, [x], keep=True)
            given_, ptrs, out = _call(cf, [x], keep=False)
            for k, g, w in zip(kept, given_, want):
                np.testing.assert_array_equal(g, k, err_msg=f.__name__)
                check(g, w, 1e-4, np.abs(x64).sum(-1) if w.ndim == 1 else None)
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            if f in (_centered_and_scaled, _scaled_and_centered):
                # the centered values are written in a pass before the last one, which reads
                # x again: they never go into x's buffer
                d = outs[0] if f is _centered_and_scaled else outs[1]
                assert _ptr(d) != ptrs[0]
            if backend == "cpu" and f is f_softmax:
                assert _ptr(outs[0]) == ptrs[0]  # donation does happen in row kernels


@pytest.mark.parametrize("backend", BACKENDS)
def test_donated_training_step(backend):
    rng = np.random.default_rng(51)
    x = rng.standard_normal((16, 300)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 300).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32) * 0.1
    t = rng.integers(0, 300, 16).astype(np.int32)
    with on(backend):
        eager = as_np(list(_step(arr(x), arr(w), arr(b), arr(t))))
        cf = fresh(_step)
        kept, _, _ = _call(cf, [x, w, b, t], keep=True)
        given_, _, _ = _call(cf, [x, w, b, t], keep=False)
        # several steps, feeding the parameters back (they are donated each time)
        ws, bs = arr(w), arr(b)
        for _ in range(3):
            _, ws, bs = cf(arr(x), ws, bs, arr(t))
        mx.eval(ws, bs)
    assert cf.stats()["row_kernels"] >= 1
    for k, g, e in zip(kept, given_, eager):
        np.testing.assert_array_equal(g, k)
        check(g, e, 1e-5)
    w_, b_ = w, b
    with on("numpy", "no_reduce_fusion"):
        cn = fresh(_step)
        for _ in range(3):
            _, w_, b_ = as_np(list(cn(arr(x), arr(w_), arr(b_), arr(t))))
    check(np.array(ws), w_, 1e-5)
    check(np.array(bs), b_, 1e-5)


# -- 8. threads ------------------------------------------------------------------------------------
@pytest.mark.skipif(not HAVE_NUMBA, reason="needs numba")
def test_large_row_kernels_split_across_threads():
    from braze._src import threads
    rng = np.random.default_rng(60)
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 1024).astype(np.float32)
    b = rng.standard_normal(1024).astype(np.float32)
    prev = threads.set_split_cost(0)  # every launch of these sizes splits
    try:
        res = {}
        for nt in (1, 2):
            with on("cpu"), config.override(num_threads=nt):
                n = threads.POOL.launches
                res[nt] = (as_np(fresh(f_softmax)(arr(x))),
                           as_np(fresh(f_layer_norm)(arr(x), arr(w), arr(b))))
                assert threads.POOL.launches == n + (2 if nt > 1 else 0)
    finally:
        threads.set_split_cost(prev)
    for a, b_ in zip(res[1], res[2]):
        np.testing.assert_array_equal(a, b_)  # rows are split, each row computed the same way
    check(res[2][0], softmax64(x), RTOL[mx.float32])
    check(res[2][1], layer_norm64(x, w, b), RTOL[mx.float32])


# -- 9. errors -------------------------------------------------------------------------------------
def _error_cases():
    x = arr(np.ones((3, 4), np.float32))
    return {
        "softmax_axis": (lambda: mx.softmax(x * 2, axis=5), "[softmax]"),
        "logsumexp_axis": (lambda: mx.logsumexp(x + 1, axis=-3), "[logsumexp]"),
        "layer_norm_weight": (lambda: mx.fast.layer_norm(x, mx.ones((5,)), None, EPS),
                              "[layer_norm]"),
        "rms_norm_weight": (lambda: mx.fast.rms_norm(x, mx.ones((3,)), EPS), "[rms_norm]"),
        "cross_entropy_targets": (lambda: nn.losses.cross_entropy(x, mx.array([1, 2])),
                                  "[cross_entropy]"),
        "argmax_axis": (lambda: mx.argmax(x * 2, axis=2), "[argmax]"),
        "max_of_nothing": (lambda: mx.max(mx.zeros((3, 0)) * 2, axis=-1), "[max]"),
        "softmax_int": (lambda: mx.fast.layer_norm(x.astype(mx.int32), None, None, EPS),
                        "[layer_norm]"),
    }


@pytest.mark.parametrize("name", sorted(_error_cases()))
def test_bad_input_raises_the_eager_error_inside_compile(name):
    fn, tag = _error_cases()[name]
    with pytest.raises(ValueError) as eager:
        mx.eval(fn())
    with on("numpy"), pytest.raises(ValueError) as compiled:
        mx.eval(mx.compile(lambda: fn())())
    assert type(compiled.value) is type(eager.value)
    assert str(compiled.value) == str(eager.value)
    assert str(eager.value).startswith(tag)


# -- 10. MLX ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_matches_mlx(backend):
    mlx = pytest.importorskip("mlx.core")
    rng = np.random.default_rng(70)
    x = rng.standard_normal((8, 1000)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    X, W, Bm = mlx.array(x), mlx.array(w), mlx.array(b)
    pairs = [
        (run(f_softmax, (arr(x),), backend), mlx.softmax(X, axis=-1)),
        (run(f_logsumexp, (arr(x),), backend), mlx.logsumexp(X, axis=-1)),
        (run(f_layer_norm, (arr(x), arr(w), arr(b)), backend),
         mlx.fast.layer_norm(X, W, Bm, EPS)),
        (run(f_rms_norm, (arr(x), arr(w)), backend), mlx.fast.rms_norm(X, W, EPS)),
    ]
    for got, ref in pairs:
        ref = np.array(ref)
        assert got.dtype == ref.dtype and got.shape == ref.shape
        check(got, ref, RTOL[mx.float32])
