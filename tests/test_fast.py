"""`mx.fast`: layer_norm, rms_norm, rope, scaled_dot_product_attention.

Against MLX (bit for bit in float16/bfloat16, where both run MLX's CPU graph; float32 to a few
ulps) when it is installed, and against float64 NumPy references (tests/op_table/quantized.py)
always. Forward/grad/vmap over sample inputs run from the op table; here: MLX parity, gradients
against MLX, compile, and bad input.
"""
import numpy as np
import pytest

import braze.core as mx

from op_table.quantized import ref_layer_norm, ref_rms_norm, ref_rope, ref_sdpa

try:
    import mlx.core as mlx
except Exception:  # pragma: no cover - MLX is optional
    mlx = None

needs_mlx = pytest.mark.skipif(mlx is None, reason="MLX is not installed")
DTYPES = ("float32", "float16", "bfloat16")


def _to(m, x, dt):
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return m.array(x).astype(getattr(m, dt))
    return m.array(x) if isinstance(x, np.ndarray) else x


def _f64(a):
    if str(a.dtype).split(".")[-1] in ("float16", "bfloat16"):
        a = a.astype(mx.float32 if isinstance(a, mx.array) else mlx.float32)
    return np.array(a).astype(np.float64)


def _check(fn, args, dt):
    got = fn(mx, *[_to(mx, a, dt) for a in args])
    want = fn(mlx, *[_to(mlx, a, dt) for a in args])
    assert got.shape == want.shape
    assert got.dtype.name == str(want.dtype).split(".")[-1]
    g, w = _f64(got), _f64(want)
    if dt == "float32":
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(g, w)


_RNG = np.random.default_rng(0)
X = (_RNG.standard_normal((2, 3, 5, 16)) * 3 + 1).astype(np.float32)
W = _RNG.standard_normal(16).astype(np.float32)
B = _RNG.standard_normal(16).astype(np.float32)
Q = _RNG.standard_normal((2, 4, 3, 8)).astype(np.float32)
K = _RNG.standard_normal((2, 2, 5, 8)).astype(np.float32)
V = _RNG.standard_normal((2, 2, 5, 6)).astype(np.float32)

CASES = {
    "layer_norm": (lambda m, x, w, b: m.fast.layer_norm(x, w, b, 1e-5), [X, W, B]),
    "layer_norm_plain": (lambda m, x: m.fast.layer_norm(x, None, None, 1e-5), [X]),
    "layer_norm_bias_only": (lambda m, x, b: m.fast.layer_norm(x, None, b, 1e-5), [X, B]),
    "rms_norm": (lambda m, x, w: m.fast.rms_norm(x, w, 1e-5), [X, W]),
    "rms_norm_plain": (lambda m, x: m.fast.rms_norm(x, None, 1e-6), [X]),
    "rope": (lambda m, x: m.fast.rope(x, 16, traditional=False, base=10000.0, scale=0.5,
                                      offset=3), [X]),
    "rope_traditional_partial": (lambda m, x: m.fast.rope(
        x, 8, traditional=True, base=10000.0, scale=1.0, offset=0), [X]),
    "rope_partial": (lambda m, x: m.fast.rope(x, 6, traditional=False, base=100.0, scale=2.0,
                                              offset=1), [X]),
    "rope_batch_offsets": (lambda m, x: m.fast.rope(
        x, 16, traditional=False, base=10000.0, scale=1.0, offset=m.array([2, 7])), [X]),
    "rope_3d": (lambda m, x: m.fast.rope(x, 16, traditional=False, base=10000.0, scale=1.0,
                                         offset=0), [X[0]]),
    "rope_5d": (lambda m, x: m.fast.rope(x, 16, traditional=True, base=10000.0, scale=1.0,
                                         offset=4), [X[None]]),
    "sdpa_gqa": (lambda m, q, k, v: m.fast.scaled_dot_product_attention(q, k, v, scale=0.3),
                 [Q, K, V]),
    "sdpa_causal": (lambda m, q, k, v: m.fast.scaled_dot_product_attention(
        q, k, v, scale=0.3, mask="causal"), [Q, K, V]),
    "sdpa_causal_more_queries": (lambda m, q, k, v: m.fast.scaled_dot_product_attention(
        q, k, v, scale=0.3, mask="causal"), [np.concatenate([Q, Q, Q], 2)[:, :, :7], K, V]),
    "sdpa_bool_mask": (lambda m, q, k, v, mk: m.fast.scaled_dot_product_attention(
        q, k, v, scale=0.3, mask=mk), [Q, K, V, _RNG.random((4, 3, 5)) < 0.6]),
    "sdpa_additive_mask": (lambda m, q, k, v, mk: m.fast.scaled_dot_product_attention(
        q, k, v, scale=0.3, mask=mk), [Q, K, V, _RNG.standard_normal((2, 1, 3, 5)).astype(
            np.float32)]),
    "sdpa_sinks": (lambda m, q, k, v, s: m.fast.scaled_dot_product_attention(
        q, k, v, scale=0.3, mask="causal", sinks=s), [Q, K, V, _RNG.standard_normal(4).astype(
            np.float32)]),
    "sdpa_mqa": (lambda m, q, k, v: m.fast.scaled_dot_product_attention(q, k, v, scale=0.3),
                 [Q, K[:, :1], V[:, :1]]),
}


@needs_mlx
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_mlx(name, dt):
    fn, args = CASES[name]
    _check(fn, args, dt)


def test_rope_freqs_matches_reference():
    f = np.exp(_RNG.standard_normal(8))
    out = mx.fast.rope(mx.array(X), 16, traditional=True, base=None, scale=1.0, offset=2,
                       freqs=mx.array(f, dtype=mx.float32))
    np.testing.assert_allclose(np.array(out), ref_rope(X.astype(np.float64), 16, True, None,
                                                       1.0, 2, f), rtol=1e-5, atol=1e-5)


def test_float64_references():
    x = X.astype(np.float64)
    xb = mx.array(x, dtype=mx.float64)
    cases = [
        (mx.fast.layer_norm(xb, mx.array(W), mx.array(B), 1e-5),
         ref_layer_norm(x, W, B, 1e-5)),
        (mx.fast.rms_norm(xb, None, 1e-5), ref_rms_norm(x, None, 1e-5)),
        (mx.fast.rope(xb, 12, traditional=False, base=10000.0, scale=1.0, offset=5),
         ref_rope(x, 12, False, 10000.0, 1.0, 5)),
    ]
    q, k, v = (mx.array(a, dtype=mx.float64) for a in (Q, K, V))
    cases.append((mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal"),
                  ref_sdpa(Q.astype(np.float64), K.astype(np.float64), V.astype(np.float64),
                           0.3, "causal")))
    for got, want in cases:
        np.testing.assert_allclose(np.array(got), want, rtol=1e-10, atol=1e-10)


@needs_mlx
@pytest.mark.parametrize("name", ["layer_norm", "rms_norm", "rope_partial", "sdpa_causal",
                                  "sdpa_bool_mask", "sdpa_sinks"])
def test_gradients_match_mlx(name):
    fn, args = CASES[name]
    pos = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    cot = np.random.default_rng(1).standard_normal(
        fn(mx, *[_to(mx, a, "float32") for a in args]).shape).astype(np.float32)

    def loss(m):
        def f(*diff):
            xs = [_to(m, a, "float32") for a in args]
            for p, d in zip(pos, diff):
                xs[p] = d
            return (fn(m, *xs) * m.array(cot)).sum()
        return f

    got = mx.grad(loss(mx), argnums=tuple(range(len(pos))))(
        *[mx.array(args[p]) for p in pos])
    want = mlx.grad(loss(mlx), argnums=tuple(range(len(pos))))(
        *[mlx.array(args[p]) for p in pos])
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-4, atol=1e-4)


def test_compile_matches_eager():
    def block(x, w, b, q, k, v):
        h = mx.fast.layer_norm(x, w, b, 1e-5) + mx.fast.rms_norm(x, w, 1e-5)
        h = mx.fast.rope(h, 16, traditional=False, base=10000.0, scale=1.0, offset=2)
        a = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal")
        return h.sum() + a.sum(), h, a

    args = [mx.array(a) for a in (X, W, B, Q, K, V)]
    eager = block(*args)
    compiled = mx.compile(block)(*args)
    for e, c in zip(eager, compiled):
        assert mx.allclose(e, c, rtol=1e-5, atol=1e-5)
    g_e = mx.grad(lambda x: block(x, *args[1:])[0])(args[0])
    g_c = mx.compile(mx.grad(lambda x: block(x, *args[1:])[0]))(args[0])
    assert mx.allclose(g_e, g_c, rtol=1e-4, atol=1e-4)


def test_shapeless_compile_follows_sequence_length():
    w = mx.array(W)
    cf = mx.compile(lambda x: mx.fast.rms_norm(x, w, 1e-5), shapeless=True)
    for T in (3, 7):
        x = mx.random.normal((2, T, 16))
        assert mx.allclose(cf(x), mx.fast.rms_norm(x, w, 1e-5), atol=1e-6)
    assert cf.stats()["traces"] == 1


def test_vmap_sdpa_over_batch_matches_loop():
    q, k, v = mx.array(Q), mx.array(K), mx.array(V)
    got = mx.vmap(lambda q, k, v: mx.fast.scaled_dot_product_attention(
        q, k, v, scale=0.3, mask="causal"))(q[:, None], k[:, None], v[:, None])
    for i in range(2):
        want = mx.fast.scaled_dot_product_attention(q[i:i + 1], k[i:i + 1], v[i:i + 1],
                                                     scale=0.3, mask="causal")
        assert mx.allclose(got[i], want, atol=1e-6)


def test_fully_masked_rows_are_uniform_like_mlx():
    q, k, v = mx.ones((1, 1, 2, 4)), mx.ones((1, 1, 3, 4)), mx.array(
        np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4))
    mask = mx.array([[False, False, False], [True, False, False]])
    out = mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0, mask=mask)
    assert mx.allclose(out[0, 0, 0], mx.mean(v[0, 0], axis=0))
    assert mx.allclose(out[0, 0, 1], v[0, 0, 0])


# -- bad input --------------------------------------------------------------------------------
_x = mx.ones((2, 3, 4, 8))


@pytest.mark.parametrize("call, match", [
    (lambda: mx.fast.layer_norm(_x, mx.ones(7), None, 1e-5), r"\[layer_norm\].*7 elements"),
    (lambda: mx.fast.layer_norm(_x, mx.ones((1, 8)), None, 1e-5), r"\[layer_norm\].*1 dim"),
    (lambda: mx.fast.layer_norm(mx.ones((2, 8), mx.int32), None, None, 1e-5),
     r"\[layer_norm\].*int32"),
    (lambda: mx.fast.layer_norm(mx.array(1.0), None, None, 1e-5), r"\[layer_norm\].*0 dim"),
    (lambda: mx.fast.layer_norm(_x, None, None, "x"), r"\[layer_norm\].*eps"),
    (lambda: mx.fast.rms_norm(_x, mx.ones(5), 1e-5), r"\[rms_norm\].*5 elements"),
    (lambda: mx.fast.rope(mx.ones((4, 8)), 8, traditional=False, base=1e4, scale=1.0,
                          offset=0), r"\[rope\].*at least 3"),
    (lambda: mx.fast.rope(_x, 7, traditional=False, base=1e4, scale=1.0, offset=0),
     r"\[rope\].*even"),
    (lambda: mx.fast.rope(_x, 10, traditional=False, base=1e4, scale=1.0, offset=0),
     r"\[rope\].*\(8\)"),
    (lambda: mx.fast.rope(_x, 8, traditional=False, base=1e4, scale=1.0,
                          offset=mx.array([1, 2, 3])), r"\[rope\].*offset"),
    (lambda: mx.fast.rope(_x, 8, traditional=False, base=1e4, scale=1.0,
                          offset=mx.array(1.5)), r"\[rope\].*integer"),
    (lambda: mx.fast.rope(_x, 8, traditional=False, base=1e4, scale=1.0, offset=0,
                          freqs=mx.ones(4)), r"\[rope\].*base or freqs"),
    (lambda: mx.fast.rope(_x, 8, traditional=False, base=None, scale=1.0, offset=0,
                          freqs=mx.ones(3)), r"\[rope\].*freqs"),
    (lambda: mx.fast.rope(mx.ones((2, 3, 8), mx.int32), 8, traditional=False, base=1e4,
                          scale=1.0, offset=0), r"\[rope\].*floating"),
    (lambda: mx.fast.scaled_dot_product_attention(_x[0], _x[0], _x[0], scale=1.0),
     r"\[scaled_dot_product_attention\].*rank 4"),
    (lambda: mx.fast.scaled_dot_product_attention(_x, _x, _x, scale=1.0, mask="foo"),
     r"\[scaled_dot_product_attention\].*'foo'"),
    (lambda: mx.fast.scaled_dot_product_attention(_x, _x[..., :4], _x, scale=1.0),
     r"\[scaled_dot_product_attention\].*last dimension"),
    (lambda: mx.fast.scaled_dot_product_attention(mx.ones((2, 3, 4, 8)), _x[:, :2],
                                                  _x[:, :2], scale=1.0),
     r"\[scaled_dot_product_attention\].*multiple"),
    (lambda: mx.fast.scaled_dot_product_attention(_x, _x, _x, scale=1.0,
                                                  mask=mx.ones((5, 4))),
     r"\[scaled_dot_product_attention\].*mask"),
    (lambda: mx.fast.scaled_dot_product_attention(_x, _x, _x, scale=1.0,
                                                  mask=mx.ones((1, 1, 1, 1, 4))),
     r"\[scaled_dot_product_attention\].*rank 4"),
    (lambda: mx.fast.scaled_dot_product_attention(
        _x.astype(mx.float16), _x.astype(mx.float16), _x.astype(mx.float16), scale=1.0,
        mask=mx.ones((4, 4))), r"\[scaled_dot_product_attention\].*promote"),
    (lambda: mx.fast.scaled_dot_product_attention(_x, _x, _x, scale=1.0, sinks=mx.ones(2)),
     r"\[scaled_dot_product_attention\].*sinks"),
])
def test_bad_input_names_the_op(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
