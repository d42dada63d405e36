"""A lone op that NumPy computes slowly gets a kernel in a compiled function (`numpy_slow`),
and the kernels and NumPy paths that this exposed agree with NumPy."""
import numpy as np
import pytest

import braze.core as mx
from braze._src.compile.compiled import Compiled
from braze._src.prims.unary import _sigmoid


def _prims(fn, *args):
    return [type(a._prim) for a in fn.lower(*args).tape.nodes]


@pytest.mark.parametrize("op, n", [(mx.logaddexp, 2), (mx.erf, 1), (mx.sigmoid, 1),
                                   (mx.remainder, 2), (mx.sign, 1), (mx.erfinv, 1)])
def test_a_lone_slow_op_gets_a_kernel(op, n):
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-0.9, 0.9, 1000).astype(np.float32) for _ in range(n)]
    f = mx.compile(op)
    args = [mx.array(x) for x in xs]
    assert Compiled in _prims(f, *args)
    np.testing.assert_allclose(np.array(f(*args)), np.array(op(*args)), rtol=2e-6, atol=1e-7)


def test_a_lone_fast_op_stays_a_numpy_call():
    f = mx.compile(mx.exp)  # MLX's rule: a group of one primitive is not fused
    assert Compiled not in _prims(f, mx.ones((8,)))


@pytest.mark.parametrize("dt", [np.uint8, np.uint32, np.uint64])
def test_unsigned_division_in_kernels_is_exact(dt):
    info = np.iinfo(dt)
    rng = np.random.default_rng(1)
    a = np.concatenate([rng.integers(0, info.max, 300, dtype=dt, endpoint=True),
                        np.array([info.max, info.max - 1, 0, 7], dt)])
    b = np.concatenate([rng.integers(0, info.max, 300, dtype=dt, endpoint=True),
                        np.array([7, info.max, 0, 0], dt)])
    f = mx.compile(lambda x, y: (x // y) * 3 + x % y)
    got = np.array(f(mx.array(a), mx.array(b)))
    with np.errstate(all="ignore"):
        want = (np.floor_divide(a, b) * dt(3) + np.remainder(a, b)).astype(dt)
    np.testing.assert_array_equal(got, want)


def _ulps(a, b):
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def test_sigmoid_reference_keeps_both_tails():
    x = np.array([-103, -100, -88, -50, -1e-3, 0, 1e-3, 17, 50, 100, np.inf, -np.inf, np.nan],
                 np.float32)
    with np.errstate(all="ignore"):
        got = _sigmoid(x)
        xd = x.astype(np.float64)
        want = np.where(xd < 0, np.exp(xd) / (1 + np.exp(xd)), 1 / (1 + np.exp(-xd)))
    ok = np.isfinite(x)  # the denormal results of the negative tail included
    assert _ulps(got[ok], want[ok].astype(np.float32)).max() <= 2
    assert got[-3] == 1 and got[-2] == 0 and np.isnan(got[-1]) and got.dtype == np.float32


def test_sigmoid_reference_matches_the_kernel():
    x = np.random.default_rng(2).uniform(-40, 40, 10000).astype(np.float32)
    with np.errstate(all="ignore"):
        ref = _sigmoid(x)
    got = np.array(mx.compile(lambda v: mx.sigmoid(v) * 1)(mx.array(x)))
    assert _ulps(got, ref).max() <= 4
    assert _sigmoid(np.array(0.5, np.float32)).shape == ()
