"""The cpu backend's Numba Threefry gives NumPy's bits (and so MLX's) for every layout
`random_bits` uses, and the backend installs it."""
import numpy as np
import pytest

import braze.core as mx
from braze._src.prims import random as R

pytest.importorskip("numba")

from braze._src.backends.cpu import CpuBackend  # noqa: E402
from braze._src.backends.cpu.threefry import threefry2x32 as native  # noqa: E402


@pytest.mark.parametrize("nk, h", [(1, 1), (1, 7), (3, 5), (1, 4097), (5, 33)])
def test_native_threefry_matches_numpy(nk, h):
    rng = np.random.default_rng(nk * 100 + h)
    keys = rng.integers(0, 2**32, (nk, 2), dtype=np.uint64).astype(np.uint32)
    x0 = rng.integers(0, 2**32, (nk, h), dtype=np.uint64).astype(np.uint32)
    x1 = rng.integers(0, 2**32, (nk, h), dtype=np.uint64).astype(np.uint32)
    a0, a1, b0, b1 = x0.copy(), x1.copy(), x0.copy(), x1.copy()
    R.threefry2x32(keys[:, :1], keys[:, 1:], a0, a1)
    native(keys[:, :1], keys[:, 1:], b0, b1)
    np.testing.assert_array_equal(b0, a0)
    np.testing.assert_array_equal(b1, a1)


def test_backend_installs_it_and_bits_are_unchanged():
    prev = R._THREEFRY[0]
    try:
        R.set_threefry(R.threefry2x32)
        key = mx.random.key(42)
        want = [np.array(mx.random.bits((3, 5), 4, key=key)),
                np.array(mx.random.uniform(shape=(2, 3, 7), key=key))]
        CpuBackend()
        assert R._THREEFRY[0] is native
        got = [np.array(mx.random.bits((3, 5), 4, key=key)),
               np.array(mx.random.uniform(shape=(2, 3, 7), key=key))]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    finally:
        R.set_threefry(prev)
