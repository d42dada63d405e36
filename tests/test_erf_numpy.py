"""The vectorized NumPy erf / erfinv behind `Erf` / `ErfInv` eval_cpu, against `math.erf`."""
import math

import numpy as np
import pytest

import braze.core as mx
from braze._src.prims import unary
from braze._src.prims.erf_numpy import erf64, erfc64, erfinv64


@pytest.fixture(autouse=True)
def _quiet():
    with np.errstate(all="ignore"):
        yield


def _points(n=100_000, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([
        rng.uniform(-6.0, 6.0, n), rng.normal(0.0, 1.0, n // 4),
        np.geomspace(1e-300, 6.0, 5000), -np.geomspace(1e-300, 30.0, 5000),
        np.linspace(-0.47, 0.47, 1001), [0.46875, -0.46875, 4.0, -4.0, 1e308, -1e308]])


_math_erf = np.frompyfunc(math.erf, 1, 1)
_math_erfc = np.frompyfunc(math.erfc, 1, 1)


def _ulps(got, ref, dt):
    ref_r = ref.astype(dt)
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref_r)).astype(np.float64)


def test_erf64_within_a_few_ulp_of_math_erf():
    x = _points()
    ref = _math_erf(x).astype(np.float64)
    assert _ulps(erf64(x), ref, np.float64).max() <= 6


def test_erfc64_relative_accuracy_in_the_tails():
    x = _points()
    ref = _math_erfc(x).astype(np.float64)
    got = erfc64(x)
    nz = ref > 1e-300
    rel = np.abs(got[nz] - ref[nz]) / ref[nz]
    assert rel.max() < 5e-15
    assert np.all(got[~nz] < 1e-290)


def test_erf_special_values():
    f = erf64
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 10.0, -10.0])
    r = f(x)
    assert np.isnan(r[0])
    assert r[1:3].tolist() == [1.0, -1.0]
    assert r[3] == 0 and not np.signbit(r[3]) and np.signbit(r[4])
    assert r[5:].tolist() == [1.0, -1.0]
    assert f(np.array(0.5)).shape == ()
    assert f(np.zeros((2, 0))).shape == (2, 0)


def _inv_points(n=100_000, seed=1):
    rng = np.random.default_rng(seed)
    t = np.geomspace(1e-16, 0.5, 5000)
    return np.concatenate([rng.uniform(-1.0, 1.0, n), 1.0 - t, -1.0 + t,
                           np.geomspace(1e-300, 0.5, 2000), [0.5, -0.5, 0.9999999999999999]])


def test_erfinv64_round_trips_through_math_erf_and_erfc():
    y = _inv_points()
    r = erfinv64(y)
    assert np.all(np.isfinite(r))
    a = np.abs(y)
    c = a < 0.5
    # central: erf(r) == y to a few ulp of y (erf' <= 1.13, so this bounds r's error too)
    back = _math_erf(r[c]).astype(np.float64)
    assert np.all(np.abs(back - y[c]) <= 4 * np.spacing(np.abs(y[c])) + 1e-300)
    # tails: erfc(|r|) == 1 - |y| (exact) to a relative 1e-14, near +-1 included
    t = 1.0 - a[~c]
    back = _math_erfc(np.abs(r[~c])).astype(np.float64)
    assert np.max(np.abs(back - t) / t) < 1e-13
    assert np.array_equal(np.sign(r), np.sign(y))


def test_erfinv_special_values():
    f = erfinv64
    x = np.array([1.0, -1.0, 1.5, -2.0, np.nan, np.inf, 0.0, -0.0])
    r = f(x)
    assert r[:2].tolist() == [np.inf, -np.inf]
    assert np.all(np.isnan(r[2:6]))
    assert r[6] == 0 and not np.signbit(r[6]) and np.signbit(r[7])


@pytest.fixture(params=["numpy", "scipy"])
def impl(request, monkeypatch):
    """Run the eager kernels with the NumPy implementation (SciPy hidden) and, when installed,
    with SciPy."""
    if request.param == "numpy":
        monkeypatch.setattr(unary, "_special", None)
    elif unary._special is None:
        pytest.skip("SciPy is not installed")
    return request.param


def test_float32_is_the_rounded_float64_result(impl):
    x = _points(20_000).astype(np.float32)
    x = x[np.isfinite(x)]
    got = np.asarray(mx.erf(mx.array(x)))
    ref = _math_erf(x.astype(np.float64)).astype(np.float64).astype(np.float32)
    assert np.mean(got != ref) < 1e-3  # rounding ties of a few-ulp float64 result aside
    assert np.all(np.abs(got.astype(np.float64) - ref) <= np.spacing(np.abs(ref)))


@pytest.mark.parametrize("dt", [mx.float16, mx.bfloat16, mx.float32, mx.float64])
def test_eager_erf_and_erfinv_dtypes(dt, impl):
    xs = np.linspace(-3, 3, 101)
    a = mx.array(xs, dtype=dt)
    r = mx.erf(a)
    assert r.dtype == dt
    ref = np.array([math.erf(float(v)) for v in np.asarray(a.astype(mx.float64))])
    tol = {mx.float16: 1e-3, mx.bfloat16: 1e-2, mx.float32: 1e-6, mx.float64: 1e-15}[dt]
    assert np.allclose(np.asarray(r.astype(mx.float64)), ref, rtol=tol, atol=tol)
    ys = mx.array(np.linspace(-0.99, 0.99, 101), dtype=dt)
    inv = mx.erfinv(ys)
    assert inv.dtype == dt
    back = np.array([math.erf(float(v)) for v in np.asarray(inv.astype(mx.float64))])
    assert np.allclose(back, np.asarray(ys.astype(mx.float64)), atol=4 * tol, rtol=4 * tol)
    sp = mx.array([np.nan, np.inf, -np.inf], dtype=dt)
    out = np.asarray(mx.erf(sp).astype(mx.float64))
    assert np.isnan(out[0]) and out[1:].tolist() == [1.0, -1.0]
    edge = np.asarray(mx.erfinv(mx.array([1.0, -1.0, 2.0], dtype=dt)).astype(mx.float64))
    assert edge[:2].tolist() == [np.inf, -np.inf] and np.isnan(edge[2])
