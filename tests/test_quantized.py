"""gather_mm, quantize, dequantize, quantized_matmul and gather_qmm.

MLX is the oracle where it is installed: quantize/dequantize are compared bit for bit (all
supported bits and group sizes, float32/float16/bfloat16, awkward groups); products and gradients
closely. Recorded literal values (taken from MLX 0.32) run everywhere. Bad input raises
ValueError/TypeError naming the op.
"""
import numpy as np
import pytest

import braze.core as mx

try:
    import mlx.core as mlx
except Exception:  # pragma: no cover - MLX is optional
    mlx = None

needs_mlx = pytest.mark.skipif(mlx is None, reason="MLX is not installed")

BITS = (1, 2, 3, 4, 5, 6, 8)
GROUPS = (32, 64, 128)
HALF = ("float16", "bfloat16")


def _np(a):
    """braze or MLX array -> NumPy (half types widened to float32, exactly)."""
    if str(a.dtype).split(".")[-1] in HALF:
        a = a.astype(mx.float32 if isinstance(a, mx.array) else mlx.float32)
    return np.array(a)


def _sample(kind, shape, rng):
    w = rng.standard_normal(shape).astype(np.float32)
    if kind == "scaled":
        w *= rng.choice([1e-3, 1.0, 300.0], size=shape[:-1] + (1,))
    elif kind == "awkward":  # constant, zero, one-signed and tie-heavy groups
        w[..., :40] = 0.0
        w[0, ...] = 3.0
        w[1, ...] = -2.0
        w[2, ::2] = 0.5
        w[3] = rng.integers(-8, 8, shape[-1]) / 2
        w[4] = np.abs(w[4])
        w[5] = -np.abs(w[5])
    return w


def _pair(w, dt):
    """The same values as braze and MLX arrays of dtype dt."""
    b = mx.array(w).astype(getattr(mx, dt))
    m = mlx.array(w).astype(getattr(mlx, dt))
    return b, m


# -- MLX bit equality -------------------------------------------------------------------------
@needs_mlx
@pytest.mark.parametrize("dt", ("float32",) + HALF)
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUPS)
def test_quantize_bit_equal_to_mlx(group_size, bits, dt):
    rng = np.random.default_rng(group_size * 10 + bits)
    for kind in ("normal", "scaled", "awkward"):
        w = _sample(kind, (8, 256), rng)
        wb, wm = _pair(w, dt)
        got = mx.quantize(wb, group_size=group_size, bits=bits)
        want = mlx.quantize(wm, group_size=group_size, bits=bits)
        assert len(got) == 3
        for g, m, name in zip(got, want, ("w_q", "scales", "biases")):
            assert g.shape == m.shape, (kind, name)
            assert g.dtype.name == str(m.dtype).split(".")[-1], (kind, name)
            np.testing.assert_array_equal(_np(g), _np(m), err_msg=f"{kind} {name}")
        d_got = mx.dequantize(*got, group_size=group_size, bits=bits)
        d_want = mlx.dequantize(*want, group_size=group_size, bits=bits)
        assert d_got.dtype.name == dt
        np.testing.assert_array_equal(_np(d_got), _np(d_want), err_msg=f"{kind} dequantize")


@needs_mlx
def test_quantize_batched_shapes_match_mlx():
    w = np.random.default_rng(0).standard_normal((2, 3, 128)).astype(np.float32)
    wb, wm = _pair(w, "float32")
    for g, m in zip(mx.quantize(wb, 64, 6), mlx.quantize(wm, 64, 6)):
        assert g.shape == m.shape
        np.testing.assert_array_equal(np.array(g), np.array(m))
    # defaults: group_size 64, bits 4
    for g, m in zip(mx.quantize(wb), mlx.quantize(wm)):
        np.testing.assert_array_equal(np.array(g), np.array(m))


@needs_mlx
@pytest.mark.parametrize("dt", ("float32",) + HALF)
def test_quantized_matmul_matches_mlx(dt):
    rng = np.random.default_rng(1)
    tol = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 5e-2}[dt]
    for transpose, bits, gs in ((True, 4, 32), (True, 8, 64), (False, 3, 32), (True, 6, 128)):
        w = rng.standard_normal((16, 128) if transpose else (128, 128)).astype(np.float32)
        x = rng.standard_normal((2, 3, 128)).astype(np.float32)
        wb, wm = _pair(w, dt)
        xb, xm = _pair(x, dt)
        qb = mx.quantize(wb, gs, bits)
        qm = mlx.quantize(wm, gs, bits)
        got = mx.quantized_matmul(xb, *qb, transpose=transpose, group_size=gs, bits=bits)
        want = mlx.quantized_matmul(xm, *qm, transpose=transpose, group_size=gs, bits=bits)
        assert got.shape == want.shape and got.dtype.name == dt
        # half products accumulate rounding: an absolute tolerance on the output's scale
        want = _np(want)
        np.testing.assert_allclose(_np(got), want, rtol=tol, atol=tol * np.abs(want).max())


@needs_mlx
def test_quantized_matmul_grads_match_mlx():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    qb = mx.quantize(mx.array(w), 32, 4)
    qm = mlx.quantize(mlx.array(w), 32, 4)

    def loss(m, q):
        return lambda x, s, b: (m.quantized_matmul(x, q, s, b, group_size=32, bits=4) ** 2).sum()

    got = mx.grad(loss(mx, qb[0]), argnums=(0, 1, 2))(mx.array(x), qb[1], qb[2])
    want = mlx.grad(loss(mlx, qm[0]), argnums=(0, 1, 2))(mlx.array(x), qm[1], qm[2])
    for g, m in zip(got, want):
        assert g.shape == m.shape
        np.testing.assert_allclose(np.array(g), np.array(m), rtol=1e-4, atol=1e-3)


@needs_mlx
def test_gather_mm_matches_mlx_forward_and_grad():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5, 6)).astype(np.float32)
    for li, ri in ((None, None), ([[0], [2]], [0, 2, 1]), ([5, 0, 5, 1], [1, 1, 2, 0]),
                   ([3, 3], [2, 0]), (None, [[0, 1, 2], [2, 2, 2]])):
        def f(m):
            def g(a, b):
                return m.gather_mm(a, b, None if li is None else m.array(li, m.uint32),
                                   None if ri is None else m.array(ri, m.int32))
            return g

        got, want = f(mx)(mx.array(a), mx.array(b)), f(mlx)(mlx.array(a), mlx.array(b))
        assert got.shape == want.shape
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-5)
        gg = mx.grad(lambda a, b: (f(mx)(a, b) ** 2).sum(), argnums=(0, 1))(
            mx.array(a), mx.array(b))
        gw = mlx.grad(lambda a, b: (f(mlx)(a, b) ** 2).sum(), argnums=(0, 1))(
            mlx.array(a), mlx.array(b))
        for x, y in zip(gg, gw):
            np.testing.assert_allclose(np.array(x), np.array(y), rtol=1e-4, atol=1e-4)


@needs_mlx
@pytest.mark.parametrize("dt", ("float32",) + HALF)
def test_gather_qmm_matches_mlx(dt):
    rng = np.random.default_rng(4)
    tol = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 5e-2}[dt]
    W = rng.standard_normal((4, 32, 64)).astype(np.float32)
    X = rng.standard_normal((5, 1, 2, 64)).astype(np.float32)
    ri = rng.integers(0, 4, (5, 3)).astype(np.uint32)
    wb, wm = _pair(W, dt)
    xb, xm = _pair(X, dt)
    got = mx.gather_qmm(xb, *mx.quantize(wb), rhs_indices=mx.array(ri), transpose=True)
    want = mlx.gather_qmm(xm, *mlx.quantize(wm), rhs_indices=mlx.array(ri), transpose=True)
    assert got.shape == want.shape == (5, 3, 2, 32)
    want = _np(want)
    np.testing.assert_allclose(_np(got), want, rtol=tol, atol=tol * np.abs(want).max())


# -- recorded literals (MLX 0.32, CPU) --------------------------------------------------------
def _literal_w():
    w = (np.arange(64, dtype=np.float32).reshape(2, 32) * 0.37 - 5.0) ** 2 / 10 - 1
    w[1] = np.sin(np.arange(32)) * 2
    return w.astype(np.float32)


_LITERALS = {
    4: ([[3434780790, 4008636125, 2882330350, 37054345],
         [3590496248, 3753116863, 419402246, 1346043505]],
        [-0.28964459896087646, 0.2499975562095642], [3.1860904693603516, -1.9999804496765137]),
    3: ([[3067533595, 3988193277, 78046390], [3085704188, 4198760224, 1088411699]],
        [-0.6372181177139282, 0.4999951124191284], [3.1860904693603516, -1.9999804496765137]),
    1: ([[4227858435], [473490319]],
        [4.182850360870361, 3.9811952114105225], [-0.9967600107192993, -1.9999804496765137]),
}


@pytest.mark.parametrize("bits", sorted(_LITERALS))
def test_quantize_recorded_values(bits):
    q, s, b = mx.quantize(mx.array(_literal_w()), group_size=32, bits=bits)
    wq, ws, wb = _LITERALS[bits]
    assert q.dtype == mx.uint32 and s.dtype == mx.float32
    assert q.tolist() == wq
    np.testing.assert_array_equal(np.array(s)[:, 0], np.float32(ws))
    np.testing.assert_array_equal(np.array(b)[:, 0], np.float32(wb))


def test_dequantize_recorded_values():
    w = _literal_w()
    d = np.array(mx.dequantize(*mx.quantize(mx.array(w), 32, 4), 32, 4))
    np.testing.assert_array_equal(d[0, :6], np.float32([
        1.4482228755950928, 1.1585783958435059, 0.8689336776733398, 0.5792889595031738,
        0.2896444797515869, 0.0]))
    d1 = np.array(mx.dequantize(*mx.quantize(mx.array(w), 32, 1), 32, 1))
    np.testing.assert_array_equal(d1[0, :3], np.float32([3.1860904693603516,
                                                          3.1860904693603516,
                                                          -0.9967600107192993]))


def test_quantize_bfloat16_recorded_values():
    q, s, b = mx.quantize(mx.array(_literal_w()).astype(mx.bfloat16), 32, 8)
    assert s.dtype == mx.bfloat16 and b.dtype == mx.bfloat16
    assert q.tolist() == [
        [2744155495, 3704668851, 4210421477, 4261412861, 3874420218, 3032731868, 1736282531,
         1914704],
        [2465524864, 3562800671, 3847678, 3556750908, 2468349275, 343927797, 4209143564,
         1275210659]]
    assert np.array(s.astype(mx.float32))[:, 0].tolist() == [-0.0164794921875, 0.015625]
    assert np.array(b.astype(mx.float32))[:, 0].tolist() == [3.1875, -2.0]


def test_packing_is_a_little_endian_bit_stream():
    # values 0..15 quantize exactly with 4 bits (scale -1, bias 15: q = 15 - w); element i of a
    # row sits in bits 4i..4i+3 of the row's stream of little-endian uint32 words
    w = (np.arange(32) % 16).astype(np.float32)[None]
    q, s, b = mx.quantize(mx.array(w), 32, 4)
    assert s.item() == -1.0 and b.item() == 15.0
    vals = (15 - w[0]).astype(np.int64)
    words = [sum(int(v) << (4 * i) for i, v in enumerate(vals[8 * j:8 * j + 8]))
             for j in range(4)]
    assert q.tolist()[0] == words
    assert mx.array_equal(mx.dequantize(q, s, b, 32, 4), mx.array(w))
    # 3 bits straddle words: element 10 uses bits 30, 31 of word 0 and bit 0 of word 1
    w3 = np.zeros((1, 32), np.float32)
    w3[0, 0], w3[0, 10] = 7.0, 0.0
    w3[0, 1:10] = 7.0
    w3[0, 11:] = 7.0
    q3, s3, b3 = mx.quantize(mx.array(w3), 32, 3)  # scale -1, bias 7: q = 7 - w
    stream = 7 << 30
    assert q3.tolist()[0] == [stream & 0xFFFFFFFF, stream >> 32, 0]


@pytest.mark.parametrize("bits", BITS)
def test_round_trip_error_is_within_one_step(bits):
    w = np.random.default_rng(bits).standard_normal((4, 128)).astype(np.float32)
    q, s, b = mx.quantize(mx.array(w), 64, bits)
    d = np.array(mx.dequantize(q, s, b, 64, bits))
    # within one step: the scale is adjusted so the group's larger-magnitude extremum is exact
    step = np.repeat(np.abs(np.array(s)), 64, axis=-1)
    assert np.all(np.abs(d - w) <= step + 1e-5)


def test_float64_quantize():
    w = np.random.default_rng(0).standard_normal((2, 64))
    q, s, b = mx.quantize(mx.array(w, dtype=mx.float64), 32, 8)
    assert s.dtype == mx.float64
    d = mx.dequantize(q, s, b, 32, 8)
    assert d.dtype == mx.float64
    assert np.abs(np.array(d) - w).max() <= np.abs(np.array(s)).max() + 1e-12


# -- transforms -------------------------------------------------------------------------------
def test_packed_weights_get_zero_gradients():
    # MLX's QuantizedMatmul raises here; braze treats the packed integers like any integer
    # input (zero gradient), so fake-quantization graphs still differentiate
    q, s, b = mx.quantize(mx.ones((8, 64)))
    x = mx.ones((2, 64))
    g = mx.grad(lambda q: mx.quantized_matmul(x, q, s, b).sum())(q)
    assert g.dtype == mx.uint32 and not mx.any(g).item()


def test_quantize_is_not_differentiable():
    w = mx.random.normal((2, 64))
    g = mx.grad(lambda w: mx.dequantize(*mx.quantize(w)).sum())(w)
    assert mx.array_equal(g, mx.zeros_like(w))


def test_vmap_quantize_dequantize_match_loop():
    w = mx.random.normal((3, 4, 64))
    got = mx.vmap(lambda w: mx.quantize(w, 32, 4), in_axes=1)(w)
    for k in range(4):
        want = mx.quantize(w[:, k], 32, 4)
        for g, ww in zip(got, want):
            assert mx.array_equal(g[k], ww)
    q, s, b = mx.quantize(w, 32, 4)
    d = mx.vmap(lambda s: mx.dequantize(q, s, b, 32, 4))(mx.stack([s, 2 * s]))
    assert mx.array_equal(d[0], mx.dequantize(q, s, b, 32, 4))
    assert mx.array_equal(d[1], mx.dequantize(q, 2 * s, b, 32, 4))


def test_vmap_quantized_matmul_and_gather_qmm():
    q, s, b = mx.quantize(mx.random.normal((3, 8, 64)), 64, 4)
    xs = mx.random.normal((5, 2, 64))
    got = mx.vmap(lambda x: mx.quantized_matmul(x, q[0], s[0], b[0]))(xs)
    for k in range(5):
        assert mx.allclose(got[k], mx.quantized_matmul(xs[k], q[0], s[0], b[0]), atol=1e-5)
    idx = mx.array([[0, 2], [1, 1], [2, 0]], mx.uint32)
    x = mx.random.normal((1, 64))
    got = mx.vmap(lambda r: mx.gather_qmm(x, q, s, b, rhs_indices=r))(idx)
    for k in range(3):
        assert mx.allclose(got[k], mx.gather_qmm(x, q, s, b, rhs_indices=idx[k]), atol=1e-5)


def test_gather_mm_second_order_gradient():
    a, b = mx.random.normal((3, 2, 4)), mx.random.normal((2, 4, 3))
    li, ri = mx.array([0, 2, 2]), mx.array([1, 0, 1])

    def f(a):
        return (mx.gather_mm(a, b, li, ri) ** 3).sum()

    h = mx.grad(lambda a: mx.grad(f)(a).sum())(a)
    eps = 1e-3
    g = lambda a: np.array(mx.grad(f)(a)).sum()  # noqa: E731
    an = np.array(a)
    fd = np.zeros_like(an)
    for ix in np.ndindex(an.shape):
        p, m = an.copy(), an.copy()
        p[ix] += eps
        m[ix] -= eps
        fd[ix] = (g(mx.array(p)) - g(mx.array(m))) / (2 * eps)
    np.testing.assert_allclose(np.array(h), fd, rtol=2e-2, atol=2e-2)


def test_compiled_quantized_matmul_matches_eager():
    q, s, b = mx.quantize(mx.random.normal((16, 64)), 32, 4)
    x = mx.random.normal((3, 64))
    f = lambda x: mx.quantized_matmul(x, q, s, b, group_size=32, bits=4) * 2 + 1  # noqa: E731
    assert mx.allclose(mx.compile(f)(x), f(x), atol=1e-5)


def test_out_of_range_gather_indices_do_not_crash():
    a, b = mx.ones((2, 2, 2)), mx.ones((2, 2, 2))
    out = mx.gather_mm(a, b, mx.array([0, 7]), mx.array([-1, 0]))
    assert out.shape == (2, 2, 2)
    mx.eval(out)


# -- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize("call, match", [
    (lambda: mx.quantize(mx.ones((2, 64)), bits=7), r"\[quantize\].*bits 7"),
    (lambda: mx.quantize(mx.ones((2, 64)), group_size=16), r"\[quantize\].*group size 16"),
    (lambda: mx.quantize(mx.ones((64,))), r"\[quantize\].*at least 2"),
    (lambda: mx.quantize(mx.ones((2, 48))), r"\[quantize\].*divisible"),
    (lambda: mx.quantize(mx.ones((2, 64), dtype=mx.int32)), r"\[quantize\].*int32"),
    (lambda: mx.quantize(mx.ones((2, 64)), mode="mxfp4", bits=3), r"\[quantize\].*mxfp4.*bits"),
    (lambda: mx.quantize(mx.ones((2, 64)), mode="mxfp4", group_size=64),
     r"\[quantize\].*group size 32"),
    (lambda: mx.quantize(mx.ones((2, 64)), mode="mxfp8", global_scale=mx.array(1.0)),
     r"\[quantize\].*Global scale"),
    (lambda: mx.quantize(mx.ones((2, 64)), mode="nvfp4", global_scale=mx.ones((2,))),
     r"\[quantize\].*scalar"),
    (lambda: mx.dequantize(*mx.quantize(mx.ones((2, 64)), mode="mxfp4"), mode="mxfp4",
                           dtype=mx.int32), r"\[dequantize\].*floating"),
    (lambda: mx.dequantize(mx.zeros((2, 8), mx.uint32), mx.ones((2, 2)), mode="mxfp4"),
     r"\[dequantize\].*uint8"),
    (lambda: mx.dequantize(*mx.quantize(mx.ones((2, 64)), mode="mxfp8"), mx.ones((2, 2)),
                           mode="mxfp8"), r"\[dequantize\].*null"),
    (lambda: mx.dequantize(*mx.quantize(mx.ones((2, 64)), mode="nvfp4"), mode="nvfp4",
                           group_size=32), r"\[dequantize\].*group size 16"),
    (lambda: mx.quantized_matmul(mx.ones((3, 64), mx.int32),
                                 *mx.quantize(mx.ones((8, 64)), mode="mxfp4"), mode="mxfp4"),
     r"\[quantized_matmul\].*floating"),
    (lambda: mx.qqmm(mx.ones((3, 64)), *mx.quantize(mx.ones((2, 8, 64)), mode="mxfp8"),
                     mode="mxfp8"), r"\[qqmm\].*2D"),
    (lambda: mx.qqmm(mx.ones((3, 64)), mx.zeros((8, 8), mx.uint32), mode="nvfp4"),
     r"\[qqmm\].*Scales must be provided"),
    (lambda: mx.qqmm(mx.ones((3, 64)), mx.ones((8, 64)), mode="nvfp4",
                     global_scale_x=mx.array(1.0)), r"\[qqmm\].*both"),
    (lambda: mx.to_fp8(mx.ones((2,), mx.int32)), r"\[to_fp8\]"),
    (lambda: mx.from_fp8(mx.ones((2,))), r"\[from_fp8\].*uint8"),
    (lambda: mx.quantize(mx.ones((2, 64)), mode="bogus"), r"\[quantize\].*bogus"),
    (lambda: mx.dequantize(mx.ones((2, 8), mx.int32), mx.ones((2, 1)), mx.ones((2, 1))),
     r"\[dequantize\].*uint32"),
    (lambda: mx.dequantize(mx.zeros((2, 8), mx.uint32), mx.ones((2, 2)), mx.ones((2, 2))),
     r"\[dequantize\].*scales"),
    (lambda: mx.dequantize(mx.zeros((2, 8), mx.uint32), mx.ones((2, 1)), None),
     r"\[dequantize\].*Biases"),
    (lambda: mx.dequantize(mx.zeros((2, 8), mx.uint32), mx.ones((2, 1)), mx.ones((2, 1)),
                           bits=9), r"\[dequantize\].*bits 9"),
    (lambda: mx.quantized_matmul(mx.ones((3, 32)), *mx.quantize(mx.ones((8, 64)))),
     r"\[quantized_matmul\].*\(\.\.\., 32\)|\[quantized_matmul\].*shape \(3, 32\)"),
    (lambda: mx.quantized_matmul(mx.ones((3, 64)), *mx.quantize(mx.ones((8, 64))),
                                 transpose=False), r"\[quantized_matmul\]"),
    (lambda: mx.gather_qmm(mx.ones((3, 1, 64)), *mx.quantize(mx.ones((2, 8, 64))),
                           rhs_indices=mx.array([0.5])), r"\[gather_qmm\].*integral"),
    (lambda: mx.gather_mm(mx.ones((2, 3, 4)), mx.ones((2, 5, 6))), r"\[gather_mm\].*dimension"),
    (lambda: mx.gather_mm(mx.ones((2, 3, 4)), mx.ones((2, 4, 6)), mx.array([0.0])),
     r"\[gather_mm\].*integral"),
    (lambda: mx.gather_mm(mx.ones((2, 3, 3, 4)), mx.ones((2, 4, 6)), None, mx.array([0, 1, 0, 1])),
     r"\[gather_mm\].*broadcast"),
    (lambda: mx.gather_mm(mx.ones((2, 3), mx.int32), mx.ones((3, 2), mx.int32)),
     r"\[gather_mm\].*inexact"),
    (lambda: mx.gather_mm(mx.array(1.0), mx.ones((3, 2))), r"\[gather_mm\].*0 dimension"),
])
def test_bad_input_names_the_op(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_bad_param_types():
    with pytest.raises(TypeError, match=r"\[quantize\]"):
        mx.quantize(mx.ones((2, 64)), bits=4.0)
    with pytest.raises(TypeError, match=r"\[quantize\]"):
        mx.quantize(mx.ones((2, 64)), mode=4)



# -- floating-point modes ---------------------------------------------------------------------
FP_MODES = ("mxfp4", "nvfp4", "mxfp8")


def _fp_sample(rng, shape=(24, 128)):
    """Normal rows at several scales plus ties, zeros, constants and an fp4 tie ladder."""
    w = _sample("scaled", shape, rng)
    w[0, :40] = 0.0
    w[1] = 3.0
    w[2, ::2] = 0.5
    w[3] = rng.integers(-8, 8, shape[-1]) / 4
    w[4, :9] = [6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25]
    w[5] = 0.0
    return w


def _eq(g, m, what):
    assert g.shape == m.shape and g.dtype.name == str(m.dtype).split(".")[-1], what
    np.testing.assert_array_equal(_np(g), _np(m), err_msg=what)


@needs_mlx
@pytest.mark.parametrize("dt", ("float32",) + HALF)
@pytest.mark.parametrize("mode", FP_MODES)
def test_fp_quantize_bit_equal_to_mlx(mode, dt):
    wb, wm = _pair(_fp_sample(np.random.default_rng(len(mode) + len(dt))), dt)
    got, want = mx.quantize(wb, mode=mode), mlx.quantize(wm, mode=mode)
    assert len(got) == 2
    _eq(got[0], want[0], "w_q")
    _eq(got[1], want[1], "scales")
    for out in (None, "float32", "float16", "bfloat16"):
        kb = {} if out is None else {"dtype": getattr(mx, out)}
        km = {} if out is None else {"dtype": getattr(mlx, out)}
        _eq(mx.dequantize(*got, mode=mode, **kb), mlx.dequantize(*want, mode=mode, **km),
            f"dequantize to {out}")


@needs_mlx
@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_nvfp4_global_scale_bit_equal_to_mlx(dt):
    w = _fp_sample(np.random.default_rng(7))
    g = float(np.abs(w).max())
    wb, wm = _pair(w, dt)
    got = mx.quantize(wb, mode="nvfp4", global_scale=mx.array(g))
    want = mlx.quantize(wm, mode="nvfp4", global_scale=mlx.array(g))
    _eq(got[0], want[0], "w_q")
    _eq(got[1], want[1], "scales")
    _eq(mx.dequantize(*got, mode="nvfp4", global_scale=mx.array(g)),
        mlx.dequantize(*want, mode="nvfp4", global_scale=mlx.array(g)), "dequantize")


@needs_mlx
@pytest.mark.parametrize("mode", FP_MODES)
def test_fp_dequantize_every_scale_code_matches_mlx(mode):
    gs, bits = {"mxfp4": (32, 4), "nvfp4": (16, 4), "mxfp8": (32, 8)}[mode]
    rng = np.random.default_rng(3)
    s = np.arange(256, dtype=np.uint8).reshape(256, 1)
    q = rng.integers(0, 2**32, (256, gs * bits // 32), dtype=np.uint64).astype(np.uint32)
    for out in ("float32", "float16", "bfloat16"):
        _eq(mx.dequantize(mx.array(q), mx.array(s), mode=mode, dtype=getattr(mx, out)),
            mlx.dequantize(mlx.array(q), mlx.array(s), mode=mode, dtype=getattr(mlx, out)),
            out)


@needs_mlx
def test_fp8_conversions_match_mlx():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(4000) * 10.0 ** rng.uniform(-5, 3, 4000)).astype(np.float32)
    x = np.concatenate([x, np.float32([0, -0.0, np.inf, -np.inf, np.nan, 448, 464, 465])])
    _eq(mx.to_fp8(mx.array(x)), mlx.to_fp8(mlx.array(x)), "to_fp8")
    codes = np.arange(256, dtype=np.uint8)
    for out in ("float32", "bfloat16"):
        _eq(mx.from_fp8(mx.array(codes), getattr(mx, out)),
            mlx.from_fp8(mlx.array(codes), getattr(mlx, out)), f"from_fp8 {out}")


@needs_mlx
@pytest.mark.parametrize("mode", FP_MODES)
def test_fp_quantized_products_match_mlx(mode):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 16, 64)).astype(np.float32)
    x = rng.standard_normal((3, 5, 64)).astype(np.float32)
    qb, qm = mx.quantize(mx.array(w), mode=mode), mlx.quantize(mlx.array(w), mode=mode)
    for t in (True, False):
        xs = x if t else x[..., :16]
        got = mx.quantized_matmul(mx.array(xs), *qb, transpose=t, mode=mode)
        want = mlx.quantized_matmul(mlx.array(xs), *qm, transpose=t, mode=mode)
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-5, atol=1e-5)
    idx = np.array([2, 0], np.uint32)
    got = mx.gather_qmm(mx.array(x[:1, :1]), *qb, rhs_indices=mx.array(idx), mode=mode)
    want = mlx.gather_qmm(mlx.array(x[:1, :1]), *qm, rhs_indices=mlx.array(idx), mode=mode)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-5, atol=1e-5)
    if mode != "mxfp4":  # MLX's CPU qqmm: one row of x, nvfp4/mxfp8
        q2b = mx.quantize(mx.array(w[0]), mode=mode)
        q2m = mlx.quantize(mlx.array(w[0]), mode=mode)
        np.testing.assert_allclose(_np(mx.qqmm(mx.array(x[0, :1]), *q2b, mode=mode)),
                                   _np(mlx.qqmm(mlx.array(x[0, :1]), *q2m, mode=mode)),
                                   rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", FP_MODES)
def test_fp_modes_defaults_dtypes_and_grads(mode):
    w = mx.random.normal((16, 64), key=mx.random.key(0))
    x = mx.random.normal((3, 64), key=mx.random.key(1)).astype(mx.bfloat16)
    wq, s = mx.quantize(w, mode=mode)
    assert (wq.dtype, s.dtype) == (mx.uint32, mx.uint8)
    assert mx.dequantize(wq, s, mode=mode).dtype == mx.bfloat16
    assert mx.quantized_matmul(x, wq, s, mode=mode).dtype == mx.bfloat16
    with pytest.raises(ValueError, match=r"\[quantized_matmul\] no gradient wrt scales"):
        mx.grad(lambda s: mx.quantized_matmul(x, wq, s, mode=mode).sum())(s)
    with pytest.raises(ValueError, match=r"\[gather_qmm\] no gradient wrt scales"):
        mx.grad(lambda s: mx.gather_qmm(x, wq, s, rhs_indices=mx.array(0), mode=mode).sum())(s)
    dx = mx.grad(lambda x: mx.quantized_matmul(x, wq, s, mode=mode).astype(mx.float32).sum())(x)
    ref = mx.dequantize(wq, s, mode=mode, dtype=mx.float32).sum(0)
    np.testing.assert_allclose(_np(dx), np.broadcast_to(_np(ref), (3, 64)), rtol=1e-2)
    batched = mx.vmap(lambda w: mx.dequantize(*mx.quantize(w, mode=mode), mode=mode))(
        mx.stack([w, 2 * w]))
    np.testing.assert_array_equal(_np(batched[1]), _np(mx.dequantize(
        *mx.quantize(2 * w, mode=mode), mode=mode)))


def test_nvfp4_global_scale_gradient_and_qqmm_straight_through():
    w = mx.random.normal((8, 32), key=mx.random.key(2))
    g = mx.array(3.0)
    wq, s = mx.quantize(w, mode="nvfp4", global_scale=g)
    f = lambda g: mx.dequantize(wq, s, mode="nvfp4", global_scale=g).sum()  # noqa: E731
    eps = 1e-2
    num = (f(g + eps) - f(g - eps)) / (2 * eps)
    np.testing.assert_allclose(float(mx.grad(f)(g)), float(num), rtol=1e-3)
    x = mx.random.normal((4, 32), key=mx.random.key(3))
    dx = mx.grad(lambda x: mx.qqmm(x, wq, s, mode="nvfp4").sum())(x)
    ref = mx.dequantize(wq, s, mode="nvfp4", dtype=mx.float32).sum(0)
    np.testing.assert_allclose(_np(dx), np.broadcast_to(_np(ref), (4, 32)), rtol=1e-6)


def test_gather_mm_index_gradient_is_an_error():
    # as MLX: indices built from a differentiated input must be stop_gradient'ed
    a, b = mx.ones((4, 1, 2, 2)), mx.ones((4, 1, 2, 2))

    def f(w, stop):
        idx = mx.reshape(mx.argsort(w)[:2], (1, 2))
        idx = mx.stop_gradient(idx) if stop else idx
        return mx.gather_mm(a, b, idx, idx).sum()

    w = mx.array([3.0, 1.0, 2.0, 0.0])
    with pytest.raises(ValueError, match=r"^\[GatherMM\].*stop_gradient"):
        mx.grad(lambda w: f(w, False))(w)
    assert mx.array_equal(mx.grad(lambda w: f(w, True))(w), mx.zeros((4,)))
