"""Convolution ops against a direct loop reference (tests/op_table/conv.py), bad input, and the
transforms the op table does not reach (vmap over only the weight, second derivatives).
Gradients and vmap of the table's cases run in test_transforms_table.py."""
import numpy as np
import pytest

import braze.core as mx

from op_table.conv import conv_loop, conv_transpose_loop

RNG = np.random.default_rng(0)


def _r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


CONV_CASES = [
    # (op, x shape, w shape, kwargs)
    ("conv1d", (2, 11, 3), (4, 3, 3), dict()),
    ("conv1d", (2, 11, 4), (6, 3, 2), dict(stride=2, padding=2, dilation=2, groups=2)),
    ("conv1d", (1, 5, 4), (4, 5, 1), dict(padding=2, groups=4)),
    ("conv1d", (3, 8, 2), (2, 1, 2), dict(stride=3)),
    ("conv2d", (2, 6, 7, 3), (5, 3, 3, 3), dict(padding=1)),
    ("conv2d", (1, 9, 8, 6), (4, 2, 3, 3), dict(stride=(2, 3), padding=(0, 2), dilation=(2, 1),
                                                groups=2)),
    ("conv2d", (2, 4, 4, 2), (3, 4, 4, 2), dict()),
    ("conv3d", (1, 4, 5, 3, 2), (3, 2, 3, 2, 2), dict(stride=(2, 1, 1), padding=(1, 0, 1))),
]


@pytest.mark.parametrize("op,xs,ws,kw", CONV_CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                          enumerate(CONV_CASES)])
def test_conv_matches_loop_reference(op, xs, ws, kw):
    x, w = _r(*xs), _r(*ws)
    got = getattr(mx, op)(mx.array(x), mx.array(w), **kw)
    ref_kw = dict(kw)
    if "dilation" in ref_kw:
        ref_kw["kernel_dilation"] = ref_kw.pop("dilation")
    want = conv_loop(x, w, **ref_kw)
    assert got.shape == want.shape
    assert got.dtype == mx.float32
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


GENERAL_CASES = [
    ((2, 6, 2), (3, 3, 2), dict(input_dilation=3)),
    ((2, 6, 2), (3, 3, 2), dict(input_dilation=2, flip=True, padding=2, stride=2)),
    ((1, 5, 6, 4), (4, 2, 3, 2), dict(stride=(1, 2), padding=([2, 0], [1, 3]),
                                      kernel_dilation=(2, 1), input_dilation=(1, 2), groups=2,
                                      flip=True)),
    ((1, 9, 2), (2, 3, 2), dict(padding=([-2], [-1]))),  # negative padding crops
    ((1, 9, 2), (2, 3, 2), dict(padding=([-3], [1]), input_dilation=2)),
]


@pytest.mark.parametrize("xs,ws,kw", GENERAL_CASES)
def test_conv_general_matches_loop_reference(xs, ws, kw):
    x, w = _r(*xs), _r(*ws)
    got = mx.conv_general(mx.array(x), mx.array(w), **kw)
    want = conv_loop(x, w, **kw)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


TRANSPOSE_CASES = [
    ("conv_transpose1d", (2, 5, 3), (4, 3, 3), dict(stride=2)),
    ("conv_transpose1d", (1, 6, 4), (2, 4, 2), dict(stride=3, padding=2, dilation=2,
                                                    output_padding=1, groups=2)),
    ("conv_transpose1d", (1, 9, 2), (1, 3, 2), dict(stride=3, padding=4)),  # padding > K-1
    ("conv_transpose2d", (2, 3, 4, 2), (3, 3, 2, 2), dict(stride=(2, 1), padding=(1, 0),
                                                          output_padding=(1, 0))),
    ("conv_transpose3d", (1, 2, 3, 2, 2), (2, 2, 2, 2, 2), dict(stride=2)),
]


@pytest.mark.parametrize("op,xs,ws,kw", TRANSPOSE_CASES)
def test_conv_transpose_matches_scatter_reference(op, xs, ws, kw):
    x, w = _r(*xs), _r(*ws)
    got = getattr(mx, op)(mx.array(x), mx.array(w), **kw)
    want = conv_transpose_loop(x, w, **kw)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float64"])
def test_conv_dtypes(dt):
    x, w = _r(2, 6, 3), _r(4, 3, 3)
    d = getattr(mx, dt)
    got = mx.conv1d(mx.array(x, dtype=d), mx.array(w, dtype=d), padding=1)
    assert got.dtype == d
    tol = 1e-12 if dt == "float64" else 5e-2
    xr = np.asarray(mx.array(x, dtype=d).astype(mx.float64))
    wr = np.asarray(mx.array(w, dtype=d).astype(mx.float64))
    np.testing.assert_allclose(np.asarray(got.astype(mx.float64)),
                               conv_loop(xr, wr, padding=1), rtol=tol, atol=tol)


def test_conv_promotes_mixed_float_dtypes():
    x = mx.array(_r(1, 5, 2), dtype=mx.float16)
    w = mx.array(_r(3, 2, 2))
    assert mx.conv1d(x, w).dtype == mx.float32


def test_conv1d_of_2d_and_3d_inputs_is_conv2d_and_conv3d():
    # MLX's conv1d applies its int parameters to every spatial axis of a 4-D/5-D input
    x, w = mx.array(_r(1, 5, 5, 4)), mx.array(_r(4, 3, 3, 2))
    got = mx.conv1d(x, w, stride=2, padding=1, groups=2)
    assert np.allclose(got, mx.conv2d(x, w, stride=2, padding=1, groups=2), atol=1e-6)
    x, w = mx.array(_r(1, 4, 5, 6, 2)), mx.array(_r(3, 2, 2, 2, 2))
    assert np.allclose(mx.conv1d(x, w, dilation=2), mx.conv3d(x, w, dilation=2), atol=1e-6)
    g = mx.grad(lambda w: mx.conv1d(mx.array(_r(1, 5, 5, 2)), w, groups=2).sum())(
        mx.array(_r(2, 3, 3, 1)))
    assert g.shape == (2, 3, 3, 1)


def test_conv_lazy_and_inputs_unchanged():
    x, w = _r(1, 6, 2), _r(3, 2, 2)
    xc, wc = x.copy(), w.copy()
    y = mx.conv1d(mx.array(x), mx.array(w))
    assert y.shape == (1, 5, 3)
    mx.eval(y)
    assert np.array_equal(x, xc) and np.array_equal(w, wc)


# -- bad input ----------------------------------------------------------------------------------
BAD = [
    (lambda: mx.conv1d(mx.zeros((1, 5, 3)), mx.zeros((2, 3, 2))), ValueError, "conv1d"),
    (lambda: mx.conv1d(mx.zeros((1, 5, 4)), mx.zeros((3, 3, 2)), groups=2), ValueError,
     "groups"),
    (lambda: mx.conv1d(mx.zeros((1, 5, 3)), mx.zeros((2, 3, 1)), groups=2), ValueError,
     "divisible"),
    (lambda: mx.conv1d(mx.zeros((5, 3)), mx.zeros((2, 3, 3))), ValueError, "dimensions"),
    (lambda: mx.conv2d(mx.zeros((1, 5, 3)), mx.zeros((2, 3, 3))), ValueError, "conv2d"),
    (lambda: mx.conv1d(mx.zeros((1, 2, 3)), mx.zeros((2, 3, 3))), ValueError, "Spatial"),
    (lambda: mx.conv1d(mx.zeros((1, 5, 3)), mx.zeros((2, 3, 3)), stride=0), ValueError,
     "stride"),
    (lambda: mx.conv1d(mx.zeros((1, 5, 3)), mx.zeros((2, 3, 3)), padding=-1), ValueError,
     "padding"),
    (lambda: mx.conv2d(mx.zeros((1, 5, 5, 3)), mx.zeros((2, 3, 3, 3)), stride=(1, 2, 3)),
     ValueError, "stride"),
    (lambda: mx.conv1d(mx.zeros((1, 5, 3), dtype=mx.int32), mx.zeros((2, 3, 3),
                                                                      dtype=mx.int32)),
     ValueError, "floating"),
    (lambda: mx.conv1d(mx.zeros((1, 5, 3)), mx.zeros((2, 3, 3)), stride=1.5), TypeError,
     "stride"),
    (lambda: mx.conv1d(mx.zeros((1, 5, 3)), "w"), TypeError, "conv1d"),
    (lambda: mx.conv_general(mx.zeros((1, 5, 3)), mx.zeros((2, 3, 3)),
                             padding=([-5], [-5])), ValueError, "conv_general"),
]


@pytest.mark.parametrize("fn,exc,needle", BAD)
def test_conv_bad_input(fn, exc, needle):
    with pytest.raises(exc) as e:
        fn()
    assert needle in str(e.value)


# -- transforms beyond the op table ------------------------------------------------------------
def test_vmap_over_weight_only_and_input_only():
    x = _r(2, 7, 4)
    wb = _r(3, 6, 3, 2)  # a batch of 3 weights, groups=2
    got = mx.vmap(lambda w: mx.conv1d(mx.array(x), w, padding=1, groups=2))(mx.array(wb))
    want = np.stack([conv_loop(x, wb[i], padding=1, groups=2) for i in range(3)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    xb = _r(7, 2, 5, 4)  # batch on axis 1 of a (N, L, C) -> batched (2, 7?, ...) input
    w = wb[0]
    got = mx.vmap(lambda x: mx.conv1d(x, mx.array(w), stride=2, groups=2), in_axes=1)(
        mx.array(xb))
    want = np.stack([conv_loop(xb[:, i], w, stride=2, groups=2) for i in range(2)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


def test_second_derivative_matches_finite_differences():
    x = RNG.standard_normal((1, 6, 2))
    w = RNG.standard_normal((2, 3, 2))

    def f(x):
        y = mx.conv1d(x, mx.array(w, dtype=mx.float64), stride=2, padding=1)
        return mx.sum(mx.sin(y))

    def g(x):  # directional derivative of grad f along v
        return mx.sum(mx.grad(f)(x) * mx.array(v, dtype=mx.float64))

    v = RNG.standard_normal(x.shape)
    hv = np.asarray(mx.grad(g)(mx.array(x, dtype=mx.float64)))
    eps = 1e-5
    fd = (np.asarray(mx.grad(f)(mx.array(x + eps * v, dtype=mx.float64)))
          - np.asarray(mx.grad(f)(mx.array(x - eps * v, dtype=mx.float64)))) / (2 * eps)
    np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-7)


def test_compile_of_conv_matches_eager():
    x, w = mx.array(_r(2, 6, 5, 3)), mx.array(_r(4, 3, 3, 3))

    def f(x, w):
        return mx.maximum(mx.conv2d(x, w, padding=1), 0) * 2

    np.testing.assert_allclose(np.asarray(mx.compile(f)(x, w)), np.asarray(f(x, w)),
                               rtol=1e-6, atol=1e-6)


def test_matches_mlx_when_available():
    mlx = pytest.importorskip("mlx.core")
    x, w = _r(2, 9, 8, 4), _r(6, 3, 2, 2)
    kw = dict(stride=(2, 1), padding=([1, 0], [2, 3]), kernel_dilation=(1, 2),
              input_dilation=(2, 3), groups=2, flip=True)
    a = mx.conv_general(mx.array(x), mx.array(w), **kw)
    b = mlx.conv_general(mlx.array(x), mlx.array(w), **kw)
    np.testing.assert_allclose(np.asarray(a), np.array(b), rtol=1e-4, atol=1e-4)


# -- convolve (issue 13) -----------------------------------------------------------------------
@pytest.mark.parametrize("a, v, mode, msg", [
    (np.zeros((2, 2)), np.ones(2), "full", r"^\[convolve\] Inputs must be 1D"),
    (np.zeros(0), np.ones(2), "full", r"^\[convolve\] Inputs cannot be empty"),
    (np.ones(3), np.ones(2), "middle", r"^\[convolve\] Invalid mode"),
])
def test_convolve_errors(a, v, mode, msg):
    with pytest.raises(ValueError, match=msg):
        mx.convolve(mx.array(a), mx.array(v), mode)
