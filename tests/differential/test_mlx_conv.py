"""Convolutions on braze and on MLX: forward and both gradients (one `vjp` with the same random
cotangent) for the shape classes the op table does not reach: depthwise with a channel
multiplier, 1x1 strided, asymmetric padding, dilation with strides and groups, flipped grouped
kernels, 3-D, grouped and dilated transposed convolutions; half floats forward.

MLX 0.32's gradients of `conv_general` with `input_dilation` > 1 are wrong in many cases (its
input gradient even has the wrong shape for some), so those are checked here forward only;
braze's gradients there are checked against finite differences (tests/test_conv_paths.py).
The transposed convolutions, which use input dilation inside, agree with MLX.
"""
import ml_dtypes
import numpy as np
import pytest

mlx = pytest.importorskip("mlx.core")

import braze.core as mx  # noqa: E402

RNG = np.random.default_rng(11)

# (id, op, x shape, w shape, keyword arguments, gradients checked)
CASES = [
    ("depthwise-x2", "conv2d", (2, 7, 6, 3), (6, 3, 3, 1), dict(groups=3, padding=1), True),
    ("1x1-strided", "conv2d", (2, 7, 5, 4), (6, 1, 1, 4), dict(stride=2), True),
    ("asym-pad-flip-groups", "conv_general", (1, 6, 7, 4), (6, 2, 3, 2),
     dict(padding=([2, 0], [1, 3]), stride=(1, 2), groups=2, flip=True), True),
    ("dilated-strided-groups", "conv2d", (2, 9, 8, 6), (6, 3, 2, 2),
     dict(stride=(2, 1), dilation=(2, 3), padding=(2, 1), groups=3), True),
    ("conv1d-long", "conv1d", (2, 40, 8), (5, 7, 8), dict(stride=3, dilation=2, padding=4),
     True),
    ("conv3d", "conv3d", (1, 5, 4, 6, 3), (4, 3, 2, 3, 3), dict(stride=(1, 2, 1), padding=1),
     True),
    ("conv1d-of-4d", "conv1d", (1, 6, 5, 4), (3, 3, 3, 4), dict(stride=2, padding=1), True),
    ("transpose2d-groups", "conv_transpose2d", (2, 4, 5, 4), (6, 3, 3, 2),
     dict(stride=2, padding=1, groups=2), True),
    ("transpose1d-dilated", "conv_transpose1d", (1, 6, 3), (4, 3, 3),
     dict(stride=3, dilation=2, padding=2, output_padding=1), True),
    ("transpose3d", "conv_transpose3d", (1, 3, 2, 3, 2), (3, 2, 3, 2, 2),
     dict(stride=(2, 1, 2), padding=(0, 1, 1)), True),
    ("input-dilation", "conv_general", (1, 5, 4, 2), (3, 3, 2, 2),
     dict(input_dilation=(2, 3), padding=([1, 2], [0, 1]), kernel_dilation=(1, 2)), False),
    ("input-dilation-strided", "conv_general", (2, 6, 4), (4, 3, 2),
     dict(input_dilation=2, stride=2, padding=1, groups=2, flip=True), False),
]


def _both(lib, op, x, w, kw):
    return getattr(lib, op)(x, w, **kw)


@pytest.mark.parametrize("name,op,xs,ws,kw,grads", CASES, ids=[c[0] for c in CASES])
def test_conv_matches_mlx(name, op, xs, ws, kw, grads):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    y = _both(mx, op, mx.array(x), mx.array(w), kw)
    ym = _both(mlx, op, mlx.array(x), mlx.array(w), kw)
    np.testing.assert_allclose(np.asarray(y), np.array(ym), rtol=1e-4, atol=1e-4)
    if not grads:
        return
    ct = RNG.standard_normal(y.shape).astype(np.float32)
    _, got = mx.vjp(lambda a, b: _both(mx, op, a, b, kw), [mx.array(x), mx.array(w)],
                    [mx.array(ct)])
    _, want = mlx.vjp(lambda a, b: _both(mlx, op, a, b, kw), [mlx.array(x), mlx.array(w)],
                      [mlx.array(ct)])
    for a, b in zip(got, want):
        assert a.shape == tuple(b.shape)
        np.testing.assert_allclose(np.asarray(a), np.array(b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,op,xs,ws,kw,grads", [CASES[0], CASES[3], CASES[7]],
                         ids=["depthwise", "grouped", "transpose"])
def test_half_floats_match_mlx(dt, name, op, xs, ws, kw, grads):
    t = ml_dtypes.bfloat16 if dt == "bfloat16" else np.float16
    x = RNG.standard_normal(xs).astype(t)
    w = RNG.standard_normal(ws).astype(t)
    y = _both(mx, op, mx.array(x), mx.array(w), kw)
    ym = _both(mlx, op, mlx.array(x), mlx.array(w), kw)
    assert y.dtype.name == dt
    tol = 2e-2 if dt == "bfloat16" else 2e-3
    np.testing.assert_allclose(np.asarray(y.astype(mx.float32)),
                               np.array(ym.astype(mlx.float32)), rtol=tol, atol=tol)
