"""Elementwise ops beyond the op table: promotion, operators, in-place semantics, edge values,
bad input, float64, and the primitive table itself. Expected values were checked against MLX."""
import math

import ml_dtypes
import numpy as np
import pytest

import braze.core as mx
from braze._src.prims import REGISTRY
from braze._src.prims import binary as B
from braze._src.prims import unary as U


def arr(values, dtype=None):
    return mx.array(np.asarray(values), dtype=dtype) if dtype else mx.array(values)


def np_(a):
    return np.asarray(a)


# -- promotion with weak Python scalars (verified against MLX 0.32) -------------------------
PROMOTION = [
    # (array dtype, scalar, result of add / subtract / multiply / floor_divide / power / maximum,
    #  result of divide)
    ("int8", 1, "int8", "float32"),
    ("int8", 1.5, "float32", "float32"),
    ("uint8", 3, "uint8", "float32"),
    ("bool_", 1, "int32", "float32"),
    ("bool_", 1.5, "float32", "float32"),
    ("bool_", True, "bool", "float32"),
    ("float16", 2, "float16", "float16"),
    ("float16", 2.5, "float16", "float16"),
    ("bfloat16", 2.5, "bfloat16", "bfloat16"),
    ("int32", 2.5, "float32", "float32"),
    ("uint32", 1, "uint32", "float32"),
    ("int64", 1.0, "float32", "float32"),
    ("float32", 1j, "complex64", "complex64"),
    ("int16", True, "int16", "float32"),
    ("uint16", 2, "uint16", "float32"),
    ("float64", 1.5, "float64", "float64"),
]


@pytest.mark.parametrize("dt,scalar,want,want_div", PROMOTION)
def test_weak_scalar_promotion(dt, scalar, want, want_div):
    a = mx.array([1], dtype=getattr(mx, dt))
    for op in (mx.add, mx.subtract, mx.multiply, mx.floor_divide, mx.power, mx.maximum):
        assert op(a, scalar).dtype.name == want, (op.__name__, "array first")
        assert op(scalar, a).dtype.name == want, (op.__name__, "scalar first")
    assert mx.divide(a, scalar).dtype.name == want_div
    assert mx.divide(scalar, a).dtype.name == want_div
    assert mx.equal(a, scalar).dtype == mx.bool_


@pytest.mark.parametrize("a,b,want", [
    ("int8", "uint8", "int16"), ("int8", "float16", "float16"), ("uint64", "int8", "float32"),
    ("bfloat16", "float16", "float32"), ("bool_", "int8", "int8"), ("uint32", "int32", "int64"),
    ("float16", "int64", "float16"), ("bfloat16", "int32", "bfloat16"),
])
def test_array_array_promotion(a, b, want):
    x, y = mx.array([1], getattr(mx, a)), mx.array([2], getattr(mx, b))
    assert (x + y).dtype.name == want
    assert (y * x).dtype.name == want


def test_numpy_scalars_are_weak():
    assert (arr([1.0]) + np.float64(1.0)).dtype == mx.float32
    assert (mx.array([1], mx.int8) + np.int64(1)).dtype == mx.int8


def test_scalar_overflow_is_an_error():
    with pytest.raises(ValueError, match="overflow"):
        mx.array([2], mx.uint8) + 300
    with pytest.raises(ValueError, match="overflow"):
        mx.array([2], mx.int8) + 2**40


@pytest.mark.parametrize("fn,dt,want", [
    (mx.exp, "int32", "float32"), (mx.sqrt, "bool_", "float32"), (mx.log, "uint64", "float32"),
    (mx.sin, "float16", "float16"), (mx.sigmoid, "int8", "float32"), (mx.abs, "complex64",
                                                                         "float32"),
    (mx.abs, "uint8", "uint8"), (mx.sign, "bool_", "bool"), (mx.square, "bool_", "bool"),
    (mx.floor, "int32", "int32"), (mx.reciprocal, "int32", "float32"),
    (mx.degrees, "int32", "float32"), (mx.real, "complex64", "float32"),
    (mx.imag, "int32", "int32"), (mx.logical_not, "float32", "bool"),
    (mx.isnan, "int32", "bool"), (mx.nan_to_num, "int8", "int8"), (mx.round, "uint8", "uint8"),
])
def test_unary_result_dtypes(fn, dt, want):
    assert fn(mx.array([1, 0], dtype=getattr(mx, dt))).dtype.name == want


def test_scalar_inputs():
    assert mx.sqrt(4).dtype == mx.float32 and mx.sqrt(4).item() == 2.0
    assert mx.abs(-3).item() == 3 and mx.abs(-3).dtype == mx.int32
    assert mx.add(1, 2).dtype == mx.int32 and mx.add(1, 2.0).dtype == mx.float32
    assert mx.add(True, 2).dtype == mx.int32
    assert mx.where(True, 1, 2).dtype == mx.int32


# -- semantics ----------------------------------------------------------------------------------
def test_integer_division_follows_python():
    x, y = arr([7, -7, 7, -7]), arr([2, 2, -2, -2])
    assert np_(mx.floor_divide(x, y)).tolist() == [3, -4, -4, 3]
    assert np_(mx.remainder(x, y)).tolist() == [1, 1, -1, -1]
    assert np_(x // y).tolist() == [3, -4, -4, 3] and np_(x % y).tolist() == [1, 1, -1, -1]
    q, r = mx.divmod(x, y)
    assert np_(q).tolist() == [3, -4, -4, 3] and np_(r).tolist() == [1, 1, -1, -1]
    assert np_(mx.remainder(arr([7, 200], mx.uint8), arr([3, 7], mx.uint8))).tolist() == [1, 4]


def test_float_floor_divide_and_remainder_edges():
    fd = np_(mx.floor_divide(arr([7.0, -7.0, 1.0, -1.0, 0.0]), arr([2.0, 2.0, 0.0, 0.0, 0.0])))
    assert fd[:4].tolist() == [3.0, -4.0, math.inf, -math.inf] and math.isnan(fd[4])
    r = np_(mx.remainder(arr([5.5, -5.5, 1.0, math.inf, 1.0, -1.0]),
                         arr([2.0, 2.0, 0.0, 2.0, math.inf, math.inf])))
    assert r[:2].tolist() == [1.5, 0.5] and np.isnan(r[2:4]).all()
    assert r[4] == 1.0 and r[5] == math.inf  # as NumPy and MLX


def test_integer_divide_by_zero_does_not_crash():
    x, z = arr([7, -7, 0]), arr([0, 0, 0])
    np_(mx.floor_divide(x, z))
    np_(mx.remainder(x, z))
    q, r = mx.divmod(x, z)
    np_(q), np_(r)
    d = np_(mx.divide(x, z))  # true division: float32
    assert d[0] == math.inf and d[1] == -math.inf and math.isnan(d[2])


def test_divmod_is_one_node_with_two_outputs():
    q, r = mx.divmod(arr([7.5, -7.5]), 2)
    assert q._prim is r._prim and isinstance(q._prim, B.DivMod)
    assert np_(q).tolist() == [3.0, -4.0] and np_(r).tolist() == [1.5, 0.5]
    with pytest.raises(ValueError, match=r"\[divmod\]"):
        mx.divmod(arr([1j]), 1)


def test_integer_power():
    assert np_(mx.power(arr([2, 3, -2]), arr([10, 0, 3]))).tolist() == [1024, 1, -8]
    # an integer to a negative integer power is 0 in MLX (NumPy raises)
    assert np_(mx.power(arr([2, 1, -1, 0]), arr([-1, -2, -3, -1]))).tolist() == [0, 0, 0, 0]
    assert np_(arr([2, 3]) ** 2).tolist() == [4, 9] and np_(2 ** arr([1, 2])).tolist() == [2, 4]


def test_bool_arithmetic():
    a, b = arr([True, True, False, False]), arr([True, False, True, False])
    assert np_(a + b).tolist() == [True, True, True, False]
    assert np_(a - b).tolist() == [False, True, True, False]
    assert np_(a * b).tolist() == [True, False, False, False]
    assert np_(mx.power(a, b)).tolist() == [True, True, False, True]
    assert mx.divide(a, a).dtype == mx.float32
    assert mx.left_shift(arr([True]), arr([True])).dtype == mx.uint8
    assert np_(mx.left_shift(arr([True]), arr([True]))).tolist() == [2]


def test_unsigned_semantics():
    u = arr([0, 3, 255], mx.uint8)
    assert np_(mx.abs(u)).tolist() == [0, 3, 255]
    assert np_(mx.sign(u)).tolist() == [0, 1, 1]
    assert np_(-u).tolist() == [0, 253, 1]
    assert np_(mx.array([1, 2], mx.uint8) - 3).tolist() == [254, 255]


def test_nan_and_inf():
    nan, inf = math.nan, math.inf
    x, y = arr([nan, 1.0, -inf]), arr([1.0, nan, 2.0])
    assert np.isnan(np_(mx.maximum(x, y))[:2]).all() and np_(mx.maximum(x, y))[2] == 2.0
    assert np.isnan(np_(mx.minimum(x, y))[:2]).all() and np_(mx.minimum(x, y))[2] == -inf
    assert np_(mx.sign(arr([nan, -2.0, 0.0, -0.0, inf]))).tolist() == [0, -1, 0, 0, 1]  # MLX
    assert np_(mx.isnan(arr([nan, 1.0, inf]))).tolist() == [True, False, False]
    assert np_(mx.isinf(arr([nan, -inf, inf, 1]))).tolist() == [False, True, True, False]
    assert np_(mx.isfinite(arr([nan, -inf, 0.0]))).tolist() == [False, False, True]
    assert np_(mx.isposinf(arr([-inf, inf]))).tolist() == [False, True]
    assert np_(mx.isneginf(arr([-inf, inf]))).tolist() == [True, False]
    assert np_(mx.logaddexp(arr([-inf, inf]), arr([-inf, inf]))).tolist() == [-inf, inf]
    s = np_(mx.sigmoid(arr([-inf, inf, 0.0, -100.0])))
    assert s[:3].tolist() == [0.0, 1.0, 0.5] and 0 <= s[3] < 1e-40
    e = np_(mx.erfinv(arr([-1.0, 1.0, 2.0])))
    assert e[0] == -inf and e[1] == inf and math.isnan(e[2])
    assert np_(mx.equal(arr([nan]), arr([nan]))).tolist() == [False]
    assert np_(mx.clip(arr([nan, 1.0]), 0.0, 0.5))[1] == 0.5
    assert math.isnan(np_(mx.clip(arr([nan, 1.0]), 0.0, 0.5))[0])


def test_no_numpy_warnings():
    with np.errstate(all="raise"):  # the kernels silence their own floating-point warnings
        x = arr([0.0, -1.0, 1e30])
        for f in (mx.log, mx.sqrt, mx.reciprocal, lambda v: v / 0, lambda v: v * v,
                  mx.arctanh, lambda v: mx.floor_divide(v, 0.0), lambda v: v % 0.0,
                  lambda v: mx.power(v, -1.0)):
            np_(f(x))
        np_(mx.floor_divide(arr([1, 2]), arr([0, 0])))


def test_bfloat16_and_float16():
    for dt in (mx.bfloat16, mx.float16):
        x = mx.array([1.0, -2.5, 0.0, math.nan, math.inf], dtype=dt)
        assert mx.exp(x).dtype == dt and mx.sqrt(x).dtype == dt and (x + x).dtype == dt
        r = np_(mx.round(mx.array([0.4, 1.5, 2.5, -0.6], dtype=dt))).astype(np.float32)
        assert r.tolist() == [0.0, 2.0, 2.0, -1.0]
        s = np_(mx.sign(x)).astype(np.float32)
        assert s.tolist() == [1.0, -1.0, 0.0, 0.0, 1.0]
        n = np_(mx.isnan(x)).tolist()
        assert n == [False, False, False, True, False]
        q = np_(mx.floor_divide(mx.array([7.0, -7.0], dtype=dt), 2.0)).astype(np.float32)
        assert q.tolist() == [3.0, -4.0]
        assert np_(mx.nan_to_num(x)).astype(np.float32)[3] == 0.0
    big = np_(mx.nan_to_num(mx.array([math.inf], dtype=mx.bfloat16)))
    assert big[0] == ml_dtypes.finfo(ml_dtypes.bfloat16).max


def test_round_decimals():
    assert np_(mx.round(arr([0.5, 1.5, 2.5, -0.5]))).tolist() == [0.0, 2.0, 2.0, -0.0]
    np.testing.assert_allclose(np_(mx.round(arr([1.234, 1.25]), 1)), [1.2, 1.2], rtol=1e-6)
    assert np_(mx.round(arr([125, 135, -125, -155]), -1)).tolist() == [120, 140, -120, -160]
    assert np_(mx.round(arr([123, 155]), 1)).tolist() == [123, 155]
    assert np_(arr([1.25]).round(1)).tolist() == pytest.approx([1.2])
    assert np_(mx.round(arr([1.5 + 2.5j]))).tolist() == [2 + 2j]
    with pytest.raises(TypeError, match=r"\[round\]"):
        mx.round(arr([1.0]), 1.5)


def test_where_and_clip():
    c = arr([True, False])
    r = mx.where(c, arr([1, 2], mx.uint8), 2.5)
    assert r.dtype == mx.float32 and np_(r).tolist() == [1.0, 2.5]
    assert mx.where(arr([1.0]), arr([1], mx.int8), 3).dtype == mx.int8
    assert mx.where(arr([True, False]), arr([1, 2]), arr([[1, 2], [3, 4]])).shape == (2, 2)
    assert np_(mx.clip(arr([1, 5, 9]), 2, 7)).tolist() == [2, 5, 7]
    assert mx.clip(arr([1, 5, 9]), 2.5, None).dtype == mx.float32
    assert mx.clip(arr([1, 5, 9], mx.uint8), None, mx.array(7.0)).dtype == mx.float32
    assert np_(mx.clip(arr([1.0, 2.0]), 3.0, 0.0)).tolist() == [0.0, 0.0]  # min(max(a, 3), 0)
    with pytest.raises(ValueError, match=r"\[clip\]"):
        mx.clip(arr([1]), None, None)


def test_shifts_and_bitwise():
    assert np_(mx.left_shift(arr([1, -1]), arr([3, 1]))).tolist() == [8, -2]
    assert np_(mx.right_shift(arr([-16, 16]), 2)).tolist() == [-4, 4]
    assert np_(arr([3]) << 1).tolist() == [6] and np_(arr([12]) >> 2).tolist() == [3]
    assert np_(arr([6]) & 3).tolist() == [2] and np_(arr([6]) | 1).tolist() == [7]
    assert np_(arr([6]) ^ 3).tolist() == [5] and np_(~arr([0, -1])).tolist() == [-1, 0]
    assert np_(~arr([True, False])).tolist() == [False, True]
    assert np_(mx.bitwise_and(arr([3]), True)).tolist() == [1]
    assert mx.bitwise_and(arr([True]), arr([3], mx.uint8)).dtype == mx.uint8


def test_logical_ops_convert_to_bool():
    assert np_(mx.logical_and(arr([0.0, math.nan, 2.0]), 1.0)).tolist() == [False, True, True]
    assert np_(mx.logical_or(arr([0, 0]), arr([0, 3]))).tolist() == [False, True]
    assert np_(mx.logical_xor(arr([1, 0, 2]), arr([1, 1, 0]))).tolist() == [False, True, True]
    assert np_(mx.logical_not(3)).tolist() is False


def test_complex_support():
    z = arr([1 + 1j, -2 + 0.5j])
    np.testing.assert_allclose(np_(mx.exp(z)), np.exp(np_(z)), rtol=1e-6)
    assert mx.abs(z).dtype == mx.float32
    np.testing.assert_allclose(np_(mx.sign(arr([3 + 4j, 0j]))), [0.6 + 0.8j, 0], rtol=1e-6)
    np.testing.assert_allclose(np_(mx.logaddexp(arr([1 + 1j]), arr([2 - 1j]))),
                               [1.9063238 - 0.62382865j], rtol=1e-5)
    assert np_(mx.maximum(arr([1 + 5j, 2 + 0j]), arr([2 + 0j, 1 + 9j]))).tolist() == [2, 2]
    assert np_(mx.less(arr([1 + 5j, 2 + 0j]), arr([2 + 0j, 1 + 9j]))).tolist() == [True, False]
    assert np_(mx.floor_divide(arr([5 + 5j]), arr([2 + 0j]))).tolist() == [2.5 + 2.5j]
    assert np_(z.real).tolist() == [1.0, -2.0] and np_(z.imag).tolist() == [1.0, 0.5]
    assert np_(z.conj()).tolist() == [1 - 1j, -2 - 0.5j]
    for f in (mx.expm1, mx.erf, mx.erfinv, mx.sigmoid, mx.floor, mx.ceil, mx.trunc):
        with pytest.raises(ValueError, match=f"\\[{f.__name__}\\]"):
            f(z)
    with pytest.raises(ValueError, match=r"\[remainder\]"):
        mx.remainder(z, 2)
    with pytest.raises(ValueError, match=r"\[arctan2\]"):
        mx.arctan2(z, z)


# -- isclose / allclose / array_equal -------------------------------------------------------------
def test_isclose_details():
    nan, inf = math.nan, math.inf
    a = arr([1.0, nan, inf, inf, 1e-9, -inf])
    b = arr([1.0 + 1e-6, nan, inf, -inf, 0.0, -inf])
    assert np_(mx.isclose(a, b)).tolist() == [True, False, True, False, True, True]
    assert np_(mx.isclose(a, b, equal_nan=True)).tolist()[1] is True
    assert np_(mx.isclose(arr([1.0, 2.0]), 1.0)).tolist() == [True, False]  # broadcasts
    r = mx.isclose(arr([1, 2]), arr([1, 3]))
    assert r.dtype == mx.bool_ and np_(r).tolist() == [True, False]
    assert np_(mx.isclose(arr([1.0]), arr([1.05]), rtol=0.1)).tolist() == [True]
    assert np_(mx.isclose(arr([1.0]), arr([1.05]), atol=0.1, rtol=0.0)).tolist() == [True]
    with pytest.raises(TypeError, match=r"\[isclose\]"):
        mx.isclose(arr([1.0]), arr([1.0]), rtol="x")


def test_allclose_details():
    r = mx.allclose(arr([1.0, 2.0]), arr([1.0, 2.0 + 1e-7]))
    assert r.shape == () and r.dtype == mx.bool_ and r.item() is True
    assert mx.allclose(arr([math.nan]), arr([math.nan])).item() is False
    assert mx.allclose(arr([math.nan]), arr([math.nan]), equal_nan=True).item() is True
    assert mx.allclose(arr([math.inf]), arr([math.inf])).item() is True
    assert mx.allclose(arr([1.0, 2.0]), arr([1.0, 3.0])).item() is False
    with pytest.raises(ValueError, match="allclose|isclose"):  # MLX: a broadcast error
        mx.allclose(arr([1.0, 2.0]), arr([1.0, 2.0, 3.0]))


def test_array_equal_details():
    a = arr([1.0, 2.0])
    r = mx.array_equal(a, arr([1, 2]))  # dtypes may differ
    assert r.shape == () and r.dtype == mx.bool_ and r.item() is True
    assert mx.array_equal(a, arr([1.0, 2.0, 3.0])).item() is False  # no error
    assert mx.array_equal(arr([1.0]), arr([[1.0]])).item() is False  # broadcastable: still False
    assert mx.array_equal(arr([1.0, 1.0]), mx.array(1.0)).item() is False
    nan = arr([math.nan])
    assert mx.array_equal(nan, nan).item() is False
    assert mx.array_equal(nan, nan, equal_nan=True).item() is True
    assert mx.array_equal(arr([1, 2]), arr([1, 2]), equal_nan=True).item() is True
    assert mx.array_equal(1, 1).item() is True


# -- operators ----------------------------------------------------------------------------------
def test_operators_and_reflected():
    a = arr([1.0, 2.0])
    assert np_(a + 1).tolist() == [2.0, 3.0] and np_(1 + a).tolist() == [2.0, 3.0]
    assert np_(1 - a).tolist() == [0.0, -1.0] and np_(a - 1).tolist() == [0.0, 1.0]
    assert np_(2 * a).tolist() == [2.0, 4.0] and np_(1 / a).tolist() == [1.0, 0.5]
    assert np_(7 // arr([2])).tolist() == [3] and np_(7 % arr([3])).tolist() == [1]
    assert np_(-a).tolist() == [-1.0, -2.0] and np_(+a).tolist() == [1.0, 2.0]
    assert +a is not a
    assert np_(abs(arr([-1, 2]))).tolist() == [1, 2]
    assert np_(a < 2).tolist() == [True, False] and np_(a >= 2).tolist() == [False, True]
    assert np_(2 > a).tolist() == [True, False]  # reflected through __lt__
    n = np.array([1.0, 2.0])
    r = n + a  # NumPy defers to the reflected operator
    assert isinstance(r, mx.array) and np_(r).tolist() == [2.0, 4.0]


def test_eq_with_non_arrays():
    a = arr([1.0, 2.0])
    assert np_(a == arr([1.0, 3.0])).tolist() == [True, False]
    assert np_(a == 1.0).tolist() == [True, False]
    # MLX: str, object, list and tuple compare unequal (MLX 0.32 raises TypeError for None;
    # braze treats None like the other non-arrays)
    for other in (None, "x", object(), [1.0, 2.0], (1, 2)):
        assert (a == other) is False
        assert (a != other) is True
    assert a in [None, a]
    with pytest.raises((TypeError, ValueError), match=r"\[less\]"):
        a < "x"


def test_methods():
    a = arr([1.0, 4.0])
    np.testing.assert_allclose(np_(a.sqrt()), [1.0, 2.0])
    np.testing.assert_allclose(np_(a.rsqrt()), [1.0, 0.5])
    np.testing.assert_allclose(np_(a.square()), [1.0, 16.0])
    np.testing.assert_allclose(np_(a.reciprocal()), [1.0, 0.25])
    np.testing.assert_allclose(np_(a.exp()), np.exp([1.0, 4.0]), rtol=1e-6)
    np.testing.assert_allclose(np_(a.log()), np.log([1.0, 4.0]), rtol=1e-6)
    np.testing.assert_allclose(np_(a.log2()), [0.0, 2.0])
    np.testing.assert_allclose(np_(a.log10()), np.log10([1.0, 4.0]), rtol=1e-6)
    np.testing.assert_allclose(np_(a.log1p()), np.log1p([1.0, 4.0]), rtol=1e-6)
    np.testing.assert_allclose(np_(a.sin()), np.sin([1.0, 4.0]), rtol=1e-6)
    np.testing.assert_allclose(np_(a.cos()), np.cos([1.0, 4.0]), rtol=1e-6)
    assert np_((-a).abs()).tolist() == [1.0, 4.0]
    assert a.astype(mx.int32).dtype == mx.int32 and a.astype("float16").dtype == mx.float16
    assert np_(arr([1.7, -1.7]).astype(mx.int32)).tolist() == [1, -1]


# -- in-place operators ---------------------------------------------------------------------
def test_inplace_updates_every_reference():
    a = arr([1, 2])
    b = a
    a += 1.5  # the dtype may change, as in MLX
    assert a is b and b.dtype == mx.float32 and np_(b).tolist() == [2.5, 3.5]
    a = arr([1, 2], mx.uint8)
    b = a
    a -= 3
    assert np_(b).tolist() == [254, 255]
    for op, want in [("__iadd__", [3.0]), ("__isub__", [-1.0]), ("__imul__", [2.0]),
                     ("__itruediv__", [0.5]), ("__ifloordiv__", [0.0]), ("__imod__", [1.0]),
                     ("__ipow__", [1.0])]:
        x = arr([1.0])
        y = x
        r = getattr(x, op)(2.0)
        assert r is x and np_(y).tolist() == want, op
    for op, want in [("__iand__", [2]), ("__ior__", [7]), ("__ixor__", [5]),
                     ("__ilshift__", [48]), ("__irshift__", [0])]:
        x = arr([6])
        y = x
        getattr(x, op)(3)
        assert np_(y).tolist() == want, op


def test_inplace_reads_the_old_value():
    a = arr([1.0, 2.0])
    a += a  # the right-hand side is the same object
    assert np_(a).tolist() == [2.0, 4.0]
    a = arr([1.0, 2.0])
    a += a * 2  # the right-hand side is a lazy expression of the old value
    assert np_(a).tolist() == [3.0, 6.0]
    a = arr([1.0, 2.0])
    a = a + 0  # lazy, then updated in place twice before any eval
    a *= 2
    a += a
    assert np_(a).tolist() == [4.0, 8.0]
    q, r = mx.divmod(arr([7, 8]), 3)
    q += r  # a sibling of a multi-output node
    assert np_(q).tolist() == [3, 4] and np_(r).tolist() == [1, 2]
    a = arr([1.0, 2.0])
    c = a * 2  # a pending consumer built before the update keeps the old value (as MLX)
    a += 1
    assert np_(c).tolist() == [2.0, 4.0] and np_(a).tolist() == [2.0, 3.0]


def test_inplace_error_leaves_array_intact():
    a = arr([1.0])
    with pytest.raises((TypeError, ValueError)):
        a += "x"
    assert np_(a).tolist() == [1.0]


def test_inputs_are_never_modified():
    x = np.array([1.0, -2.0, 3.0], np.float32)
    a = mx.array(x)
    keep = np_(a).copy()
    for f in (mx.exp, mx.negative, mx.abs, mx.sign, mx.stop_gradient, mx.positive, mx.real,
              mx.conj, mx.round, mx.floor, lambda v: v + 1, lambda v: mx.where(v > 0, v, 0.0),
              lambda v: mx.clip(v, 0, 1), lambda v: mx.nan_to_num(v), lambda v: mx.divmod(v, 2)):
        out = f(a)
        for o in out if isinstance(out, list) else [out]:
            np_(o)
    assert np_(a).tolist() == keep.tolist() and x.tolist() == [1.0, -2.0, 3.0]


# -- bad input -------------------------------------------------------------------------------------
def test_shape_mismatch_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"\[add\].*\(3,\).*\(4,\)"):
        mx.add(mx.zeros(3), mx.zeros(4))
    with pytest.raises(ValueError, match=r"\[where\]"):
        mx.where(arr([True, False, True]), arr([1, 2]), 0)


@pytest.mark.parametrize("fn", [mx.add, mx.multiply, mx.maximum, mx.equal, mx.divide,
                                mx.bitwise_and, mx.logical_and, mx.power])
def test_bad_operand_type_names_op(fn):
    with pytest.raises((TypeError, ValueError), match=f"\\[{fn.__name__}\\]"):
        fn(arr([1.0]), "a")
    with pytest.raises((TypeError, ValueError), match=f"\\[{fn.__name__}\\]"):
        fn(None, arr([1.0]))


@pytest.mark.parametrize("fn", [mx.exp, mx.sqrt, mx.abs, mx.negative, mx.isnan, mx.round,
                                lambda v: mx.astype(v, mx.float32)])
def test_bad_unary_input(fn):
    with pytest.raises((TypeError, ValueError), match=r"^\[[a-z_]+\]"):
        fn("a")


@pytest.mark.parametrize("fn", [mx.bitwise_and, mx.bitwise_or, mx.bitwise_xor, mx.left_shift,
                                mx.right_shift])
def test_bitwise_rejects_floats(fn):
    with pytest.raises(ValueError, match=f"\\[{fn.__name__}\\].*float32"):
        fn(arr([1.0]), 1)
    with pytest.raises(RuntimeError):  # the type MLX raises, too
        fn(arr([1]), 1.5)


def test_bitwise_invert_and_negative_reject():
    with pytest.raises(ValueError, match=r"\[bitwise_invert\]"):
        mx.bitwise_invert(arr([1.0]))
    with pytest.raises(ValueError, match=r"bitwise"):
        ~arr([1.0])
    with pytest.raises(ValueError, match=r"\[negative\].*bool"):
        -arr([True])
    with pytest.raises(TypeError, match=r"\[astype\]"):
        mx.astype(arr([1.0]), "not-a-dtype")
    with pytest.raises(ValueError, match=r"\[nan_to_num\]"):
        mx.nan_to_num(arr([1j]))


# -- float64 (the op table cannot build float64 inputs) -------------------------------------------
F64_UNARY = ["sqrt", "rsqrt", "exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
             "tan", "arctan", "sinh", "cosh", "tanh", "arcsinh", "erf", "sigmoid", "abs",
             "negative", "square", "floor", "ceil", "trunc", "round", "reciprocal"]


@pytest.mark.parametrize("name", F64_UNARY)
def test_float64_unary(name):
    x = np.array([0.5, 1.25, 2.0, 3.75])
    got = getattr(mx, name)(mx.array(x, dtype=mx.float64))
    assert got.dtype == mx.float64
    ref = {"rsqrt": lambda v: 1 / np.sqrt(v), "reciprocal": lambda v: 1 / v,
           "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
           "erf": np.vectorize(math.erf)}.get(name, getattr(np, name, None))
    np.testing.assert_allclose(np_(got), ref(x), rtol=1e-13)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power", "maximum",
                                  "minimum", "logaddexp", "arctan2", "floor_divide",
                                  "remainder"])
def test_float64_binary(name):
    x, y = np.array([0.5, 1.25, 2.0, -3.75]), np.array([1.5, 0.25, 4.0, 2.0])
    got = getattr(mx, name)(mx.array(x, dtype=mx.float64), mx.array(y, dtype=mx.float64))
    assert got.dtype == mx.float64
    ref = np.floor(x / y) if name == "floor_divide" else getattr(np, name)(x, y)
    np.testing.assert_allclose(np_(got), ref, rtol=1e-13)
    assert (mx.array(x, dtype=mx.float64) + 1.5).dtype == mx.float64


# -- the primitive table ---------------------------------------------------------------------------
ELEMENTWISE = [n for n, c in REGISTRY.items() if c.__module__ in (U.__name__, B.__name__)]


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_primitives_are_declared_fully(name):
    cls = REGISTRY[name]
    p = {"Log": U.LOG, "Round": U.ROUND, "Equal": B.EQUAL}.get(name) or cls()
    assert p == type(p)(*[getattr(p, f) for f in p.__dataclass_fields__])  # dataclass equality
    assert hash(p) == hash(type(p)(*[getattr(p, f) for f in p.__dataclass_fields__]))
    if name != "DivMod":
        assert isinstance(p.kernel_op, str) and p.kernel_op.isidentifier()
    with pytest.raises(Exception):
        p.foo = 1  # frozen


def test_parameterless_primitives_are_singletons():
    a, b = mx.array([1.0]), mx.array([2.0])
    assert (a + b)._prim is B.ADD and mx.multiply(a, b)._prim is B.MULTIPLY
    assert mx.exp(a)._prim is U.EXP and mx.log2(a)._prim is U.LOG2
    assert U.Exp() == U.EXP and U.Exp() != U.SIN and U.Log("2") == U.LOG2 != U.LOG
    assert repr(B.ADD) == "Add()"


def test_fast_path_binds_directly():
    a, b = mx.array([1.0]), mx.array([2.0])
    out = mx.add(a, b)
    assert out._inputs[0] is a and out._inputs[1] is b  # no AsType or Broadcast in between


# -- optional: braze against MLX itself ------------------------------------------------------------
DTYPES = ["bool_", "uint8", "uint32", "int8", "int32", "int64", "float16", "float32",
          "bfloat16", "complex64"]
UNARY_NAMES = ["abs", "sign", "sqrt", "rsqrt", "square", "reciprocal", "exp", "expm1", "log",
               "log1p", "sin", "arctan", "tanh", "erf", "erfinv", "sigmoid", "floor", "ceil",
               "round", "degrees", "logical_not", "bitwise_invert", "isnan", "isinf",
               "isfinite", "real", "imag", "conj", "stop_gradient", "negative", "trunc",
               "nan_to_num"]
BINARY_NAMES = ["add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power",
                "maximum", "minimum", "logaddexp", "arctan2", "bitwise_and", "left_shift",
                "logical_and", "logical_xor", "equal", "less", "greater_equal"]


def _outcome(mod, fn, args):
    try:
        r = fn(*args)
        r = r if isinstance(r, (list, tuple)) else [r]
        return [str(x.dtype).split(".")[-1] for x in r]
    except (ValueError, TypeError, RuntimeError):
        return "error"


@pytest.mark.parametrize("name", UNARY_NAMES + BINARY_NAMES)
def test_dtypes_match_mlx(name):
    mlx = pytest.importorskip("mlx.core")
    mlx.set_default_device(mlx.cpu)
    for dt in DTYPES:
        ours = _outcome(mx, getattr(mx, name),
                        [mx.array([1, 2], dtype=getattr(mx, dt))] * (
                            2 if name in BINARY_NAMES else 1))
        theirs = _outcome(mlx, getattr(mlx, name),
                          [mlx.array([1, 2], dtype=getattr(mlx, dt))] * (
                              2 if name in BINARY_NAMES else 1))
        if name == "nan_to_num" and dt == "float64":
            continue  # MLX does not support it yet; braze does
        assert ours == theirs, (name, dt, ours, theirs)


# -- issue 13 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["int8", "int32", "int64"])
def test_integer_negative_power_is_zero_as_mlx(dt):
    x = mx.power(mx.array([2, -2, 1, -1], dt), mx.array([-1, -3, -9, -2], dt))
    assert x.tolist() == [0, 0, 0, 0]
    assert mx.power(2, -1).item() == 0  # 0-d


def test_isinf_isfinite_complex_look_at_both_parts():
    inf, nan = math.inf, math.nan
    x = mx.array([complex(0, inf), complex(-inf, 0), complex(3, 4), complex(nan, 0)])
    assert mx.isinf(x).tolist() == [True, True, False, False]
    assert mx.isfinite(x).tolist() == [False, False, True, False]
