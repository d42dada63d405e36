"""Primitives: the binary elementwise family, plus the ternary Select and two-output DivMod.

Declared one line each from a table like the unary family (see `unary.make_elementwise`).
Inputs arrive with one common dtype and shape (the ops layer promotes and broadcasts); for
`Select` the condition is bool and x, y share a dtype.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .base import Primitive, lazy_dataclass, ops
from .unary import elementwise_vmap, in_f32, kind, make_elementwise

_U8 = np.dtype(np.uint8)


def _bool_via_u8(fn):
    """Run an integer kernel on bools (as uint8) and map the result back to bool (!= 0)."""
    def kernel(a, b):
        if a.dtype.kind == "b":
            return fn(a.view(_U8), b.view(_U8)) != 0
        return fn(a, b)
    return kernel


def _subtract(a, b):
    if a.dtype.kind == "b":  # MLX: bool - bool is xor
        return np.not_equal(a, b)
    return np.subtract(a, b)


def _floor_div_float(a, b):
    return np.floor(np.divide(a, b))


_floor_div_float = in_f32(_floor_div_float)


def _floor_divide(a, b):
    k = kind(a.dtype)
    if k == "f":  # MLX: floor(a / b) for floats
        return _floor_div_float(a, b)
    if k == "c":  # MLX: plain division for complex
        return np.divide(a, b)
    if k == "b":
        return np.floor_divide(a.view(_U8), b.view(_U8)) != 0
    return np.floor_divide(a, b)  # Python's sign rule; x // 0 == 0 (no crash)


def _power(a, b):
    k = a.dtype.kind
    if k == "b":
        return np.power(a.view(_U8), b.view(_U8)) != 0
    if k == "i":
        neg = b < 0
        if neg.any():  # MLX: an integer to a negative integer power is 0 (NumPy raises)
            r = np.power(a, np.where(neg, 0, b).astype(b.dtype))
            return np.where(neg, a.dtype.type(0), r)  # np.where: r may be a 0-d scalar
    return np.power(a, b)


def _logaddexp(a, b):
    if a.dtype.kind != "c":
        return np.logaddexp(a, b)
    big = np.real(a) >= np.real(b)
    m, n = np.where(big, a, b), np.where(big, b, a)
    return m + np.log1p(np.exp(n - m))


def _select(c, x, y):
    return np.where(c, x, y)


# -- rules that are not a plain derivative -----------------------------------------------------
def _power_db(t, a, b, out):
    """d(a^b)/db = log(a) a^b, taken as 0 where a^b == 0 (MLX: 0 * log 0 -> 0)."""
    return t * ops.where(ops.not_equal(out, 0), ops.log(a) * out, 0)


def _logaddexp_da(t, a, b, out):
    """exp(a - out), i.e. sigmoid(a - b) for reals (exact in both tails)."""
    return t * (ops.exp(a - out) if a.dtype is D.complex64 else ops.sigmoid(a - b))


def _select_vjp(self, primals, cotangents, argnums, outputs):
    """The cotangent goes to x where the condition holds, to y elsewhere (as MLX, through
    `where`, so values in the branch not taken never reach the other's gradient)."""
    c, g = primals[0], cotangents[0]
    z = ops.zeros_like(g)
    return [ops.zeros_like(c) if i == 0 else ops.where(c, g, z) if i == 1 else ops.where(c, z, g)
            for i in argnums]


def _select_jvp(self, primals, tangents, argnums):
    c, x = primals[0], primals[1]
    tan = dict(zip(argnums, tangents))
    if 1 not in tan and 2 not in tan:
        return [ops.zeros_like(x)]
    tx = tan.get(1)
    ty = tan.get(2)
    return [ops.where(c, ops.zeros_like(x) if tx is None else tx,
                      ops.zeros_like(x) if ty is None else ty)]


# -- the table ----------------------------------------------------------------------------------
# `d=(da, db)`: per input, the jvp `(t, a, b, out) -> t * df/da` (see unary.linear_rules).
_G = globals()
_B = dict(namespace=_G, arity=2)
_NDB = dict(namespace=_G, arity=2, differentiable=False)

ADD = make_elementwise("Add", np.add, "same", "add",
                       d=(lambda t, a, b, o: t, lambda t, a, b, o: t), **_B)
SUBTRACT = make_elementwise("Subtract", _subtract, "same", "subtract",
                            d=(lambda t, a, b, o: t, lambda t, a, b, o: -t), **_B)
def _multiply_vjp(self, primals, cotangents, argnums, outputs):
    # conj(other) * g, in that order: NumPy's complex multiply (fused multiply-adds) is not
    # bitwise commutative, and MLX's gradients equal exactly `conj(b) * g` (its test checks)
    g = cotangents[0]
    res = []
    for i in argnums:
        other = primals[1 - i]
        res.append(ops.multiply(ops.conj(other) if other.dtype is D.complex64 else other, g))
    return res


MULTIPLY = make_elementwise("Multiply", np.multiply, "same", "multiply",
                            d=(lambda t, a, b, o: t * b, lambda t, a, b, o: t * a),
                            vjp=_multiply_vjp, **_B)
DIVIDE = make_elementwise("Divide", np.divide, "same", "divide",
                          d=(lambda t, a, b, o: t / b, lambda t, a, b, o: -(t * o) / b), **_B)
FLOOR_DIVIDE = make_elementwise("FloorDivide", _floor_divide, "same", "floor_divide",
                                **_NDB)  # piecewise constant: zero gradient, as MLX
REMAINDER = make_elementwise("Remainder", _bool_via_u8(np.remainder), "same", "remainder",
                             numpy_slow=True, d=(lambda t, a, b, o: t,
                                lambda t, a, b, o: -(t * ops.floor_divide(a, b))), **_B)
POWER = make_elementwise("Power", _power, "same", "power", costly=True,
                         d=(lambda t, a, b, o: t * (b * ops.power(a, b - 1)), _power_db), **_B)
MAXIMUM = make_elementwise("Maximum", np.maximum, "same", "maximum", exact=True,  # ties: to b
                           d=(lambda t, a, b, o: t * (a > b), lambda t, a, b, o: t * (a <= b)),
                           **_B)
MINIMUM = make_elementwise("Minimum", np.minimum, "same", "minimum", exact=True,  # ties: to b
                           d=(lambda t, a, b, o: t * (a < b), lambda t, a, b, o: t * (a >= b)),
                           **_B)
LOG_ADD_EXP = make_elementwise("LogAddExp", _logaddexp, "same", "logaddexp", costly=True,
                               numpy_slow=True,
                               d=(_logaddexp_da, lambda t, a, b, o: _logaddexp_da(t, b, a, o)),
                               **_B)
ARCTAN2 = make_elementwise("ArcTan2", np.arctan2, "same", "arctan2", costly=True,
                           d=(lambda t, a, b, o: t * b / (a * a + b * b),
                              lambda t, a, b, o: -(t * a) / (a * a + b * b)), **_B)
BITWISE_AND = make_elementwise("BitwiseAnd", np.bitwise_and, "same", "bitwise_and", **_NDB)
BITWISE_OR = make_elementwise("BitwiseOr", np.bitwise_or, "same", "bitwise_or", **_NDB)
BITWISE_XOR = make_elementwise("BitwiseXor", np.bitwise_xor, "same", "bitwise_xor", **_NDB)
LEFT_SHIFT = make_elementwise("LeftShift", np.left_shift, "same", "left_shift", **_NDB)
RIGHT_SHIFT = make_elementwise("RightShift", np.right_shift, "same", "right_shift", **_NDB)
LOGICAL_AND = make_elementwise("LogicalAnd", np.logical_and, "bool", "logical_and", **_NDB)
LOGICAL_OR = make_elementwise("LogicalOr", np.logical_or, "bool", "logical_or", **_NDB)
NOT_EQUAL = make_elementwise("NotEqual", np.not_equal, "bool", "not_equal", **_NDB)
LESS = make_elementwise("Less", np.less, "bool", "less", **_NDB)
LESS_EQUAL = make_elementwise("LessEqual", np.less_equal, "bool", "less_equal", **_NDB)
GREATER = make_elementwise("Greater", np.greater, "bool", "greater", **_NDB)
GREATER_EQUAL = make_elementwise("GreaterEqual", np.greater_equal, "bool", "greater_equal",
                                 **_NDB)
SELECT = make_elementwise("Select", _select, "second", "select", exact=True, namespace=_G,
                          arity=3, vjp=_select_vjp, jvp=_select_jvp)


@lazy_dataclass
class Equal(Primitive):
    """a == b; with `equal_nan`, two NaNs compare equal too (MLX prints it as NaNEqual)."""

    equal_nan: bool = False
    differentiable = False

    kernel_op = "equal"  # NaNs equal with `equal_nan`

    def abstract_eval(self, a, b):
        return [(a.shape, D.bool_)]

    def eval_cpu(self, a, b):
        r = np.equal(a, b)
        if self.equal_nan and kind(a.dtype) in "fc":
            r |= np.isnan(a) & np.isnan(b)
        return [r]

    def vmap(self, inputs, axes):
        return elementwise_vmap(self, inputs, axes)


EQUAL, NAN_EQUAL = Equal(False), Equal(True)


@lazy_dataclass
class DivMod(Primitive):
    """(floor_divide(a, b), remainder(a, b)) as one node with two outputs."""

    differentiable = False  # MLX gives zero gradients (floor_divide is piecewise constant)

    def abstract_eval(self, a, b):
        return [(a.shape, a.dtype), (a.shape, a.dtype)]

    def eval_cpu(self, a, b):
        return [_floor_divide(a, b), REMAINDER.fn(a, b)]

    def vmap(self, inputs, axes):
        return elementwise_vmap(self, inputs, axes)


DIVMOD = DivMod()
