"""sort, argsort, partition, argpartition, topk: stability, NaN, axes, edge cases, bad input.

Expected values were read off MLX 0.32; the optional tests at the end compare against MLX
directly when it is installed.
"""
import math

import ml_dtypes
import numpy as np
import pytest

import braze.core as mx

NAN = math.nan
OPS = ["sort", "argsort", "partition", "argpartition", "topk"]


def _call(op, a, **kw):
    if op in ("partition", "argpartition"):
        return getattr(mx, op)(a, 0, **kw)
    if op == "topk":
        return mx.topk(a, 1, **kw)
    return getattr(mx, op)(a, **kw)


def test_sort_basic_and_axes():
    x = mx.array([[3, 1, 2], [0, 5, 4]])
    assert mx.sort(x).tolist() == [[1, 2, 3], [0, 4, 5]]
    assert mx.sort(x, axis=0).tolist() == [[0, 1, 2], [3, 5, 4]]
    assert mx.sort(x, axis=None).tolist() == [0, 1, 2, 3, 4, 5]
    assert mx.argsort(x, axis=None).tolist() == [3, 1, 2, 0, 5, 4]
    assert mx.argsort(x).dtype == mx.uint32
    assert mx.sort(x).dtype == mx.int32


def test_argsort_is_stable():
    assert mx.argsort(mx.array([1, 1, 1, 0, 0, 1])).tolist() == [3, 4, 0, 1, 2, 5]
    # -0.0 and 0.0 compare equal: they keep their order
    assert mx.argsort(mx.array([0.0, -0.0, 0.0, -0.0])).tolist() == [0, 1, 2, 3]
    s = np.asarray(mx.sort(mx.array([0.0, -0.0, 0.0, -0.0])))
    assert list(np.signbit(s)) == [False, True, False, True]
    rng = np.random.default_rng(0)
    for dt in ("bool", "int8", "uint16", "float16", "bfloat16", "float32"):
        v = rng.integers(0, 3, size=(4, 50))
        x = v.astype(ml_dtypes.bfloat16 if dt == "bfloat16" else dt)
        got = np.asarray(mx.argsort(mx.array(x), axis=1))
        want = np.argsort(x.astype(np.float64), axis=1, kind="stable")
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32"])
def test_nan_sorts_last(dt):
    npd = ml_dtypes.bfloat16 if dt == "bfloat16" else dt
    x = mx.array(np.array([1.0, NAN, 3.0, -2.0, NAN, 0.5]).astype(npd))
    s = np.asarray(mx.sort(x)).astype(np.float64)
    np.testing.assert_array_equal(s[:4], [-2.0, 0.5, 1.0, 3.0])
    assert np.isnan(s[4:]).all()
    assert mx.argsort(x).tolist() == [3, 5, 0, 2, 1, 4]
    t = np.asarray(mx.topk(x, 2)).astype(np.float64)
    assert np.isnan(t).all()  # NaN counts as the largest, as in MLX
    p = np.asarray(mx.partition(x, 3)).astype(np.float64)
    assert sorted(p[:3]) == [-2.0, 0.5, 1.0] and p[3] == 3.0 and np.isnan(p[4:]).all()


def test_topk_nan_like_mlx():
    t = np.asarray(mx.topk(mx.array([1.0, NAN, 3.0, 2.0]), 2))
    assert sorted(t.tolist(), key=lambda v: (math.isnan(v), v))[0] == 3.0
    assert np.isnan(t).sum() == 1


@pytest.mark.parametrize("kth", [0, 1, 4, 6, -1, -7])
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_partition_property(kth, axis):
    rng = np.random.default_rng(kth + 10)
    x = rng.integers(-5, 5, size=(5, 7)).astype(np.float32)
    flat = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
    n = flat.shape[-1]
    if not -n <= kth < n:
        with pytest.raises(ValueError):
            mx.partition(mx.array(x), kth, axis=axis)
        return
    k = kth % n
    p = np.asarray(mx.partition(mx.array(x), kth, axis=axis))
    p = p if axis is None else np.moveaxis(p, axis, -1)
    s = np.sort(flat, axis=-1)
    np.testing.assert_array_equal(p[..., k], s[..., k])
    assert np.all(p[..., :k] <= p[..., k:k + 1]) and np.all(p[..., k + 1:] >= p[..., k:k + 1])
    np.testing.assert_array_equal(np.sort(p, axis=-1), s)  # a permutation of each row
    idx = np.asarray(mx.argpartition(mx.array(x), kth, axis=axis)).astype(np.int64)
    assert mx.argpartition(mx.array(x), kth, axis=axis).dtype == mx.uint32
    vals = np.take_along_axis(flat, idx if axis is None else np.moveaxis(idx, axis, -1), -1)
    np.testing.assert_array_equal(vals[..., k], s[..., k])
    assert np.all(vals[..., :k] <= vals[..., k:k + 1])
    assert np.all(vals[..., k + 1:] >= vals[..., k:k + 1])


def test_partition_values_from_mlx():
    x = mx.array([[3, 1, 2], [0, 5, 4]])
    assert mx.partition(x, 1).tolist() == [[1, 2, 3], [0, 4, 5]]
    assert mx.partition(x, -3).tolist() == [[1, 2, 3], [0, 4, 5]]


@pytest.mark.parametrize("dt", ["bool", "int8", "uint32", "float16", "bfloat16", "float32"])
def test_topk_returns_the_k_largest(dt):
    rng = np.random.default_rng(3)
    v = rng.standard_normal((4, 9)) * 10
    x = (v > 0 if dt == "bool" else v.astype(ml_dtypes.bfloat16 if dt == "bfloat16" else dt))
    a = mx.array(x)
    for k in (0, 1, 3, 9):
        t = mx.topk(a, k)
        assert t.shape == (4, k) and t.dtype == a.dtype
        np.testing.assert_array_equal(np.sort(np.asarray(t).astype(np.float64), axis=-1),
                                      np.sort(x.astype(np.float64), axis=-1)[:, 9 - k:])
    t0 = mx.topk(a, 2, axis=0)
    np.testing.assert_array_equal(np.sort(np.asarray(t0).astype(np.float64), axis=0),
                                  np.sort(x.astype(np.float64), axis=0)[2:])
    tf = mx.topk(a, 5, axis=None)
    assert tf.shape == (5,)
    np.testing.assert_array_equal(np.sort(np.asarray(tf).astype(np.float64)),
                                  np.sort(x.astype(np.float64).ravel())[-5:])


def test_empty_and_scalar_inputs():
    assert mx.sort(mx.zeros((0,))).shape == (0,)
    assert mx.argsort(mx.zeros((2, 0))).shape == (2, 0)
    assert mx.topk(mx.zeros((0,)), 0).shape == (0,)
    assert mx.topk(mx.zeros((2, 0)), 0).shape == (2, 0)
    assert mx.sort(mx.array(3), axis=None).tolist() == [3]
    with pytest.raises(ValueError, match=r"^\[sort\].*-1"):
        mx.sort(mx.array(3))
    with pytest.raises(ValueError, match=r"^\[partition\].*kth 0"):
        mx.partition(mx.zeros((0,)), 0)


# -- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis", [2, -3])
def test_bad_axis(op, axis):
    with pytest.raises(ValueError) as e:
        _call(op, mx.zeros((2, 3)), axis=axis)
    assert isinstance(e.value, IndexError)
    assert str(e.value).startswith(f"[{op}]") and str(axis) in str(e.value)


@pytest.mark.parametrize("op", OPS)
def test_axis_must_be_an_int(op):
    with pytest.raises(TypeError, match=rf"^\[{op}\]"):
        _call(op, mx.zeros((2, 3)), axis=(0,))
    with pytest.raises(TypeError, match=rf"^\[{op}\].*1.0"):
        _call(op, mx.zeros((2, 3)), axis=1.0)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("bad", [[3, 1, 2], 2.0, None, np.array([3, 1])])
def test_non_array_input(op, bad):
    with pytest.raises(TypeError, match=rf"^\[{op}\]"):
        _call(op, bad)


@pytest.mark.parametrize("op", ["partition", "argpartition"])
@pytest.mark.parametrize("kth", [3, -4, 100])
def test_kth_out_of_range(op, kth):
    with pytest.raises(ValueError, match=rf"^\[{op}\] Received invalid kth {kth}"):
        getattr(mx, op)(mx.zeros((2, 3)), kth)


@pytest.mark.parametrize("op", ["partition", "argpartition"])
@pytest.mark.parametrize("kth", [1.5, None, True, "1"])
def test_kth_must_be_an_int(op, kth):
    with pytest.raises(TypeError, match=rf"^\[{op}\].*kth"):
        getattr(mx, op)(mx.zeros((2, 3)), kth)


@pytest.mark.parametrize("k", [4, -1, 100])
def test_topk_k_out_of_range(k):
    with pytest.raises(ValueError, match=rf"^\[topk\] Received invalid k={k}"):
        mx.topk(mx.zeros((2, 3)), k)


def test_topk_k_must_be_an_int():
    with pytest.raises(TypeError, match=r"^\[topk\].*k"):
        mx.topk(mx.zeros((2, 3)), 1.0)


def test_inputs_are_never_modified():
    data = np.array([[3.0, -1.0, 2.0], [NAN, 5.0, 4.0]], np.float32)
    a = mx.array(data)
    outs = [_call(op, a) for op in OPS] + [mx.sort(a, axis=None), mx.topk(a, 3)]
    mx.eval(*outs)
    for o in outs:
        o += 1
    mx.eval(*outs)
    np.testing.assert_array_equal(np.asarray(a), data)


# -- optional: MLX as the oracle --------------------------------------------------------------
@pytest.mark.parametrize("dt", ["bool", "uint8", "int8", "int32", "float16", "bfloat16",
                                "float32"])
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_matches_mlx(dt, axis):
    mlx = pytest.importorskip("mlx.core")
    rng = np.random.default_rng(5)
    v = rng.integers(-3, 4, size=(4, 6)).astype(np.float32)
    v[0, 1] = v[2, 3] = NAN if dt in ("float16", "bfloat16", "float32") else 0
    x = (v > 0) if dt == "bool" else v.astype(dt if dt != "bfloat16" else np.float32)
    mx_x = mx.array(x.astype(ml_dtypes.bfloat16) if dt == "bfloat16" else x)
    ml_x = mlx.array(x)
    if dt == "bfloat16":
        ml_x = ml_x.astype(mlx.bfloat16)

    def np_of(r):
        if isinstance(r, mx.array):
            return np.asarray(r).astype(np.float64)
        return np.array(r.astype(mlx.float32)).astype(np.float64)

    for op in ("sort", "argsort"):
        got = getattr(mx, op)(mx_x, axis=axis)
        want = getattr(mlx, op)(ml_x, axis=axis, stream=mlx.cpu)
        assert got.dtype.name == str(want.dtype).split(".")[-1]
        np.testing.assert_array_equal(np_of(got), np_of(want))
    got = mx.topk(mx_x, 2, axis=axis)
    want = mlx.topk(ml_x, 2, axis=axis, stream=mlx.cpu)
    ax = -1 if axis is None else axis
    np.testing.assert_array_equal(np.sort(np_of(got), axis=ax), np.sort(np_of(want), axis=ax))


# -- searchsorted (issue 13) -------------------------------------------------------------------
@pytest.mark.parametrize("seq, side, msg", [
    (np.zeros((3, 4)), "left", r"^\[searchsorted\] The sorted sequence must be 1-D but has 2"),
    (np.array(1.0), "left", r"^\[searchsorted\] The sorted sequence must be 1-D but has 0"),
    (np.array([1.0, 2.0]), "middle", r"^\[searchsorted\] Invalid side 'middle'"),
])
def test_searchsorted_errors(seq, side, msg):
    with pytest.raises(ValueError, match=msg):
        mx.searchsorted(mx.array(seq), mx.array([1.0]), side=side)


def test_searchsorted_nan_promotion_and_vmap():
    a = mx.array([1.0, 2.0, float("nan")])
    nan = mx.array([float("nan")])
    assert mx.searchsorted(a, nan).tolist() == [2]
    assert mx.searchsorted(a, nan, side="right").tolist() == [3]
    assert mx.searchsorted(mx.array([1, 3, 4, 7]), mx.array([4.5])).tolist() == [3]
    with pytest.raises(ValueError, match=r"^\[searchsorted\] Cannot vmap over the sorted"):
        mx.vmap(lambda s: mx.searchsorted(s, mx.array([1.0])))(mx.zeros((3, 4)))
