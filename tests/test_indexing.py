"""Indexing: getitem (every index kind) vs NumPy, setitem semantics, .at[] accumulation, errors."""
import numpy as np
import pytest

import braze.core as mx

X = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype(np.int32)


def A(v):
    return np.array(v)


GET = [
    (0,), (-1,), (slice(None, None, -1),), (1, slice(0, 3, 2)),
    (slice(1, 0, -1), slice(None, None, -2)),
    (None, Ellipsis, None, 1), (Ellipsis, 2), (slice(None), None, 2, slice(None, None, 2), -1),
    (A([1, 0, 1]),), (0, slice(None), A([1, 0, 2])),
    (slice(None), A([0, 1]), slice(None), A([1, 2])),
    (A([0, 1]), A([1, 2])), (A([0, 1]), 0), (slice(None), A([0, 1]), None, 0),
    (A([0, 1]), None, A([0, 1])), (Ellipsis, A([0, 1])), (A([0, 1]), Ellipsis, A([0, 1])),
    (A([[0, 1], [1, 0]]),), (A(-1),), (slice(None), A(1)), (A(0), slice(None), A([0, 1, 1, 1, 1])),
    (slice(None, None, -1), A([[2], [0]]), slice(1, 3), A([4, -1])),
    (0, 1, 2, 3), (-1, slice(None), -2),
    (None,), (Ellipsis,), (), (slice(5, 1, -1),), (slice(-100, 100),),
    (1, slice(None), None, Ellipsis, A([0, 2])), (slice(None), slice(None, None, -1), A([[3, 0]])),
]


def _bz(idx):
    if not isinstance(idx, tuple):
        return _bz((idx,))[0]
    return tuple(mx.array(i) if isinstance(i, np.ndarray) else i for i in idx)


@pytest.mark.parametrize("idx", GET, ids=[str(i) for i in range(len(GET))])
def test_getitem_matches_numpy(idx):
    a = mx.array(X)
    got = a[_bz(idx)]
    want = X[idx]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_getitem_single_forms():
    a = mx.array(X)
    np.testing.assert_array_equal(a[1], X[1])
    np.testing.assert_array_equal(a[mx.array([1, 0])], X[[1, 0]])
    np.testing.assert_array_equal(a[[1, 0]], X[[1, 0]])
    np.testing.assert_array_equal(a[np.int64(1)], X[1])
    np.testing.assert_array_equal(a[None], X[None])
    assert mx.array(5)[...].item() == 5 and mx.array(5)[None].shape == (1,)
    np.testing.assert_array_equal(a[mx.array([1], mx.uint8)], X[[1]])


@pytest.mark.parametrize("idx,exc,words", [
    (5, IndexError, ["[getitem]", "5", "axis 0"]),
    ((1, -4), IndexError, ["[getitem]", "-4", "axis 1"]),
    ((0, 0, 0, 0, 0), IndexError, ["[getitem]", "Too many"]),
    ((Ellipsis, 0, Ellipsis), IndexError, ["[getitem]", "ellipsis"]),
    (1.5, TypeError, ["[getitem]", "1.5"]),
    ("a", TypeError, ["[getitem]", "'a'"]),
    (slice(1.5, None), TypeError, ["[getitem]", "1.5"]),
    (np.array([True, False]), ValueError, ["[getitem]", "oolean"]),
    (np.array([0.5]), ValueError, ["[getitem]", "float"]),
    (np.array([7]), IndexError, ["[getitem]", "7"]),
])
def test_getitem_errors(idx, exc, words):
    a = mx.array(X)
    if isinstance(idx, np.ndarray):
        idx = mx.array(idx)
    with pytest.raises(exc) as ei:
        a[idx]
    for w in words:
        assert w in str(ei.value)
    assert isinstance(ei.value, ValueError)  # MLX raises ValueError for all of these


def test_getitem_0d():
    with pytest.raises(IndexError):
        mx.array(3)[0]


# -- setitem --------------------------------------------------------------------------------
SET = [
    (0, 5), (-1, np.arange(5)), (slice(None, None, -1), np.arange(5)), ((1, slice(0, 3, 2)), 9),
    ((Ellipsis, 2), np.arange(4)), ((None, 1), 3),
    ((A([0, 0, 1]),), np.arange(60).reshape(3, 4, 5)),
    ((slice(None), A([0, 2]), 1), np.zeros((2, 2, 5))), ((A([[0], [1]]), A([0, 2])), 7),
    ((1, A([0, 2])), np.arange(40).reshape(2, 4, 5)), (Ellipsis, np.arange(5)),
    ((slice(None), A([2, 0]), slice(1, 3)), np.arange(2 * 2 * 2 * 5).reshape(2, 2, 2, 5)),
]


@pytest.mark.parametrize("idx,v", SET, ids=[str(i) for i in range(len(SET))])
def test_setitem_matches_numpy(idx, v):
    src = X.copy()
    a = mx.array(src)
    b = a  # every reference sees the update
    a[_bz(idx)] = mx.array(v) if isinstance(v, np.ndarray) else v
    want = X.copy()
    want[idx] = v
    np.testing.assert_array_equal(b, want)
    np.testing.assert_array_equal(src, X)


def test_setitem_mlx_int_rule():
    # MLX's setitem: ints do not move the array dims (a[0][:, idx] layout), unlike getitem.
    a = mx.zeros((2, 3, 4)) if hasattr(mx, "zeros") else mx.array(np.zeros((2, 3, 4), np.float32))
    a[0, :, mx.array([0, 2])] = mx.array(np.arange(6.0).reshape(3, 2))
    want = np.zeros((2, 3, 4), np.float32)
    want[0][:, [0, 2]] = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(a, want)


def test_setitem_semantics():
    a = mx.array(np.ones(5, np.int32))
    a[1] = 2.7  # cast to a's dtype
    assert a.dtype == mx.int32 and a.tolist() == [1, 2, 1, 1, 1]
    a[mx.array([0, 0, 3])] = mx.array([1, 2, 3])  # duplicates: last write wins
    assert a.tolist() == [2, 2, 1, 3, 1]
    a[2:] = mx.array([[[7]]])  # leading singleton dims are dropped
    assert a.tolist() == [2, 2, 7, 7, 7]
    a[0] = a[4] + 1 if hasattr(mx, "add") else a[4]  # value depending on a itself
    assert a.tolist()[0] in (7, 8)
    a[1:3] = a[3:]  [:2]
    assert a.tolist()[1:3] == [7, 7]
    b = mx.array(np.zeros((2, 3), np.float32))
    b[mx.array([True, False])] = mx.array([1.0, 2.0, 3.0])  # boolean mask (MLX supports this)
    np.testing.assert_array_equal(b, [[1, 2, 3], [0, 0, 0]])


def test_setitem_does_not_write_shared_buffer():
    src = X.copy()
    a = mx.array(src)
    view = a[0]
    np.asarray(view)
    a[0] = 0
    np.testing.assert_array_equal(view, X[0])
    np.testing.assert_array_equal(src, X)
    np.testing.assert_array_equal(a[0], np.zeros_like(X[0]))


@pytest.mark.parametrize("idx,v,exc,words", [
    (0, np.ones((2, 4)), ValueError, ["[setitem]", "(2,4)"]),
    (7, 1, IndexError, ["[setitem]", "7"]),
    ((0, 0, 0, 0, 0), 1, IndexError, ["[setitem]", "Too many"]),
    (np.array([True]), 1, ValueError, ["[setitem]", "mask"]),
])
def test_setitem_errors(idx, v, exc, words):
    a = mx.array(X)
    with pytest.raises(exc) as ei:
        a[mx.array(idx) if isinstance(idx, np.ndarray) else idx] = (
            mx.array(v) if isinstance(v, np.ndarray) else v)
    for w in words:
        assert w in str(ei.value)
    np.testing.assert_array_equal(a, X)  # unchanged after a failed assignment


# -- .at[] ----------------------------------------------------------------------------------
@pytest.mark.parametrize("meth,ufunc", [("add", np.add), ("multiply", np.multiply),
                                        ("maximum", np.maximum), ("minimum", np.minimum)])
def test_at_accumulates_duplicates(meth, ufunc):
    rng = np.random.default_rng(0)
    base = rng.standard_normal((6, 3)).astype(np.float32)
    idx = np.array([0, 2, 2, 5, 0, 0])
    vals = rng.standard_normal((6, 3)).astype(np.float32)
    a = mx.array(base)
    got = getattr(a.at[mx.array(idx)], meth)(mx.array(vals))
    want = base.copy()
    ufunc.at(want, idx, vals)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(a, base)  # .at returns a new array


def test_at_mixed_index_and_cast():
    base = np.zeros((3, 4), np.int32)
    a = mx.array(base)
    got = a.at[1:, mx.array([0, 0, 3])].add(2.5)  # cast to int32 first: 2 per hit
    want = base.copy()
    np.add.at(want, (slice(1, None), [0, 0, 3]), 2)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == mx.int32
    np.testing.assert_array_equal(a.at[1].add(1), [[0] * 4, [1] * 4, [0] * 4])


@pytest.mark.skipif(not hasattr(mx, "negative") or not hasattr(mx, "reciprocal"),
                    reason="elementwise ops not available")
def test_at_subtract_divide():
    a = mx.array(np.ones(4, np.float32))
    np.testing.assert_allclose(a.at[mx.array([0, 0, 1])].subtract(1.0), [-1, 0, 1, 1])
    np.testing.assert_allclose(a.at[mx.array([0, 0, 1])].divide(2.0), [0.25, 0.5, 1, 1])


# -- take / put / dynamic slices -----------------------------------------------------------
def test_take_family():
    a = mx.array(X)
    np.testing.assert_array_equal(mx.take(a, mx.array([[1, -1]]), axis=2), np.take(X, [[1, -1]], 2))
    np.testing.assert_array_equal(mx.take(a, 2, axis=1), np.take(X, 2, 1))
    i = np.array([[[[0]], [[2]], [[1]]]])
    np.testing.assert_array_equal(mx.take_along_axis(a, mx.array(i), axis=1),
                                  np.take_along_axis(X, np.broadcast_to(i, (2, 3, 4, 5)), 1))
    out = mx.put_along_axis(a, mx.array(i), mx.array(-1), axis=1)
    want = X.copy()
    np.put_along_axis(want, np.broadcast_to(i, (2, 3, 4, 5)), -1, 1)
    np.testing.assert_array_equal(out, want)
    s = mx.slice(a, mx.array([1, 2]), (1, 3), (2, 3))
    np.testing.assert_array_equal(s, X[:, 1:3, :, 2:5])
    u = mx.slice_update(a, mx.array(np.zeros((2, 3, 1, 2), np.int32)), mx.array([1, 3]), (2, 3))
    want = X.copy()
    want[:, :, 1:2, 3:5] = 0
    np.testing.assert_array_equal(u, want)


@pytest.mark.parametrize("fn,exc,words", [
    (lambda a: mx.take(a, mx.array([0.5])), ValueError, ["[take]", "float32"]),
    (lambda a: mx.take(a, 200), IndexError, ["[take]", "200"]),
    (lambda a: mx.take(a, mx.array([0]), axis=4), IndexError, ["[take]", "4"]),
    (lambda a: mx.take_along_axis(a, mx.array([0]), axis=0), ValueError,
     ["[take_along_axis]", "dimension 1"]),
    (lambda a: mx.slice(a, 1, (0,), (1,)), TypeError, ["[slice]", "1"]),
    (lambda a: mx.slice(a, mx.array([0]), (0,), (9,)), ValueError, ["[slice]", "9"]),
    (lambda a: mx.slice(a, mx.array([0, 1]), (0,), (1,)), ValueError, ["[slice]", "2"]),
    (lambda a: mx.slice_update(a, mx.array(np.ones((3, 3, 4, 5))), mx.array([0]), (0,)),
     ValueError, ["[slice_update]", "(3,3,4,5)"]),
])
def test_take_errors(fn, exc, words):
    a = mx.array(X)
    with pytest.raises(exc) as ei:
        fn(a)
    for w in words:
        assert w in str(ei.value)


def test_against_mlx():
    mlx = pytest.importorskip("mlx.core")
    for idx, v in [((0, slice(None), np.array([0, 2])), np.arange(6.0).reshape(3, 2)),
                   ((np.array([0, 1]), None, np.array([1, 2])), 7.0),
                   ((slice(None), slice(None, None, 2), np.array([1, 2])), np.ones((2, 2, 2)))]:
        res = []
        for M in (mx, mlx):
            a = M.array(np.zeros((2, 3, 4), np.float32))
            ix = tuple(M.array(i) if isinstance(i, np.ndarray) else i for i in idx)
            a[ix] = M.array(v) if isinstance(v, np.ndarray) else v
            res.append(np.array(a))
            res.append(np.array(M.array(np.zeros((2, 3, 4), np.float32)).at[ix].add(
                M.array(v) if isinstance(v, np.ndarray) else v)))
        np.testing.assert_array_equal(res[0], res[2])
        np.testing.assert_array_equal(res[1], res[3])


# -- issue 13 ----------------------------------------------------------------------------------
def test_along_axis_empty_float_indices_select_nothing_as_mlx():
    a = mx.array([], mx.float32)
    assert mx.put_along_axis(a, a, a, axis=None).shape == (0,)
    assert mx.take_along_axis(a, a, axis=0).shape == (0,)
    with pytest.raises(ValueError, match=r"^\[put_along_axis\] Indices must be integral"):
        mx.put_along_axis(mx.zeros(3), mx.array([1.0]), mx.array([2.0]), axis=0)
