"""Shape ops: identity elision, errors, methods, views; MLX cross-checks when installed."""
import numpy as np
import pytest

import braze.core as mx

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_identity_elision():
    a = mx.array(X)
    assert mx.reshape(a, (2, 3, 4)) is a
    assert mx.broadcast_to(a, (2, 3, 4)) is a
    assert a[:] is a and a[...] is a and a[:, :, :] is a
    assert mx.transpose(a, (0, 1, 2)) is a
    assert mx.squeeze(a) is a


def test_methods():
    a = mx.array(X)
    assert a.reshape(4, 6).shape == (4, 6) and a.reshape((4, 6)).shape == (4, 6)
    assert a.transpose(1, 0, 2).shape == (3, 2, 4) and a.transpose((2, 1, 0)).shape == (4, 3, 2)
    assert a.T.shape == (4, 3, 2) and a.transpose().shape == (4, 3, 2)
    assert a.flatten().shape == (24,) and a.flatten(1).shape == (2, 12)
    assert a.swapaxes(0, 2).shape == (4, 3, 2) and a.moveaxis(0, 2).shape == (3, 4, 2)
    assert [p.shape for p in a.split(2, axis=2)] == [(2, 3, 2)] * 2
    assert a[0].diagonal().shape == (3,) and a[0, 0].diag().shape == (4, 4)
    assert mx.array(np.ones((1, 3, 1))).squeeze().shape == (3,)


def test_values_against_numpy():
    a = mx.array(X)
    np.testing.assert_array_equal(mx.moveaxis(a, 2, 0), np.moveaxis(X, 2, 0))
    np.testing.assert_array_equal(mx.flip(a, (0, 2)), np.flip(X, (0, 2)))
    np.testing.assert_array_equal(mx.roll(a, -5), np.roll(X, -5))
    np.testing.assert_array_equal(mx.roll(a, 1, (0, 1)), np.roll(X, 1, axis=(0, 1)))
    for k in (-4, -1, 0, 2, 9):
        np.testing.assert_array_equal(mx.diagonal(a, k, 1, 2), np.diagonal(X, k, 1, 2))
        np.testing.assert_array_equal(mx.diag(mx.array([1, 2, 3]), k), np.diag([1, 2, 3], k))
    np.testing.assert_array_equal(mx.tile(a, 2), np.tile(X, 2))
    np.testing.assert_array_equal(mx.repeat(a, 2, axis=-1), np.repeat(X, 2, axis=-1))
    pieces = mx.split(a, [1, -1, 10], axis=2)
    for g, w in zip(pieces, np.split(X, [1, 3, 10], axis=2)):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(mx.stack([a, a], axis=-1), np.stack([X, X], -1))
    assert mx.concatenate([mx.array([1], mx.int32), mx.array([2.5], mx.float16)]).dtype \
        == mx.float16
    assert mx.broadcast_shapes((1, 2), (3, 1), (2,)) == (3, 2)
    assert [x.shape for x in mx.atleast_3d(mx.array(1), mx.ones((3,)) if hasattr(mx, "ones")
                                           else mx.array([1, 2, 3]))] == [(1, 1, 1), (1, 3, 1)]
    np.testing.assert_array_equal(mx.pad(mx.array([1, 2]), 1, constant_values=7), [7, 1, 2, 7])
    v = mx.view(mx.array(np.array([1.0], np.float32)), mx.int32)
    assert v.item() == np.array([1.0], np.float32).view(np.int32)[0]


def test_inputs_not_modified_and_views():
    src = X.copy()
    a = mx.array(src)
    r = mx.reshape(a, (6, 4))
    np.testing.assert_array_equal(r, X.reshape(6, 4))
    np.testing.assert_array_equal(src, X)


@pytest.mark.parametrize("fn,exc,words", [
    (lambda a: mx.reshape(a, (5, 5)), ValueError, ["[reshape]", "(5,5)", "24"]),
    (lambda a: mx.reshape(a, (-1, -1)), ValueError, ["[reshape]", "infer"]),
    (lambda a: mx.reshape(a, "ab"), TypeError, ["[reshape]", "'ab'"]),
    (lambda a: mx.transpose(a, (0, 0, 1)), ValueError, ["[transpose]", "(0, 0, 1)"]),
    (lambda a: mx.transpose(a, (0, 1)), ValueError, ["[transpose]", "2 axes"]),
    (lambda a: mx.transpose(a, (0, 1, 5)), IndexError, ["[transpose]", "5"]),
    (lambda a: mx.squeeze(a, 0), ValueError, ["[squeeze]", "axis 0"]),
    (lambda a: mx.expand_dims(a, 7), IndexError, ["[expand_dims]", "7"]),
    (lambda a: mx.swapaxes(a, 0, 3), IndexError, ["[swapaxes]", "3"]),
    (lambda a: mx.flatten(a, 2, 1), ValueError, ["[flatten]", "2"]),
    (lambda a: mx.unflatten(a, 2, (3, -1)), ValueError, ["[unflatten]", "(3,-1)"]),
    (lambda a: mx.broadcast_to(a, (3, 3, 4)), ValueError, ["[broadcast_to]", "(3,3,4)"]),
    (lambda a: mx.split(a, 5, axis=2), ValueError, ["[split]", "5"]),
    (lambda a: mx.split(a, 0), ValueError, ["[split]", "0"]),
    (lambda a: mx.split(a, 1.5), TypeError, ["[split]", "1.5"]),
    (lambda a: mx.concatenate([a, a[0]]), ValueError, ["[concatenate]", "dimensions"]),
    (lambda a: mx.concatenate([a, a[:, :2]], axis=2), ValueError, ["[concatenate]", "(2,2,4)"]),
    (lambda a: mx.concatenate([]), ValueError, ["[concatenate]"]),
    (lambda a: mx.concatenate(a), TypeError, ["[concatenate]"]),
    (lambda a: mx.stack([a, a[0]]), ValueError, ["[stack]", "(3,4)"]),
    (lambda a: mx.repeat(a, -1), ValueError, ["[repeat]", "-1"]),
    (lambda a: mx.tile(a, (-1,)), ValueError, ["[tile]", "-1"]),
    (lambda a: mx.pad(a, -1), ValueError, ["[pad]", "-1"]),
    (lambda a: mx.pad(a, 1, mode="wrap"), ValueError, ["[pad]", "wrap"]),
    (lambda a: mx.pad(a, [(1, 1)] * 4), ValueError, ["[pad]", "4"]),
    (lambda a: mx.diag(a), ValueError, ["[diag]", "3 dimensions"]),
    (lambda a: mx.diagonal(a, 0, 1, 1), ValueError, ["[diagonal]", "1"]),
    (lambda a: mx.diagonal(a[0, 0]), ValueError, ["[diagonal]", "1 dimensions"]),
    (lambda a: mx.roll(a, (1, 2), (0, 1, 2)), ValueError, ["[roll]"]),
    (lambda a: mx.moveaxis(a, 0, 3), IndexError, ["[moveaxis]", "3"]),
    (lambda a: mx.view(a[..., :3], mx.float64), ValueError, ["[view]", "float64"]),
    (lambda a: mx.view(a, "nope"), TypeError, ["[view]", "nope"]),
    (lambda a: mx.broadcast_shapes(), ValueError, ["[broadcast_shapes]"]),
])
def test_errors(fn, exc, words):
    a = mx.array(X)
    with pytest.raises(exc) as ei:
        fn(a)
    for w in words:
        assert w in str(ei.value), (w, str(ei.value))


def test_against_mlx():
    mlx = pytest.importorskip("mlx.core")
    a, m = mx.array(X), mlx.array(X)
    for f in [lambda M, x: M.pad(x, ((1, 0), (2, 1), (0, 3)), mode="edge"),
              lambda M, x: M.diagonal(x, -1, 2, 0),
              lambda M, x: M.roll(x, (1, 2), 0),
              lambda M, x: M.unstack(x, axis=2)[1],
              lambda M, x: M.atleast_3d(x[0, 0]),
              lambda M, x: M.repeat(x, 2)]:
        np.testing.assert_array_equal(np.array(f(mx, a)), np.array(f(mlx, m)))


def test_flatten_clamps_axes_like_mlx():
    """MLX counts negative axes from the end and then clamps both to [0, ndim - 1]; a 0-d array
    becomes shape (1,) whatever the axes (found by tests/differential)."""
    a = mx.zeros((2, 3))
    assert mx.flatten(a, 0, 5).shape == (6,)
    assert mx.flatten(a, -5, 1).shape == (6,)
    assert mx.flatten(a, 1, 7).shape == (2, 3)
    assert mx.flatten(mx.array(1.0), 1, 2).shape == (1,)
    assert mx.flatten(mx.array(1.0), -3, 7).shape == (1,)
    with pytest.raises(ValueError, match="start_axis"):
        mx.flatten(a, 3, 4)
    with pytest.raises(ValueError, match="end_axis"):
        mx.flatten(a, -9, -7)


# -- issue 13 ----------------------------------------------------------------------------------
def test_roll_tuple_shift_without_axes_adds_the_shifts():
    x = np.arange(10).reshape(2, 5)
    np.testing.assert_array_equal(np.asarray(mx.roll(mx.array(x), (1, 1, -3))),
                                  np.roll(x, (1, 1, -3)))


def test_view_of_a_0d_array():
    assert mx.array(-1, mx.int8).view(mx.uint8).item() == 255


@pytest.mark.parametrize("call, text", [
    (lambda: mx.reshape(mx.zeros(4), [2**31]), "[reshape] Shape dimension 2147483648"),
    (lambda: mx.broadcast_to(mx.zeros(4), [2**31, 1]), "[broadcast_to] Shape dimension"),
    (lambda: mx.concatenate([mx.zeros(2**30)] * 3), "[concatenate] Shape dimension 3221225472"),
    (lambda: mx.repeat(mx.zeros(2**30), 2), "[repeat] Shape dimension 2147483648"),
    (lambda: mx.tile(mx.zeros(2**30), 4), "[tile] Shape dimension 4294967296"),
])
def test_computed_dimensions_outside_int32_overflow(call, text):
    with pytest.raises(OverflowError) as ei:
        call()
    assert str(ei.value).startswith(text)


def test_diff_errors_as_mlx():
    a = mx.array([1, 2, 4])
    with pytest.raises(IndexError, match=r"^\[diff\] Axis is out of bounds"):
        mx.diff(a, axis=1)
    with pytest.raises(ValueError, match=r"^\[diff\] Order `n` must be non-negative"):
        mx.diff(a, n=-1)
    assert mx.diff(a, n=5).shape == (0,)


def test_matrix_transpose_needs_two_dimensions():
    with pytest.raises(ValueError, match=r"^\[matrix_transpose\] Input array must have at least"):
        mx.matrix_transpose(mx.zeros(3))


@pytest.mark.parametrize("args, msg", [
    (((-2, 3), (3, 1), 0), r"^\[as_strided\] Negative dimensions not allowed"),
    (((3,), (4,), 0), r"^\[as_strided\] Shape \(3,\), strides \(4,\) and offset 0 read outside"),
    (((3,), (-1,), 1), r"^\[as_strided\] .* read outside an array of 8 elements"),
    (((3,), (1, 1), 0), r"^\[as_strided\] Expected one stride per dimension"),
])
def test_as_strided_errors(args, msg):
    with pytest.raises(ValueError, match=msg):
        mx.as_strided(mx.zeros(8), *args)
