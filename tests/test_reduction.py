"""Reductions and scans: MLX's result dtypes, NaN/inf, empty arrays, numerics and bad input.

Expected values were read off MLX 0.32 and are written here as plain expectations; the optional
tests at the end compare against MLX directly when it is installed.
"""
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

import braze.core as mx
from braze._src.ops import reduction as R
from braze._src.prims.reduce import ArgReduce, Reduce

NAN, INF = math.nan, math.inf
ALL_DTYPES = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
              "float16", "float32", "bfloat16"]


def arr(values, dt="float32"):
    return mx.array(np.array(values, dtype=np.float64 if dt != "bool" else bool)
                    .astype(ml_dtypes.bfloat16 if dt == "bfloat16" else dt))


def val(a):
    """The value of a braze array as NumPy (floats as float64)."""
    return np.asarray(a).astype(np.float64) if a.dtype.kind == "f" else np.asarray(a)


def same(a, expected):
    np.testing.assert_array_equal(np.asarray(a).astype(np.float64),
                                  np.asarray(expected, dtype=np.float64))


# -- result dtypes (MLX 0.32) -----------------------------------------------------------------
SUM_DT = {"bool": "int32", "uint8": "uint32", "uint16": "uint32", "int8": "int32",
          "int16": "int32"}
FLOAT_DT = {d: "float32" for d in ALL_DTYPES if d not in ("float16", "float32", "bfloat16")}
RESULT_DTYPES = {
    "sum": SUM_DT, "prod": SUM_DT, "max": {}, "min": {}, "mean": FLOAT_DT, "var": FLOAT_DT,
    "std": FLOAT_DT, "logsumexp": FLOAT_DT, "softmax": FLOAT_DT, "median": FLOAT_DT,
    "all": {d: "bool" for d in ALL_DTYPES}, "any": {d: "bool" for d in ALL_DTYPES},
    "argmax": {d: "uint32" for d in ALL_DTYPES}, "argmin": {d: "uint32" for d in ALL_DTYPES},
    "count_nonzero": {d: "int32" for d in ALL_DTYPES},
    "cumsum": {"bool": "int32"}, "cumprod": {}, "cummax": {}, "cummin": {},
    "logcumsumexp": FLOAT_DT,
}


@pytest.mark.parametrize("op", sorted(RESULT_DTYPES))
@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_result_dtype(op, dt):
    a = arr([[1, 2, 3], [4, 5, 6]], dt)
    out = getattr(mx, op)(a)
    want = RESULT_DTYPES[op].get(dt, dt)
    assert out.dtype == getattr(mx, want if want != "bool" else "bool_"), (op, dt, out.dtype)
    out.item() if out.size == 1 else out.tolist()  # evaluates with the promised dtype


def test_empty_axes_tuple_keeps_dtype_like_mlx():
    a = arr([1, 2], "int8")
    assert mx.sum(a, axis=()).dtype == mx.int8  # MLX: no reduction, no widening
    assert mx.prod(a, axis=()).dtype == mx.int8
    assert mx.mean(a, axis=()).dtype == mx.float32
    assert mx.all(a, axis=()).dtype == mx.bool_
    assert mx.count_nonzero(a, axis=()).dtype == mx.int32
    same(mx.var(a, axis=()), [0, 0])
    same(mx.logsumexp(a, axis=()), [1, 2])
    b = mx.sum(a, axis=())
    assert b is not a
    b += 1
    same(a, [1, 2])


def test_size_one_axis_still_widens():
    a = arr([[1], [2]], "int8")
    out = mx.sum(a, axis=1)
    assert out.dtype == mx.int32 and out.shape == (2,)
    same(out, [1, 2])


# -- keepdims and axes ------------------------------------------------------------------------
def test_keepdims_and_axes_shapes():
    a = mx.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert mx.sum(a).shape == ()
    assert mx.sum(a, keepdims=True).shape == (1, 1, 1)
    assert mx.max(a, axis=(0, 2)).shape == (3,)
    assert mx.max(a, axis=[2, 0], keepdims=True).shape == (1, 3, 1)
    assert mx.mean(a, axis=-1).shape == (2, 3)
    assert mx.argmax(a).shape == ()
    assert mx.argmax(a, keepdims=True).shape == (1, 1, 1)
    assert mx.argmax(a, axis=1, keepdims=True).shape == (2, 1, 4)
    assert mx.median(a, axis=(0, 1), keepdims=True).shape == (1, 1, 4)
    assert mx.count_nonzero(a, axis=(0, 1), keepdims=True).shape == (1, 1, 4)
    same(mx.argmax(a), 23)
    same(mx.argmin(a, axis=2), np.zeros((2, 3)))


def test_array_methods():
    a = mx.array([[1.0, 2.0], [3.0, 5.0]])
    same(a.sum(0), [4, 7])
    same(a.prod(), 30)
    same(a.max(None, True), [[5]])
    same(a.min(1), [1, 3])
    same(a.mean(), 2.75)
    np.testing.assert_allclose(val(a.var(None, False, 1)), np.var([1, 2, 3, 5], ddof=1),
                               rtol=1e-6)
    np.testing.assert_allclose(val(a.std()), np.std([1, 2, 3, 5]), rtol=1e-6)
    assert a.all().item() and a.any().item()
    same(a.argmax(1), [1, 1])
    same(a.argmin(), 0)
    np.testing.assert_allclose(val(a.logsumexp(1)), np.log(np.exp([[1, 2], [3, 5]]).sum(1)),
                               rtol=1e-6)
    same(a.cumsum(), [1, 3, 6, 11])
    same(a.cumsum(0, reverse=True), [[4, 7], [3, 5]])
    same(a.cumprod(1, inclusive=False), [[1, 1], [1, 3]])
    same(a.cummax(0), [[1, 2], [3, 5]])
    same(a.cummin(None, reverse=True), [1, 2, 3, 5])
    np.testing.assert_allclose(val(a.logcumsumexp(1)), np.logaddexp.accumulate(
        np.array([[1, 2], [3, 5.0]]), axis=1), rtol=1e-6)


# -- NaN and inf ------------------------------------------------------------------------------
def test_nan_propagates_through_max_min_and_sum():
    x = mx.array([1.0, NAN, 3.0])
    for op in (mx.sum, mx.prod, mx.max, mx.min, mx.mean, mx.var, mx.logsumexp, mx.median):
        assert math.isnan(op(x).item()), op
    assert math.isnan(mx.max(mx.array([NAN, 1.0])).item())
    for dt in ("float16", "bfloat16"):
        assert math.isnan(mx.max(arr([1, NAN, 3], dt)).item())
        assert math.isnan(mx.min(arr([NAN, 1, 3], dt)).item())


def test_nan_in_argmax_argmin_is_the_first_nan():
    same(mx.argmax(mx.array([1.0, NAN, 3.0])), 1)
    same(mx.argmax(mx.array([NAN, 1.0])), 0)
    same(mx.argmax(mx.array([1.0, NAN, NAN])), 1)
    same(mx.argmin(mx.array([2.0, NAN, 1.0])), 1)
    same(mx.argmax(arr([1, 2, NAN, 9], "bfloat16")), 2)


def test_nan_counts_as_true_and_nonzero():
    assert mx.all(mx.array([1.0, NAN])).item() is True
    same(mx.count_nonzero(mx.array([[0, 2, 0, 4], [5, 0.0, NAN, 9]]), axis=1), [2, 3])


def test_logsumexp_infinities():
    same(mx.logsumexp(mx.array([-INF, -INF])), -INF)
    same(mx.logsumexp(mx.array([INF, INF])), INF)
    same(mx.logsumexp(mx.array([INF, 1.0])), INF)
    same(mx.logsumexp(mx.array([INF, -INF])), INF)
    np.testing.assert_allclose(mx.logsumexp(mx.array([1000.0, 1000.0])).item(),
                               1000 + math.log(2), rtol=1e-6)  # no overflow


def test_softmax_values_and_nan_cases():
    x = mx.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(val(mx.softmax(x, axis=(0, 1))),
                               np.exp([[1, 2], [3, 4]]) / np.exp([1, 2, 3, 4]).sum(), rtol=1e-6)
    np.testing.assert_allclose(val(mx.softmax(mx.array([1000.0, 1000.0]))), [0.5, 0.5])
    assert np.isnan(val(mx.softmax(mx.array([INF, 1.0])))).all()  # as MLX: inf - inf
    assert np.isnan(val(mx.softmax(mx.array([-INF, -INF])))).all()
    same(mx.softmax(mx.array(2.0)), 1.0)
    h = mx.softmax(arr([1, 2], "float16"), precise=True)
    assert h.dtype == mx.float16
    np.testing.assert_allclose(val(h), [0.26894, 0.73106], atol=1e-3)


def test_integer_softmax_and_logsumexp_are_float_on_every_axis():
    x = mx.array(np.arange(12).reshape(3, 4) % 5)
    for axis in (None, 0, -1, (0, 1)):
        s = mx.softmax(x, axis=axis)
        assert s.dtype == mx.float32
        np.testing.assert_allclose(val(mx.sum(s, axis=axis)), 1.0, rtol=1e-6)
        assert mx.logsumexp(arr([[200, 200]], "uint8"), axis=axis).dtype == mx.float32
    np.testing.assert_allclose(mx.logsumexp(arr([200, 200], "uint8")).item(),
                               200 + math.log(2), rtol=1e-6)


def test_var_ddof_edges():
    same(mx.var(mx.array([1.0, 2.0]), ddof=2), INF)
    same(mx.var(mx.array([1.0, 2.0]), ddof=3), INF)
    assert math.isnan(mx.var(mx.array([1.0, 1.0]), ddof=2).item())
    np.testing.assert_allclose(mx.var(mx.array([1.0, 2.0]), ddof=-1).item(), 1 / 6, rtol=1e-6)
    same(mx.std(mx.array([1.0, 2.0]), ddof=2), INF)


def test_var_is_two_pass():
    # E[x^2] - E[x]^2 would lose everything here in float32
    np.testing.assert_allclose(mx.var(mx.array([1e4 + 1, 1e4 + 2])).item(), 0.25, rtol=1e-6)


def test_var_of_complex_is_real():
    v = mx.var(mx.array([1 + 1j, 2 - 1j]))
    assert v.dtype == mx.float32
    np.testing.assert_allclose(v.item(), 1.25, rtol=1e-6)


def test_median():
    same(mx.median(mx.array([1, 2, 3, 4])), 2.5)
    same(mx.median(arr([1, 2, 3, 4], "uint8")), 2.5)
    same(mx.median(mx.array([3, 1, 2])), 2)
    same(mx.median(mx.array([[1, 2, 3, 4], [5, 6, 7, 9]]), axis=(0, 1)), 4.5)
    same(mx.median(mx.array([[1, 2, 3, 4], [5, 6, 7, 9]]), axis=1, keepdims=True),
         [[2.5], [6.5]])
    m = mx.median(mx.array([[1.0, NAN], [1, 2]]), axis=1)
    assert math.isnan(m[0].item()) and m[1].item() == 1.5
    assert mx.median(arr([1, 2, 3], "float16")).dtype == mx.float16
    x = np.random.default_rng(1).standard_normal((4, 5, 6)).astype(np.float32)
    np.testing.assert_allclose(val(mx.median(mx.array(x), axis=(0, 2))),
                               np.median(x, axis=(0, 2)), rtol=1e-6)


def test_scan_nan_and_inf():
    x = mx.array([1.0, NAN, 3.0])
    got = val(mx.cummax(x))
    assert got[0] == 1 and np.isnan(got[1:]).all()
    got = val(mx.cummin(x))
    assert got[0] == 1 and np.isnan(got[1:]).all()
    got = val(mx.cumsum(mx.array([1.0, INF, NAN])))
    assert got[0] == 1 and got[1] == INF and np.isnan(got[2])
    same(mx.logcumsumexp(mx.array([-INF, -INF, 0.0])), [-INF, -INF, 0])
    same(mx.logcumsumexp(mx.array([INF, INF, 0.0])), [INF, INF, INF])


# -- empty arrays -----------------------------------------------------------------------------
def test_empty_reductions():
    e = mx.zeros((0, 3))
    same(mx.sum(e), 0)
    same(mx.sum(e, axis=0), [0, 0, 0])
    assert mx.sum(e, axis=1).shape == (0,)
    same(mx.prod(e, axis=0), [1, 1, 1])
    assert mx.all(e).item() is True and mx.any(e).item() is False
    same(mx.count_nonzero(e, axis=0), [0, 0, 0])
    assert np.isnan(val(mx.mean(e, axis=0))).all()
    assert np.isnan(val(mx.var(e))).all()
    assert mx.max(e, axis=1).shape == (0,)
    assert mx.median(e, axis=1).shape == (0,)
    assert mx.softmax(e, axis=1).shape == (0, 3)
    assert mx.cumsum(e, axis=0).shape == (0, 3)
    assert mx.cummax(e, axis=1, inclusive=False).shape == (0, 3)


@pytest.mark.parametrize("op,axis,msg", [
    (mx.max, None, "[max] Cannot max reduce over axis 0 with size 0."),
    (mx.min, 0, "[min] Cannot min reduce over axis 0 with size 0."),
    (mx.argmax, None, "[argmax] Cannot argmax reduce zero size array."),
    (mx.argmin, 1, "[argmin] Cannot argmin reduce zero size array."),
    (mx.logsumexp, 1, "[logsumexp] Received empty array."),
    (mx.median, 0, "[median] Cannot take median along empty axis."),
])
def test_empty_reductions_that_raise(op, axis, msg):
    with pytest.raises(ValueError) as e:
        op(mx.zeros((0, 3)), axis=axis)
    assert str(e.value) == msg


def test_max_names_the_empty_axis():
    with pytest.raises(ValueError, match=r"axis 1 with size 0"):
        mx.max(mx.zeros((2, 0, 3)), axis=(0, 1))


# -- scans ------------------------------------------------------------------------------------
SCAN_EXPECT = {  # a = [1, 2, 3, 4] (int32), from MLX 0.32
    ("cumsum", False, True): [1, 3, 6, 10],
    ("cumsum", True, True): [10, 9, 7, 4],
    ("cumsum", False, False): [0, 1, 3, 6],
    ("cumsum", True, False): [9, 7, 4, 0],
    ("cumprod", False, True): [1, 2, 6, 24],
    ("cumprod", True, True): [24, 24, 12, 4],
    ("cumprod", False, False): [1, 1, 2, 6],
    ("cumprod", True, False): [24, 12, 4, 1],
    ("cummax", False, True): [1, 2, 3, 4],
    ("cummax", True, True): [4, 4, 4, 4],
    ("cummax", False, False): [-2**31, 1, 2, 3],
    ("cummax", True, False): [4, 4, 4, -2**31],
    ("cummin", False, True): [1, 1, 1, 1],
    ("cummin", True, True): [1, 2, 3, 4],
    ("cummin", False, False): [2**31 - 1, 1, 1, 1],
    ("cummin", True, False): [2, 3, 4, 2**31 - 1],
}


@pytest.mark.parametrize("key", sorted(SCAN_EXPECT), ids=str)
def test_scan_reverse_and_exclusive(key):
    op, reverse, inclusive = key
    out = getattr(mx, op)(mx.array([1, 2, 3, 4]), reverse=reverse, inclusive=inclusive)
    assert out.dtype == mx.int32
    assert out.tolist() == SCAN_EXPECT[key]


def test_logcumsumexp_reverse_exclusive():
    a = mx.array([1, 2, 3, 4])
    ref = np.logaddexp.accumulate([1.0, 2, 3, 4])
    np.testing.assert_allclose(val(mx.logcumsumexp(a)), ref, rtol=1e-6)
    np.testing.assert_allclose(val(mx.logcumsumexp(a, inclusive=False)),
                               [-INF] + list(ref[:-1]), rtol=1e-6)
    rref = np.logaddexp.accumulate([4.0, 3, 2, 1])[::-1]
    np.testing.assert_allclose(val(mx.logcumsumexp(a, reverse=True)), rref, rtol=1e-6)
    np.testing.assert_allclose(val(mx.logcumsumexp(a, reverse=True, inclusive=False)),
                               list(rref[1:]) + [-INF], rtol=1e-6)


@pytest.mark.parametrize("dt,lo,hi", [("uint8", 0, 255), ("int8", -128, 127),
                                      ("float16", -INF, INF), ("bool", False, True)])
def test_exclusive_cummax_cummin_fill_with_the_dtype_extremes(dt, lo, hi):
    a = arr([1, 1, 1], dt)
    assert val(mx.cummax(a, inclusive=False))[0] == lo
    assert val(mx.cummin(a, inclusive=False))[0] == hi


def test_scan_dtypes_and_flattening():
    b = mx.array([True, True, False])
    assert mx.cumsum(b).dtype == mx.int32 and mx.cumsum(b).tolist() == [1, 2, 2]
    assert mx.cumprod(b).dtype == mx.bool_
    assert mx.cumprod(mx.array([True, False]), inclusive=False).tolist() == [True, True]
    assert mx.cumsum(arr([100, 100], "int8")).tolist() == [100, -56]  # wraps like MLX
    assert mx.cumsum(arr([1, 2], "int8"), dtype=mx.float32).dtype == mx.float32
    assert mx.cumsum(mx.array([1.5, 2.5]), dtype=mx.int32).tolist() == [1, 3]
    assert mx.cumsum(mx.array([[1, 2], [3, 4]])).tolist() == [1, 3, 6, 10]
    assert mx.cumsum(mx.array(3)).shape == (1,)
    assert mx.logcumsumexp(mx.array([True, False])).dtype == mx.float32


# -- numerics ---------------------------------------------------------------------------------
def test_half_precision_accumulates_in_float32():
    same(mx.sum(arr([60000, 60000, -60000], "float16")), 60000)
    s = mx.sum(arr([1.0] * 3000, "bfloat16"))
    assert s.dtype == mx.bfloat16 and s.item() == 3008.0  # 3000 rounded once, like MLX
    same(mx.mean(arr([60000, 60000], "float16")), INF)  # as MLX: the float16 sum overflows


def test_float32_sums_are_pairwise():
    x = np.full(10**6, 0.1, np.float32)
    exact = 10**6 * np.float64(np.float32(0.1))
    assert abs(mx.sum(mx.array(x)).item() - exact) / exact < 1e-6
    x2 = np.full((10**6, 2), 0.1, np.float32)
    got = val(mx.sum(mx.array(x2), axis=0))
    assert np.all(np.abs(got - exact) / exact < 1e-6)


def test_no_numpy_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mx.eval(mx.mean(mx.zeros((0, 2)), axis=0), mx.var(mx.array([1.0, 1.0]), ddof=2),
                mx.logsumexp(mx.array([-INF, -INF])), mx.softmax(mx.array([INF, 1.0])),
                mx.sum(mx.array([INF, -INF])), mx.prod(arr([300, 300], "float16")),
                mx.cumsum(mx.array([INF, -INF])), mx.logcumsumexp(mx.array([-INF, -INF])),
                mx.cumprod(arr([100, 100, 100], "int8")), mx.max(mx.array([NAN, 1.0])),
                mx.median(mx.array([NAN, 1.0])))


def test_elision_of_size_one_reductions_is_switchable(monkeypatch):
    a = mx.array(np.ones((3, 1, 2), np.float32))
    out = mx.sum(a, axis=1)
    assert not isinstance(out._prim, Reduce) and out.shape == (3, 2)
    monkeypatch.setattr(R, "ELIDE_TRIVIAL_REDUCTIONS", False)
    out = mx.sum(a, axis=1)
    assert isinstance(out._prim, Reduce) or isinstance(out._inputs[0]._prim, Reduce)
    same(out, np.ones((3, 2)))
    out = mx.max(a, axis=1, keepdims=True)
    assert isinstance(out._prim, Reduce)
    assert isinstance(mx.argmax(a, axis=1, keepdims=True)._prim, ArgReduce)


# -- bad input --------------------------------------------------------------------------------
REDUCERS = ["sum", "prod", "max", "min", "mean", "var", "std", "all", "any", "logsumexp",
            "softmax", "median", "count_nonzero"]
ONE_AXIS = ["argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]


@pytest.mark.parametrize("op", REDUCERS + ONE_AXIS)
@pytest.mark.parametrize("axis", [2, -3, 7])
def test_bad_axis(op, axis):
    with pytest.raises(ValueError) as e:
        getattr(mx, op)(mx.zeros((2, 3)), axis=axis)
    assert isinstance(e.value, IndexError)  # MLX raises IndexError
    assert str(e.value).startswith(f"[{op}]") and str(axis) in str(e.value)


@pytest.mark.parametrize("op", REDUCERS)
def test_duplicate_axes(op):
    with pytest.raises(ValueError, match=rf"^\[{op}\].*duplicate"):
        getattr(mx, op)(mx.zeros((2, 3)), axis=(0, -2))


@pytest.mark.parametrize("op", REDUCERS + ONE_AXIS)
@pytest.mark.parametrize("bad", [[1.0, 2.0], 3.0, None, "abc", np.ones(3)])
def test_non_array_input(op, bad):
    with pytest.raises(TypeError, match=rf"^\[{op}\]"):
        getattr(mx, op)(bad)


@pytest.mark.parametrize("op", REDUCERS + ONE_AXIS)
def test_bad_axis_type(op):
    with pytest.raises(TypeError, match=rf"^\[{op}\].*1.5"):
        getattr(mx, op)(mx.zeros((2, 3)), axis=1.5)


@pytest.mark.parametrize("op", ONE_AXIS)
def test_one_axis_ops_reject_tuples(op):
    with pytest.raises(TypeError, match=rf"^\[{op}\]"):
        getattr(mx, op)(mx.zeros((2, 3)), axis=(0,))


def test_bad_flags():
    x = mx.zeros((2, 3))
    with pytest.raises(TypeError, match=r"^\[sum\].*keepdims"):
        mx.sum(x, keepdims=1)
    with pytest.raises(TypeError, match=r"^\[var\].*ddof.*1.5"):
        mx.var(x, ddof=1.5)
    with pytest.raises(TypeError, match=r"^\[cumsum\].*reverse"):
        mx.cumsum(x, reverse=1)
    with pytest.raises(TypeError, match=r"^\[cummax\].*inclusive"):
        mx.cummax(x, inclusive="no")
    with pytest.raises(TypeError, match=r"^\[softmax\].*precise"):
        mx.softmax(x, precise=None)
    with pytest.raises(TypeError, match=r"^\[cumsum\]"):
        mx.cumsum(x, dtype="not a dtype")
    with pytest.raises(ValueError, match=r"^\[sum\].*axis 0"):
        mx.sum(mx.array(3), axis=0)


def test_inputs_are_never_modified():
    data = np.array([[3.0, -1.0, 2.0], [NAN, 5.0, 4.0]], np.float32)
    a = mx.array(data)
    outs = [getattr(mx, op)(a) for op in REDUCERS + ONE_AXIS]
    outs += [mx.cumsum(a, axis=1, reverse=True, inclusive=False), mx.sum(a, axis=())]
    mx.eval(*outs)
    for o in outs:
        o += 1  # in-place on the result re-points the result only
    mx.eval(*outs)
    np.testing.assert_array_equal(np.asarray(a), data)


# -- optional: MLX as the oracle --------------------------------------------------------------
MLX_DTYPES = ["bool", "uint8", "int8", "int32", "uint32", "float16", "bfloat16", "float32"]


def _to_mlx(mlx, x):
    if x.dtype == ml_dtypes.bfloat16:
        return mlx.array(x.astype(np.float32)).astype(mlx.bfloat16)
    return mlx.array(x)


def _mlx_np(a):
    import mlx.core as mlx
    if a.dtype == mlx.bfloat16:
        a = a.astype(mlx.float32)
    return np.array(a)


def _sample(dt, shape=(3, 4, 5), seed=0):
    rng = np.random.default_rng(seed)
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt[0] in "ui":
        return rng.integers(0 if dt[0] == "u" else -4, 5, size=shape).astype(dt)
    x = rng.standard_normal(shape)
    return x.astype(ml_dtypes.bfloat16 if dt == "bfloat16" else dt)


@pytest.mark.parametrize("dt", MLX_DTYPES)
@pytest.mark.parametrize("op", REDUCERS + ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_matches_mlx_reductions(op, dt, axis):
    mlx = pytest.importorskip("mlx.core")
    if op in ("argmax", "argmin") and isinstance(axis, tuple):
        axis = -1
    if op in ("softmax", "logsumexp") and dt[0] in "biu":
        # MLX 0.32 only promotes integers on its last-axis fast path: elsewhere softmax keeps
        # the integer dtype (garbage values) and logsumexp wraps around; braze gives float32
        axis = -1
    x = _sample(dt)
    if op == "prod":
        x = x[:, :2, :3]
    got = getattr(mx, op)(mx.array(x), axis=axis)
    want = getattr(mlx, op)(_to_mlx(mlx, x), axis=axis, stream=mlx.cpu)
    assert got.dtype.name == str(want.dtype).split(".")[-1]
    assert got.shape == tuple(want.shape)
    tol = {"float16": 3e-3, "bfloat16": 2e-2}.get(got.dtype.name, 2e-5)
    np.testing.assert_allclose(val(got), _mlx_np(want).astype(val(got).dtype), rtol=tol,
                               atol=tol)


@pytest.mark.parametrize("dt", MLX_DTYPES)
@pytest.mark.parametrize("op", ONE_AXIS[2:])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inclusive", [False, True])
def test_matches_mlx_scans(op, dt, reverse, inclusive):
    mlx = pytest.importorskip("mlx.core")
    x = _sample(dt, (3, 5))
    if op == "cumprod":
        x = x[:, :3]
    got = getattr(mx, op)(mx.array(x), axis=1, reverse=reverse, inclusive=inclusive)
    want = getattr(mlx, op)(_to_mlx(mlx, x), axis=1, reverse=reverse, inclusive=inclusive,
                            stream=mlx.cpu)
    assert got.dtype.name == str(want.dtype).split(".")[-1]
    tol = {"float16": 3e-3, "bfloat16": 2e-2}.get(got.dtype.name, 2e-5)
    np.testing.assert_allclose(val(got), _mlx_np(want).astype(val(got).dtype), rtol=tol,
                               atol=tol)


# -- issue 13 ----------------------------------------------------------------------------------
def test_numpy_functions_call_the_methods_with_their_keywords():
    a = mx.array([[1.0, 2.0], [3.0, 4.0]])
    assert np.sum(a).item() == 10 and np.all(a > 0).item()
    assert np.mean(a, axis=0).tolist() == [2.0, 3.0]
    assert np.sum(a, dtype=np.int32).dtype == mx.int32
    assert np.cumsum(a).tolist() == [1, 3, 6, 10]
    assert np.var(a, ddof=1).item() == pytest.approx(5 / 3)
    with pytest.raises(TypeError, match=r"^\[sum\] out="):
        a.sum(out=np.zeros(()))


def test_median_nan_propagates_for_complex():
    out = mx.median(mx.array([complex(1, 0), complex(NAN, 0), complex(0, 0)]))
    assert mx.isnan(out).item()
    x = mx.array([[1.0, NAN, 3.0], [4.0, 5.0, 6.0]])
    np.testing.assert_array_equal(np.asarray(mx.median(x, axis=1)), [NAN, 5.0])


def test_logcumsumexp_complex():
    a = np.array([1, 2, 3], np.float32) + 1j
    out = np.asarray(mx.logcumsumexp(mx.array(a)))
    ref = np.log(np.cumsum(np.exp(a.astype(np.complex128))))
    np.testing.assert_allclose(out, ref, rtol=1e-5)
