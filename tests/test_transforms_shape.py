"""Transforms of the shape and indexing primitives, for what the op table does not reach:
advanced getitem under grad, setitem and `.at[]` gradients for both the array and the values,
vmap with batched indices, nested vmaps, multi-output split, dynamic slices with batched
offsets, masked assignment, and the scatter reductions' rules (MLX's semantics for max/min,
zero-safe products for prod)."""
import numpy as np
import pytest

import braze.core as mx

RNG = np.random.default_rng(0)


def f64(x):
    return mx.array(np.asarray(x, dtype=np.float64), dtype=mx.float64)


def randn(*shape):
    return RNG.standard_normal(shape)


def numeric_grad(f, xs, k, eps=1e-6):
    """Central differences of scalar f(*xs) (NumPy float64 inputs) w.r.t. xs[k]."""
    x = xs[k]
    g = np.zeros(x.shape)
    for j in range(x.size):
        xp, xm = x.copy().reshape(-1), x.copy().reshape(-1)
        xp[j] += eps
        xm[j] -= eps
        args_p = [f64(a) for a in xs]
        args_m = [f64(a) for a in xs]
        args_p[k] = f64(xp.reshape(x.shape))
        args_m[k] = f64(xm.reshape(x.shape))
        g.reshape(-1)[j] = (f(*args_p).item() - f(*args_m).item()) / (2 * eps)
    return g


def check_grads(f, *xs):
    """mx.grad of scalar f against central differences, for every argument."""
    grads = mx.grad(f, argnums=tuple(range(len(xs))))(*[f64(x) for x in xs])
    if len(xs) == 1:  # as in MLX, a one-element argnums gives the gradient itself
        grads = (grads,)
    for k, x in enumerate(xs):
        g = np.asarray(grads[k])
        assert g.shape == np.shape(x)
        np.testing.assert_allclose(g, numeric_grad(f, list(xs), k), rtol=1e-6, atol=1e-6)


def fresh(a):
    """A new array node holding a's value, to assign into (MLX code writes `mx.array(a)`;
    see test_setitem_on_mx_array_copy_reaches_the_original for that spelling)."""
    return mx.expand_dims(a, 0)[0]


def weighted(out, seed=1):
    """A scalar that weighs every element of `out` differently (so wrong gradients show)."""
    w = np.random.default_rng(seed).standard_normal(out.shape)
    return mx.sum(out * f64(w))


def check_jvp(f, xs, ts):
    """jvp of f against central differences along the tangent direction."""
    eps = 1e-6
    _, jv = mx.jvp(f, [f64(x) for x in xs], [f64(t) for t in ts])
    plus = f(*[f64(x + eps * t) for x, t in zip(xs, ts)])
    minus = f(*[f64(x - eps * t) for x, t in zip(xs, ts)])
    fd = (np.asarray(plus) - np.asarray(minus)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(jv[0]), fd, rtol=1e-6, atol=1e-6)


def loop_vmap(fn, args, in_axes):
    """What vmap must return: fn on each example (axis 0 of the result), stacked."""
    n = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = []
    for b in range(n):
        ex = [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]
        outs.append(np.asarray(fn(*[mx.array(e) for e in ex])))
    return np.stack(outs)


def check_vmap(fn, args, in_axes):
    got = mx.vmap(fn, in_axes=in_axes)(*[mx.array(a) for a in args])
    want = loop_vmap(fn, args, in_axes)
    np.testing.assert_array_equal(np.asarray(got), want)


# -- getitem under grad -----------------------------------------------------------------------
def test_grad_getitem_int_array_with_duplicates():
    x = randn(4, 3)
    idx = np.array([[0, 2], [2, 2]])
    check_grads(lambda a: weighted(a[mx.array(idx)]), x)
    g = mx.grad(lambda a: mx.sum(a[mx.array(idx)]))(f64(x))
    want = np.zeros_like(x)
    np.add.at(want, idx, 1.0)
    np.testing.assert_array_equal(np.asarray(g), want)


def test_grad_getitem_two_int_arrays_and_slice():
    x = randn(3, 4, 5)
    i, j = mx.array([0, 2, -1]), mx.array([1, 1, 3])
    check_grads(lambda a: weighted(a[i, :, j]), x)  # arrays apart: the index dims go first
    check_grads(lambda a: weighted(a[:, i, j]), x)


@pytest.mark.parametrize("index", [
    (slice(None, None, -1),),
    (slice(None, None, -2), None, Ellipsis, slice(1, 3)),
    (1, slice(None, None, -1), None, slice(1, 3)),
    (Ellipsis, slice(4, 0, -3)),
    (None, Ellipsis, None),
], ids=["rev", "neg-step-none-ellipsis", "int-rev-none", "ellipsis-neg3", "nones"])
def test_grad_basic_getitem(index):
    x = randn(3, 4, 5)
    check_grads(lambda a: weighted(a[index]), x)
    check_jvp(lambda a: a[index], [x], [randn(3, 4, 5)])


def test_grad_getitem_mixed_advanced_and_negative_step():
    x = randn(4, 5, 3)
    idx = mx.array([3, 0, -2])
    check_grads(lambda a: weighted(a[::-1, idx, None]), x)
    check_jvp(lambda a: a[::-1, idx, None], [x], [randn(4, 5, 3)])


# -- setitem and .at[] -------------------------------------------------------------------------
def _set_slice(a, v):
    a = fresh(a)
    a[1:3] = v
    return a


def test_grad_setitem_slice_both_inputs():
    a, v = randn(4, 3), randn(2, 3)
    check_grads(lambda a, v: weighted(_set_slice(a, v)), a, v)
    g_a, g_v = mx.grad(lambda a, v: mx.sum(_set_slice(a, v)), argnums=(0, 1))(f64(a), f64(v))
    want_a = np.ones((4, 3))
    want_a[1:3] = 0
    np.testing.assert_array_equal(np.asarray(g_a), want_a)
    np.testing.assert_array_equal(np.asarray(g_v), np.ones((2, 3)))
    check_jvp(_set_slice, [a, v], [randn(4, 3), randn(2, 3)])


def test_grad_setitem_broadcast_value_and_strided():
    def f(a, v):
        a = fresh(a)
        a[::-2, 1] = v  # v broadcasts over the selected rows
        return weighted(a)
    check_grads(f, randn(5, 3), randn(1))


def test_grad_setitem_int_array_matches_mlx():
    # MLX: with duplicate indices every occurrence receives the cotangent of that slot
    idx = mx.array([0, 0, 2])

    def f(a, v):
        a = fresh(a)
        a[idx] = v
        return mx.sum(a * f64([1.0, 2.0, 3.0]))
    g_a, g_v = mx.grad(f, argnums=(0, 1))(f64([1.0, 2.0, 3.0]), f64([4.0, 5.0, 6.0]))
    np.testing.assert_array_equal(np.asarray(g_a), [0, 2, 0])
    np.testing.assert_array_equal(np.asarray(g_v), [1, 1, 3])


def test_grad_setitem_2d_advanced():
    i = mx.array([[2], [0]])
    j = mx.array([1, 3])

    def f(a, v):
        a = fresh(a)
        a[i, j] = v  # distinct positions: a plain permutation of the values
        return weighted(a)
    check_grads(f, randn(3, 4), randn(2, 2))


def test_grad_at_add_with_duplicates():
    idx = mx.array([0, 0, 2])
    check_grads(lambda a, v: weighted(a.at[idx].add(v)), randn(3, 2), randn(3, 2))
    check_grads(lambda a, v: weighted(a.at[idx].subtract(v)), randn(3, 2), randn(2))
    check_jvp(lambda a, v: a.at[idx].add(v), [randn(3, 2), randn(3, 2)],
              [randn(3, 2), randn(3, 2)])


def test_scatter_max_min_follow_mlx():
    a, v = f64([1.0, 2.0, 3.0]), f64([4.0, 5.0, 6.0])
    idx = mx.array([0, 0, 2])
    g = mx.grad(lambda a, v: mx.sum(a.at[idx].maximum(v)), argnums=(0, 1))(a, v)
    np.testing.assert_array_equal(np.asarray(g[0]), [0, 1, 0])
    np.testing.assert_array_equal(np.asarray(g[1]), [0, 1, 1])
    g = mx.grad(lambda a, v: mx.sum(a.at[idx].minimum(v)), argnums=(0, 1))(a, v)
    np.testing.assert_array_equal(np.asarray(g[0]), [1, 1, 1])
    np.testing.assert_array_equal(np.asarray(g[1]), [0, 0, 0])
    # away from ties the max/min scatter is differentiable and its rules agree with FD
    x, u = randn(4), randn(5)
    j = mx.array([0, 1, 1, 3, 3])
    check_grads(lambda a, v: weighted(a.at[j].maximum(v)), x, u)
    check_jvp(lambda a, v: a.at[j].minimum(v), [x, u], [randn(4), randn(5)])


def test_scatter_prod_grads_against_finite_differences():
    # duplicates (two updates of position 0), slices, an integer index, strided slices
    j = mx.array([0, 1, 1, 3, 0])
    check_grads(lambda a, v: weighted(a.at[j].multiply(v)), randn(4), randn(5))
    check_grads(lambda a, v: weighted(a.at[j].divide(v)), randn(4), randn(5) + 3.0)
    check_grads(lambda a, v: weighted(a.at[1:3].multiply(v)), randn(4), randn(2))
    check_grads(lambda a, v: weighted(a.at[::2].multiply(v)), randn(5, 2), randn(3, 2))
    check_grads(lambda a, v: weighted(a.at[2].multiply(v)), randn(4, 3), randn(3))
    # updates broadcast over the indexed positions; indices into two axes
    check_grads(lambda a, v: weighted(a.at[j].multiply(v)), randn(4, 3), randn(3))
    r, c = mx.array([0, 2, 0]), mx.array([1, 1, 1])
    check_grads(lambda a, v: weighted(a.at[r, c].multiply(v)), randn(3, 2), randn(3))
    check_jvp(lambda a, v: a.at[j].multiply(v), [randn(4), randn(5)], [randn(4), randn(5)])
    check_jvp(lambda a, v: a.at[r, c].multiply(v), [randn(3, 2), randn(3)],
              [randn(3, 2), randn(3)])


def test_scatter_prod_grads_at_zeros():
    """No update is divided by: zeros (also several at one position) give exact gradients,
    the products of the other factors."""
    a = f64([2.0, 3.0, 5.0, 7.0])
    j = mx.array([0, 0, 1, 1, 1, 2])
    v = f64([0.0, 4.0, 0.0, 0.0, 6.0, 0.0])
    w = f64([1.0, 10.0, 100.0, 1000.0])
    ga, gv = mx.grad(lambda a, v: mx.sum(a.at[j].multiply(v) * w), argnums=(0, 1))(a, v)
    np.testing.assert_array_equal(np.asarray(ga), [0.0, 0.0, 0.0, 1000.0])
    # d/dv_k = w[i] * a[i] * (product of the other updates at i)
    np.testing.assert_array_equal(np.asarray(gv), [2 * 4.0, 0.0, 0.0, 0.0, 0.0, 500.0])
    a0 = f64([0.0, 3.0])
    ga, gv = mx.grad(lambda a, v: mx.sum(a.at[mx.array([0, 0])].multiply(v)),
                     argnums=(0, 1))(a0, f64([2.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(ga), [6.0, 1.0])
    np.testing.assert_array_equal(np.asarray(gv), [0.0, 0.0])


def test_scatter_prod_grads_match_mlx():
    """MLX differentiates `.at[slice].multiply` (a SliceUpdate) and raises for array indices
    (its Scatter has no prod rule); braze differentiates both, equal where MLX has a rule."""
    mlx = pytest.importorskip("mlx.core")
    w = [1.0, 2.0, 3.0, 4.0]
    cases = [
        ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0], lambda x: x.at[1:3]),
        ([1.0, 0.0, 3.0, 4.0], [0.0, 6.0], lambda x: x.at[1:3]),
        ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0], lambda x: x.at[::2]),
    ]
    for xv, vv, at in cases:
        for op in ("multiply", "divide"):
            res = []
            for m in (mx, mlx):
                ww = m.array(w)

                def f(x, v, m=m, ww=ww):
                    return m.sum(getattr(at(x), op)(v) * ww)
                g = m.grad(f, argnums=(0, 1))(m.array(xv), m.array(vv))
                res.append([np.array(t) for t in g])
            for b, m in zip(*res):
                np.testing.assert_allclose(b, m, rtol=1e-6, err_msg=f"{xv} {vv} {op}")
    g = mx.grad(lambda x, v: mx.sum(x.at[1].multiply(v) * mx.array(w)),
                argnums=(0, 1))(mx.array(w), mx.array(5.0))
    gm = mlx.grad(lambda x, v: mlx.sum(x.at[1].multiply(v) * mlx.array(w)),
                  argnums=(0, 1))(mlx.array(w), mlx.array(5.0))
    assert [np.array(t).tolist() for t in g] == [np.array(t).tolist() for t in gm]


def test_grad_masked_setitem():
    mask = mx.array([True, False, True, True])

    def f(a, v):
        a = fresh(a)
        a[mask] = v
        return weighted(a)
    check_grads(f, randn(4), randn(3))
    check_grads(f, randn(4), randn(1))  # one value fills every masked position
    rows = mx.array([False, True, True])

    def g(a, v):
        a = fresh(a)
        a[rows] = v  # a row mask over a matrix
        return weighted(a)
    check_grads(g, randn(3, 2), randn(2, 2))


def test_grad_put_and_take_along_axis():
    idx = mx.array([[2, 0, 0], [1, 1, 2]])
    check_grads(lambda a: weighted(mx.take_along_axis(a, idx, axis=1)), randn(2, 3))
    pidx = mx.array([[0], [2]])
    check_grads(lambda a, v: weighted(mx.put_along_axis(a, pidx, v, axis=1)),
                randn(2, 3), randn(2, 1))


def test_grad_dynamic_slice_and_update():
    start = mx.array([1, 2])
    check_grads(lambda a: weighted(mx.slice(a, start, (0, 1), (2, 2))), randn(4, 5))
    check_grads(lambda a, u: weighted(mx.slice_update(a, u, start, (0, 1))),
                randn(4, 5), randn(2, 3))


def test_grad_pad_value():
    check_grads(lambda a, c: weighted(mx.pad(a, ((1, 0), (2, 1)), constant_values=c)),
                randn(2, 3), np.array(0.5))


# -- split under grad --------------------------------------------------------------------------
def test_grad_split_outputs_used_separately():
    def f(x):
        a, b, c = mx.split(x, [1, 3], axis=1)
        return weighted(a, 1) + 2 * weighted(c, 2) + weighted(b, 3)
    check_grads(f, randn(2, 5))


def test_grad_split_some_outputs_unused():
    def f(x):
        parts = mx.split(x, 3)
        return weighted(parts[1])
    x = randn(6, 2)
    check_grads(f, x)
    g = np.asarray(mx.grad(f)(f64(x)))
    assert np.all(g[:2] == 0) and np.all(g[4:] == 0)


def test_grad_unstack():
    def f(x):
        rows = mx.unstack(x, axis=1)
        return weighted(rows[0] * rows[2], 4) + weighted(rows[1], 5)
    check_grads(f, randn(3, 3))


# -- vmap ---------------------------------------------------------------------------------------
def test_vmap_getitem_batched_data_and_indices():
    x = RNG.standard_normal((3, 5, 4)).astype(np.float32)
    idx = np.array([[0, 4], [2, 2], [-1, 1]])
    check_vmap(lambda a, i: a[i], [x, idx], (0, 0))
    check_vmap(lambda a, i: a[i], [np.moveaxis(x, 0, 2), idx.T], (2, 1))
    check_vmap(lambda a, i: a[:, i], [x, idx[:, :1]], (0, 0))
    check_vmap(lambda a, i: a[i, 1:, None], [x, idx], (0, 0))


def test_vmap_getitem_batched_indices_only():
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    idx = np.array([[0, 4], [2, 2], [-1, 1]])
    check_vmap(lambda a, i: a[i], [x, idx], (None, 0))
    check_vmap(lambda a, i: a[1:, i], [x, idx[:, :1]], (None, 0))
    check_vmap(lambda a, i, j: a[i, j], [x, idx, np.array([1, 2])], (None, 0, None))


def test_vmap_getitem_batched_data_only():
    x = RNG.standard_normal((5, 3, 4)).astype(np.float32)
    idx = np.array([[0, 2], [1, 1]])
    check_vmap(lambda a: a[mx.array(idx)], [x], (1,))
    check_vmap(lambda a: a[::-1, mx.array([3, 0])], [x], (1,))
    check_vmap(lambda a: a[..., None, ::2], [x], (0,))


def test_vmap_setitem_and_at():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    v = RNG.standard_normal((3, 2)).astype(np.float32)
    idx = np.array([[0, 0], [3, 1], [2, 2]])

    def set_slice(x, u):
        x = fresh(x)
        x[1:3] = u
        return x

    def set_idx(x, i, u):
        x = fresh(x)
        x[i] = u
        return x
    check_vmap(set_slice, [a, v], (0, 0))
    check_vmap(set_slice, [a[0], v], (None, 0))
    check_vmap(set_idx, [a, idx, v], (0, 0, 0))
    check_vmap(set_idx, [a, idx, v[0]], (0, 0, None))
    check_vmap(set_idx, [a[0], idx, v], (None, 0, 0))
    check_vmap(set_idx, [a, idx[0], v], (0, None, 0))
    check_vmap(set_idx, [a[0], idx[0], v.T], (None, None, 1))
    check_vmap(lambda x, i, u: x.at[i].add(u), [a, idx, v], (0, 0, 0))
    check_vmap(lambda x, i, u: x.at[i].maximum(u), [a.T, idx, v], (1, 0, 0))


def test_vmap_masked_setitem():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    m = np.array([[True, False, True, False], [False, False, False, True],
                  [True, True, True, True]])

    def f(x, mask, v):
        x = fresh(x)
        x[mask] = v
        return x
    check_vmap(f, [a, m, np.arange(12, dtype=np.float32).reshape(3, 4)], (0, 0, 0))
    check_vmap(f, [a, m[0], np.arange(6, dtype=np.float32).reshape(3, 2)], (0, None, 0))
    check_vmap(f, [a[0], m, np.float32(7)], (None, 0, None))


def test_vmap_take_put_along_axis():
    x = RNG.standard_normal((3, 2, 4)).astype(np.float32)
    idx = RNG.integers(0, 4, (3, 2, 1))
    check_vmap(lambda a, i: mx.take_along_axis(a, i, axis=1), [x, idx], (0, 0))
    check_vmap(lambda a, i: mx.take_along_axis(a, i, axis=-1), [x[0], idx], (None, 0))
    check_vmap(lambda a, i, u: mx.put_along_axis(a, i, u, axis=1),
               [x, idx, np.ones((3, 2, 1), np.float32)], (0, 0, 0))
    check_vmap(lambda a, i: mx.take(a, i, axis=1), [x, idx[:, 0]], (0, 0))


def test_vmap_dynamic_slices_batched_starts():
    x = RNG.standard_normal((3, 5, 6)).astype(np.float32)
    starts = np.array([[0, 1], [4, 0], [2, 5]], np.int32)  # some windows get clamped
    check_vmap(lambda a, s: mx.slice(a, s, (0, 1), (2, 3)), [x, starts], (0, 0))
    check_vmap(lambda a, s: mx.slice(a, s, (0, 1), (2, 3)), [x[0], starts], (None, 0))
    check_vmap(lambda a, s: mx.slice(a, s, (1,), (2,)), [np.moveaxis(x, 0, 2), starts[:, :1].T],
               (2, 1))
    u = np.ones((3, 2, 3), np.float32)
    check_vmap(lambda a, v, s: mx.slice_update(a, v, s, (0, 1)), [x, u, starts], (0, 0, 0))
    check_vmap(lambda a, v, s: mx.slice_update(a, v, s, (0, 1)), [x[0], u[0], starts],
               (None, None, 0))
    check_vmap(lambda a, v, s: mx.slice_update(a, v, s, (0, 1)),
               [np.moveaxis(x, 0, 1), u, starts[0]], (1, 0, None))


def test_vmap_pad_batched_value():
    x = RNG.standard_normal((3, 2, 2)).astype(np.float32)
    vals = np.array([1.0, -2.0, 3.5], np.float32)
    check_vmap(lambda a, c: mx.pad(a, ((1, 0), (0, 2)), constant_values=c), [x, vals], (0, 0))
    check_vmap(lambda a, c: mx.pad(a, 1, constant_values=c), [x[0], vals], (None, 0))


def test_vmap_view_batch_axis_last():
    x = RNG.integers(0, 1000, (2, 3)).astype(np.int32)
    check_vmap(lambda a: mx.view(a, mx.int8), [x], (1,))
    check_vmap(lambda a: mx.view(a, mx.uint16), [x], (0,))


def test_nested_vmap_transpose_reshape():
    x = RNG.standard_normal((2, 4, 3, 5)).astype(np.float32)

    def f(a):  # per example (4, 5)
        return mx.reshape(mx.transpose(a), (2, 10))[:, ::-3]

    got = mx.vmap(mx.vmap(f, in_axes=1), in_axes=0)(mx.array(x))
    want = np.stack([np.stack([np.asarray(f(mx.array(x[i, :, j]))) for j in range(3)])
                     for i in range(2)])
    np.testing.assert_array_equal(np.asarray(got), want)
    got = mx.vmap(mx.vmap(lambda a: mx.flatten(mx.swapaxes(a, 0, 1)), in_axes=2),
                  in_axes=3)(mx.array(x))
    want = np.stack([np.stack([x[:, :, j, i].T.reshape(-1) for j in range(3)])
                     for i in range(5)])
    np.testing.assert_array_equal(np.asarray(got), want)


def test_nested_vmap_concat_split():
    x = RNG.standard_normal((2, 3, 6)).astype(np.float32)
    y = RNG.standard_normal((3, 2)).astype(np.float32)

    def f(a, b):
        p, q = mx.split(a, [4])
        return mx.concatenate([q, b, p])
    got = mx.vmap(mx.vmap(f, in_axes=(0, 0)), in_axes=(0, None))(mx.array(x), mx.array(y))
    want = np.stack([np.stack([np.concatenate([x[i, j, 4:], y[j], x[i, j, :4]])
                               for j in range(3)]) for i in range(2)])
    np.testing.assert_array_equal(np.asarray(got), want)


def test_vmap_of_grad_through_gather():
    x = RNG.standard_normal((3, 4))
    idx = np.array([[0, 0], [1, 3], [2, 2]])

    def loss(a, i):
        return mx.sum(a[i] * a[i])

    got = mx.vmap(mx.grad(loss), in_axes=(0, 0))(f64(x), mx.array(idx))
    want = np.zeros_like(x)
    for b in range(3):
        np.add.at(want[b], idx[b], 2 * x[b, idx[b]])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


def test_grad_of_vmap_through_scatter():
    x, v = randn(3, 4), randn(3, 2)
    idx = mx.array([[0, 0], [3, 1], [2, 2]])

    def f(a, u):
        return weighted(mx.vmap(lambda p, i, w: p.at[i].add(w * p[i]))(a, idx, u))
    check_grads(f, x, v)


# -- MLX spellings that depend on array identity under transforms ----------------------------
def test_setitem_on_mx_array_copy_reaches_the_original():
    def f(a, v):
        a = mx.array(a)
        a[1:2] = v
        return mx.sum(a * f64([1.0, 2.0, 3.0]))
    g_a, g_v = mx.grad(f, argnums=(0, 1))(f64([1.0, 1, 1]), f64([1.0]))
    np.testing.assert_array_equal(np.asarray(g_a), [1, 0, 3])
    np.testing.assert_array_equal(np.asarray(g_v), [2])


def test_setitem_on_the_traced_argument():
    def f(a, v):
        a[1:2] = v
        return mx.sum(a * f64([1.0, 2.0, 3.0]))
    g_a, g_v = mx.grad(f, argnums=(0, 1))(f64([1.0, 1, 1]), f64([1.0]))
    np.testing.assert_array_equal(np.asarray(g_a), [1, 0, 3])
    np.testing.assert_array_equal(np.asarray(g_v), [2])


# -- indices computed inside the traced function; nested grads ---------------------------------
def test_indices_from_traced_values():
    x = f64([1.0, 5.0, 3.0])
    # as in MLX, indices computed from the differentiated input need stop_gradient under vjp
    with pytest.raises(ValueError, match=r"^\[gather\] Cannot calculate VJP.*stop_gradient"):
        mx.grad(lambda a: 2 * a[mx.argmax(a)])(x)
    np.testing.assert_array_equal(
        np.asarray(mx.grad(lambda a: 2 * a[mx.stop_gradient(mx.argmax(a))])(x)), [0, 2, 0])
    # jvp: braze gives the indices a zero tangent (MLX raises here too)
    _, t = mx.jvp(lambda a: a[mx.argmax(a)], [x], [f64([1.0, 2.0, 3.0])])
    assert t[0].item() == 2.0
    xb = f64([[1.0, 5.0, 3.0], [7.0, 0.0, 1.0]])
    np.testing.assert_array_equal(np.asarray(mx.vmap(lambda a: a[mx.argmax(a)])(xb)), [5, 7])
    np.testing.assert_array_equal(
        np.asarray(mx.vmap(mx.grad(lambda a: a[mx.stop_gradient(mx.argmax(a))]))(xb)),
        [[0, 1, 0], [1, 0, 0]])


def test_grad_of_grad_through_gather_and_scatter():
    idx = mx.array([0, 2, 2, 3])

    def f(a):
        g = a[idx]
        return mx.sum(g * g * g)

    def g(a):
        return weighted(mx.grad(f)(a), 7)  # the scatter-add of the gather's vjp, differentiated
    check_grads(g, randn(4))
