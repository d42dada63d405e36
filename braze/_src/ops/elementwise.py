"""Public ops: elementwise math, arithmetic, comparisons, logic and the array operators.

Each op converts and checks its arguments, casts to the dtype it computes in (MLX's rules:
math on integers and bools runs in float32, `divide` of integers gives float32, logical ops
work on bools, shifts of bools on uint8), promotes and broadcasts binary operands through
`binary_operands`, and binds a prebuilt singleton primitive. The common case (two arrays of
one dtype and shape) goes straight from `binary_operands`' fast path to `bind`.
"""
from __future__ import annotations

import math
from typing import List, Optional

import numpy as np

from .. import dtypes as D
from ..array import TraceState, array, node, overwrite_descriptor
from ..memory import check_allocation
from ..prims import binary as B
from ..prims import unary as U
from ..prims.base import bind
from ..prims.core import Copy
from ..scheduler import CompileTraces
from ._helpers import (
    as_array,
    attach_methods,
    binary_operands,
    broadcast_arrays_,
    broadcast_shapes,
    broadcast_to_shape,
    is_scalar,
    to_arrays,
)
from ._helpers import astype as _astype
from ._typing import ArrayLike, Dtype, StreamOrDevice

__all__ = [
    # unary math
    "abs", "negative", "positive", "sign", "sqrt", "rsqrt", "square", "reciprocal", "exp",
    "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos",
    "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "erf", "erfinv",
    "sigmoid", "floor", "ceil", "round", "trunc", "degrees", "radians", "logical_not",
    "bitwise_invert", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "nan_to_num",
    "real", "imag", "conj", "conjugate", "stop_gradient", "astype",
    # binary and ternary
    "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "divmod", "power",
    "maximum", "minimum", "logaddexp", "arctan2", "bitwise_and", "bitwise_or", "bitwise_xor",
    "left_shift", "right_shift", "logical_and", "logical_or", "logical_xor", "where", "clip",
    # comparisons
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "isclose",
    "allclose", "array_equal",
    # MLX aliases
    "acos", "asin", "atan", "acosh", "asinh", "atanh", "atan2", "pow", "bitwise_left_shift",
    "bitwise_right_shift",
]

_f32 = D.float32
_bool = D.bool_
_COPY = Copy()


class DtypeError(ValueError, RuntimeError):
    """A dtype an op does not support: a ValueError as braze promises, and a RuntimeError as
    MLX raises for the bitwise ops."""


def _arr(a, op):
    return a if type(a) is array else as_array(a, op)


def _named(fn, name, doc):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


# -- unary op factories -----------------------------------------------------------------------
_BOOL = D.bool_


def _result_kind(prim) -> str:
    """"same" / "bool" when `prim`'s abstract_eval is the elementwise table's for that kind
    (output: the first input's shape, and its dtype / bool), so the op can skip the call;
    "" otherwise."""
    cls = type(prim)
    qual = getattr(cls.abstract_eval, "__qualname__", "")
    kind = getattr(cls, "kind", "")
    return kind if qual.startswith("_make_abstract.") and kind in ("same", "bool") else ""


def _bind1(prim, a, same):
    """bind(prim, (a,)) for a one-input, one-output primitive; `same`: its output has a's
    shape and dtype (the table's abstract_eval, skipped)."""
    if TraceState.depth or not same:
        return bind(prim, (a,))
    return node(a._shape, a._dtype, prim, (a,))


def _math(prim, name, doc, complex_ok=True):
    """Math function: bool/int inputs compute in float32; complex64 if MLX supports it."""
    same = _result_kind(prim) == "same"

    def op(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
        if type(a) is not array:
            a = as_array(a, name)
        k = a._dtype.kind
        if k != "f":
            if k == "c":
                if not complex_ok:
                    raise ValueError(f"[{name}] Not supported for complex64.")
            else:
                a = _astype(a, _f32)
        return _bind1(prim, a, same)
    return _named(op, name, doc)


def _keep(prim, name, doc, complex_ok=True, bool_ok=True):
    """A function whose result keeps the input dtype (complex -> float32 for Abs)."""
    same = _result_kind(prim) == "same"

    def op(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
        if type(a) is not array:
            a = as_array(a, name)
        k = a._dtype.kind
        if k == "c" and not complex_ok:
            raise ValueError(f"[{name}] Not supported for complex64.")
        if k == "b" and not bool_ok:
            raise ValueError(f"[{name}] Not supported for bool, use logical_not instead.")
        return _bind1(prim, a, same)
    return _named(op, name, doc)


abs = _keep(U.ABS, "abs", "Element-wise absolute value (complex64 gives float32).")
negative = _keep(U.NEGATIVE, "negative", "Element-wise negation.", bool_ok=False)
sign = _keep(U.SIGN, "sign", "Element-wise sign: -1, 0 or 1 (x / |x| for complex; 0 for NaN).")
square = _keep(U.SQUARE, "square", "Element-wise square.")
floor = _keep(U.FLOOR, "floor", "Element-wise floor.", complex_ok=False)
ceil = _keep(U.CEIL, "ceil", "Element-wise ceiling.", complex_ok=False)
trunc = _keep(U.TRUNC, "trunc", "Element-wise rounding toward zero.", complex_ok=False)
stop_gradient = _keep(U.STOP_GRADIENT, "stop_gradient",
                      "The input, with no gradient flowing through it.")
sqrt = _math(U.SQRT, "sqrt", "Element-wise square root.")
rsqrt = _math(U.RSQRT, "rsqrt", "Element-wise reciprocal square root.")
exp = _math(U.EXP, "exp", "Element-wise exponential.")
expm1 = _math(U.EXPM1, "expm1", "Element-wise exp(x) - 1, accurate near 0.", complex_ok=False)
log = _math(U.LOG, "log", "Element-wise natural logarithm.")
log2 = _math(U.LOG2, "log2", "Element-wise base-2 logarithm.")
log10 = _math(U.LOG10, "log10", "Element-wise base-10 logarithm.")
log1p = _math(U.LOG1P, "log1p", "Element-wise log(1 + x), accurate near 0.")
sin = _math(U.SIN, "sin", "Element-wise sine.")
cos = _math(U.COS, "cos", "Element-wise cosine.")
tan = _math(U.TAN, "tan", "Element-wise tangent.")
arcsin = _math(U.ARCSIN, "arcsin", "Element-wise inverse sine.")
arccos = _math(U.ARCCOS, "arccos", "Element-wise inverse cosine.")
arctan = _math(U.ARCTAN, "arctan", "Element-wise inverse tangent.")
sinh = _math(U.SINH, "sinh", "Element-wise hyperbolic sine.")
cosh = _math(U.COSH, "cosh", "Element-wise hyperbolic cosine.")
tanh = _math(U.TANH, "tanh", "Element-wise hyperbolic tangent.")
arcsinh = _math(U.ARCSINH, "arcsinh", "Element-wise inverse hyperbolic sine.")
arccosh = _math(U.ARCCOSH, "arccosh", "Element-wise inverse hyperbolic cosine.")
arctanh = _math(U.ARCTANH, "arctanh", "Element-wise inverse hyperbolic tangent.")
erf = _math(U.ERF, "erf", "Element-wise error function.", complex_ok=False)
erfinv = _math(U.ERFINV, "erfinv", "Element-wise inverse error function.", complex_ok=False)
sigmoid = _math(U.SIGMOID, "sigmoid", "Element-wise logistic sigmoid 1 / (1 + exp(-x)).",
                complex_ok=False)


def positive(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Element-wise +a: the same values as a new array."""
    return bind(_COPY, (_arr(a, "positive"),))


def reciprocal(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Element-wise 1 / a (integers and bools give float32)."""
    return divide(1, _arr(a, "reciprocal"))


def degrees(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Convert angles from radians to degrees."""
    a = _arr(a, "degrees")
    return multiply(a if a._dtype.kind in "fc" else _astype(a, _f32), 180.0 / math.pi)


def radians(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Convert angles from degrees to radians."""
    a = _arr(a, "radians")
    return multiply(a if a._dtype.kind in "fc" else _astype(a, _f32), math.pi / 180.0)


def round(a: ArrayLike, /, decimals: int = 0, stream: StreamOrDevice = None) -> array:
    """Round half to even to `decimals` decimal places (negative: tens, hundreds, ...)."""
    a = _arr(a, "round")
    if not isinstance(decimals, (int, np.integer)) or isinstance(decimals, bool):
        raise TypeError(f"[round] decimals must be an int, got {decimals!r}.")
    return bind(U.ROUND if decimals == 0 else U.Round(int(decimals)), (a,))


def logical_not(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Element-wise logical not (any nonzero value is True)."""
    return bind(U.LOGICAL_NOT, (_arr(a, "logical_not"),))


def bitwise_invert(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Element-wise bitwise inversion of integers (logical not of bools)."""
    a = _arr(a, "bitwise_invert")
    if a._dtype.kind not in "bui":
        raise DtypeError("[bitwise_invert] Bitwise inverse only allowed on integer types, "
                         f"got {a._dtype.name}.")
    return bind(U.BITWISE_INVERT, (a,))


def real(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """The real part (complex64 gives float32; real inputs are returned as they are)."""
    a = _arr(a, "real")
    return bind(U.REAL if a._dtype.kind == "c" else _COPY, (a,))


def imag(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """The imaginary part (complex64 gives float32; real inputs give zeros)."""
    a = _arr(a, "imag")
    if a._dtype.kind == "c":
        return bind(U.IMAG, (a,))
    return _full(a._shape, 0, a._dtype)


def _conj(a, op):
    a = _arr(a, op)
    return bind(U.CONJUGATE if a._dtype.kind == "c" else _COPY, (a,))


def conj(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """The complex conjugate (real inputs are returned as they are)."""
    return _conj(a, "conj")


def conjugate(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """The complex conjugate (real inputs are returned as they are)."""
    return _conj(a, "conjugate")


def astype(a: ArrayLike, dtype: Dtype, /, *, stream: StreamOrDevice = None) -> array:
    """Cast to `dtype` (C semantics: float -> int truncates toward zero)."""
    if dtype is None:  # NumPy reads None as float64; MLX refuses it
        raise TypeError("[astype] Expected a dtype, got None.")
    dt = D.to_dtype(dtype, "astype")
    a = _arr(a, "astype")
    return bind(_COPY, (a,)) if a._dtype is dt else _astype(a, dt)


def _full(shape, value, dt):
    return broadcast_to_shape(array(value, dt), shape)


# -- predicates and nan_to_num --------------------------------------------------------------
def isnan(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Element-wise NaN test (False for integers and bools)."""
    a = _arr(a, "isnan")
    if a._dtype.kind in "fc":
        return bind(B.NOT_EQUAL, (a, a))
    return _full(a._shape, False, _bool)


def isposinf(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Element-wise test for +inf."""
    a = _arr(a, "isposinf")
    if a._dtype.kind in "fc":
        return bind(B.EQUAL, (a, broadcast_to_shape(array(math.inf, a._dtype), a._shape)))
    return _full(a._shape, False, _bool)


def isneginf(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Element-wise test for -inf."""
    a = _arr(a, "isneginf")
    if a._dtype.kind in "fc":
        return bind(B.EQUAL, (a, broadcast_to_shape(array(-math.inf, a._dtype), a._shape)))
    return _full(a._shape, False, _bool)


def isinf(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Element-wise test for +inf or -inf."""
    a = _arr(a, "isinf")
    if a._dtype.kind == "c":  # either part infinite, as NumPy and MLX
        return bind(B.LOGICAL_OR, (isinf(real(a)), isinf(imag(a))))
    if a._dtype.kind == "f":
        return bind(B.LOGICAL_OR, (isposinf(a), isneginf(a)))
    return _full(a._shape, False, _bool)


def isfinite(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Element-wise test for finite values (not inf, not NaN)."""
    a = _arr(a, "isfinite")
    if a._dtype.kind == "c":  # both parts finite
        return bind(B.LOGICAL_AND, (isfinite(real(a)), isfinite(imag(a))))
    if a._dtype.kind == "f":
        return logical_not(bind(B.LOGICAL_OR, (isinf(a), isnan(a))))
    return _full(a._shape, True, _bool)


def _float_arg(v, name, op):
    if isinstance(v, array) and v.size == 1:
        v = v.item()
    if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool):
        raise TypeError(f"[{op}] {name} must be a float, got {v!r}.")
    return float(v)


def nan_to_num(a: ArrayLike, nan: float = 0.0, posinf: Optional[float] = None,
               neginf: Optional[float] = None, *, stream: StreamOrDevice = None) -> array:
    """Replace NaN with `nan`, +inf with `posinf` and -inf with `neginf` (default: the
    dtype's largest and lowest finite values). Integers and bools are returned unchanged."""
    a = _arr(a, "nan_to_num")
    dt = a._dtype
    nan = _float_arg(nan, "nan", "nan_to_num")
    if dt.kind != "f":
        if dt.kind == "c":
            raise ValueError("[nan_to_num] Does not yet support given type: complex64.")
        return bind(_COPY, (a,))
    lo, hi = D.finfo_min_max(dt)
    hi = hi if posinf is None else _float_arg(posinf, "posinf", "nan_to_num")
    lo = lo if neginf is None else _float_arg(neginf, "neginf", "nan_to_num")
    shape = a._shape

    def const(v):
        return _full(shape, v, dt)
    out = bind(B.SELECT, (isnan(a), const(nan), a))
    out = bind(B.SELECT, (isposinf(a), const(hi), out))
    return bind(B.SELECT, (isneginf(a), const(lo), out))


# -- binary op factories -----------------------------------------------------------------------
def _binary(prim, name, doc):
    """Promote, broadcast, bind: the hot path of arithmetic (`bind` inlined outside traces)."""
    abstract = prim.abstract_eval
    kind = _result_kind(prim)

    def op(a: ArrayLike, b: ArrayLike, stream: StreamOrDevice = None) -> array:
        if (type(a) is not array or type(b) is not array or a._dtype is not b._dtype
                or a._shape != b._shape or CompileTraces.dynamic):
            a, b = binary_operands(a, b, name)
        return _emit2(prim, a, b, kind, abstract)
    return _named(op, name, doc)


def _emit2(prim, a, b, kind, abstract):
    """bind(prim, (a, b)) for operands of one shape and dtype, its abstract_eval skipped
    outside traces (`kind` from `_result_kind`)."""
    if TraceState.depth:
        return bind(prim, (a, b))
    if kind == "same":
        shape, dtype = a._shape, a._dtype
    elif kind:
        shape, dtype = a._shape, _BOOL
    else:
        avals = abstract(a, b)
        if len(avals) != 1:  # pragma: no cover
            return bind(prim, (a, b))
        shape, dtype = avals[0]
    return node(shape, dtype, prim, (a, b))


def _binary_float(prim, name, doc, complex_ok=True):
    """Promote; integers and bools compute in float32."""
    abstract = prim.abstract_eval
    kind = _result_kind(prim)

    def op(a: ArrayLike, b: ArrayLike, stream: StreamOrDevice = None) -> array:
        if (type(a) is not array or type(b) is not array or a._dtype is not b._dtype
                or a._shape != b._shape or CompileTraces.dynamic):
            a, b = binary_operands(a, b, name)
        k = a._dtype.kind
        if k != "f":
            if k == "c":
                if not complex_ok:
                    raise ValueError(f"[{name}] Not supported for complex64.")
            else:
                a, b = _astype(a, _f32), _astype(b, _f32)
        return _emit2(prim, a, b, kind, abstract)
    return _named(op, name, doc)


def _bitwise(prim, name, doc, shift=False):
    """Integer and bool operands only (bools shift as uint8, as in MLX)."""
    def op(a: ArrayLike, b: ArrayLike, stream: StreamOrDevice = None) -> array:
        a, b = binary_operands(a, b, name)
        dt = a._dtype
        if dt.kind not in "bui":
            raise DtypeError(f"[{name}] Only allowed on integer or boolean types, got "
                             f"{dt.name}.")
        if shift and dt is _bool:
            a, b = _astype(a, D.uint8), _astype(b, D.uint8)
        return bind(prim, (a, b))
    return _named(op, name, doc)


def _logical(prim, name, doc):
    """Operands are converted to bool (nonzero is True)."""
    def op(a: ArrayLike, b: ArrayLike, stream: StreamOrDevice = None) -> array:
        a, b = _arr(a, name), _arr(b, name)
        a, b = binary_operands(_astype(a, _bool), _astype(b, _bool), name)
        return bind(prim, (a, b))
    return _named(op, name, doc)


add = _binary(B.ADD, "add", "Element-wise addition with broadcasting.")
subtract = _binary(B.SUBTRACT, "subtract", "Element-wise subtraction with broadcasting.")
multiply = _binary(B.MULTIPLY, "multiply", "Element-wise multiplication with broadcasting.")
power = _binary(B.POWER, "power", "Element-wise a ** b (integers to negative powers give 0).")
maximum = _binary(B.MAXIMUM, "maximum", "Element-wise maximum (NaN propagates).")
minimum = _binary(B.MINIMUM, "minimum", "Element-wise minimum (NaN propagates).")
equal = _binary(B.EQUAL, "equal", "Element-wise a == b.")
not_equal = _binary(B.NOT_EQUAL, "not_equal", "Element-wise a != b.")
less = _binary(B.LESS, "less", "Element-wise a < b.")
less_equal = _binary(B.LESS_EQUAL, "less_equal", "Element-wise a <= b.")
greater = _binary(B.GREATER, "greater", "Element-wise a > b.")
greater_equal = _binary(B.GREATER_EQUAL, "greater_equal", "Element-wise a >= b.")
divide = _binary_float(B.DIVIDE, "divide", "Element-wise true division (integers give float32).")
logaddexp = _binary_float(B.LOG_ADD_EXP, "logaddexp", "Element-wise log(exp(a) + exp(b)).")
arctan2 = _binary_float(B.ARCTAN2, "arctan2", "Element-wise arctan(a / b) in the right quadrant.",
                        complex_ok=False)
bitwise_and = _bitwise(B.BITWISE_AND, "bitwise_and", "Element-wise bitwise and.")
bitwise_or = _bitwise(B.BITWISE_OR, "bitwise_or", "Element-wise bitwise or.")
bitwise_xor = _bitwise(B.BITWISE_XOR, "bitwise_xor", "Element-wise bitwise xor.")
left_shift = _bitwise(B.LEFT_SHIFT, "left_shift", "Element-wise a << b.", shift=True)
right_shift = _bitwise(B.RIGHT_SHIFT, "right_shift", "Element-wise a >> b.", shift=True)
logical_and = _logical(B.LOGICAL_AND, "logical_and", "Element-wise logical and.")
logical_or = _logical(B.LOGICAL_OR, "logical_or", "Element-wise logical or.")
logical_xor = _logical(B.NOT_EQUAL, "logical_xor", "Element-wise logical xor.")


def floor_divide(a: ArrayLike, b: ArrayLike, stream: StreamOrDevice = None) -> array:
    """Element-wise floor(a / b) (Python's sign rules for integers; x // 0 is 0 for integers)."""
    a, b = binary_operands(a, b, "floor_divide")
    return bind(B.FLOOR_DIVIDE, (a, b))


def remainder(a: ArrayLike, b: ArrayLike, stream: StreamOrDevice = None) -> array:
    """Element-wise remainder with the sign of the divisor (Python's %)."""
    a, b = binary_operands(a, b, "remainder")
    if a._dtype.kind == "c":
        raise ValueError("[remainder] Complex type not supported.")
    return bind(B.REMAINDER, (a, b))


def divmod(a: ArrayLike, b: ArrayLike, stream: StreamOrDevice = None) -> List[array]:
    """(floor_divide(a, b), remainder(a, b)), computed together."""
    a, b = binary_operands(a, b, "divmod")
    if a._dtype.kind == "c":
        raise ValueError("[divmod] Complex type not supported.")
    return bind(B.DIVMOD, (a, b))


def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike, /, *,
          stream: StreamOrDevice = None) -> array:
    """Elements of x where condition is true, else of y (x and y promote like a binary op)."""
    c = _astype(_arr(condition, "where"), _bool)
    if CompileTraces.dynamic:  # shapeless compile trace: one shape-following broadcast of all 3
        x, y = to_arrays(x, y, "where")
        dt = D.promote(x._dtype, y._dtype)
        c, x, y = broadcast_arrays_([c, _astype(x, dt), _astype(y, dt)], "where")
        return bind(B.SELECT, (c, x, y))
    x, y = binary_operands(x, y, "where")
    shape = x._shape
    if c._shape != shape:
        shape = broadcast_shapes(c._shape, shape, op="where")
        check_allocation("where", shape, x._dtype)
        c, x, y = (broadcast_to_shape(c, shape), broadcast_to_shape(x, shape),
                   broadcast_to_shape(y, shape))
    return bind(B.SELECT, (c, x, y))


def clip(a: ArrayLike, /, a_min: Optional[ArrayLike], a_max: Optional[ArrayLike], *,
         stream: StreamOrDevice = None) -> array:
    """Clip the values of `a` to [a_min, a_max]; either bound (not both) may be None."""
    if a_min is None and a_max is None:
        raise ValueError("[clip] At most one of a_min and a_max may be None.")
    a = _arr(a, "clip")
    if a_min is not None:
        a = bind(B.MAXIMUM, binary_operands(a, a_min, "clip"))
    if a_max is not None:
        a = bind(B.MINIMUM, binary_operands(a, a_max, "clip"))
    return a


# -- closeness and equality of whole arrays ----------------------------------------------------
def _tol(v, name, op):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"[{op}] {name} must be a float, got {v!r}.")
    return float(v)


def isclose(a: ArrayLike, b: ArrayLike, /, rtol: float = 1e-05, atol: float = 1e-08, *,
            equal_nan: bool = False, stream: StreamOrDevice = None) -> array:
    """Element-wise |a - b| <= atol + rtol * |b|; equal infinities are close, NaNs only with
    `equal_nan`."""
    return _isclose(a, b, rtol, atol, equal_nan, "isclose")


def _isclose(a, b, rtol, atol, equal_nan, op):
    rtol, atol = _tol(rtol, "rtol", op), _tol(atol, "atol", op)
    a, b = binary_operands(a, b, op)
    # As MLX: the tolerances are float32 arrays, so the comparison runs in at least float32.
    rhs = add(array(atol, _f32), multiply(array(rtol, _f32), abs(b)))
    out = less_equal(abs(subtract(a, b)), rhs)
    if a._dtype.kind not in "fc":
        return out
    any_inf = bind(B.LOGICAL_OR, (isinf(a), isinf(b)))
    both_inf = logical_or(logical_and(isposinf(a), isposinf(b)),
                          logical_and(isneginf(a), isneginf(b)))
    out = logical_or(logical_and(out, logical_not(any_inf)), both_inf)
    if equal_nan:
        out = logical_or(out, logical_and(isnan(a), isnan(b)))
    return out


def _all(x):
    from .reduction import all as all_
    return all_(x)


def allclose(a: ArrayLike, b: ArrayLike, /, rtol: float = 1e-05, atol: float = 1e-08, *,
             equal_nan: bool = False, stream: StreamOrDevice = None) -> array:
    """True (a scalar bool array) if every element of a and b is close (see isclose)."""
    return _all(_isclose(a, b, rtol, atol, equal_nan, "allclose"))


def array_equal(a: ArrayLike, b: ArrayLike, equal_nan: bool = False,
                stream: StreamOrDevice = None) -> array:
    """True (a scalar bool array) if a and b have the same shape and equal values; arrays of
    different shapes (even broadcastable ones) give False, dtypes may differ."""
    a, b = _arr(a, "array_equal"), _arr(b, "array_equal")
    if a._shape != b._shape:
        return array(False)
    a, b = binary_operands(a, b, "array_equal")
    prim = B.NAN_EQUAL if equal_nan and a._dtype.kind in "fc" else B.EQUAL
    return _all(bind(prim, (a, b)))


# -- MLX aliases: built again under their own names, which their errors then name -------------
acos = _math(U.ARCCOS, "acos", arccos.__doc__)
asin = _math(U.ARCSIN, "asin", arcsin.__doc__)
atan = _math(U.ARCTAN, "atan", arctan.__doc__)
acosh = _math(U.ARCCOSH, "acosh", arccosh.__doc__)
asinh = _math(U.ARCSINH, "asinh", arcsinh.__doc__)
atanh = _math(U.ARCTANH, "atanh", arctanh.__doc__)
atan2 = _binary_float(B.ARCTAN2, "atan2", arctan2.__doc__, complex_ok=False)
pow = _binary(B.POWER, "pow", power.__doc__)  # noqa: A001  (MLX's name)
bitwise_left_shift = _bitwise(B.LEFT_SHIFT, "bitwise_left_shift", left_shift.__doc__, shift=True)
bitwise_right_shift = _bitwise(B.RIGHT_SHIFT, "bitwise_right_shift", right_shift.__doc__,
                               shift=True)


# -- array operators and methods ----------------------------------------------------------------
def _comparable(v) -> bool:
    return type(v) is array or is_scalar(v) or isinstance(v, (array, np.ndarray))


def _eq(a, b):
    # As MLX: comparing with something that is not an array or a scalar is simply unequal.
    return equal(a, b) if _comparable(b) else False


def _ne(a, b):
    return not_equal(a, b) if _comparable(b) else True


def _invert(a):
    if a._dtype.kind in "fc":
        raise DtypeError(f"[bitwise_invert] Floating point types not allowed with bitwise "
                         f"inversion, got {a._dtype.name}.")
    return bitwise_invert(a)


def _inplace(fn):
    """`a op= b` as MLX does it: the object `a` takes the new value, so every reference to it
    sees the update, while nodes built from `a` earlier (the right-hand side included) keep
    reading the old value (`overwrite_descriptor` re-points them)."""
    def method(self, other):
        if fn is divide and self._dtype.kind not in "fc":
            raise DtypeError(f"[divide] In place division cannot cast to non-floating point "
                             f"type {self._dtype.name}.")
        overwrite_descriptor(self, fn(self, other))
        return self
    method.__name__ = f"__i{fn.__name__}__"
    return method


def _reflect(fn):
    def method(self, other):
        return fn(other, self)
    return method


def _pow(self, other, mod=None):
    return power(self, other)


class OperandError(TypeError, ValueError):
    """An operator with an operand that is not an array or a scalar (`a * "s"`, `a < [1]`):
    MLX raises ValueError; TypeError is Python's convention for unsupported operands."""


def _operator(fn, what: str):
    """The operator form of `fn`: as in MLX, operators take arrays, scalars and NumPy arrays
    only (lists and tuples too are refused; the functions accept them)."""
    def method(self, other, *rest):
        if not _comparable(other) and not hasattr(other, "__mlx_array__"):
            raise OperandError(f"[{fn.__name__.strip('_')}] Cannot perform {what} on an array and "
                               f"{type(other).__name__}.")
        return fn(self, other, *rest)
    method.__name__ = getattr(fn, "__name__", what)
    return method


def _astype_method(self, dtype: Dtype, stream: StreamOrDevice = None) -> array:
    """Cast to `dtype`; see `mx.astype`."""
    return astype(self, dtype, stream=stream)  # MLX's method takes the stream positionally


_METHODS = {
    "__add__": add, "__radd__": _reflect(add), "__iadd__": _inplace(add),
    "__sub__": subtract, "__rsub__": _reflect(subtract), "__isub__": _inplace(subtract),
    "__mul__": multiply, "__rmul__": _reflect(multiply), "__imul__": _inplace(multiply),
    "__truediv__": divide, "__rtruediv__": _reflect(divide), "__itruediv__": _inplace(divide),
    "__div__": divide, "__rdiv__": _reflect(divide),
    "__floordiv__": floor_divide, "__rfloordiv__": _reflect(floor_divide),
    "__ifloordiv__": _inplace(floor_divide),
    "__mod__": remainder, "__rmod__": _reflect(remainder), "__imod__": _inplace(remainder),
    "__divmod__": divmod, "__rdivmod__": _reflect(divmod),  # builtin divmod(a, b)
    "__pow__": _pow, "__rpow__": _reflect(power), "__ipow__": _inplace(power),
    "__and__": bitwise_and, "__rand__": _reflect(bitwise_and),
    "__iand__": _inplace(bitwise_and),
    "__or__": bitwise_or, "__ror__": _reflect(bitwise_or), "__ior__": _inplace(bitwise_or),
    "__xor__": bitwise_xor, "__rxor__": _reflect(bitwise_xor), "__ixor__": _inplace(bitwise_xor),
    "__lshift__": left_shift, "__rlshift__": _reflect(left_shift),
    "__ilshift__": _inplace(left_shift),
    "__rshift__": right_shift, "__rrshift__": _reflect(right_shift),
    "__irshift__": _inplace(right_shift),
    "__eq__": _eq, "__ne__": _ne, "__lt__": less, "__le__": less_equal, "__gt__": greater,
    "__ge__": greater_equal,
    "__neg__": negative, "__pos__": positive, "__abs__": abs, "__invert__": _invert,
    "abs": abs, "square": square, "sqrt": sqrt, "rsqrt": rsqrt, "reciprocal": reciprocal,
    "exp": exp, "log": log, "log2": log2, "log10": log10, "log1p": log1p, "sin": sin,
    "cos": cos, "round": round, "conj": conj, "astype": _astype_method,
    "real": property(real), "imag": property(imag),
}
_OPERATOR_NAMES = {
    "add": "addition", "sub": "subtraction", "mul": "multiplication", "truediv": "division",
    "div": "division", "floordiv": "floor division", "mod": "modulus", "divmod": "divmod",
    "pow": "power", "and": "bitwise and", "or": "bitwise or", "xor": "bitwise xor",
    "lshift": "left shift", "rshift": "right shift", "lt": "less than",
    "le": "less than or equal", "gt": "greater than", "ge": "greater than or equal"}
for _k, _what in _OPERATOR_NAMES.items():
    for _name in (f"__{_k}__", f"__r{_k}__", f"__i{_k}__"):
        if _name in _METHODS:
            _METHODS[_name] = _operator(_METHODS[_name], _what)
attach_methods(_METHODS)
