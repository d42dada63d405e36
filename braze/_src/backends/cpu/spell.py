"""How the `cpu` backend spells each kernel op in Numba source: the backend's one op table.

A primitive names its elementwise operation (`Primitive.kernel_op`: "exp", "add", "cast", ...);
`SPELL[op]` turns it into an expression for argument expressions `args` of dtypes `arg_dts`,
computed in the compute type of the result dtype `out`; an op the math library (lib/math.py)
has functions for needs no entry: `exp` is `exp_f32(a)` / `exp_f64(a)`. Parameters come from
the primitive (Log's base is in its op name, Round's `decimals`, Equal's `equal_nan`, AsType's
`dtype`).

Compute types: bool, integers, float32 and float64 compute in their own type (every result is
cast back to its dtype, so integers wrap as in NumPy); float16 and bfloat16 compute in float32
(`HALF`: the body emitter rounds every result that is not `exact`). complex64 is not spelled
(`Unsupported`): such regions run on the numpy backend.
"""
from __future__ import annotations

import math
import struct

from .. import spelling
from ..spelling import COMMON, Unsupported, by_kind
from .lib import math as mathlib

#: numba scalar constructor of the type each dtype is computed in
COMPUTE = {
    "bool": "np.bool_", "int8": "np.int8", "int16": "np.int16", "int32": "np.int32",
    "int64": "np.int64", "uint8": "np.uint8", "uint16": "np.uint16", "uint32": "np.uint32",
    "uint64": "np.uint64", "float16": "np.float32", "bfloat16": "np.float32",
    "float32": "np.float32", "float64": "np.float64",
}
#: numba type of the buffer elements
STORAGE = {
    "bool": "boolean", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "uint16", "bfloat16": "uint16", "float32": "float32", "float64": "float64",
}
#: half-precision buffers hold bit patterns: converted on load and store, rounded after ops
HALF = spelling.HALF
LOAD = {"float16": "f16_to_f32", "bfloat16": "bf16_to_f32"}
STORE = {"float16": "f32_to_f16", "bfloat16": "f32_to_bf16"}
ROUND = {"float16": "round_f16", "bfloat16": "round_bf16"}


class Ctx:
    """The library names one kernel calls (its module imports them)."""

    def __init__(self):
        self.names = set()

    def call(self, name: str) -> str:
        self.names.add(name)
        return name


def literal(inp) -> str:
    """Typed, exact Python source for a baked constant (`IRInput`)."""
    return spelling.literal(Operands, inp)


def cast(ctx: Ctx, a: str, src, dst) -> str:
    """Source converting `a` (computed in `src`'s compute type) to dtype `dst` (spelling.cast)."""
    return spelling.cast(Operands(ctx, None, [a], [src], dst), a, src, dst)


class Operands(spelling.Operands):
    __slots__ = ("ctx",)
    COMPUTE = COMPUTE
    BACKEND = "cpu"

    def __init__(self, ctx, *args):
        self.ctx = ctx
        super().__init__(*args)

    OR, AND = "|", "&"  # on np.bool_ the bitwise operators are the logical ones
    NOT, CHOOSE = "(not {})", "({a} if {c} else {b})"
    TRUE, FALSE = "True", "False"

    @staticmethod
    def int_literal(dt, v: int) -> str:
        return f"{COMPUTE[dt.name]}({v})"

    @staticmethod
    def float_literal(inp, v: float) -> str:
        """float64 as itself, float32/16/bfloat16 as their exact float32 value; a NaN through
        its bits (its payload kept)."""
        if inp.dtype.name == "float64":
            if math.isnan(v):
                bits = struct.unpack("<q", struct.pack("<d", v))[0]
                return f"_bits_f64(np.int64({bits}))"
            return f"np.float64({inp.literal()})"
        if math.isnan(v):
            import numpy as np
            bits = int(np.array(inp.array(), dtype=np.float32).view(np.int32))
            return f"_bits_f32(np.int32({bits}))"
        return f"np.float32({inp.literal()})"
    F64 = "np.float64"

    @staticmethod
    def fabs(x: str) -> str:
        return f"abs({x})"

    def rint(self, x: str, f64: bool) -> str:
        return self.lib("rint_f64" if f64 else "rint_f32", x)

    def lib(self, fn: str, *args) -> str:
        """A call of the scalar library (lib/scalar.py); the module imports it."""
        return f"{self.ctx.call(fn)}({', '.join(args)})"

    def typed(self, fn: str, *args) -> str:
        """An integer helper of the scalar library, cast back to the result type."""
        return f"{self.T}({self.lib(fn, *args)})"

    def raw(self, op: str, a: str, b: str) -> str:
        """`a op b`; 64-bit integers wrap around through library calls (Numba's integer
        arithmetic is `nsw`: LLVM may assume it never overflows, while NumPy wraps)."""
        if self.out.name in ("int64", "uint64"):
            return f"{self.ctx.call(spelling.WRAP[op])}({a}, {b})"
        return f"{a} {op} {b}"

    def arith(self, op: str, a: str, b: str) -> str:
        """`a op b` cast back to the result dtype (Numba widens integers to 64 bits)."""
        r = self.raw(op, a, b)
        return f"({r})" if self.k == "f" else f"{self.T}({r})"

    def math(self, op: str) -> str:
        """The math-library function computing `op` in this op's float type."""
        name = f"{op}_{'f64' if self.out.name == 'float64' else 'f32'}"
        if name not in mathlib.FUNCTIONS:
            raise Unsupported(f"no math function {name}")
        return self.ctx.call(name)



def expr(ctx: Ctx, prim, args: list, arg_dts: list, out) -> str:
    """The expression computing `prim(*args)` in `out`'s compute type (before any
    half-precision rounding)."""
    spell = spelling.lookup(Operands, SPELL, _math_function, prim, arg_dts, out)
    return spell(Operands(ctx, prim, args, arg_dts, out))


# -- unary --------------------------------------------------------------------------------------
def _math_function(op):
    """`op_f32(a, ...)` / `op_f64(a, ...)`: every op the math library has a function for
    (exp, log2, sigmoid, arctan2, ...) is spelled by its name; None for other ops."""
    if f"{op}_f32" not in mathlib.FUNCTIONS:
        return None

    def spell(o):
        o.floats_only(op)
        return f"{o.math(op)}({', '.join(o.args)})"
    return spell


def _erfinv(o):
    o.floats_only("erfinv")
    if not o.f64:  # MLX's float algorithm, bit for bit (random.normal relies on it)
        return f"{o.ctx.call('erfinv_mlx_f32')}(np.float32({o.a}))"
    return f"{o.math('erfinv')}({o.a})"


def _rounding(np_fn):
    return lambda o: f"np.{np_fn}({o.a})" if o.k == "f" else o.a


# -- binary -------------------------------------------------------------------------------------
_floor_divide = by_kind(lambda o: f"np.floor({o.a} / {o.b})", lambda o: f"({o.a} & {o.b})",
                        "floordiv_")
_remainder = by_kind(lambda o: o.lib("rem_f", o.a, o.b), lambda o: "np.bool_(False)", "rem_")


def _logaddexp(o):
    o.floats_only("logaddexp")
    return f"{o.ctx.call('logaddexp_f64' if o.f64 else 'logaddexp_f32')}({o.a}, {o.b})"


SPELL = {
    **COMMON,
    "sqrt": lambda o: f"np.sqrt({o.a})",
    "rsqrt": lambda o: f"({o.T}(1) / np.sqrt({o.a}))",
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "trunc": _rounding("trunc"),
    "erfinv": _erfinv,
    "floor_divide": _floor_divide, "remainder": _remainder,
    "logaddexp": _logaddexp,
}
