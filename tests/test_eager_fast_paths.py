"""The eager hot paths of decode-style programs give what the general paths give.

- basic indices (ints, slices, new axes, one ellipsis) skip `_parse` (`_basic_index`);
- one integer index array (`table[tokens]`) builds the Gather and Reshape directly;
- a product of a batch by a matrix folds the batch into rows of one 2-D product, as MLX's
  matmul and addmm do (one RowsMatmul node outside transformations);
- the transpose of an evaluated array is a NumPy view made at once (no node);
- a Gather of table rows (an embedding) skips the general index arithmetic.
"""
import numpy as np
import pytest

import braze.core as mx
from braze._src.ops.indexing import _basic_index
from braze._src.prims.linalg import AddMM, Matmul, RowsAddMM, RowsMatmul
from braze._src.prims.shape import Slice, Transpose, Unflatten

BASIC = [
    0, -1, 3, slice(None), slice(1, None), slice(None, None, -1), slice(-3, -1),
    slice(10, -10, -2), slice(-100, 100), slice(5, 2), (Ellipsis, 0), (Ellipsis, slice(1, 3)),
    (1, Ellipsis, -1), (slice(None), 2, Ellipsis), (0, 1, 2), (-1, slice(None, None, 2), 0),
    (), Ellipsis, (Ellipsis,), (slice(None), slice(None), slice(None, 1)),
    None, (None, 0), (slice(None), None), (Ellipsis, None), (None, Ellipsis, None, -1),
    (0, None, slice(1, 3), None), (None, None, 1, 2, 3), (None, slice(None, None, -1)),
]


@pytest.mark.parametrize("idx", BASIC, ids=repr)
def test_basic_index_matches_numpy(idx):
    a = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    assert _basic_index(a.shape, idx) is not None
    got = mx.array(a)[idx]
    np.testing.assert_array_equal(np.array(got), a[idx])
    assert got.shape == a[idx].shape


@pytest.mark.parametrize("idx", BASIC, ids=repr)
def test_basic_setitem_matches_numpy_and_slices_only_what_it_must(idx):
    a = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    *_, sliced, out, whole = _basic_index(a.shape, idx)
    assert whole == (np.shares_memory(a[idx], a) and a[idx].size == a.size and
                     np.array_equal(a[idx].reshape(-1), a.reshape(-1)))
    got = mx.array(a)[idx]
    assert (not isinstance(got._prim, Slice) and
            not (got._prim is not None and isinstance(got._inputs[0]._prim, Slice))) == whole
    want = a.copy()
    want[idx] = -1.0 - np.arange(a[idx].size, dtype=np.float32).reshape(a[idx].shape)
    m = mx.array(a)
    m[idx] = mx.array(want[idx])
    np.testing.assert_array_equal(np.array(m), want)


@pytest.mark.parametrize("idx", [np.int32(1), (True,), (mx.array([1]),), [0, 1],
                                 (0, 0, 0, 0), (Ellipsis, Ellipsis), 7, slice(0, 2**40)],
                         ids=repr)
def test_other_indices_take_the_general_path(idx):
    assert _basic_index((4, 5, 6), idx) is None


def test_basic_index_errors_are_the_general_paths():
    a = mx.zeros((4, 5))
    with pytest.raises(IndexError, match="out of bounds"):
        a[4]
    with pytest.raises(ValueError, match="step cannot be zero"):
        a[::0]
    with pytest.raises(IndexError, match="Too many indices"):
        a[0, 0, 0]
    with pytest.raises(IndexError, match="Too many indices"):
        a[None, 0, 0, 0]


def test_batch_by_matrix_is_one_2d_product():
    """Eager: one RowsMatmul node; in a trace: Flatten + Matmul + Unflatten; the same bits."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 8)).astype(np.float32)
    b = rng.standard_normal((8, 5)).astype(np.float32)
    y = mx.array(a) @ mx.array(b)
    assert isinstance(y._prim, RowsMatmul) and y._inputs[0].shape == (2, 3, 8)
    traced = mx.compile(lambda p, q: p @ q)
    tape_y = traced(mx.array(a), mx.array(b))
    np.testing.assert_array_equal(np.array(y), np.array(tape_y))
    np.testing.assert_allclose(np.array(y), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    seen = []
    mx.grad(lambda p: (_record(p @ mx.array(b), seen) ** 2).sum())(mx.array(a))
    assert isinstance(seen[0]._prim, Unflatten)
    mm = seen[0]._inputs[0]
    assert isinstance(mm._prim, Matmul) and mm._inputs[0].shape == (6, 8)


def _record(x, seen):
    seen.append(x)
    return x


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 0), (0, 5)), ((0, 3, 4), (4, 5)),
                                              ((2, 0, 4), (4, 0))])
def test_empty_batch_products(a_shape, b_shape):
    a, b = mx.zeros(a_shape), mx.ones(b_shape)
    want = np.zeros(a_shape[:-1] + b_shape[1:], np.float32)
    np.testing.assert_array_equal(np.array(a @ b), want)
    c = mx.ones(b_shape[1:])
    np.testing.assert_array_equal(np.array(mx.addmm(c, a, b)), want + 1)


def test_batch_by_vector_is_squeezed_after_one_2d_product():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 8)).astype(np.float32)
    b = rng.standard_normal((8,)).astype(np.float32)
    y = mx.array(a) @ mx.array(b)
    node = y._inputs[0]
    assert isinstance(node._prim, Unflatten)
    assert isinstance(node._inputs[0]._prim, Matmul) and node._inputs[0]._inputs[0].shape == (6, 8)
    np.testing.assert_allclose(np.array(y), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def _given(m, transposed):
    """A right operand (its last two axes) as a rows primitive is given it."""
    return np.swapaxes(m, -1, -2) if transposed else m


@pytest.mark.parametrize("transposed", [False, True])
def test_rows_matmul_rules_match_the_product(transposed):
    """RowsMatmul's eval, vjp, jvp and vmap (called on concrete arrays) against float64 NumPy;
    `tb` (a Linear's weight, given transposed) takes and gives b's gradients transposed."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    g, ta, tb = rng.standard_normal((2, 3, 5)), rng.standard_normal(a.shape), \
        rng.standard_normal(b.shape)
    A, B, G, TA, TB = (mx.array(v.astype(np.float32)) for v in
                       (a, _given(b, transposed), g, ta, _given(tb, transposed)))
    prim = RowsMatmul(tb=transposed)
    (y,) = prim.eval_cpu(np.array(A), np.array(B))
    np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-5)
    da, db = prim.vjp([A, B], [G], [0, 1], None)
    np.testing.assert_allclose(np.array(da), g @ b.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(db), _given(np.einsum("bti,btj->ij", a, g), transposed),
                               rtol=1e-4, atol=1e-4)
    (t,) = prim.jvp([A, B], [TA, TB], [0, 1])
    np.testing.assert_allclose(np.array(t), ta @ b + a @ tb, rtol=1e-4, atol=1e-4)
    vb = rng.standard_normal((3, 4, 5))  # a batch of 3 matrices on axis 0, then on axis 2
    VB = mx.array(_given(vb, transposed).astype(np.float32))
    for axes, ins, want in [
            ((1, None), (mx.moveaxis(A, 0, 1), B), a @ b),
            ((None, 0), (A, VB), np.stack([a @ m for m in vb])),
            ((0, 2), (mx.array(np.stack([a] * 3).astype(np.float32)), mx.moveaxis(VB, 0, 2)),
             np.stack([a @ m for m in vb]))]:
        (out,), (ax,) = prim.vmap(list(ins), list(axes))
        assert ax == 0
        np.testing.assert_allclose(np.array(out), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("c_shape,alpha,beta", [((5,), 0.5, 2.0), ((1,), 1.0, 1.0),
                                                ((), 2.0, 0.0)])
def test_rows_addmm_rules_match_the_product(c_shape, alpha, beta, transposed):
    """RowsAddMM's eval, vjp, jvp and vmap (on concrete arrays) against float64 NumPy; a
    beta of 0 ignores c, NaNs included, as AddMM and BLAS do; `tb` as RowsMatmul's."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    c = rng.standard_normal(c_shape) if beta else np.full(c_shape, np.nan)
    g = rng.standard_normal((2, 3, 5))
    f32 = lambda v: mx.array(np.asarray(v, np.float32))  # noqa: E731
    C, A, B, G = f32(c), f32(a), f32(_given(b, transposed)), f32(g)
    prim = RowsAddMM(alpha, beta, tb=transposed)
    ref = alpha * (a @ b) + (beta * c if beta else 0.0)
    np.testing.assert_allclose(np.array(mx.addmm(C, A, f32(b), alpha=alpha, beta=beta)), ref,
                               rtol=1e-5, atol=1e-5)
    with np.errstate(invalid="ignore"):
        (y,) = prim.eval_cpu(np.array(C), np.array(A), np.array(B))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    dc, da, db = prim.vjp([C, A, B], [G], [0, 1, 2], None)
    want_dc = beta * g.sum(axis=(0, 1))
    want_dc = want_dc.reshape(c_shape) if c_shape == (5,) else want_dc.sum().reshape(c_shape)
    for got, want in [(dc, want_dc), (da, alpha * g @ b.T),
                      (db, _given(alpha * np.einsum("bti,btj->ij", a, g), transposed))]:
        np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)
    tc, ta, tb = (rng.standard_normal(x.shape) for x in (np.zeros(c_shape), a, b))
    (t,) = prim.jvp([C, A, B], [f32(tc), f32(ta), f32(_given(tb, transposed))], [0, 1, 2])
    np.testing.assert_allclose(np.array(t), beta * tc + alpha * (ta @ b + a @ tb), rtol=1e-4,
                               atol=1e-4)
    vc = rng.standard_normal((3,) + c_shape) if beta else np.full((3,) + c_shape, np.nan)
    vb = rng.standard_normal((3, 4, 5))
    for axes, ins, want in [
            ((0, None, None), (f32(vc), A, B),
             np.stack([alpha * (a @ b) + (beta * v if beta else 0.0) for v in vc])),
            ((None, None, 0), (C, A, f32(_given(vb, transposed))),
             np.stack([alpha * (a @ m) + (beta * c if beta else 0.0) for m in vb])),
            ((0, 1, None), (f32(vc), mx.moveaxis(f32(np.stack([a] * 3)), 0, 1), B),
             np.stack([alpha * (a @ b) + (beta * v if beta else 0.0) for v in vc]))]:
        (out,), (ax,) = prim.vmap(list(ins), list(axes))
        assert ax == 0
        np.testing.assert_allclose(np.array(out), want, rtol=1e-4, atol=1e-4)


def test_transpose_of_an_evaluated_array_is_a_view_made_at_once():
    w = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    t = w.T
    assert t._prim is None and np.shares_memory(np.asarray(t), np.asarray(w))
    np.testing.assert_array_equal(np.array(t), np.arange(12).reshape(3, 4).T)
    w[0, 0] = 100.0  # an update of w never reaches the view taken before it
    mx.eval(w)
    assert float(t[0, 0]) == 0.0 and float(w[0, 0]) == 100.0
    lazy = (w + 1).transpose(1, 0)
    assert isinstance(lazy._prim, Transpose)
    g = mx.grad(lambda v: (v.T * mx.arange(3.0)).sum())(w)  # a tracer's transpose: a node
    np.testing.assert_array_equal(np.array(g), np.broadcast_to(np.arange(3.0)[:, None], (3, 4)))


def test_batch_addmm_is_one_2d_product_with_gradients():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    c = rng.standard_normal((5,))
    y = mx.addmm(mx.array(c), mx.array(a), mx.array(b), alpha=0.5, beta=2.0)
    assert isinstance(y._prim, RowsAddMM)  # eager: one node
    traced = mx.compile(lambda *v: mx.addmm(*v, alpha=0.5, beta=2.0))
    np.testing.assert_array_equal(np.array(y), np.array(traced(mx.array(c), mx.array(a),
                                                               mx.array(b))))
    np.testing.assert_allclose(np.array(y), 0.5 * (a @ b) + 2.0 * c, rtol=1e-5, atol=1e-5)
    seen = []
    mx.grad(lambda v: _record(mx.addmm(mx.array(c), v, mx.array(b)), seen).sum())(mx.array(a))
    assert isinstance(seen[0]._prim, Unflatten) and isinstance(seen[0]._inputs[0]._prim, AddMM)

    def loss(c, a, b):
        return (mx.addmm(c, a, b, alpha=0.5, beta=2.0) ** 2).sum()

    args = [mx.array(v.astype(np.float32)) for v in (c, a, b)]
    grads = mx.grad(loss, argnums=(0, 1, 2))(*args)
    g = 2 * (0.5 * (a @ b) + 2.0 * c)  # d loss / d y
    want = [2.0 * g.sum(axis=(0, 1)), 0.5 * g @ b.T, 0.5 * np.einsum("bti,btj->ij", a, g)]
    for got, w in zip(grads, want):
        np.testing.assert_allclose(np.array(got), w, rtol=1e-4, atol=1e-4)


def test_batch_addmm_rejects_a_bias_of_the_wrong_size():
    with pytest.raises(ValueError, match=r"\[addmm\] Input c with shape \(3,\)"):
        mx.addmm(mx.zeros((3,)), mx.zeros((2, 3, 4)), mx.zeros((4, 5)))


def test_shapeless_trace_keeps_the_broadcast_product():
    f = mx.compile(lambda a, b: a @ b, shapeless=True)
    b = mx.ones((4, 2))
    for n in (3, 5):
        a = mx.ones((n, 2, 4))
        np.testing.assert_array_equal(np.array(f(a, b)), np.full((n, 2, 2), 4.0))


@pytest.mark.parametrize("idx", [[0, 3, 9], [-1, -10, 2], [[1, 2], [3, 4]]])
def test_table_rows_match_numpy(idx):
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    got = mx.array(table)[mx.array(np.array(idx, np.int32))]
    np.testing.assert_array_equal(np.array(got), table[np.array(idx)])


def test_table_rows_of_unsigned_indices():
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    got = mx.take(mx.array(table), mx.array(np.array([9, 0], np.uint32)), axis=0)
    np.testing.assert_array_equal(np.array(got), table[[9, 0]])


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint8])
def test_one_index_array_is_a_gather_and_a_reshape(dtype):
    """`table[tokens]` (an embedding): the nodes the general path builds, MLX's values, and
    its gradient (rows used twice add up)."""
    import mlx.core as mlx

    table = np.arange(60, dtype=np.float32).reshape(10, 2, 3)
    idx = np.array([[9, 0], [3, 9]], dtype)
    got = mx.array(table)[mx.array(idx)]
    assert type(got._prim).__name__ == "Reshape"
    assert type(got._inputs[0]._prim).__name__ == "Gather"
    np.testing.assert_array_equal(np.array(got), np.array(mlx.array(table)[mlx.array(idx)]))
    g = mx.grad(lambda t: (t[mx.array(idx)] * 2).sum())(mx.array(table))
    want = np.zeros_like(table)
    np.add.at(want, idx.astype(np.int64), 2.0)
    np.testing.assert_array_equal(np.array(g), want)


def test_one_index_array_errors_are_the_general_paths():
    with pytest.raises(IndexError, match="out of bounds"):
        mx.zeros((4, 2))[mx.array([4])]
    with pytest.raises(IndexError, match="Boolean"):
        mx.zeros((4, 2))[mx.array([True])]
    with pytest.raises(IndexError, match="integral"):
        mx.zeros((4, 2))[mx.array([1.0])]
    with pytest.raises(IndexError):
        mx.array(1.0)[mx.array([0])]


@pytest.mark.parametrize("v", [0, 5, -2**31, 2**31 - 1, 2**31, -2**31 - 1, 1.5, -0.0, 1e-46,
                               3.4028234663852886e38, 3.4028235677973366e38, 1e300, -1e300,
                               float("nan"), float("inf"), True])
def test_python_scalars_convert_as_mlx_does(v):
    """The scalar shortcut (ints in int32, finite floats in float32) agrees with MLX, and a
    float that overflows float32 becomes inf without a NumPy warning."""
    import warnings

    import mlx.core as mlx

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = mx.array(v)
    want = mlx.array(v)
    assert got.dtype.name == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(np.array(got), np.array(want))
    assert np.signbit(np.array(got)) == np.signbit(np.array(want))


def test_shapeless_replay_reuses_its_shapes_only_for_the_same_input_shapes():
    """A shapeless compiled function keeps the shapes it inferred per input shapes: a call
    with other shapes infers anew, and one the trace cannot take still raises."""
    f = mx.compile(lambda a, b: mx.reshape(a * b, (-1, 2)).sum(axis=0), shapeless=True)
    for n in (4, 6, 4, 8, 6):
        a = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
        got = f(mx.array(a), mx.array(np.float32(3.0)))
        assert got.shape == (2,)
        np.testing.assert_array_equal(np.array(got), (a * 3).reshape(-1, 2).sum(axis=0))
    g = mx.compile(lambda a, b: a + b, shapeless=True)
    assert g(mx.ones((2, 3)), mx.ones((3,))).shape == (2, 3)
    assert g(mx.ones((2, 3)), mx.ones((3,))).shape == (2, 3)
    with pytest.raises(ValueError):
        mx.eval(g(mx.ones((2, 3)), mx.ones((4,))))
    assert g(mx.ones((5, 4)), mx.ones((4,))).shape == (5, 4)


def test_a_transpose_view_keeps_its_values_through_donations():
    """The eager transpose holds the buffer: a compiled call, an eager op or an update that
    could donate the array's buffer copies instead; without the view the buffer is donated."""
    f = mx.compile(lambda a: a * 2 + 1)

    def fresh():
        w = mx.array(np.arange(10000, dtype=np.float32).reshape(100, 100))
        mx.eval(w)
        return w

    for step in (lambda w: f(w), lambda w: w * 3):
        w = fresh()
        t = w.T
        y = step(w)
        del w
        mx.eval(y)
        assert float(t[1, 0]) == 1.0
    w = fresh()
    t = w.T
    w[:, :] = 0
    mx.eval(w)
    assert float(t[1, 0]) == 1.0 and float(w[0, 1]) == 0.0
    w = fresh()
    ptr = np.asarray(w).__array_interface__["data"][0]
    y = f(w)
    del w
    mx.eval(y)
    assert np.asarray(y).__array_interface__["data"][0] == ptr


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("shape", [(1, 1, 64, 172), (1, 4, 64, 64), (2, 3, 17, 5), (1, 1, 0, 3)])
def test_small_products_give_the_bits_of_numpys_matmul(dtype, shape):
    # a Linear's product (batch by a transposed weight) and a plain 2-D one: np.dot's BLAS
    # call for small products, the bits of np.matmul's
    B, L, k, n = shape
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((B, L, k)) + (1j * rng.standard_normal((B, L, k))
                                           if dtype is np.complex64 else 0)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)
    dt = getattr(mx, np.dtype(dtype).name)
    X, W = mx.array(x, dtype=dt), mx.array(w, dtype=dt)
    got = X @ W.T
    assert np.array(got).dtype == x.dtype
    # the batch folded into rows of one product, as MLX batches it
    np.testing.assert_array_equal(np.array(got), np.matmul(x.reshape(B * L, k), w.T).reshape(
        B, L, n))
    np.testing.assert_array_equal(np.array(X[0] @ W.T), np.matmul(x[0], w.T))


def test_eval_of_flat_and_nested_sequences():
    a, b = mx.array([1.0, 2.0]), mx.array([3.0])
    for form in (lambda *xs: mx.eval(list(xs)), lambda *xs: mx.eval(tuple(xs)),
                 lambda *xs: mx.eval(*xs), lambda *xs: mx.eval([xs[0], [xs[1], "skip", 3]]),
                 lambda *xs: mx.eval({"k": xs[0], "v": (xs[1], None)})):
        x, y = a * 2, mx.exp(b)
        form(x, y)
        assert x._data is not None and y._data is not None
        np.testing.assert_array_equal(x._data, [2.0, 4.0])
    mx.eval([])
    mx.eval(())
    mx.eval()
    done = a + 1
    mx.eval(done)
    mx.eval([done, done, a])  # evaluated and repeated arrays: nothing to do twice
    np.testing.assert_array_equal(np.array(done), [2.0, 3.0])


@pytest.mark.parametrize("bias", [False, True])
def test_linear_reads_its_weight_where_it_lies(bias):
    # an eager Linear on a batch: one node on the weight itself (no transposed array), the
    # bits of `x @ w.T` / `addmm(b, x, w.T)`; 2-D inputs and traces take the ops' graph
    import braze.nn as nn
    mx.random.seed(3)
    layer = nn.Linear(4, 5, bias=bias)
    x = mx.random.normal((2, 3, 4))
    mx.eval(x, layer.parameters())
    y = layer(x)
    prim = y._prim
    assert isinstance(prim, RowsAddMM if bias else RowsMatmul) and prim.tb
    assert y._inputs[-1] is layer.weight and y.shape == (2, 3, 5)
    w = layer.weight
    want = mx.addmm(layer.bias, x, w.T) if bias else x @ w.T
    assert not want._prim.tb
    np.testing.assert_array_equal(np.array(y), np.array(want))
    np.testing.assert_array_equal(np.array(layer(x[0])), np.array(want[0]))  # 2-D: matmul

    def loss(params, v):
        layer.update(params)
        return (layer(v) ** 2).sum()

    g = mx.grad(loss)(layer.trainable_parameters(), x)
    xs, ws = np.array(x, np.float64), np.array(w, np.float64)
    out = xs @ ws.T + (np.array(layer.bias, np.float64) if bias else 0.0)
    np.testing.assert_allclose(np.array(g["weight"]), np.einsum("bti,btj->ij", 2 * out, xs),
                               rtol=1e-4, atol=1e-4)


def test_moving_unit_axes_is_a_reshape_of_the_reshape_below():
    """Eager: a transpose that keeps the axes longer than 1 in order (a decode step's heads,
    (1, 1, H, D) -> (1, H, 1, D)) is a reshape, and a reshape of an unevaluated reshape reads
    its input: one node. Values are NumPy's; a reshape back to the input's shape is still an
    array of its own; in a transform the graph is the ops' own."""
    x = mx.array(np.arange(24, dtype=np.float32).reshape(1, 24))
    y = x * 2  # unevaluated
    q = y.reshape(1, 1, 4, 6).transpose(0, 2, 1, 3)
    assert q._prim.name == "Reshape" and q._inputs[0] is y and q.shape == (1, 4, 1, 6)
    want = (np.arange(24, dtype=np.float32).reshape(1, 1, 4, 6) * 2).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(np.asarray(q), want)
    o = (x * 3).reshape(1, 4, 1, 6).transpose(0, 2, 1, 3)
    assert o._prim.name == "Reshape" and o.shape == (1, 1, 4, 6)
    assert (x * 3).transpose(1, 0)._prim.name == "Reshape"  # (1, 24) -> (24, 1)
    t = (x * 3).reshape(4, 6).transpose(1, 0)
    assert t._prim.name == "Transpose"  # the order of long axes changes
    np.testing.assert_array_equal(np.asarray(t), (np.arange(24) * 3).reshape(4, 6).T)
    z = x * 4
    back = z.reshape(4, 6).reshape(1, 24)
    assert back is not z
    back[0, 0] = -1.0
    assert np.asarray(z)[0, 0] == 0.0 and np.asarray(back)[0, 0] == -1.0
    g = mx.grad(lambda a: mx.sum(a.reshape(1, 1, 4, 6).transpose(0, 2, 1, 3) ** 2))(x)
    np.testing.assert_array_equal(np.asarray(g), 2 * np.asarray(x))



def test_kept_slices_leave_equality_hash_and_pickling_alone():
    """Slice and SliceUpdate keep their Python slices beside their fields once evaluated: the
    primitive still equals, hashes and pickles as its fields say, and reads the same."""
    import pickle

    from braze._src.prims.shape import SliceUpdate
    x = np.arange(12.0).reshape(3, 4)
    a, b = Slice((2, 0), (-4, 4), (-1, 2)), Slice((2, 0), (-4, 4), (-1, 2))
    np.testing.assert_array_equal(a.eval_cpu(x)[0], x[2::-1, 0:4:2])
    assert a == b and hash(a) == hash(b)
    c = pickle.loads(pickle.dumps(a))
    assert c == a and hash(c) == hash(a)
    np.testing.assert_array_equal(c.eval_cpu(x)[0], x[2::-1, 0:4:2])
    u = SliceUpdate((0, 1), (2, 3), (1, 1))
    for _ in range(2):
        (y,) = u.eval_cpu(x, np.full((2, 2), -1.0))
        want = x.copy()
        want[0:2, 1:3] = -1.0
        np.testing.assert_array_equal(y, want)
