"""The native mx.fast primitives (braze/_src/prims/fast.py): forward against the composite
graphs (float64 NumPy references and the braze composite itself, bit for bit in half
precision) and against MLX; gradients against the float64 composite's and MLX's; second order,
vmap against a loop, compile (shapeless, grad of compile, compile of grad); the NumPy path
against the kernels; edge shapes."""
import numpy as np
import pytest

import braze.core as mx
from braze._src import config
from braze._src.ops import fast as OF
from braze._src.prims import fast as PF

from op_table.quantized import ref_layer_norm, ref_rms_norm

try:
    import mlx.core as mlx
except Exception:  # pragma: no cover - MLX is optional
    mlx = None

needs_mlx = pytest.mark.skipif(mlx is None, reason="MLX is not installed")
DTYPES = ("float32", "float16", "bfloat16")
TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 2e-2, "float64": 1e-12}


def _rng(seed=0):
    return np.random.default_rng(seed)


def _np(a):
    if a.dtype in (mx.float16, mx.bfloat16):
        a = a.astype(mx.float32)
    return np.array(a).astype(np.float64)


def _mlx_np(a):
    if a.dtype in (mlx.float16, mlx.bfloat16):
        a = a.astype(mlx.float32)
    return np.array(a).astype(np.float64)


def _bx(a, dt):
    return mx.array(a).astype(getattr(mx, dt))


def _mx(a, dt):
    return mlx.array(a).astype(getattr(mlx, dt))


def _same(a, b, frac=0.005, atol=0.0):
    """Equal in half precision up to summation order: a float32 sum in another order rounds
    to the neighbouring half value now and then, so at most `frac` of the elements (and one)
    may be one half ulp apart; the rest are equal bit for bit."""
    _close_half(_np(a), _np(b), str(b.dtype).split(".")[-1], frac, atol)


def _close_half(g, w, dt, frac=0.005, atol=0.0):
    if dt not in ("float16", "bfloat16"):
        np.testing.assert_array_equal(g, w)
        return
    ulp = np.spacing(np.abs(w).astype(np.float16 if dt == "float16" else np.float32))
    ulp = ulp.astype(np.float64) * (1 if dt == "float16" else 2 ** 16)
    differ = ~((g == w) | (np.isnan(g) & np.isnan(w)))
    assert differ.sum() <= max(1, frac * g.size), f"{differ.sum()} of {g.size} differ"
    bound = np.maximum(ulp * 1.01, atol * ulp.max() if ulp.size else 0) + 1e-30
    np.testing.assert_array_less(np.abs(g - w)[differ], bound[differ])


def _native(out, name):
    assert out._prim is not None and type(out._prim).__name__ == name, out._prim


# -- rms_norm / layer_norm ---------------------------------------------------------------------
NORM_SHAPES = [(2, 3, 16), (5, 7), (1, 1), (3, 33), (2, 1, 1000), (4, 1)]


def _norm_args(shape, dt, seed=0):
    r = _rng(seed)
    x = (r.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    w = r.standard_normal(shape[-1]).astype(np.float32)
    b = r.standard_normal(shape[-1]).astype(np.float32)
    return x, w, b


NORMS = {
    "rms": (lambda m, x, w, b: m.fast.rms_norm(x, w, 1e-5),
            lambda x, w, b: OF._rms_norm_composite(x, w, 1e-5), "RMSNorm"),
    "rms_plain": (lambda m, x, w, b: m.fast.rms_norm(x, None, 1e-6),
                  lambda x, w, b: OF._rms_norm_composite(x, None, 1e-6), "RMSNorm"),
    "ln": (lambda m, x, w, b: m.fast.layer_norm(x, w, b, 1e-5),
           lambda x, w, b: OF._layer_norm_composite(x, w, b, 1e-5), "LayerNorm"),
    "ln_plain": (lambda m, x, w, b: m.fast.layer_norm(x, None, None, 1e-5),
                 lambda x, w, b: OF._layer_norm_composite(x, None, None, 1e-5), "LayerNorm"),
    "ln_w": (lambda m, x, w, b: m.fast.layer_norm(x, w, None, 1e-4),
             lambda x, w, b: OF._layer_norm_composite(x, w, None, 1e-4), "LayerNorm"),
    "ln_b": (lambda m, x, w, b: m.fast.layer_norm(x, None, b, 1e-5),
             lambda x, w, b: OF._layer_norm_composite(x, None, b, 1e-5), "LayerNorm"),
}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", NORM_SHAPES)
@pytest.mark.parametrize("name", sorted(NORMS))
def test_norm_matches_composite(name, shape, dt):
    fn, comp, prim = NORMS[name]
    args = [_bx(a, dt) for a in _norm_args(shape, dt)]
    got = fn(mx, *args)
    _native(got, prim)
    want = comp(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    if dt == "float32":
        np.testing.assert_allclose(_np(got), _np(want), rtol=2e-6, atol=2e-6)
    else:
        _same(got, want)
    x, w, b = _norm_args(shape, dt)
    ref = {"rms": lambda: ref_rms_norm(x, w, 1e-5),
           "rms_plain": lambda: ref_rms_norm(x, None, 1e-6),
           "ln": lambda: ref_layer_norm(x, w, b, 1e-5),
           "ln_plain": lambda: ref_layer_norm(x, None, None, 1e-5),
           "ln_w": lambda: ref_layer_norm(x, w, None, 1e-4),
           "ln_b": lambda: ref_layer_norm(x, None, b, 1e-5)}[name]
    if dt == "float32":
        np.testing.assert_allclose(_np(got), ref(), rtol=1e-4, atol=1e-4)


@needs_mlx
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(NORMS))
def test_norm_matches_mlx(name, dt):
    fn = NORMS[name][0]
    args = _norm_args((3, 5, 40), dt, seed=1)
    got = fn(mx, *[_bx(a, dt) for a in args])
    want = fn(mlx, *[_mx(a, dt) for a in args])
    if dt == "float32":
        np.testing.assert_allclose(_np(got), _mlx_np(want), rtol=1e-5, atol=1e-5)
    else:
        _close_half(_np(got), _mlx_np(want), dt)


def test_norm_float64_and_mixed_dtypes():
    x, w, b = _norm_args((3, 9), "float64")
    got = mx.fast.layer_norm(mx.array(x, dtype=mx.float64), mx.array(w), mx.array(b), 1e-5)
    assert got.dtype == mx.float64
    np.testing.assert_allclose(np.array(got), ref_layer_norm(x.astype(np.float64), w, b, 1e-5),
                               rtol=1e-6, atol=1e-6)
    # half x with a float32 weight: float32 output (the NumPy path's promotions)
    for fn, comp, _ in NORMS.values():
        args = [_bx(x, "float16"), _bx(w, "float32"), _bx(b, "bfloat16")]
        got, want = fn(mx, *args), comp(*args)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(NORMS))
def test_norm_grads_match_float64_composite(name, dt):
    fn, comp, _ = NORMS[name]
    x, w, b = _norm_args((3, 4, 24), dt, seed=2)
    cot = _rng(3).standard_normal(x.shape)

    def grads(f, dtype):
        args = [mx.array(a).astype(dtype) for a in (x, w, b)]
        c = mx.array(cot).astype(dtype)
        return mx.grad(lambda *a: (f(*a) * c).sum(), argnums=(0, 1, 2))(*args)

    got = grads(lambda *a: fn(mx, *a), getattr(mx, dt))
    want = grads(comp, mx.float64)
    for g, wv in zip(got, want):
        assert g.dtype == getattr(mx, dt)
        np.testing.assert_allclose(_np(g), _np(wv), rtol=TOL[dt] * 10, atol=TOL[dt] * 10)


@needs_mlx
@pytest.mark.parametrize("name", ["rms", "ln", "ln_b"])
def test_norm_grads_match_mlx(name):
    fn = NORMS[name][0]
    x, w, b = _norm_args((2, 6, 20), "float32", seed=4)
    cot = _rng(5).standard_normal(x.shape).astype(np.float32)

    def loss(m):
        return lambda *a: (fn(m, *a) * m.array(cot)).sum()

    got = mx.grad(loss(mx), argnums=(0, 1, 2))(*[mx.array(a) for a in (x, w, b)])
    want = mlx.grad(loss(mlx), argnums=(0, 1, 2))(*[mlx.array(a) for a in (x, w, b)])
    for g, wv in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(wv), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["rms", "ln"])
def test_norm_second_order_matches_composite(name):
    fn, comp, _ = NORMS[name]
    x, w, b = (mx.array(a) for a in _norm_args((3, 10), "float32", seed=6))
    c = mx.array(_rng(7).standard_normal((3, 10)).astype(np.float32))

    def gg(f):
        inner = mx.grad(lambda x, w: (f(x, w, b) * c).sum(), argnums=(0, 1))
        return mx.grad(lambda x, w: sum((g * g).sum() for g in inner(x, w)), argnums=(0, 1))(x, w)

    for g, wv in zip(gg(lambda *a: fn(mx, *a)), gg(comp)):
        np.testing.assert_allclose(np.array(g), np.array(wv), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(NORMS))
def test_norm_numpy_path_matches_kernel(name):
    fn = NORMS[name][0]
    for dt in DTYPES:
        args = [_bx(a, dt) for a in _norm_args((4, 37), dt, seed=8)]
        c = _bx(_rng(9).standard_normal((4, 37)), dt)
        native = fn(mx, *args)
        g_native = mx.grad(lambda *a: (fn(mx, *a) * c).sum(), argnums=(0, 1, 2))(*args)
        mx.eval(native, g_native)
        with config.override(backend="numpy"):
            ref = fn(mx, *args)
            g_ref = mx.grad(lambda *a: (fn(mx, *a) * c).sum(), argnums=(0, 1, 2))(*args)
            mx.eval(ref, g_ref)
        if dt == "float32":
            np.testing.assert_allclose(_np(native), _np(ref), rtol=2e-6, atol=2e-6)
        else:
            _same(native, ref)
        for p, q in zip(g_native, g_ref):
            np.testing.assert_allclose(_np(p), _np(q), rtol=TOL[dt], atol=TOL[dt])


@pytest.mark.parametrize("name", ["rms", "ln"])
def test_norm_vmap_matches_loop(name):
    fn = NORMS[name][0]
    x, w, b = _norm_args((3, 4, 12), "float32", seed=10)
    x, w, b = mx.array(x), mx.array(w), mx.array(b)
    for ax in (0, 1, 2):
        xs = mx.moveaxis(x, 0, ax)
        got = mx.vmap(lambda x: fn(mx, x, w, b), in_axes=ax)(xs)
        want = mx.stack([fn(mx, x[i], w, b) for i in range(3)])
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6, atol=1e-6)
    # batched weight and bias: through the composite graph
    ws, bs = mx.stack([w, w * 2, w - 1]), mx.stack([b, -b, b + 1])
    got = mx.vmap(lambda x, w, b: fn(mx, x, w, b))(x, ws, bs)
    want = mx.stack([fn(mx, x[i], ws[i], bs[i]) for i in range(3)])
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6, atol=1e-6)
    # vmap of the gradient (the backward primitive's vmap)
    gfn = mx.grad(lambda x, w: fn(mx, x, w, b).sum() * 1.0 + (fn(mx, x, w, b) ** 2).sum(),
                  argnums=(0, 1))
    got = mx.vmap(gfn, in_axes=(0, None))(x, w)
    for i in range(3):
        for g, wv in zip(got, gfn(x[i], w)):
            np.testing.assert_allclose(np.array(g[i]), np.array(wv), rtol=1e-5, atol=1e-5)


def test_norm_empty_and_edges():
    for shape in [(0, 8), (2, 0, 8), (3, 0)]:
        x = mx.zeros(shape)
        w = mx.ones((shape[-1],))
        for fn, comp, _ in NORMS.values():
            got = fn(mx, x, w, w)
            assert got.shape == shape
            g = mx.grad(lambda x: fn(mx, x, w, w).sum())(x)
            assert g.shape == shape


def test_norm_compile():
    x, w, b = (mx.array(a) for a in _norm_args((2, 5, 16), "float32", seed=11))

    def f(x, w, b):
        return (mx.fast.rms_norm(x, w, 1e-5) * 2 + mx.fast.layer_norm(x, w, b, 1e-5)).sum(-1)

    want = f(x, w, b)
    np.testing.assert_allclose(np.array(mx.compile(f)(x, w, b)), np.array(want), rtol=1e-6,
                               atol=1e-6)
    cf = mx.compile(f, shapeless=True)
    for T in (5, 9):
        xt = mx.random.normal((2, T, 16))
        np.testing.assert_allclose(np.array(cf(xt, w, b)), np.array(f(xt, w, b)), rtol=1e-6,
                                   atol=1e-6)
    loss = lambda x, w, b: (f(x, w, b) ** 2).sum()  # noqa: E731
    g = mx.grad(loss, argnums=(0, 1, 2))(x, w, b)
    for got in (mx.grad(mx.compile(loss), argnums=(0, 1, 2))(x, w, b),
                mx.compile(mx.grad(loss, argnums=(0, 1, 2)))(x, w, b)):
        for p, q in zip(got, g):
            np.testing.assert_allclose(np.array(p), np.array(q), rtol=1e-5, atol=1e-5)


def test_kernels_module_present():
    assert PF._kernels() is not None


def _kernel_dtype(sig):
    """The float type a kernel specialisation computes in (its first float argument)."""
    from numba.core import types
    for t in sig:
        t = getattr(t, "dtype", t)
        if isinstance(t, types.Float):
            return str(t)
    return None


def test_one_kernel_build_per_dtype():
    """The call sites normalise their arguments (flags as ints, every mask one float array
    with strides, arrays C-contiguous and writable), so Numba builds each kernel once per
    float dtype whatever the masks, flags and layouts (each build costs seconds cold)."""
    from numba.core.registry import CPUDispatcher
    K = PF._kernels()
    for dt in DTYPES + ("float64",):
        for name in ("plain", "gqa4_causal", "bool_2d", "bool_full", "bool_heads", "add_batch",
                     "sinks", "sinks_mask"):
            mx.eval(_sdpa_call(mx, name, dt), _attn_grads(SDPA_FN, *_attn_args(name, dt)))
        args = [_bx(a, dt) for a in _norm_args((3, 8), dt)]
        for fn, _, _ in NORMS.values():
            mx.eval(fn(mx, *args), mx.grad(lambda *a: fn(mx, *a).sum(), argnums=(0, 1, 2))(*args))
        for name in ("full", "traditional", "partial", "batch_offsets"):
            mx.eval(_rope_call(name, mx, _bx(_rope_x(ROPES[name][0]), dt)))
    q, k, v, mask = (mx.array(a) for a in _sdpa_inputs("bool_2d")[:4])
    full = mx.broadcast_to(mask, q.shape[:3] + k.shape[2:3])  # a strided bool buffer
    mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask=full[..., ::-1, :]))
    for name in dir(K):
        kernel = getattr(K, name)
        if isinstance(kernel, CPUDispatcher):
            dts = [_kernel_dtype(sig) for sig in kernel.signatures]
            assert len(dts) == len(set(dts)), (name, kernel.signatures)


# -- rope --------------------------------------------------------------------------------------
def _rope_x(shape, seed=0):
    return (_rng(seed).standard_normal(shape) * 2).astype(np.float32)


ROPES = {  # name: (x shape, dims, traditional, base, scale, offset, freqs?)
    "full": ((2, 3, 5, 16), 16, False, 10000.0, 1.0, 3, False),
    "traditional": ((2, 3, 5, 16), 16, True, 10000.0, 0.5, 0, False),
    "partial": ((1, 2, 4, 12), 6, False, 100.0, 2.0, 1, False),
    "partial_trad": ((1, 2, 4, 10), 4, True, 10000.0, 1.0, 7, False),
    "odd_d": ((2, 1, 3, 14), 14, False, 500.0, 1.0, 2, False),
    "batch_offsets": ((3, 2, 4, 8), 8, False, 10000.0, 1.0, "batch", False),
    "array_offset": ((2, 2, 3, 8), 8, True, 10000.0, 1.0, "scalar", False),
    "freqs": ((2, 2, 4, 8), 8, False, None, 1.0, 5, True),
    "three_d": ((2, 6, 8), 8, False, 10000.0, 1.0, 1, False),
    "five_d": ((2, 2, 2, 3, 8), 8, True, 10000.0, 1.0, 4, False),
    "decode": ((1, 4, 1, 64), 64, False, 10000.0, 1.0, 127, False),
    "one_length": ((1, 1, 1, 2), 2, False, 10000.0, 1.0, 0, False),
}


def _rope_call(name, m, x):
    shape, dims, trad, base, scale, off, fr = ROPES[name]
    if off == "batch":
        off = m.array(np.arange(shape[0]) * 5 + 1)
    elif off == "scalar":
        off = m.array(6)
    freqs = m.array(np.exp(_rng(1).standard_normal(dims // 2)).astype(np.float32)) if fr \
        else None
    fn = m.fast.rope if m is not OF else OF._rope_composite
    return fn(x, dims, traditional=trad, base=base, scale=scale, offset=off, freqs=freqs)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(ROPES))
def test_rope_matches_composite(name, dt):
    x = _bx(_rope_x(ROPES[name][0]), dt)
    got = _rope_call(name, mx, x)
    _native(got, "Rope")
    want = _rope_call(name, OF, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    if dt == "float32":
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6, atol=1e-6)
    else:
        _same(got, want, frac=0)
    # the vjp: rope by minus the angle, against the composite's gradient
    c = _bx(_rng(2).standard_normal(x.shape), dt)
    g = mx.grad(lambda x: (_rope_call(name, mx, x) * c).sum())(x)
    gw = mx.grad(lambda x: (_rope_call(name, OF, x) * c).sum())(x)
    np.testing.assert_allclose(_np(g), _np(gw), rtol=TOL[dt], atol=TOL[dt])


@needs_mlx
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(ROPES))
def test_rope_matches_mlx(name, dt):
    x = _rope_x(ROPES[name][0])
    got = _rope_call(name, mx, _bx(x, dt))
    want = _rope_call(name, mlx, _mx(x, dt))
    if dt == "float32":  # MLX's float32 cos/sin lose a few more ulps at large angles
        np.testing.assert_allclose(_np(got), _mlx_np(want), rtol=1e-4, atol=5e-5)
    else:
        _close_half(_np(got), _mlx_np(want), dt)


@needs_mlx
@pytest.mark.parametrize("name", ["full", "partial_trad", "batch_offsets", "freqs"])
def test_rope_grads_match_mlx(name):
    x = _rope_x(ROPES[name][0], seed=3)
    cot = _rng(4).standard_normal(x.shape).astype(np.float32)
    got = mx.grad(lambda x: (_rope_call(name, mx, x) * mx.array(cot)).sum())(mx.array(x))
    want = mlx.grad(lambda x: (_rope_call(name, mlx, x) * mlx.array(cot)).sum())(mlx.array(x))
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-5)


def test_rope_float64_numpy_path_and_freqs_grad():
    for name in ("full", "traditional", "batch_offsets"):
        x = mx.array(_rope_x(ROPES[name][0]), dtype=mx.float64)
        got, want = _rope_call(name, mx, x), _rope_call(name, OF, x)
        assert got.dtype == mx.float64
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12, atol=1e-12)
    x = _bx(_rope_x((2, 3, 4, 16)), "float32")
    for dt in DTYPES:
        xd = x.astype(getattr(mx, dt))
        native = _rope_call("full", mx, xd)
        mx.eval(native)
        with config.override(backend="numpy"):
            ref = _rope_call("full", mx, xd)
            mx.eval(ref)
        _same(native, ref, frac=0) if dt != "float32" else np.testing.assert_allclose(
            _np(native), _np(ref), rtol=1e-6, atol=1e-6)
    # gradient with respect to freqs goes through the composite graph
    f = mx.array(np.exp(_rng(5).standard_normal(4)).astype(np.float32))
    xs = mx.array(_rope_x((1, 2, 3, 8)))

    def loss(fn):
        return lambda f: (fn(xs, 8, traditional=False, base=None, scale=1.0, offset=2,
                             freqs=f) ** 3).sum()

    np.testing.assert_allclose(np.array(mx.grad(loss(mx.fast.rope))(f)),
                               np.array(mx.grad(loss(OF._rope_composite))(f)), rtol=1e-5,
                               atol=1e-5)


def test_rope_vmap_jvp_compile():
    x = mx.array(_rope_x((3, 2, 2, 4, 8)))  # vmapped over axis 0 of (2, 2, 4, 8) examples

    def f(x, off=3):
        return mx.fast.rope(x, 8, traditional=False, base=10000.0, scale=1.0, offset=off)

    for ax in (0, 2, 4):
        got = mx.vmap(f, in_axes=ax)(mx.moveaxis(x, 0, ax))
        want = mx.stack([f(x[i]) for i in range(3)])
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6, atol=1e-6)
    offs = mx.array([1, 9])
    got = mx.vmap(lambda x: f(x, offs))(x)
    want = mx.stack([f(x[i], offs) for i in range(3)])
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6, atol=1e-6)
    # offsets vmapped too: through the graph
    offv = mx.array([[0, 1], [2, 3], [4, 5]])
    got = mx.vmap(lambda x, o: f(x, o))(x, offv)
    want = mx.stack([f(x[i], offv[i]) for i in range(3)])
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6, atol=1e-6)
    # jvp (linear in x)
    t = mx.array(_rope_x(x.shape[1:], seed=9))
    _, (jv,) = mx.jvp(f, [x[0]], [t])
    np.testing.assert_allclose(np.array(jv), np.array(f(t)), rtol=1e-6, atol=1e-6)
    # compile, shapeless over the sequence length, grad of compile, compile of grad
    cf = mx.compile(f, shapeless=True)
    for T in (4, 6):
        xt = mx.random.normal((2, 2, T, 8))
        np.testing.assert_allclose(np.array(cf(xt)), np.array(f(xt)), rtol=1e-6, atol=1e-6)
    loss = lambda x: (f(x) ** 2).sum()  # noqa: E731
    g = mx.grad(loss)(x[0])
    for got in (mx.grad(mx.compile(loss))(x[0]), mx.compile(mx.grad(loss))(x[0])):
        np.testing.assert_allclose(np.array(got), np.array(g), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", ["float32", "float16", "float64"])
def test_rope_position_table_rows_are_the_offsets_angles(dt, monkeypatch):
    """A scalar integer offset reads rows of the kept table of positions: bit for bit the
    angles computed at that offset, also across the table's growth; offsets past the largest
    table are computed as before."""
    monkeypatch.setattr(PF, "_POSITIONS", {})
    npd = np.dtype(dt) if dt != "bfloat16" else None
    for dims, base, scale, inverse in [(16, 10000.0, 1.0, False), (8, 500000.0, 0.25, True)]:
        prim = PF.Rope(dims, False, base, scale, inverse)
        for T, off in [(1, 0), (1, 37), (5, 250), (1, 255), (3, 254), (9, 1000), (1, 4095)]:
            x = np.zeros((1, 2, T, dims), npd)
            for offset in (np.int32(off), np.array(off, np.int64), np.uint32(off)):
                got = prim._tables(x, offset, None)
                want = prim._angles(x, off, None)
                for g, w in zip(got, want):
                    assert g.shape == w.shape == (1, T, dims // 2) and g.dtype == npd
                    np.testing.assert_array_equal(g, w)
    assert max(len(t[0]) for t in PF._POSITIONS.values()) == 4096
    monkeypatch.setattr(PF, "_POSITIONS_BYTES", 1 << 12)
    far = prim._tables(np.zeros((1, 1, 1, 8), npd), np.int32(100000), None)
    np.testing.assert_array_equal(far[0], prim._angles(np.zeros((1, 1, 1, 8), npd), 100000,
                                                       None)[0])
    x = mx.random.normal((1, 2, 3, 8))
    np.testing.assert_allclose(np.array(mx.fast.rope(x, 8, traditional=False, base=10000.0,
                                                     scale=1.0, offset=100000)),
                               np.array(OF._rope_composite(x, 8, traditional=False, base=10000.0,
                                                           scale=1.0, offset=100000)),
                               rtol=1e-5, atol=1e-5)


def test_rope_empty():
    x = mx.zeros((2, 3, 0, 8))
    assert mx.fast.rope(x, 8, traditional=False, base=1e4, scale=1.0, offset=0).shape == x.shape


# -- scaled_dot_product_attention --------------------------------------------------------------
SDPA = {  # name: (B, Nq, Nkv, Tq, Tk, Dk, Dv, mask, sinks)
    "plain": (2, 4, 4, 3, 5, 8, 8, None, False),
    "gqa2": (1, 4, 2, 5, 7, 16, 16, None, False),
    "gqa4_causal": (2, 8, 2, 6, 9, 13, 13, "causal", False),
    "causal_square": (1, 2, 1, 7, 7, 8, 8, "causal", False),
    "causal_more_queries": (1, 2, 2, 6, 4, 8, 8, "causal", False),
    "decode": (1, 8, 2, 1, 300, 64, 64, None, False),
    "decode_causal": (1, 4, 1, 1, 70, 16, 16, "causal", False),
    "many_rows": (1, 4, 1, 9, 12, 5, 7, "causal", False),
    "bool_2d": (2, 4, 2, 3, 6, 8, 8, "bool_2d", False),
    "bool_full": (2, 4, 2, 3, 6, 8, 8, "bool_full", False),
    "bool_heads": (1, 4, 4, 3, 6, 8, 8, "bool_heads", False),
    "add_batch": (2, 4, 2, 3, 6, 8, 8, "add_batch", False),
    "add_2d": (1, 2, 1, 4, 4, 6, 6, "add_2d", False),
    "sinks": (2, 4, 2, 3, 5, 8, 8, "causal", True),
    "sinks_mask": (1, 4, 1, 3, 5, 8, 8, "add_2d", True),
    "one_key": (1, 2, 1, 3, 1, 8, 8, None, False),
    "dv_differs": (1, 2, 1, 3, 5, 8, 3, None, False),
}


def _sdpa_inputs(name, seed=0):
    B, Nq, Nkv, Tq, Tk, Dk, Dv, mask, sinks = SDPA[name]
    r = _rng(seed)
    q = r.standard_normal((B, Nq, Tq, Dk)).astype(np.float32)
    k = r.standard_normal((B, Nkv, Tk, Dk)).astype(np.float32)
    v = r.standard_normal((B, Nkv, Tk, Dv)).astype(np.float32)
    m = {None: None, "causal": "causal",
         "bool_2d": r.random((Tq, Tk)) < 0.6, "bool_full": r.random((B, Nq, Tq, Tk)) < 0.6,
         "bool_heads": r.random((Nq, 1, Tk)) < 0.6,
         "add_batch": r.standard_normal((B, 1, Tq, Tk)).astype(np.float32),
         "add_2d": r.standard_normal((Tq, Tk)).astype(np.float32)}[mask]
    s = r.standard_normal(Nq).astype(np.float32) if sinks else None
    return q, k, v, m, s


def _sdpa_call(m, name, dt, seed=0, fn=None):
    q, k, v, mask, sinks = _sdpa_inputs(name, seed)
    conv = _bx if m is mx else _mx
    args = [conv(a, dt) for a in (q, k, v)]
    if isinstance(mask, np.ndarray):
        mask = m.array(mask) if mask.dtype == bool else conv(mask, dt)
    sinks = conv(sinks, dt) if sinks is not None else None
    fn = fn or m.fast.scaled_dot_product_attention
    return fn(*args, scale=1 / np.sqrt(q.shape[-1]), mask=mask, sinks=sinks)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(SDPA))
def test_sdpa_matches_composite(name, dt):
    got = _sdpa_call(mx, name, dt)
    _native(got, "ScaledDotProductAttention")
    want = _sdpa_call(mx, name, dt, fn=OF._sdpa_composite)
    assert got.dtype == want.dtype and got.shape == want.shape
    if dt == "float32":
        np.testing.assert_allclose(_np(got), _np(want), rtol=2e-6, atol=2e-6)
    else:
        # exp is libm's here, NumPy's SIMD loop there: a probability rounded to the other
        # neighbour moves an output near 0 by more than its own ulp (not the largest's)
        _same(got, want, frac=0.05, atol=1.0)


@needs_mlx
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(SDPA))
def test_sdpa_matches_mlx(name, dt):
    got = _sdpa_call(mx, name, dt)
    want = _sdpa_call(mlx, name, dt)
    if dt == "float32":
        np.testing.assert_allclose(_np(got), _mlx_np(want), rtol=1e-5, atol=1e-5)
    else:
        _close_half(_np(got), _mlx_np(want), dt, frac=0.05, atol=1.0)


def test_sdpa_float64_and_numpy_path():
    for name in ("gqa4_causal", "bool_2d", "sinks_mask", "causal_more_queries"):
        q, k, v, mask, sinks = _sdpa_inputs(name)
        ref = OF._sdpa_composite
        args = [mx.array(a, dtype=mx.float64) for a in (q, k, v)]
        mk = mx.array(mask, dtype=mx.float64) if isinstance(mask, np.ndarray) and \
            mask.dtype != bool else (mx.array(mask) if isinstance(mask, np.ndarray) else mask)
        sk = mx.array(sinks, dtype=mx.float64) if sinks is not None else None
        got = mx.fast.scaled_dot_product_attention(*args, scale=0.3, mask=mk, sinks=sk)
        want = ref(*args, scale=0.3, mask=mk, sinks=sk)
        assert got.dtype == mx.float64
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12, atol=1e-12)
        for dt in DTYPES:
            native = _sdpa_call(mx, name, dt)
            mx.eval(native)
            with config.override(backend="numpy"):
                np_path = _sdpa_call(mx, name, dt)
                mx.eval(np_path)
            if dt == "float32":
                np.testing.assert_allclose(_np(native), _np(np_path), rtol=2e-6, atol=2e-6)
            else:
                _same(native, np_path, frac=0.05, atol=1.0)


def test_sdpa_edges():
    q = mx.random.normal((1, 2, 3, 4))
    for shape_k in [(1, 1, 0, 4), (1, 2, 0, 4)]:
        k = mx.zeros(shape_k)
        got = mx.fast.scaled_dot_product_attention(q, k, k, scale=1.0)
        want = OF._sdpa_composite(q, k, k, scale=1.0)
        assert got.shape == want.shape == (1, 2, 3, 4)
        np.testing.assert_allclose(np.array(got), np.array(want))
    k = mx.random.normal((1, 1, 5, 4))
    got = mx.fast.scaled_dot_product_attention(q[:, :, :0], k, k, scale=1.0, mask="causal")
    assert got.shape == (1, 2, 0, 4)
    # fully masked rows are uniform over the keys (MLX's behaviour)
    mask = mx.array([[False] * 5, [True, False, False, False, False], [True] * 5])
    got = mx.fast.scaled_dot_product_attention(q, k, k, scale=1.0, mask=mask)
    np.testing.assert_allclose(np.array(got[0, :, 0]), np.array(mx.broadcast_to(
        mx.mean(k[0, 0], axis=0), (2, 4))), rtol=1e-6, atol=1e-6)
    # -inf additive masks: a fully -inf row is NaN, as in the composite
    add = mx.array(np.where(np.array(mask), 0.0, -np.inf).astype(np.float32))
    got = mx.fast.scaled_dot_product_attention(q, k, k, scale=1.0, mask=add)
    want = OF._sdpa_composite(q, k, k, scale=1.0, mask=add)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("batch,start,mask", [(1, 0, None), (2, 5, None), (2, 0, "causal"),
                                              (3, 11, "bool")])
def test_sdpa_reads_a_kv_cache_prefix_where_it_lies(batch, start, mask):
    """K/V that are the first positions of a larger cache buffer (cache[..., a:b, :]) are read
    in place, bit for bit what the kernel gives on contiguous copies; views it cannot read in
    place (the heads axis not uniform in memory) are copied, with the same results."""
    rng = _rng(3)
    nh, nkv, d, cap, t = 8, 2, 32, 700, 513
    q = rng.standard_normal((batch, nh, 4, d)).astype(np.float32)
    kbuf = rng.standard_normal((batch, nkv, cap, d)).astype(np.float32)
    vbuf = rng.standard_normal((batch, nkv, cap, d)).astype(np.float32)
    k, v = kbuf[..., start:start + t, :], vbuf[..., :t, :]
    m = rng.random((4, t)) > 0.3 if mask == "bool" else None
    prim = PF.ScaledDotProductAttention(d ** -0.5, causal=mask == "causal",
                                        mask="bool" if m is not None else None)
    extra = (m,) if m is not None else ()
    rows, dist = PF._kv_rows(k, np.dtype(np.float32))
    assert np.shares_memory(rows, kbuf) and dist == cap  # no copy
    got = prim.eval_cpu(q, k, v, *extra)[0]
    want = prim.eval_cpu(q, np.ascontiguousarray(k), np.ascontiguousarray(v), *extra)[0]
    np.testing.assert_array_equal(got, want)
    # heads and batch swapped in memory: (B, N) strides not uniform, so a copy
    kt = np.ascontiguousarray(kbuf.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    kt = kt[..., start:start + t, :]
    rows, dist = PF._kv_rows(kt, np.dtype(np.float32))
    assert (batch == 1) == np.shares_memory(rows, kt) and dist == (cap if batch == 1 else t)
    np.testing.assert_array_equal(prim.eval_cpu(q, kt, v, *extra)[0], want)
    ref = OF._sdpa_composite(mx.array(q), mx.array(k), mx.array(v), scale=d ** -0.5,
                             mask="causal" if mask == "causal" else
                             (mx.array(m) if m is not None else None))
    np.testing.assert_allclose(got, np.array(ref), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["gqa4_causal", "bool_2d", "add_batch", "sinks",
                                  "causal_more_queries"])
def test_sdpa_grads_match_float64_composite(name):
    q, k, v, mask, sinks = _sdpa_inputs(name, seed=1)
    cot = _rng(2).standard_normal(q.shape[:3] + v.shape[3:])

    def grads(fn, dtype):
        args = [mx.array(a).astype(dtype) for a in (q, k, v)]
        mk = mask
        if isinstance(mask, np.ndarray):
            mk = mx.array(mask) if mask.dtype == bool else mx.array(mask).astype(dtype)
        sk = mx.array(sinks).astype(dtype) if sinks is not None else None
        c = mx.array(cot).astype(dtype)
        return mx.grad(lambda q, k, v: (fn(q, k, v, scale=0.4, mask=mk, sinks=sk) * c).sum(),
                       argnums=(0, 1, 2))(*args)

    got = grads(mx.fast.scaled_dot_product_attention, mx.float32)
    want = grads(OF._sdpa_composite, mx.float64)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-4, atol=1e-4)


@needs_mlx
@pytest.mark.parametrize("name", ["gqa2", "decode_causal", "bool_heads", "sinks_mask"])
def test_sdpa_grads_match_mlx(name):
    q, k, v, mask, sinks = _sdpa_inputs(name, seed=3)
    cot = _rng(4).standard_normal(q.shape[:3] + v.shape[3:]).astype(np.float32)

    def loss(m):
        mk = m.array(mask) if isinstance(mask, np.ndarray) else mask
        sk = m.array(sinks) if sinks is not None else None
        return lambda q, k, v: (m.fast.scaled_dot_product_attention(
            q, k, v, scale=0.4, mask=mk, sinks=sk) * m.array(cot)).sum()

    got = mx.grad(loss(mx), argnums=(0, 1, 2))(*[mx.array(a) for a in (q, k, v)])
    want = mlx.grad(loss(mlx), argnums=(0, 1, 2))(*[mlx.array(a) for a in (q, k, v)])
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-4, atol=1e-4)


def test_sdpa_vmap_jvp_compile():
    q, k, v, _, _ = _sdpa_inputs("gqa4_causal", seed=5)
    q, k, v = mx.array(q), mx.array(k), mx.array(v)

    def f(q, k, v):
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal")

    # vmap over a new leading axis (folded into the batch), and over an inner axis
    qs, ks, vs = (mx.stack([a, a * 0.5, -a]) for a in (q, k, v))
    got = mx.vmap(f)(qs, ks, vs)
    for i in range(3):
        np.testing.assert_allclose(np.array(got[i]), np.array(f(qs[i], ks[i], vs[i])),
                                   rtol=1e-6, atol=1e-6)
    got = mx.vmap(f, in_axes=(2, 2, 2), out_axes=2)(q[:, :, None], k[:, :, None],
                                                     v[:, :, None])
    np.testing.assert_allclose(np.array(got[:, :, 0]), np.array(f(q, k, v)), rtol=1e-6,
                               atol=1e-6)
    # only q batched, and a batched mask: through the graph
    got = mx.vmap(f, in_axes=(0, None, None))(qs, k, v)
    for i in range(3):
        np.testing.assert_allclose(np.array(got[i]), np.array(f(qs[i], k, v)), rtol=1e-6,
                                   atol=1e-6)
    masks = mx.array(_rng(6).random((3, q.shape[2], k.shape[2])) < 0.7)
    g = mx.vmap(lambda m: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask=m))
    got = g(masks)
    for i in range(3):
        want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask=masks[i])
        np.testing.assert_allclose(np.array(got[i]), np.array(want), rtol=1e-6, atol=1e-6)
    # jvp against the composite's
    t = [mx.array(_rng(7).standard_normal(a.shape).astype(np.float32)) for a in (q, k, v)]
    _, (jv,) = mx.jvp(f, [q, k, v], t)
    _, (jw,) = mx.jvp(lambda q, k, v: OF._sdpa_composite(q, k, v, scale=0.3, mask="causal"),
                      [q, k, v], t)
    np.testing.assert_allclose(np.array(jv), np.array(jw), rtol=1e-5, atol=1e-5)
    # compile: plain, shapeless over the sequence length, grad of compile, compile of grad
    np.testing.assert_allclose(np.array(mx.compile(f)(q, k, v)), np.array(f(q, k, v)),
                               rtol=1e-6, atol=1e-6)
    cf = mx.compile(f, shapeless=True)
    for T in (6, 11):
        kt, vt = mx.random.normal((2, 2, T, 13)), mx.random.normal((2, 2, T, 13))
        np.testing.assert_allclose(np.array(cf(q, kt, vt)), np.array(f(q, kt, vt)),
                                   rtol=1e-6, atol=1e-6)
    loss = lambda q, k, v: (f(q, k, v) ** 2).sum()  # noqa: E731
    g = mx.grad(loss, argnums=(0, 1, 2))(q, k, v)
    for got in (mx.grad(mx.compile(loss), argnums=(0, 1, 2))(q, k, v),
                mx.compile(mx.grad(loss, argnums=(0, 1, 2)))(q, k, v)):
        for p, w in zip(got, g):
            np.testing.assert_allclose(np.array(p), np.array(w), rtol=1e-5, atol=1e-5)


# -- scaled_dot_product_attention backward -----------------------------------------------------
def _attn_args(name, dt, seed=1):
    """An SDPA case's (q, k, v), mask, sinks and an output cotangent, braze arrays of dtype
    `dt` (a bool mask stays bool)."""
    q, k, v, mask, sinks = _sdpa_inputs(name, seed)
    cot = _rng(seed + 1).standard_normal(q.shape[:3] + v.shape[3:])
    conv = lambda a: mx.array(a).astype(getattr(mx, dt))  # noqa: E731
    if isinstance(mask, np.ndarray):
        mask = mx.array(mask) if mask.dtype == bool else conv(mask)
    return [conv(a) for a in (q, k, v)], mask, None if sinks is None else conv(sinks), conv(cot)


def _attn_loss(fn, mask, cot, scale=0.4):
    return lambda q, k, v, sinks=None: (fn(q, k, v, scale=scale, mask=mask, sinks=sinks)
                                        * cot).sum()


def _attn_grads(fn, qkv, mask, sinks, cot):
    """The gradients of sum(fn(q, k, v) * cot) with respect to q, k, v and the sinks."""
    args = qkv + ([] if sinks is None else [sinks])
    return mx.grad(_attn_loss(fn, mask, cot), argnums=tuple(range(len(args))))(*args)


SDPA_FN = mx.fast.scaled_dot_product_attention


@pytest.mark.parametrize("name", sorted(SDPA))
def test_sdpa_backward_matches_composite(name):
    """The native backward primitive: to rounding in float64, float32 against float64."""
    want = _attn_grads(OF._sdpa_composite, *_attn_args(name, "float64"))
    for dt, tol in (("float64", 1e-12), ("float32", 1e-5)):
        got = _attn_grads(SDPA_FN, *_attn_args(name, dt))
        _native(got[0], "ScaledDotProductAttentionVJP")
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == getattr(mx, dt) and g.shape == w.shape
            np.testing.assert_allclose(_np(g), _np(w), rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["gqa4_causal", "bool_full", "add_batch", "sinks_mask"])
def test_sdpa_backward_half(name, dt):
    """Half inputs: computed in float32 (the probabilities rounded as the forward's)."""
    got = _attn_grads(SDPA_FN, *_attn_args(name, dt))
    want = _attn_grads(OF._sdpa_composite, *_attn_args(name, "float64"))
    for g, w in zip(got, want):
        assert g.dtype == getattr(mx, dt)
        np.testing.assert_allclose(_np(g), _np(w), rtol=TOL[dt] * 3, atol=TOL[dt] * 3)


def test_sdpa_backward_finite_differences():
    eps = 1e-6
    for name in ("gqa4_causal", "sinks_mask", "bool_heads", "add_batch"):
        qkv, mask, sinks, cot = _attn_args(name, "float64", seed=3)
        loss = _attn_loss(SDPA_FN, mask, cot)
        args = qkv + ([] if sinks is None else [sinks])
        grads = _attn_grads(SDPA_FN, qkv, mask, sinks, cot)
        r = _rng(4)
        for i, (a, g) in enumerate(zip(args, grads)):
            base = np.array(a)
            for flat in r.choice(base.size, min(5, base.size), replace=False):
                shifted = []
                for sign in (1, -1):
                    x = base.copy()
                    x.flat[flat] += sign * eps
                    shifted.append(loss(*[mx.array(x, dtype=mx.float64) if j == i else b
                                          for j, b in enumerate(args)]).item())
                fd = (shifted[0] - shifted[1]) / (2 * eps)
                np.testing.assert_allclose(np.array(g).flat[flat], fd, rtol=1e-6, atol=1e-7)


@needs_mlx
@pytest.mark.parametrize("name", ["plain", "gqa4_causal", "causal_more_queries", "bool_full",
                                  "add_batch", "sinks", "sinks_mask", "dv_differs", "decode"])
def test_sdpa_backward_matches_mlx(name):
    q, k, v, mask, sinks = _sdpa_inputs(name, seed=5)
    cot = _rng(6).standard_normal(q.shape[:3] + v.shape[3:]).astype(np.float32)
    args = [q, k, v] + ([] if sinks is None else [sinks])

    def grads(m):
        mk = m.array(mask) if isinstance(mask, np.ndarray) else mask
        loss = _attn_loss(m.fast.scaled_dot_product_attention, mk, m.array(cot))
        return m.grad(loss, argnums=tuple(range(len(args))))(*[m.array(a) for a in args])

    for g, w in zip(grads(mx), grads(mlx)):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=2e-5, atol=2e-5)


def test_sdpa_backward_numpy_path_matches_kernel():
    for name in ("gqa4_causal", "bool_heads", "add_batch", "sinks_mask", "causal_more_queries"):
        for dt in ("float32", "float64", "float16"):
            native = _attn_grads(SDPA_FN, *_attn_args(name, dt))
            mx.eval(native)
            with config.override(backend="numpy"):
                ref = _attn_grads(SDPA_FN, *_attn_args(name, dt))
                mx.eval(ref)
            for p, q in zip(native, ref):
                np.testing.assert_allclose(_np(p), _np(q), rtol=TOL[dt], atol=TOL[dt])


def test_sdpa_backward_vmap_matches_loop():
    qkv, _, sinks, cot = _attn_args("gqa4_causal", "float32", seed=7)
    gf = mx.grad(_attn_loss(SDPA_FN, "causal", cot), argnums=(0, 1, 2))
    stacked = [mx.stack([a, a * 0.5, -a]) for a in qkv]
    for in_axes in (0, (0, None, None)):  # folded into the batch; only q batched: the graph
        ins = stacked if in_axes == 0 else stacked[:1] + qkv[1:]
        got = mx.vmap(gf, in_axes=in_axes)(*ins)
        for i in range(3):
            want = gf(*[a[i] if in_axes == 0 or j == 0 else a for j, a in enumerate(ins)])
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.array(g[i]), np.array(w), rtol=1e-5, atol=1e-5)
    # with sinks (their gradient per example: through the graph)
    sk = mx.array(_rng(8).standard_normal(qkv[0].shape[1]).astype(np.float32))
    gs = mx.grad(_attn_loss(SDPA_FN, None, cot), argnums=(0, 3))
    got = mx.vmap(gs, in_axes=(0, 0, 0, None))(*stacked, sk)
    for i in range(3):
        for g, w in zip(got, gs(*[a[i] for a in stacked], sk)):
            np.testing.assert_allclose(np.array(g[i]), np.array(w), rtol=1e-5, atol=1e-5)


def test_sdpa_backward_compile():
    qkv, mask, sinks, cot = _attn_args("sinks_mask", "float32", seed=9)
    loss = _attn_loss(SDPA_FN, mask, cot)
    gf = mx.grad(loss, argnums=(0, 1, 2, 3))
    want = gf(*qkv, sinks)
    for got in (mx.compile(gf)(*qkv, sinks), mx.grad(mx.compile(loss), argnums=(0, 1, 2, 3))(
            *qkv, sinks)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-6, atol=1e-6)
    # shapeless over the sequence length
    q = qkv[0]
    cf = mx.compile(lambda q, k, v: mx.grad(lambda q, k, v: (SDPA_FN(
        q, k, v, scale=0.4, mask="causal") ** 2).sum(), argnums=(0, 1, 2))(q, k, v),
        shapeless=True)
    for T in (5, 8):
        k, v = (mx.random.normal((1, 1, T, 8)) for _ in range(2))
        want = mx.grad(lambda q, k, v: (SDPA_FN(q, k, v, scale=0.4, mask="causal") ** 2).sum(),
                       argnums=(0, 1, 2))(q, k, v)
        for g, w in zip(cf(q, k, v), want):
            np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-6, atol=1e-6)


def test_sdpa_backward_mask_gradient_and_second_order():
    """A mask's gradient goes through the graph (MLX gives one: the score gradient for an
    additive mask, integer zeros for a bool one); grad of grad differentiates the graph."""
    for name in ("add_batch", "bool_2d"):
        qkv, mask, sinks, cot = _attn_args(name, "float32", seed=10)

        def gmask(fn):
            return mx.grad(lambda m: _attn_loss(fn, m, cot)(*qkv))(mask)

        got, want = gmask(SDPA_FN), gmask(OF._sdpa_composite)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-5)
    qkv, mask, _, cot = _attn_args("gqa2", "float32", seed=11)

    def gg(fn):
        inner = mx.grad(_attn_loss(fn, "causal", cot), argnums=(0, 1, 2))
        return mx.grad(lambda *a: sum((g * g).sum() for g in inner(*a)), argnums=(0, 1, 2))(*qkv)

    for g, w in zip(gg(SDPA_FN), gg(OF._sdpa_composite)):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-4, atol=1e-4)


def test_sdpa_backward_edges():
    q = mx.random.normal((1, 2, 3, 4))
    for k in (mx.zeros((1, 1, 0, 4)), mx.random.normal((1, 1, 5, 4))):
        for qq in (q, q[:, :, :0]):
            cot = mx.ones(qq.shape)
            got = _attn_grads(SDPA_FN, [qq, k, k], None, None, cot)
            want = _attn_grads(OF._sdpa_composite, [qq, k, k], None, None, cot)
            for g, w in zip(got, want):
                assert g.shape == w.shape
                np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-6, atol=1e-6)
    # fully masked rows (bool: uniform, no score gradient) and -inf rows (NaN, as the graph's)
    k = mx.random.normal((1, 1, 5, 4))
    keep = np.array([[False] * 5, [True, False, False, False, False], [True] * 5])
    cot = mx.random.normal((1, 2, 3, 4))
    for mask in (mx.array(keep), mx.array(np.where(keep, 0.0, -np.inf).astype(np.float32))):
        got = _attn_grads(SDPA_FN, [q, k, k], mask, None, cot)
        want = _attn_grads(OF._sdpa_composite, [q, k, k], mask, None, cot)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-5, atol=1e-5)
