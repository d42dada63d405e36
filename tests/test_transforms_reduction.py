"""Transform rules of the reduce, scan and sort families: the cases the op table misses.

Ties in max/min, zeros in prod/cumprod, nested grads of softmax/logsumexp/prod, vmap with
keepdims and axis=None, exclusive and reversed scans (whose identity slot is infinite for
cummax/cummin/logcumsumexp, so the table's finite-difference check cannot see them), sort and
partition, and agreement with MLX's gradients where MLX has them.
"""
import numpy as np
import pytest

import braze.core as mx
from braze._src import dtypes as D
from braze._src.prims.creation import Arange, Eye, Linspace, Tri


def f64(x):
    return mx.array(np.asarray(x, dtype=np.float64), dtype=mx.float64)


def num(x):
    return np.asarray(x).astype(np.float64)


def fd_grad(f, x, eps=1e-6):
    """Central differences of a scalar braze function of a float64 ndarray."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x).reshape(-1)
    for j in range(x.size):
        xp, xm = x.copy().reshape(-1), x.copy().reshape(-1)
        xp[j] += eps
        xm[j] -= eps
        g[j] = (f(f64(xp.reshape(x.shape))).item() - f(f64(xm.reshape(x.shape))).item()) / (
            2 * eps)
    return g.reshape(x.shape)


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- ties and zeros ----------------------------------------------------------------------------
def test_max_ties_share_the_cotangent():
    g = mx.grad(lambda x: mx.max(x))(mx.array([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_array_equal(num(g), [0, 0.5, 0.5, 0])
    g = mx.grad(lambda x: mx.min(x))(mx.array([1.0, 1.0, 3.0]))
    np.testing.assert_array_equal(num(g), [0.5, 0.5, 0])


def test_max_ties_along_an_axis_with_keepdims():
    x = mx.array([[2.0, 2.0, 1.0], [0.0, 5.0, 5.0]])
    w = mx.array([[1.0], [10.0]])
    g = mx.grad(lambda x: mx.sum(mx.max(x, axis=1, keepdims=True) * w))(x)
    np.testing.assert_array_equal(num(g), [[0.5, 0.5, 0], [0, 5, 5]])
    g = mx.grad(lambda x: mx.sum(mx.max(x, axis=(0, 1))))(mx.array([[4.0, 1.0], [4.0, 4.0]]))
    np.testing.assert_allclose(num(g), [[1 / 3, 0], [1 / 3, 1 / 3]])


def test_max_jvp_is_the_transpose_of_its_vjp_with_ties():
    x = mx.array([1.0, 3.0, 3.0, 2.0])
    t = mx.array([1.0, 10.0, 100.0, 1000.0])
    _, (j,) = mx.jvp(lambda x: mx.max(x), [x], [t])
    _, (v,) = mx.vjp(lambda x: mx.max(x), [x], [mx.array(1.0)])
    assert j.item() == pytest.approx(float(np.sum(num(v) * num(t))))


@pytest.mark.parametrize("x,want", [
    ([2.0, 0.0, 3.0], [0, 6, 0]),
    ([2.0, 0.0, 0.0], [0, 0, 0]),
    ([2.0, -1.0, 3.0], [-3, 6, -2]),
])
def test_prod_grad_with_zeros(x, want):
    np.testing.assert_array_equal(num(mx.grad(lambda x: mx.prod(x))(mx.array(x))), want)


def test_prod_grad_with_zeros_over_several_axes():
    x = np.array([[[1.0, 2.0], [0.0, 3.0]], [[4.0, 5.0], [6.0, 0.5]]])
    g = num(mx.grad(lambda x: mx.sum(mx.prod(x, axis=(0, 2)) * mx.array([1.0, 2.0])))(
        f64(x)))
    want = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        others = np.delete(x[:, i[1], :].reshape(-1), i[0] * 2 + i[2])
        want[i] = np.prod(others) * (1.0 if i[1] == 0 else 2.0)
    np.testing.assert_allclose(g, want)


def test_prod_hessian_with_a_zero():
    # H_ij = product of the elements other than i and j (0 on the diagonal)
    x = np.array([2.0, 0.0, 3.0, 5.0])
    h = np.stack([num(mx.grad(lambda x, i=i: mx.grad(lambda y: mx.prod(y))(x)[i])(f64(x)))
                  for i in range(4)])
    want = np.zeros((4, 4))
    for i in range(4):
        for j in range(4):
            if i != j:
                want[i, j] = np.prod(np.delete(x, [i, j]))
    np.testing.assert_allclose(h, want)


def test_prod_jvp_with_zeros():
    x, t = f64([2.0, 0.0, 3.0]), f64([1.0, 2.0, 3.0])
    _, (j,) = mx.jvp(lambda x: mx.prod(x), [x], [t])
    assert j.item() == pytest.approx(12.0)


# -- nested grads ------------------------------------------------------------------------------
def _hvp_check(f, x, v):
    """grad(<grad f(x), v>) against finite differences of grad f along each coordinate."""
    gv = lambda y: mx.sum(mx.grad(f)(y) * f64(v))  # noqa: E731
    got = num(mx.grad(gv)(f64(x)))
    np.testing.assert_allclose(got, fd_grad(gv, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [None, -1, 0, (0, 1)])
def test_softmax_second_order(axis):
    c = rand((3, 4), 5)
    _hvp_check(lambda x: mx.sum(mx.softmax(x, axis=axis) * f64(c)), rand((3, 4)), rand((3, 4), 1))


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, True), ((0, 1), False)])
def test_logsumexp_second_order(axis, keepdims):
    def f(x):
        r = mx.logsumexp(x, axis=axis, keepdims=keepdims)
        return mx.sum(r * r)
    _hvp_check(f, rand((3, 4)), rand((3, 4), 1))


def test_logsumexp_hessian_is_softmax_covariance():
    x = rand((5,))
    h = np.stack([num(mx.grad(lambda x, i=i: mx.grad(mx.logsumexp)(x)[i])(f64(x)))
                  for i in range(5)])
    p = np.exp(x - np.log(np.sum(np.exp(x))))
    np.testing.assert_allclose(h, np.diag(p) - np.outer(p, p), atol=1e-12)


@pytest.mark.parametrize("fn", ["max", "min", "prod", "sum"])
def test_reduction_second_order(fn):
    c = rand((3,), 6)
    _hvp_check(lambda x: mx.sum(mx.square(getattr(mx, fn)(x, axis=1)) * f64(c)), rand((3, 4)) + 2,
               rand((3, 4), 1))


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_second_order(name, reverse):
    c = rand((3, 5), 6)

    def f(x):
        y = getattr(mx, name)(x, axis=1, reverse=reverse)
        return mx.sum(y * y * f64(c))
    _hvp_check(f, rand((3, 5)), rand((3, 5), 1))


def test_sort_second_order():
    c = rand((3, 5), 6)
    _hvp_check(lambda x: mx.sum(mx.square(mx.sort(x, axis=1)) * f64(c)), rand((3, 5)),
               rand((3, 5), 1))


# -- scans: exclusive and reversed, against finite differences on the finite outputs ----------
SCANS = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]
SCAN_FLAGS = [(False, True), (True, True), (False, False), (True, False)]


def _finite_scan_loss(name, axis, reverse, inclusive, c):
    """<scan(x), c> over the outputs that are finite (the exclusive identity slot is not)."""
    def f(x):
        y = getattr(mx, name)(x, axis=axis, reverse=reverse, inclusive=inclusive)
        keep = mx.isfinite(mx.stop_gradient(y))
        return mx.sum(mx.where(keep, y, 0.0) * f64(c))
    return f


@pytest.mark.parametrize("name", SCANS)
@pytest.mark.parametrize("reverse,inclusive", SCAN_FLAGS)
@pytest.mark.parametrize("axis", [0, 1, None])
def test_scan_vjp_matches_finite_differences(name, reverse, inclusive, axis):
    x = rand((3, 5))
    c = rand((15,) if axis is None else (3, 5), 1)
    f = _finite_scan_loss(name, axis, reverse, inclusive, c)
    np.testing.assert_allclose(num(mx.grad(f)(f64(x))), fd_grad(f, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", SCANS)
@pytest.mark.parametrize("reverse,inclusive", SCAN_FLAGS)
def test_scan_jvp_vjp_identity(name, reverse, inclusive):
    x, t, c = rand((3, 5)), rand((3, 5), 1), rand((3, 5), 2)

    def f(x):
        return getattr(mx, name)(x, axis=1, reverse=reverse, inclusive=inclusive)
    out, (j,) = mx.jvp(f, [f64(x)], [f64(t)])
    c = np.where(np.isfinite(num(out[0])), c, 0.0)
    _, (v,) = mx.vjp(f, [f64(x)], [f64(c)])
    assert np.all(np.isfinite(num(j))) and np.all(np.isfinite(num(v)))
    assert np.sum(num(j) * c) == pytest.approx(np.sum(t * num(v)), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("reverse,inclusive", SCAN_FLAGS)
def test_cumprod_grad_with_zeros(reverse, inclusive):
    x = np.array([2.0, 0.0, 3.0, 0.0, 4.0, 0.5])
    w = np.arange(1.0, 7.0)

    def f(x):
        return mx.sum(mx.cumprod(x, reverse=reverse, inclusive=inclusive) * f64(w))
    g = num(mx.grad(f)(f64(x)))
    # exact: the loss is multilinear, so finite differences are exact up to rounding
    np.testing.assert_allclose(g, fd_grad(f, x), atol=1e-8)
    _, (j,) = mx.jvp(lambda x: mx.cumprod(x, reverse=reverse, inclusive=inclusive),
                     [f64(x)], [f64(np.ones(6))])
    np.testing.assert_allclose(np.sum(num(j) * w), np.sum(g), atol=1e-8)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("reverse,inclusive", SCAN_FLAGS)
def test_cummax_ties_go_to_the_latest_source_like_mlx(name, reverse, inclusive):
    mlx = pytest.importorskip("mlx.core")
    x = [1.0, 3.0, 2.0, 3.0, 5.0, 5.0, 1.0]
    w = np.arange(1.0, 8.0)

    def loss(m):
        return lambda x: m.sum(getattr(m, name)(x, reverse=reverse, inclusive=inclusive)
                               * m.array(w.astype(np.float32)))
    want = np.array(mlx.grad(loss(mlx))(mlx.array(x)))
    np.testing.assert_array_equal(num(mx.grad(loss(mx))(mx.array(x))), want)


# -- agreement with MLX --------------------------------------------------------------------------
MLX_FNS = {
    "sum": lambda m, x: m.sum(x, axis=1),
    "prod": lambda m, x: m.prod(x, axis=(0, 2)),
    "max": lambda m, x: m.max(x, axis=-1, keepdims=True),
    "min": lambda m, x: m.min(x),
    "mean": lambda m, x: m.mean(x, axis=0),
    "var": lambda m, x: m.var(x, axis=(1, 2), ddof=1),
    "logsumexp": lambda m, x: m.logsumexp(x, axis=2),
    "softmax": lambda m, x: m.softmax(x, axis=1),
    "softmax_all": lambda m, x: m.softmax(x, axis=None),
    "cumsum_rev_excl": lambda m, x: m.cumsum(x, axis=1, reverse=True, inclusive=False),
    "cumprod": lambda m, x: m.cumprod(x, axis=2),
    "cumprod_excl": lambda m, x: m.cumprod(x, axis=2, inclusive=False),
    "cummax": lambda m, x: m.cummax(x, axis=0),
    "cummin_rev": lambda m, x: m.cummin(x, axis=1, reverse=True),
    "logcumsumexp": lambda m, x: m.logcumsumexp(x, axis=1),
    "logcumsumexp_rev": lambda m, x: m.logcumsumexp(x, axis=2, reverse=True),
    "sort": lambda m, x: m.sort(x, axis=1),
    "sort_flat": lambda m, x: m.sort(x, axis=None),
    "topk": lambda m, x: m.sort(m.topk(x, 2, axis=-1), axis=-1),
    "median": lambda m, x: m.median(x, axis=1),
}


@pytest.mark.parametrize("name", sorted(MLX_FNS))
def test_grad_matches_mlx(name):
    mlx = pytest.importorskip("mlx.core")
    fn = MLX_FNS[name]
    x = (rand((3, 4, 5)) + (1.5 if "prod" in name else 0)).astype(np.float32)
    if "prod" in name:
        x[1, 2, 3] = 0.0
    c = rand(np.asarray(fn(mlx, mlx.array(x))).shape, 1).astype(np.float32)

    def loss(m):
        return lambda x: m.sum(fn(m, x) * m.array(c))
    want = np.array(mlx.grad(loss(mlx))(mlx.array(x)))
    got = num(mx.grad(loss(mx))(mx.array(x)))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


# -- vmap ----------------------------------------------------------------------------------------
def _vmap_vs_loop(fn, x, in_axis):
    got = num(mx.vmap(fn, in_axes=in_axis)(mx.array(x)))
    xs = np.moveaxis(x, in_axis, 0)
    want = np.stack([num(fn(mx.array(xs[b]))) for b in range(xs.shape[0])])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


VMAP_FNS = {
    "sum_all_keep": lambda x: mx.sum(x, axis=None, keepdims=True),
    "sum_all": lambda x: mx.sum(x),
    "prod_keep": lambda x: mx.prod(x, axis=(0, 2), keepdims=True),
    "max_keep": lambda x: mx.max(x, axis=1, keepdims=True),
    "min_all_keep": lambda x: mx.min(x, axis=None, keepdims=True),
    "any": lambda x: mx.any(x > 0.5, axis=0),
    "argmax_all_keep": lambda x: mx.argmax(x, keepdims=True),
    "argmin_ax": lambda x: mx.argmin(x, axis=2),
    "logsumexp_all_keep": lambda x: mx.logsumexp(x, keepdims=True),
    "softmax_tuple": lambda x: mx.softmax(x, axis=(0, 2)),
    "cummax_rev_excl": lambda x: mx.cummax(x, axis=1, reverse=True, inclusive=False),
    "cumprod_excl": lambda x: mx.cumprod(x, axis=0, inclusive=False),
    "logcumsumexp_flat": lambda x: mx.logcumsumexp(x),
    "sort": lambda x: mx.sort(x, axis=0),
    "argsort_flat": lambda x: mx.argsort(x, axis=None),
    "partition": lambda x: mx.sort(mx.partition(x, 1, axis=1), axis=1),
    "argpartition": lambda x: mx.argpartition(x, 2, axis=-1)[..., 2],
    "topk": lambda x: mx.sort(mx.topk(x, 2, axis=0), axis=0),
    "median_keep": lambda x: mx.median(x, axis=(1, 2), keepdims=True),
}


@pytest.mark.parametrize("name", sorted(VMAP_FNS))
@pytest.mark.parametrize("in_axis", [0, 1, 3])
def test_vmap_reductions(name, in_axis):
    x = rand((2, 3, 4, 5)).astype(np.float32)
    _vmap_vs_loop(VMAP_FNS[name], np.moveaxis(x, 0, in_axis), in_axis)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "logsumexp", "softmax", "cumprod",
                                  "cummax", "logcumsumexp", "sort"])
def test_vmap_of_grad(name):
    fns = {"sum": lambda x: mx.sum(x * x), "prod": lambda x: mx.prod(x),
           "max": lambda x: mx.max(x), "logsumexp": lambda x: mx.logsumexp(x),
           "softmax": lambda x: mx.sum(mx.softmax(x) * mx.arange(4.0)),
           "cumprod": lambda x: mx.sum(mx.cumprod(x, inclusive=False)),
           "cummax": lambda x: mx.sum(mx.cummax(x, reverse=True) * mx.arange(4.0)),
           "logcumsumexp": lambda x: mx.sum(mx.logcumsumexp(x) * mx.arange(4.0)),
           "sort": lambda x: mx.sum(mx.sort(x) * mx.arange(4.0))}
    g = mx.grad(fns[name])
    x = rand((4, 3)).astype(np.float32)
    got = num(mx.vmap(g, in_axes=1)(mx.array(x)))
    want = np.stack([num(g(mx.array(x[:, b]))) for b in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_grad_of_vmap_of_softmax():
    x = rand((3, 4))
    c = rand((3, 4), 1)

    def f(x):
        return mx.sum(mx.vmap(lambda r: mx.softmax(r), in_axes=1, out_axes=1)(x) * f64(c))
    np.testing.assert_allclose(num(mx.grad(f)(f64(x))), fd_grad(f, x), rtol=1e-5, atol=1e-7)


def test_vmap_with_an_unbatched_creation_op_inside():
    x = rand((3, 4)).astype(np.float32)
    got = mx.vmap(lambda r: mx.cumsum(r * mx.arange(4.0) + mx.eye(4)[1]))(mx.array(x))
    want = np.cumsum(x * np.arange(4.0) + np.eye(4)[1], axis=1)
    np.testing.assert_allclose(num(got), want, rtol=1e-6)


@pytest.mark.parametrize("prim", [Arange(0, 5, 1, D.int32), Linspace(0.0, 1.0, 4, True, D.float32),
                                  Eye(2, 3, 0, D.float32), Tri(3, 3, 0, D.float32)])
def test_creation_primitives_are_unbatched_and_not_differentiable(prim):
    assert not prim.differentiable
    (out,), (ax,) = prim.vmap([], [])
    assert ax is None
    np.testing.assert_array_equal(np.asarray(out), prim.eval_cpu()[0])


def test_non_differentiable_reductions_give_zero_gradients():
    x = mx.array([[1.0, 3.0], [2.0, 0.0]])
    for f in (lambda x: mx.sum(mx.argmax(x, axis=1).astype(mx.float32) * x),
              lambda x: mx.sum(mx.argsort(x, axis=0).astype(mx.float32) * x),
              lambda x: mx.sum(mx.argpartition(x, 0, axis=1).astype(mx.float32) * x)):
        g = mx.grad(f)(x)
        # only the explicit `* x` contributes: the index arrays are constants
        assert g.shape == x.shape
    g = mx.grad(lambda x: mx.sum(mx.all(x > 0, axis=0).astype(mx.float32)))(x)
    np.testing.assert_array_equal(num(g), 0)
