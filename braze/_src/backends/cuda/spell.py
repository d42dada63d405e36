"""How the `cuda` backend spells each kernel op in CUDA C++: the backend's one op table.

`SPELL[op]` (op = `Primitive.kernel_op`) turns a primitive into an expression over argument
expressions `args` of dtypes `arg_dts`, computed in the compute type of the result dtype `out`;
an op CUDA's math library has a function for is spelled by `MATH` (`expf` / `exp`).
Parameters come from the primitive (Log's base is in its op name, Round's `decimals`, Equal's
`equal_nan`, AsType's `dtype`). Helpers beyond CUDA's library live in `braze/prelude.cuh`
(prelude.py), in namespace `braze`.

Compute types: bool, integers, float32 and float64 compute in their own type; float16 and
bfloat16 are stored as `__half` / `__nv_bfloat16` and compute in float (the body emitter rounds
every result that is not `exact`, as the cpu backend does). Integer semantics are the cpu
backend's: wrap-around (through the unsigned type: signed overflow is undefined in C++),
Python's signs for `//` and `%`, NumPy's shifts, braze's float -> int casts. complex64 is not
spelled (`Unsupported`).
"""
from __future__ import annotations

import math
import struct

import numpy as np

from ..spelling import COMMON, Unsupported

#: the C++ type each dtype is computed in
COMPUTE = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
    "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
    "uint64": "uint64_t", "float16": "float", "bfloat16": "float", "float32": "float",
    "float64": "double",
}
#: the C++ type of the buffer elements
STORAGE = dict(COMPUTE, float16="__half", bfloat16="__nv_bfloat16")
HALF = ("float16", "bfloat16")
#: half-precision values are converted on load and store and rounded after ops
LOAD = {"float16": "braze::to_float", "bfloat16": "braze::to_float"}
STORE = {"float16": "braze::to_f16", "bfloat16": "braze::to_bf16"}
ROUND = {"float16": "braze::round_f16", "bfloat16": "braze::round_bf16"}

#: kernel ops that are one CUDA math-library function (float name; double drops the "f")
MATH = {
    "exp": "expf", "expm1": "expm1f", "log": "logf", "log2": "log2f", "log10": "log10f",
    "log1p": "log1pf", "sin": "sinf", "cos": "cosf", "tan": "tanf", "sinh": "sinhf",
    "cosh": "coshf", "tanh": "tanhf", "arcsin": "asinf", "arccos": "acosf", "arctan": "atanf",
    "erf": "erff",
    "sqrt": "sqrtf", "floor": "floorf", "ceil": "ceilf", "trunc": "truncf",
    "arctan2": "atan2f", "power": "powf",
}


def literal(inp) -> str:
    """Exact C++ source for a baked constant (`IRInput`) in its compute type."""
    dt, v = inp.dtype, inp.py_value()
    k = dt.kind
    if k == "c":
        raise Unsupported("complex constant")
    if k == "b":
        return "true" if v else "false"
    T = COMPUTE[dt.name]
    if k in "ui":
        if dt.name == "int64" and v == -2**63:
            return "int64_t(0x8000000000000000ull)"
        suffix = "ull" if k == "u" else "ll"
        return f"{T}({v}{suffix})"
    if dt.name == "float64":
        if math.isnan(v) or math.isinf(v):  # the exact bits: a NaN keeps its payload
            bits = struct.unpack("<Q", struct.pack("<d", v))[0]
            return f"__longlong_as_double(0x{bits:016x}ll)"
        return repr(v) if "e" in repr(v) or "." in repr(v) else f"{v!r}.0"
    # float32, float16, bfloat16: the exact value as float32
    if math.isnan(v) or math.isinf(v):
        bits = int(np.array(inp.array(), dtype=np.float32).view(np.uint32))
        return f"__uint_as_float(0x{bits:08x}u)"
    text = repr(v)
    return f"{text}f" if ("e" in text or "." in text) else f"{text}.0f"


def cast(a: str, src, dst) -> str:
    """Source converting `a` (computed in `src`'s compute type) to dtype `dst` with braze's
    cast semantics (braze/_src/casts.py)."""
    s, d = src.name, dst.name
    ks, kd = src.kind, dst.kind
    if "c" in (ks, kd):
        raise Unsupported("complex cast")
    if s == d:
        return a
    T = COMPUTE[d]
    if kd == "b":
        return a if ks == "b" else f"({a} != {COMPUTE[s]}(0))"
    if ks == "b":
        return f"{T}({a} ? 1 : 0)"
    if kd == "f":
        if d in HALF:  # through float32 from every dtype (braze's cast, as MLX)
            return f"{ROUND[d]}({a if COMPUTE[s] == 'float' else f'float({a})'})"
        return a if COMPUTE[s] == T else f"{T}({a})"
    if ks in "ui":
        return f"{T}({a})"  # keeps the low bits (modular)
    if d == "int64":
        return f"braze::f_to_i64({a})"
    if d == "int32":
        return f"braze::f_to_i32({a})"
    if d == "uint32":  # through int64, keep the low bits
        return f"uint32_t(braze::f_to_i64({a}))"
    if d == "uint64":
        return f"braze::f_to_u64({a})"
    return f"{T}(braze::f_to_i32({a}))"  # 8/16-bit: through int32, keep the low bits


class Operands:
    """One op's operands as its spelling function reads them."""

    __slots__ = ("prim", "args", "dts", "out", "T", "k", "f64")

    def __init__(self, prim, args, dts, out):
        self.prim, self.args, self.dts, self.out = prim, args, dts, out
        self.T = COMPUTE[out.name]
        self.k = dts[0].kind if dts else None  # the first argument's kind: b u i f
        self.f64 = out.name == "float64" or bool(dts) and dts[0].name == "float64"

    @property
    def a(self):
        return self.args[0]

    @property
    def b(self):
        return self.args[1]

    @property
    def AT(self):
        """The compute type of the first argument."""
        return COMPUTE[self.dts[0].name]

    def wrap(self, fn: str, *args) -> str:
        """An integer op with wrap-around (`braze::wadd<int32_t>(a, b)`)."""
        return f"braze::{fn}<{self.T}>({', '.join(args)})"

    def math(self, op: str) -> str:
        self.floats_only(op)
        name = MATH[op]
        return name[:-1] if self.f64 else name

    def floats_only(self, op: str) -> None:
        if self.k != "f":
            raise Unsupported(f"{op} on {self.dts[0].name}")


def expr(prim, args: list, arg_dts: list, out) -> str:
    """The expression computing `prim(*args)` in `out`'s compute type (before any
    half-precision rounding)."""
    op = prim.kernel_op
    spell = SPELL.get(op)
    if spell is None and op in MATH:
        spell = _math_function(op)
    if spell is None or out.name not in COMPUTE or any(d.kind == "c" for d in arg_dts):
        raise Unsupported(f"no cuda spelling of {prim!r} on these dtypes")
    return spell(Operands(prim, args, arg_dts, out))


def _math_function(op):
    def spell(o):
        return f"{o.math(op)}({', '.join(o.args)})"
    return spell


# -- unary --------------------------------------------------------------------------------------
def _abs(o):
    if o.k == "i":
        return f"({o.a} >= 0 ? {o.a} : {o.wrap('wsub', f'{o.T}(0)', o.a)})"
    return f"{'fabs' if o.f64 else 'fabsf'}({o.a})" if o.k == "f" else o.a


def _negative(o):
    if o.k == "b":
        raise Unsupported("negative of bool")
    return f"-{o.a}" if o.k == "f" else o.wrap("wsub", f"{o.T}(0)", o.a)


def _sign(o):
    a, T = o.a, o.T
    if o.k == "b":
        return a
    if o.k == "u":
        return f"{T}({a} > 0 ? 1 : 0)"
    return f"{T}(({a} > 0 ? 1 : 0) - ({a} < 0 ? 1 : 0))"  # sign(nan) == 0


def _round(o):
    a, T, d = o.a, o.T, o.prim.decimals
    if o.k != "f":
        if o.k == "b" or d >= 0:
            return a
        s = 10.0 ** (-d)  # integers at negative decimals: half to even on a / 10**-d
        return f"{T}(braze::f_to_i64(rint(double({a}) / {s!r}) * {s!r}))"
    rint = "rint" if o.f64 else "rintf"
    if d == 0:
        return f"{rint}({a})"
    s = f"{T}({10.0 ** abs(d)!r})"
    return f"({rint}({a} * {s}) / {s})" if d > 0 else f"({rint}({a} / {s}) * {s})"


def _rounding(op):
    """floor/ceil/trunc: the math function on floats, the value itself on integers."""
    return lambda o: f"{o.math(op)}({o.a})" if o.k == "f" else o.a


def _erfinv(o):
    o.floats_only("erfinv")
    return f"erfinv({o.a})" if o.f64 else f"braze::erfinv_mlx({o.a})"


def _in_double(fn: str):
    """An inverse hyperbolic function: in float64, rounded once (as the cpu backend)."""
    def spell(o):
        o.floats_only(fn)
        return f"{fn}({o.a})" if o.f64 else f"float({fn}(double({o.a})))"
    return spell


def _rsqrt(o):
    o.floats_only("rsqrt")
    return f"(1.0 / sqrt({o.a}))" if o.f64 else f"(1.0f / sqrtf({o.a}))"


# -- binary -------------------------------------------------------------------------------------
def _arith(sym: str, wrap: str, on_bool: str):
    def spell(o):
        if o.k == "b":
            return on_bool.format(a=o.a, b=o.b)
        if o.k == "f":
            return f"({o.a} {sym} {o.b})"
        return o.wrap(wrap, o.a, o.b)
    return spell


def _by_kind(on_float, on_bool, int_fn: str):
    """A binary op spelled per argument kind; integers by the prelude's `{int_fn}i/u`."""
    def spell(o):
        if o.k in "fb":
            return (on_float if o.k == "f" else on_bool)(o)
        return f"braze::{int_fn}{o.k}<{o.T}>({o.a}, {o.b})"
    return spell


_floor_divide = _by_kind(lambda o: f"{'floor' if o.f64 else 'floorf'}({o.a} / {o.b})",
                         lambda o: f"({o.a} && {o.b})", "floordiv_")
_remainder = _by_kind(lambda o: f"braze::rem_f({o.a}, {o.b})", lambda o: "false", "rem_")


def _power(o):
    if o.k == "f":
        return f"{o.math('power')}({o.a}, {o.b})"
    if o.k == "b":
        return f"({o.a} || !{o.b})"
    return f"braze::{'ipow' if o.k == 'i' else 'upow'}<{o.T}>({o.a}, {o.b})"


def _extremum(is_max: bool):
    def spell(o):
        a, b = o.a, o.b
        if o.k == "f":
            return f"braze::{'max_f' if is_max else 'min_f'}({a}, {b})"
        if o.k == "b":
            return f"({a} || {b})" if is_max else f"({a} && {b})"
        return f"({a} {'>' if is_max else '<'} {b} ? {a} : {b})"
    return spell


def _logaddexp(o):
    o.floats_only("logaddexp")
    return f"braze::logaddexp_f({o.a}, {o.b})"


def _sigmoid(o):
    o.floats_only("sigmoid")
    return f"braze::sigmoid_f({o.a})"


def _shift(left: bool):
    def spell(o):
        if o.k not in "ui":
            raise Unsupported(f"shift of {o.dts[0].name}")
        fn = "shl" if left else ("shr_i" if o.k == "i" else "shr_u")
        return f"braze::{fn}<{o.T}>({o.a}, {o.b})"
    return spell


def _logical(sym: str):
    def spell(o):
        if o.k == "b":
            return f"({o.a} {sym} {o.b})"
        z = f"{o.AT}(0)"
        return f"(({o.a} != {z}) {sym} ({o.b} != {z}))"
    return spell


def _equal(o):
    if o.prim.equal_nan and o.k == "f":
        return f"braze::nan_equal({o.a}, {o.b})"
    return f"({o.a} == {o.b})"


SPELL = {
    **COMMON,
    "cast": lambda o: cast(o.a, o.dts[0], o.prim.dtype),
    "abs": _abs, "negative": _negative, "sign": _sign,
    "square": lambda o: o.a if o.k == "b" else (f"({o.a} * {o.a})" if o.k == "f"
                                                else o.wrap("wmul", o.a, o.a)),
    "rsqrt": _rsqrt,
    "arcsinh": _in_double("asinh"), "arccosh": _in_double("acosh"),
    "arctanh": _in_double("atanh"),
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "trunc": _rounding("trunc"),
    "round": _round,
    "sigmoid": _sigmoid,
    "logical_not": lambda o: f"!{o.a}" if o.k == "b" else f"({o.a} == {o.AT}(0))",
    "bitwise_invert": lambda o: f"!{o.a}" if o.k == "b" else f"{o.T}(~{o.a})",
    "erfinv": _erfinv,
    "add": _arith("+", "wadd", "({a} || {b})"),
    "subtract": _arith("-", "wsub", "({a} != {b})"),
    "multiply": _arith("*", "wmul", "({a} && {b})"),
    "floor_divide": _floor_divide, "remainder": _remainder, "power": _power,
    "maximum": _extremum(True), "minimum": _extremum(False),
    "logaddexp": _logaddexp,
    "left_shift": _shift(True), "right_shift": _shift(False),
    "logical_and": _logical("&&"), "logical_or": _logical("||"),
    "equal": _equal,
    "select": lambda o: f"({o.a} ? {o.b} : {o.args[2]})",
}
