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

from .. import spelling
from ..spelling import COMMON, by_kind

#: the C++ type each dtype is computed in
COMPUTE = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
    "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
    "uint64": "uint64_t", "float16": "float", "bfloat16": "float", "float32": "float",
    "float64": "double",
}
#: the C++ type of the buffer elements
STORAGE = dict(COMPUTE, float16="__half", bfloat16="__nv_bfloat16")
#: half-precision values are converted on load and store and rounded after ops
HALF = spelling.HALF
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
    return spelling.literal(Operands, inp)


class Operands(spelling.Operands):
    __slots__ = ()
    COMPUTE = COMPUTE
    BACKEND = "cuda"

    OR, AND = "||", "&&"
    NOT, CHOOSE = "!{}", "({c} ? {a} : {b})"
    TRUE, FALSE = "true", "false"

    @staticmethod
    def int_literal(dt, v: int) -> str:
        if dt.name == "int64" and v == -2**63:
            return "int64_t(0x8000000000000000ull)"
        return f"{COMPUTE[dt.name]}({v}{'ull' if dt.kind == 'u' else 'll'})"

    @staticmethod
    def float_literal(inp, v: float) -> str:
        """float64 as itself, float32/16/bfloat16 as their exact float32 value; NaN and ±Inf
        through their bits (a NaN keeps its payload)."""
        if inp.dtype.name == "float64":
            if math.isnan(v) or math.isinf(v):
                bits = struct.unpack("<Q", struct.pack("<d", v))[0]
                return f"__longlong_as_double(0x{bits:016x}ll)"
            return repr(v) if "e" in repr(v) or "." in repr(v) else f"{v!r}.0"
        if math.isnan(v) or math.isinf(v):
            bits = int(np.array(inp.array(), dtype=np.float32).view(np.uint32))
            return f"__uint_as_float(0x{bits:08x}u)"
        text = repr(v)
        return f"{text}f" if ("e" in text or "." in text) else f"{text}.0f"
    F64 = "double"

    def fabs(self, x: str) -> str:
        return f"{'fabs' if self.f64 else 'fabsf'}({x})"

    @staticmethod
    def rint(x: str, f64: bool) -> str:
        return f"{'rint' if f64 else 'rintf'}({x})"

    @staticmethod
    def lib(fn: str, *args) -> str:
        """A helper of the prelude (`braze::nan_equal(a, b)`)."""
        return f"braze::{fn}({', '.join(args)})"

    def typed(self, fn: str, *args) -> str:
        """An integer helper of the prelude in the result type (`braze::wadd<int32_t>(a, b)`)."""
        return f"braze::{fn}<{self.T}>({', '.join(args)})"

    def arith(self, sym: str, a: str, b: str) -> str:
        """`a sym b`; integers wrap around (through the unsigned type in the prelude)."""
        return f"({a} {sym} {b})" if self.k == "f" else self.typed(spelling.WRAP[sym], a, b)

    def math(self, op: str) -> str:
        self.floats_only(op)
        name = MATH[op]
        return name[:-1] if self.f64 else name



def expr(prim, args: list, arg_dts: list, out) -> str:
    """The expression computing `prim(*args)` in `out`'s compute type (before any
    half-precision rounding)."""
    spell = spelling.lookup(Operands, SPELL, _math_function, prim, arg_dts, out)
    return spell(Operands(prim, args, arg_dts, out))


def _math_function(op):
    """The CUDA math function of `op` (`MATH`); None for other ops."""
    if op not in MATH:
        return None

    def spell(o):
        return f"{o.math(op)}({', '.join(o.args)})"
    return spell


# -- unary --------------------------------------------------------------------------------------
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
_floor_divide = by_kind(lambda o: f"{'floor' if o.f64 else 'floorf'}({o.a} / {o.b})",
                        lambda o: f"({o.a} && {o.b})", "floordiv_")
_remainder = by_kind(lambda o: o.lib("rem_f", o.a, o.b), lambda o: "false", "rem_")


def _logaddexp(o):
    o.floats_only("logaddexp")
    return f"braze::logaddexp_f({o.a}, {o.b})"


def _sigmoid(o):
    o.floats_only("sigmoid")
    return f"braze::sigmoid_f({o.a})"


SPELL = {
    **COMMON,
    "rsqrt": _rsqrt,
    "arcsinh": _in_double("asinh"), "arccosh": _in_double("acosh"),
    "arctanh": _in_double("atanh"),
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "trunc": _rounding("trunc"),
    "sigmoid": _sigmoid,
    "erfinv": _erfinv,
    "floor_divide": _floor_divide, "remainder": _remainder,
    "logaddexp": _logaddexp,
}
