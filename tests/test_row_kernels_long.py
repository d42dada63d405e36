"""Row kernels on rows longer than the stash limit (the row no longer fits in cache): the
softmax and variance patterns are computed in two passes over memory (online max/sum of
exponentials, Chan's running mean and M2), with the same results as the numpy backend."""
import numpy as np
import pytest

import braze.core as mx
from braze._src import config
from braze._src.backends import base as B

pytest.importorskip("numba")

from braze._src.backends.cpu import CpuBackend  # noqa: E402
from braze._src.backends.cpu.render_rows import STASH_MAX  # noqa: E402

C = STASH_MAX + 4465  # not a multiple of the 1024-element chunk


def _cpu():
    if "cpu" not in B.registered():
        B.register("cpu", CpuBackend)
    return B.get("cpu")


def _both(f, *args):
    """(cpu result, numpy result, the cpu row kernels' sources) of compiled f."""
    be = _cpu()
    be._entries.clear()  # a cache (kernels come back from the disk cache): see what runs
    out = {}
    for name in ("cpu", "numpy"):
        with config.override(backend=name):
            r = mx.compile(f)(*args)
            out[name] = np.array(r, dtype=np.float64)
    sources = [p.source for e in be._entries.values() if e.ir.reduce_ndim
               for p in e.programs.values()]
    return out["cpu"], out["numpy"], sources


def _rows():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((4, C)) * 3 + 1).astype(np.float32)
    x[1] = -np.inf                 # every element -inf: softmax is NaN, as eager
    x[2, :1500] = -np.inf          # the first chunks are -inf only, then finite values
    x[3, 77] = np.nan
    return x


def _passes(src):
    return src.count("# pass")


@pytest.mark.parametrize("name, f", [
    ("softmax", lambda x: mx.softmax(x, axis=-1)),
    ("logsumexp", lambda x: mx.logsumexp(x, axis=-1, keepdims=True)),
    ("softmax_f64", lambda x: mx.softmax(x.astype(mx.float64), axis=-1)),
])
def test_softmax_family_two_passes(name, f):
    x = mx.array(_rows())
    got, ref, sources = _both(f, x)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-12)
    eager = np.array(f(x), dtype=np.float64)
    np.testing.assert_allclose(got, eager, rtol=2e-6, atol=1e-12)
    assert sources and all(_passes(s) <= 2 for s in sources)
    if name != "logsumexp":  # its max is adjusted for infinities first: two passes anyway
        assert any("rescale" in s for s in sources)


def test_softmax_inf_rows_match_eager():
    x = np.full((3, C), -np.inf, np.float32)
    x[0, C - 3] = 2.0       # a single finite value at the end
    x[1, 100] = np.inf      # +inf: exp(inf - inf) is NaN, as eager
    x[2, ::2] = 0.5
    got, ref, _ = _both(lambda a: mx.softmax(a, axis=-1), mx.array(x))
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-12)


@pytest.mark.parametrize("name, f", [
    ("layer_norm", lambda x, w: mx.fast.layer_norm(x, w, None, 1e-5)),
    ("var", lambda x, w: mx.var(x, axis=-1, keepdims=True) * w),
    ("norm_formula", lambda x, w: (x - mx.mean(x, -1, keepdims=True))
     * mx.rsqrt(mx.var(x, -1, keepdims=True) + 1e-5) * w),
])
def test_variance_family_two_passes(name, f):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, C)).astype(np.float32) * 2
    x[1] += 1000.0  # a large mean: the running-mean update must not cancel
    x[2, 9] = np.inf
    w = mx.array(rng.standard_normal(C).astype(np.float32))
    got, ref, sources = _both(f, mx.array(x), w)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-5)
    assert any(_passes(s) <= 2 and "lsqdev" in s for s in sources)


def test_variance_accuracy_long_row():
    """The two-pass result agrees with the float64 variance as well as NumPy's float32
    two-pass variance does (within a small factor)."""
    rng = np.random.default_rng(7)
    x = (rng.uniform(0, 1, (1, 4 * C)) + 10).astype(np.float32)
    got, _, _ = _both(lambda a: mx.var(a, axis=-1), mx.array(x))
    exact = x.astype(np.float64).var(axis=-1)
    np_err = abs(float(x.var(axis=-1, dtype=np.float32)[0]) - exact[0])
    assert abs(got[0] - exact[0]) <= 4 * np_err + 1e-7 * exact[0]


def test_short_rows_keep_three_passes_and_stash():
    """Rows that fit the stash keep the straightforward passes (bitwise the eager formula's
    order of operations per element) and store each exp once."""
    x = mx.array(np.random.default_rng(8).standard_normal((4, 4096)).astype(np.float32))
    got, ref, sources = _both(lambda a: mx.softmax(a, axis=-1), x)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-12)
    stash = [s for s in sources if "_stash" in s.splitlines()[0]]
    assert stash and all("rescale" not in s for s in stash)
    assert any("stash t" in s for s in stash)


@pytest.mark.parametrize("name, f, exact", [
    ("sum", lambda x: mx.sum(x * 2), False),
    ("mean_sq", lambda x: mx.mean((x - 0.5) ** 2), False),
    ("max", lambda x: mx.max(mx.abs(x), axis=-1, keepdims=True), True),
    ("min", lambda x: mx.min(x + 1, axis=-1), True),
    ("any", lambda x: mx.any(x > 3.5), True),
    ("all", lambda x: mx.all(x > -30), True),
    ("int_sum", lambda x: mx.sum((x > 0).astype(mx.int32) * 3), True),
    ("two_sums", lambda x: [mx.sum(x, -1), mx.max(x * x, -1) + mx.sum(x, -1)], False),
])
def test_few_long_rows_split_across_threads(name, f, exact):
    """Fewer rows than threads: each thread reduces a column segment, the partial
    accumulators are combined (NaN propagates through max/min), the per-row ops follow."""
    from braze._src import threads
    rng = np.random.default_rng(9)
    xs = rng.standard_normal((1, 5 * C + 17)).astype(np.float32)  # > the thread threshold
    if name in ("max", "min"):
        xs[0, 2 * C] = np.nan
    x = mx.array(xs)
    before = threads.POOL.launches
    prev = threads.set_split_cost(0)  # split whatever the measured cost
    try:
        with config.override(num_threads=2):
            got, ref, _ = _both(f, x)
    finally:
        threads.set_split_cost(prev)
    assert threads.POOL.launches > before
    if exact:
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5)
    eager = f(x)
    eager = [eager] if not isinstance(eager, list) else eager
    np.testing.assert_allclose(got, np.array([np.array(e) for e in eager], dtype=np.float64)
                               .reshape(got.shape), rtol=1e-5)


def test_rows_that_do_not_collapse_to_one_dimension():
    """An input broadcast along a middle axis keeps two row dimensions: the `_nd` variant
    unravels the row index; the usual one-dimension variant does not."""
    rng = np.random.default_rng(10)
    x = mx.array(rng.standard_normal((3, 4, 50)).astype(np.float32))
    y = mx.array(rng.standard_normal((3, 1, 50)).astype(np.float32))
    got, ref, sources = _both(lambda a, b: mx.softmax(a * b, axis=-1), x, y)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-12)
    assert any("_nd" in s.splitlines()[0] and "q //= nd" in s for s in sources)
    got, ref, sources = _both(lambda a: mx.softmax(a, axis=-1), x)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-12)
    assert sources and all("q //= nd" not in s for s in sources)
