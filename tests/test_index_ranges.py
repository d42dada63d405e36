"""Index arrays computed lazily (no bounds check at the op) are read as the kernels read them:
in range as given, negative ones wrapped once, the rest clamped; the index buffer itself is
never changed (prims/indexing.py `_fix_index`)."""
import numpy as np
import pytest

import braze.core as mx


def _lazy(a):
    return mx.array(np.asarray(a)) + 0  # an unevaluated index: the op cannot check its bounds


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.uint32])
def test_in_range_indices_read_as_given(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    idx = rng.integers(0, 5, (6, 3)).astype(dtype)
    got = mx.take_along_axis(mx.array(x), _lazy(idx), axis=1)
    np.testing.assert_array_equal(np.asarray(got), np.take_along_axis(x, idx, axis=1))
    got = mx.take(mx.array(x), _lazy(idx[:, 0]), axis=1)
    np.testing.assert_array_equal(np.asarray(got), np.take(x, idx[:, 0], axis=1))


def test_negative_indices_wrap_and_out_of_range_ones_clamp():
    x = np.arange(10, dtype=np.float32)
    idx = np.array([-1, -10, 3, 12, -30], np.int32)
    got = np.asarray(mx.take_along_axis(mx.array(x), _lazy(idx), axis=0))
    np.testing.assert_array_equal(got, x[[9, 0, 3, 9, 0]])


def test_scatters_with_in_range_indices_match_numpy_and_leave_the_indices_alone():
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 4, (8,)).astype(np.int32)
    keep = idx.copy()
    ind = mx.array(idx)
    upd = rng.standard_normal((8, 3)).astype(np.float32)
    out = mx.zeros((4, 3)).at[ind].add(mx.array(upd))
    want = np.zeros((4, 3), np.float32)
    np.add.at(want, idx, upd)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    x = np.zeros((8, 4), np.float32)
    put = mx.put_along_axis(mx.array(x), _lazy(idx[:, None]), mx.array(upd[:, :1]), axis=1)
    np.put_along_axis(x, idx[:, None], upd[:, :1], axis=1)
    np.testing.assert_array_equal(np.asarray(put), x)
    np.testing.assert_array_equal(np.asarray(ind), keep)
    np.testing.assert_array_equal(idx, keep)
