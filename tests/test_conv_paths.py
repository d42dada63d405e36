"""Every evaluation path of the convolution primitives (prims/conv.py: im2col + GEMM, scatter
for input-dilated convolutions, depthwise taps, the weight gradient's gather, scatter and einsum
forms), forward against the loop reference and both gradients against central finite
differences in float64; half floats computed in float32 and rounded once; empty batches; and
the transforms of ConvWeightGrad (second derivatives, vmap of gradients)."""
import ml_dtypes
import numpy as np
import pytest

import braze.core as mx

from op_table.conv import conv_loop

RNG = np.random.default_rng(7)

# (id, x shape, w shape, conv_general keyword arguments): each row picks one path
PATHS = [
    ("gemm-1d", (2, 9, 3), (4, 3, 3), dict(padding=1)),
    ("gemm-1x1", (2, 4, 5, 3), (5, 1, 1, 3), {}),
    ("gemm-strided-asym", (1, 8, 7, 2), (3, 3, 2, 2), dict(stride=(2, 3), padding=([2, 0],
                                                                                     [1, 2]))),
    ("gemm-dilated-flip-3d", (1, 5, 4, 5, 2), (2, 2, 2, 2, 2), dict(kernel_dilation=(2, 1, 2),
                                                                    padding=1, flip=True)),
    ("grouped", (2, 7, 6), (6, 3, 2), dict(groups=3, stride=2, padding=1)),
    ("depthwise", (2, 6, 5, 4), (4, 3, 3, 1), dict(groups=4, padding=1)),
    ("depthwise-multiplier", (1, 7, 3), (6, 3, 1), dict(groups=3, kernel_dilation=2,
                                                        padding=([1], [2]))),
    ("scatter", (2, 4, 3), (4, 3, 3), dict(input_dilation=2, padding=2)),
    ("scatter-2d-flip-groups", (1, 3, 4, 4), (6, 3, 2, 2), dict(
        input_dilation=(2, 3), padding=([2, 0], [1, 3]), groups=2, flip=True)),
    ("scatter-wide-pad", (1, 3, 2), (2, 2, 2), dict(input_dilation=3, padding=([4], [0]))),
    ("scatter-depthwise", (1, 4, 3, 2), (4, 2, 2, 1), dict(input_dilation=2, groups=2,
                                                           padding=1, kernel_dilation=2)),
    ("dilated-and-strided", (1, 5, 2), (2, 3, 2), dict(input_dilation=2, stride=2, padding=1)),
]


def _pair(xs, ws, dtype=np.float64):
    return RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ws).astype(dtype)


@pytest.mark.parametrize("name,xs,ws,kw", PATHS, ids=[p[0] for p in PATHS])
def test_forward_and_gradients(name, xs, ws, kw):
    x, w = _pair(xs, ws)
    y = mx.conv_general(mx.array(x, dtype=mx.float64), mx.array(w, dtype=mx.float64), **kw)
    want = conv_loop(x, w, **kw)
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-10, atol=1e-10)
    ct = RNG.standard_normal(want.shape)

    def loss(a, b):
        return float((conv_loop(a, b, **kw) * ct).sum())

    _, (gx, gw) = mx.vjp(lambda a, b: mx.conv_general(a, b, **kw),
                         [mx.array(x, dtype=mx.float64), mx.array(w, dtype=mx.float64)],
                         [mx.array(ct, dtype=mx.float64)])
    assert gx.shape == x.shape and gw.shape == w.shape
    eps = 1e-4
    for grad, delta in ((gx, (RNG.standard_normal(xs), 0)), (gw, (0, RNG.standard_normal(ws)))):
        dx, dw = delta
        fd = (loss(x + eps * dx, w + eps * dw) - loss(x - eps * dx, w - eps * dw)) / (2 * eps)
        d = dx if np.ndim(dx) else dw
        np.testing.assert_allclose(float((np.asarray(grad) * d).sum()), fd, rtol=1e-7,
                                   atol=1e-7)


@pytest.mark.parametrize("xs", [(1, 300, 8, 64), (3, 40, 40, 32)], ids=["rows", "images"])
def test_depthwise_in_cache_blocks_matches_dense(xs):
    # big enough to be cut into blocks (of output rows, of images): against the same
    # convolution with a dense block-diagonal weight, which takes the GEMM path
    C = xs[-1]
    x, w = _pair(xs, (C, 3, 3, 1))
    dense = np.zeros((C, 3, 3, C))
    dense[np.arange(C), :, :, np.arange(C)] = w[..., 0]
    got = mx.conv2d(mx.array(x, dtype=mx.float64), mx.array(w, dtype=mx.float64), padding=1,
                    groups=C)
    want = mx.conv2d(mx.array(x, dtype=mx.float64), mx.array(dense, dtype=mx.float64), padding=1)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)


def test_unread_input_has_zero_gradient():
    # stride 2 over padding 1: the one input element sits between the windows
    x = mx.array(np.ones((1, 1, 2)), dtype=mx.float64)
    w = mx.array(np.ones((2, 1, 2)), dtype=mx.float64)
    g = mx.grad(lambda x: mx.conv1d(x, w, stride=2, padding=1).sum())(x)
    assert np.array_equal(np.asarray(g), np.zeros((1, 1, 2)))


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,xs,ws,kw", [PATHS[2], PATHS[5], PATHS[8]],
                         ids=["gemm", "depthwise", "scatter"])
def test_half_floats_round_once_from_float32(dt, name, xs, ws, kw):
    x, w = _pair(xs, ws, np.float32)
    d = getattr(mx, dt)
    xh, wh = mx.array(x, dtype=d), mx.array(w, dtype=d)
    got = mx.conv_general(xh, wh, **kw)
    assert got.dtype == d
    exact = conv_loop(np.asarray(xh.astype(mx.float32)), np.asarray(wh.astype(mx.float32)), **kw)
    want = exact.astype(np.float32).astype(ml_dtypes.bfloat16 if dt == "bfloat16" else dt)
    # one rounding of a float32 sum: equal, or one ulp apart where the exact sum is near a tie
    got64, want64 = np.asarray(got.astype(mx.float64)), want.astype(np.float64)
    ulp = np.abs(want64) * (2.0 ** -10 if dt == "float16" else 2.0 ** -7) + 1e-6
    assert np.all(np.abs(got64 - want64) <= ulp)


@pytest.mark.parametrize("name,xs,ws,kw", PATHS, ids=[p[0] for p in PATHS])
def test_empty_batch(name, xs, ws, kw):
    x, w = _pair((0,) + xs[1:], ws)
    xa, wa = mx.array(x), mx.array(w)
    y = mx.conv_general(xa, wa, **kw)
    _, (gx, gw) = mx.vjp(lambda a, b: mx.conv_general(a, b, **kw), [xa, wa],
                         [mx.zeros(y.shape)])
    assert y.shape[0] == 0 and gx.shape == x.shape
    assert np.array_equal(np.asarray(gw), np.zeros(w.shape))


def _grad_w(x, kw):
    return lambda w: mx.grad(lambda w: mx.sum(mx.sin(mx.conv_general(x, w, **kw))))(w)


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, groups=2),
                                dict(input_dilation=2, padding=1, groups=2, flip=True)])
def test_second_derivatives_through_the_weight_gradient(kw):
    x = mx.array(RNG.standard_normal((1, 6, 4)), dtype=mx.float64)
    w = mx.array(RNG.standard_normal((4, 3, 2)), dtype=mx.float64)
    v = mx.array(RNG.standard_normal((4, 3, 2)), dtype=mx.float64)
    # d/dw <grad_w f(w), v> (Hessian-vector product) and d/dx of the same: both rules of
    # ConvWeightGrad, against central differences of the first gradient
    hv = mx.grad(lambda w: mx.sum(_grad_w(x, kw)(w) * v))(w)
    eps = 1e-5
    fd = (np.asarray(_grad_w(x, kw)(w + eps * v)) - np.asarray(_grad_w(x, kw)(w - eps * v))) / (
        2 * eps)
    np.testing.assert_allclose(np.asarray(hv), fd, rtol=1e-5, atol=1e-7)
    u = mx.array(RNG.standard_normal(x.shape), dtype=mx.float64)
    hx = mx.grad(lambda x: mx.sum(_grad_w(x, kw)(w) * v))(x)
    fdx = (mx.sum(_grad_w(x + eps * u, kw)(w) * v) - mx.sum(_grad_w(x - eps * u, kw)(w) * v))
    np.testing.assert_allclose(float(mx.sum(hx * u)), float(fdx) / (2 * eps), rtol=1e-5)
    # the jvp of the weight gradient: a directional derivative along v
    _, (t,) = mx.jvp(_grad_w(x, kw), [w], [v])
    np.testing.assert_allclose(np.asarray(t), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
def test_vmap_of_the_weight_gradient(in_axes):
    kw = dict(stride=2, padding=1, groups=2)
    xb = RNG.standard_normal((3, 2, 7, 4))
    wb = RNG.standard_normal((3, 4, 3, 2))

    def gw(x, w):
        return mx.grad(lambda w: mx.sum(mx.conv_general(x, w, **kw) ** 2))(w)

    xs = mx.array(xb if in_axes[0] == 0 else xb[0], dtype=mx.float64)
    ws = mx.array(wb if in_axes[1] == 0 else wb[0], dtype=mx.float64)
    got = mx.vmap(gw, in_axes=in_axes)(xs, ws)
    want = [gw(mx.array(xb[i] if in_axes[0] == 0 else xb[0], dtype=mx.float64),
               mx.array(wb[i] if in_axes[1] == 0 else wb[0], dtype=mx.float64))
            for i in range(3)]
    np.testing.assert_allclose(np.asarray(got), np.stack([np.asarray(a) for a in want]),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape, lo, hi", [((2, 5, 3), (1,), (2,)), ((1, 4, 6, 2), (0, 3), (1, 0)),
                                           ((2, 0, 3, 1), (1, 1), (1, 1)),
                                           ((1, 3, 3, 2), (0, 0), (0, 0)),
                                           ((1, 2, 2, 2, 1), (1, 0, 2), (0, 1, 1))])
def test_zero_pad_is_numpys_pad(shape, lo, hi):
    from braze._src.prims import conv as C
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 3.5
    want = np.pad(x, [(0, 0)] + list(zip(lo, hi)) + [(0, 0)])
    got = C._zero_pad(x, lo, hi)
    assert got.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    # padding where positive, cutting where negative
    lo2, hi2 = [-a if i % 2 else a for i, a in enumerate(lo)], list(hi)
    idx = (slice(None),) + tuple(slice(max(-a, 0), n - max(-b, 0))
                                 for a, b, n in zip(lo2, hi2, shape[1:-1]))
    want = np.pad(x[idx], [(0, 0)] + [(max(a, 0), max(b, 0)) for a, b in zip(lo2, hi2)]
                  + [(0, 0)])
    np.testing.assert_array_equal(C._pad_or_crop(x, lo2, hi2), want)
