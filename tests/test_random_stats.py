"""Statistical checks of mx.random with fixed seeds, and its bad-input errors.

The Kolmogorov–Smirnov statistic and every CDF are written here (no SciPy). With fixed keys the
draws are deterministic, so the tests are too; the thresholds are the 0.1% critical values
(a correct sampler fails one of them for one key in a thousand).
"""
import math

import numpy as np
import pytest

import braze.core as mx

K = mx.random.key
N = 20000
KS_CRIT = 1.95 / math.sqrt(N)  # Kolmogorov distribution, alpha = 0.001
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _np(a):
    return np.array(a).astype(np.float64)


def ks_statistic(samples, cdf) -> float:
    """sup |F_n(x) - F(x)| for the empirical CDF F_n of `samples`."""
    x = np.sort(np.asarray(samples, np.float64).ravel())
    n = x.size
    f = cdf(x)
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))


def phi(x):
    return 0.5 * (1.0 + _erf(np.asarray(x, np.float64) / math.sqrt(2.0)))


def normal_cdf(mu, sigma):
    return lambda x: phi((x - mu) / sigma)


def uniform_cdf(a, b):
    return lambda x: np.clip((x - a) / (b - a), 0.0, 1.0)


def gumbel_cdf(x):
    return np.exp(-np.exp(-x))


def laplace_cdf(mu, b):
    def cdf(x):
        z = (x - mu) / b
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.maximum(z, 0)))
    return cdf


def truncnorm_cdf(a, b):
    pa, pb = phi(a), phi(b)
    return lambda x: np.clip((phi(x) - pa) / (pb - pa), 0.0, 1.0)


def test_ks_statistic_itself():
    # the exact statistic of a tiny sample, worked by hand: points 0.1, 0.5, 0.9 under U(0,1)
    assert ks_statistic([0.5, 0.1, 0.9], uniform_cdf(0, 1)) == pytest.approx(0.2333333333)
    # and it sees a wrong distribution
    z = np.random.default_rng(0).normal(size=N)
    assert ks_statistic(z, normal_cdf(0, 1)) < KS_CRIT
    assert ks_statistic(z, normal_cdf(0.1, 1)) > KS_CRIT
    assert ks_statistic(z, uniform_cdf(-3, 3)) > KS_CRIT


def _moments(x, mean, var, n_sigma=5.0):
    x = np.asarray(x, np.float64).ravel()
    n = x.size
    assert abs(x.mean() - mean) < n_sigma * math.sqrt(var / n), (x.mean(), mean)
    # the sample variance's standard error, from the 4th moment
    m4 = np.mean((x - x.mean()) ** 4)
    assert abs(x.var() - var) < n_sigma * math.sqrt(max(m4 - var**2, 1e-12) / n), (x.var(), var)


# -- continuous distributions ---------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_uniform(seed):
    x = _np(mx.random.uniform(shape=(N,), key=K(seed)))
    assert x.min() >= 0.0 and x.max() < 1.0
    _moments(x, 0.5, 1 / 12)
    assert ks_statistic(x, uniform_cdf(0, 1)) < KS_CRIT
    y = _np(mx.random.uniform(-2.0, 5.0, (N,), key=K(seed + 10)))
    assert y.min() >= -2.0 and y.max() < 5.0
    _moments(y, 1.5, 49 / 12)
    assert ks_statistic(y, uniform_cdf(-2, 5)) < KS_CRIT


def test_uniform_half_precision():
    for dt in (mx.float16, mx.bfloat16):
        x = _np(mx.random.uniform(shape=(N,), dtype=dt, key=K(3)).astype(mx.float32))
        assert x.min() >= 0.0 and x.max() < 1.0
        _moments(x, 0.5, 1 / 12)


@pytest.mark.parametrize("seed", [0, 1])
def test_normal(seed):
    z = _np(mx.random.normal((N,), key=K(seed)))
    _moments(z, 0.0, 1.0)
    assert ks_statistic(z, normal_cdf(0, 1)) < KS_CRIT
    y = _np(mx.random.normal((N,), loc=3.0, scale=0.5, key=K(seed + 10)))
    _moments(y, 3.0, 0.25)
    assert ks_statistic(y, normal_cdf(3.0, 0.5)) < KS_CRIT
    # array parameters broadcast
    locs = mx.array([[-10.0], [10.0]])
    w = _np(mx.random.normal((2, N // 2), loc=locs, key=K(seed + 20)))
    assert abs(w[0].mean() + 10) < 0.1 and abs(w[1].mean() - 10) < 0.1


def test_normal_tails():
    z = _np(mx.random.normal((200000,), key=K(5)))
    assert np.all(np.isfinite(z))
    frac = np.mean(np.abs(z) > 3)  # 0.0027
    assert 0.0020 < frac < 0.0034


@pytest.mark.parametrize("lower,upper", [(-1.0, 2.0), (0.5, 3.0), (-3.0, -2.0)])
def test_truncated_normal(lower, upper):
    x = _np(mx.random.truncated_normal(lower, upper, (N,), key=K(7)))
    assert x.min() >= lower and x.max() <= upper
    assert ks_statistic(x, truncnorm_cdf(lower, upper)) < KS_CRIT


def test_truncated_normal_array_bounds():
    lo = mx.array([-1.0, 0.0, 1.0])
    hi = mx.array([1.0, 0.5, 4.0])
    x = _np(mx.random.truncated_normal(lo, hi, (N // 3, 3), key=K(8)))
    assert np.all(x >= _np(lo)) and np.all(x <= _np(hi))
    for j in range(3):
        assert ks_statistic(x[:, j], truncnorm_cdf(float(_np(lo)[j]), float(_np(hi)[j]))) < \
            1.95 / math.sqrt(N // 3)


def test_gumbel():
    x = _np(mx.random.gumbel((N,), key=K(9)))
    _moments(x, 0.5772156649015329, math.pi**2 / 6)
    assert ks_statistic(x, gumbel_cdf) < KS_CRIT


@pytest.mark.parametrize("loc,scale", [(0.0, 1.0), (2.0, 0.5)])
def test_laplace(loc, scale):
    x = _np(mx.random.laplace((N,), loc=loc, scale=scale, key=K(10)))
    _moments(x, loc, 2 * scale**2)
    assert ks_statistic(x, laplace_cdf(loc, scale)) < KS_CRIT


def test_multivariate_normal():
    mean = np.float32([1.0, -2.0, 0.5])
    a = np.float32([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [-0.3, 0.2, 0.7]])
    cov = a @ a.T
    x = _np(mx.random.multivariate_normal(mx.array(mean), mx.array(cov), (N,), key=K(11)))
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.mean(0), mean, atol=5 * math.sqrt(cov.max() / N))
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.05)
    for w in (np.float64([1, 0, 0]), np.float64([0.3, -1, 2])):
        proj = x @ w
        sd = math.sqrt(w @ cov @ w)
        assert ks_statistic(proj, normal_cdf(float(w @ mean), sd)) < KS_CRIT


# -- discrete distributions -----------------------------------------------------------------------
def _chi2_ok(counts, probs):
    """Pearson's chi-square against expected frequencies, at the 0.1% level (Wilson–Hilferty
    approximation of the critical value)."""
    counts = np.asarray(counts, np.float64)
    expected = np.asarray(probs, np.float64) * counts.sum()
    stat = np.sum((counts - expected) ** 2 / expected)
    k = len(counts) - 1
    z = 3.09  # one-sided 0.001
    crit = k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3
    return stat < crit, (stat, crit)


def test_randint_frequencies():
    r = np.array(mx.random.randint(-3, 7, (N,), key=K(12)))
    assert r.min() == -3 and r.max() == 6
    ok, info = _chi2_ok(np.bincount(r + 3, minlength=10), np.full(10, 0.1))
    assert ok, info
    # array bounds
    r = np.array(mx.random.randint(mx.array([0, 100]), mx.array([2, 105]), (N // 2, 2),
                                   key=K(13)))
    assert set(np.unique(r[:, 0])) == {0, 1} and set(np.unique(r[:, 1])) == set(range(100, 105))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.85])
def test_bernoulli_frequency(p):
    b = np.array(mx.random.bernoulli(p, (N,), key=K(14)))
    assert b.dtype == np.bool_
    assert abs(b.mean() - p) < 5 * math.sqrt(p * (1 - p) / N)


def test_bernoulli_edges_and_array_p():
    assert not np.any(np.array(mx.random.bernoulli(0.0, (N,), key=K(15))))
    assert np.all(np.array(mx.random.bernoulli(1.0, (N,), key=K(15))))
    p = mx.array([0.2, 0.9])
    b = np.array(mx.random.bernoulli(p, (N // 2, 2), key=K(16)))
    assert abs(b[:, 0].mean() - 0.2) < 0.03 and abs(b[:, 1].mean() - 0.9) < 0.03


def test_categorical_frequencies():
    probs = np.float64([0.05, 0.15, 0.3, 0.5])
    logits = mx.array(np.log(probs).astype(np.float32) + 1.7)  # unnormalized
    s = np.array(mx.random.categorical(logits, num_samples=N, key=K(17)))
    ok, info = _chi2_ok(np.bincount(s, minlength=4), probs)
    assert ok, info
    # a batch of distributions along axis 0
    probs2 = np.float64([[0.7, 0.1], [0.3, 0.9]])
    s2 = np.array(mx.random.categorical(mx.array(np.log(probs2).astype(np.float32)), axis=0,
                                        shape=(N // 2, 2), key=K(18)))
    for j in range(2):
        ok, info = _chi2_ok(np.bincount(s2[:, j], minlength=2), probs2[:, j])
        assert ok, info


def test_permutation_is_uniform():
    keys = mx.random.split(K(19), 6000)
    perms = np.array(mx.vmap(lambda k: mx.random.permutation(4, key=k))(keys))
    assert np.all(np.sort(perms, axis=1) == np.arange(4))
    codes = perms @ np.array([64, 16, 4, 1])
    _, counts = np.unique(codes, return_counts=True)
    assert len(counts) == 24
    ok, info = _chi2_ok(counts, np.full(24, 1 / 24))
    assert ok, info


def test_bits_are_balanced():
    for width, n in ((4, 32), (2, 16), (1, 8)):
        b = np.array(mx.random.bits((4000,), width, key=K(20 + width)))
        ones = np.unpackbits(b.view(np.uint8)).mean()
        assert abs(ones - 0.5) < 5 * math.sqrt(0.25 / (4000 * n))


def test_subkeys_are_independent():
    k1, k2 = mx.random.split(K(21))
    a = _np(mx.random.normal((N,), key=k1))
    b = _np(mx.random.normal((N,), key=k2))
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / math.sqrt(N)


# -- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("call,exc,op", [
    (lambda: mx.random.uniform(shape=(3,), key=mx.array([1, 2, 3], dtype=mx.uint32)),
     ValueError, "uniform"),
    (lambda: mx.random.uniform(shape=(3,), key=mx.array([1, 2], dtype=mx.int32)),
     ValueError, "uniform"),
    (lambda: mx.random.normal((3,), key=mx.array([[1, 2]], dtype=mx.uint32)),
     ValueError, "normal"),
    (lambda: mx.random.normal((3,), key=[0, 1]), TypeError, "normal"),
    (lambda: mx.random.split(mx.array([1.0, 2.0])), ValueError, "split"),
    (lambda: mx.random.split(mx.random.key(0), -1), ValueError, "split"),
    (lambda: mx.random.split(mx.random.key(0), 2.5), TypeError, "split"),
    (lambda: mx.random.bits((3,), key=mx.zeros((3,), dtype=mx.uint32)), ValueError, "bits"),
    (lambda: mx.random.bits((3,), width=3), ValueError, "bits"),
    (lambda: mx.random.normal((3,), dtype=mx.int32), ValueError, "normal"),
    (lambda: mx.random.uniform(shape=(3,), dtype=mx.int32), ValueError, "uniform"),
    (lambda: mx.random.gumbel((3,), dtype=mx.uint8), ValueError, "gumbel"),
    (lambda: mx.random.laplace((3,), dtype=mx.int16), ValueError, "laplace"),
    (lambda: mx.random.truncated_normal(0, 1, (3,), dtype=mx.int32), ValueError,
     "truncated_normal"),
    (lambda: mx.random.randint(0, 5, (3,), dtype=mx.float32), ValueError, "randint"),
    (lambda: mx.random.bernoulli(1, (3,)), ValueError, "bernoulli"),
    (lambda: mx.random.bernoulli(mx.array([0.5, 0.5]), (3,)), ValueError, "bernoulli"),
    (lambda: mx.random.uniform(shape=(-1,)), ValueError, "uniform"),
    (lambda: mx.random.normal((2, -3)), ValueError, "normal"),
    (lambda: mx.random.normal("abc"), TypeError, "normal"),
    (lambda: mx.random.uniform(shape=(2.5,)), TypeError, "uniform"),
    (lambda: mx.random.uniform(mx.zeros((4,)), 1, shape=(3,)), ValueError, "uniform"),
    (lambda: mx.random.uniform(mx.zeros((3,)), 1, shape=()), ValueError, "uniform"),
    (lambda: mx.random.uniform("a", 1), TypeError, "uniform"),
    (lambda: mx.random.randint(0, mx.array([1, 2]), (3,)), ValueError, "randint"),
    (lambda: mx.random.categorical(mx.zeros((2, 3)), axis=2), ValueError, "categorical"),
    (lambda: mx.random.categorical(mx.zeros((2, 3)), shape=(2,), num_samples=2), ValueError,
     "categorical"),
    (lambda: mx.random.categorical(mx.zeros((2, 3)), shape=(3,)), ValueError, "categorical"),
    (lambda: mx.random.multivariate_normal(mx.zeros((2,)), mx.eye(3)), ValueError,
     "multivariate_normal"),
    (lambda: mx.random.multivariate_normal(mx.zeros((2,)), mx.zeros((2, 3))), ValueError,
     "multivariate_normal"),
    (lambda: mx.random.multivariate_normal(mx.array(0.0), mx.eye(1)), ValueError,
     "multivariate_normal"),
    (lambda: mx.random.multivariate_normal(mx.zeros((2,)), mx.zeros((2,))), ValueError,
     "multivariate_normal"),
    (lambda: mx.random.multivariate_normal(mx.zeros((2,)), mx.eye(2), dtype=mx.float16),
     ValueError, "multivariate_normal"),
    (lambda: mx.random.permutation(mx.array(3.0)), ValueError, "permutation"),
    (lambda: mx.random.permutation(mx.zeros((2, 2)), axis=2), ValueError, "permutation"),
    (lambda: mx.random.permutation(-1), ValueError, "permutation"),
    (lambda: mx.random.permutation("x"), TypeError, "permutation"),
    (lambda: mx.random.seed(-1), ValueError, "seed"),
    (lambda: mx.random.seed(1.5), TypeError, "seed"),
    (lambda: mx.random.key(2**64), ValueError, "key"),
    (lambda: mx.random.uniform(stream="gpu0"), TypeError, "uniform"),
    (lambda: mx.random.laplace((2,), scale="big"), TypeError, "laplace"),
])
def test_bad_input(call, exc, op):
    with pytest.raises(exc, match=rf"\[{op}\]"):
        call()
