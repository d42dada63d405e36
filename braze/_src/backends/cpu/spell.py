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

from ..spelling import COMMON, Unsupported
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
HALF = ("float16", "bfloat16")
#: half-precision buffers hold bit patterns: converted on load and store, rounded after ops
LOAD = {"float16": "f16_to_f32", "bfloat16": "bf16_to_f32"}
STORE = {"float16": "f32_to_f16", "bfloat16": "f32_to_bf16"}
ROUND = {"float16": "round_f16", "bfloat16": "round_bf16"}
_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16,
         "uint32": 32, "uint64": 64}


class Ctx:
    """The library names one kernel calls (its module imports them)."""

    def __init__(self):
        self.names = set()

    def call(self, name: str) -> str:
        self.names.add(name)
        return name


def literal(inp) -> str:
    """Typed, exact Python source for a baked constant (`IRInput`)."""
    dt, v = inp.dtype, inp.py_value()
    k = dt.kind
    if k == "c":
        raise Unsupported("complex constant")
    if k == "b":
        return "True" if v else "False"
    if k in "ui":
        return f"{COMPUTE[dt.name]}({v})"
    if dt.name == "float64":
        if math.isnan(v):  # keep the exact NaN payload
            bits = struct.unpack("<q", struct.pack("<d", v))[0]
            return f"_bits_f64(np.int64({bits}))"
        return f"np.float64({inp.literal()})"
    # float32, float16, bfloat16: the exact value as float32
    if math.isnan(v):
        import numpy as np
        bits = int(np.array(inp.array(), dtype=np.float32).view(np.int32))
        return f"_bits_f32(np.int32({bits}))"
    return f"np.float32({inp.literal()})"


def cast(ctx: Ctx, a: str, src, dst) -> str:
    """Source converting `a` (computed in `src`'s compute type) to dtype `dst` with braze's
    cast semantics (braze/_src/casts.py: x86-64 C conversions)."""
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
        return f"({T}(1) if {a} else {T}(0))"
    if kd == "f":
        if d in HALF:  # through float32 from every dtype (braze's cast, as MLX)
            return f"{ctx.call(ROUND[d])}(np.float32({a}))"
        return f"{T}({a})"
    if ks in "ui":
        return f"{T}({a})"
    if d == "int64":
        return f"{ctx.call('f_to_i64')}({a})"
    if d == "int32":
        return f"{ctx.call('f_to_i32')}({a})"
    if d == "uint32":  # through int64, keep the low bits
        return f"np.uint32({ctx.call('f_to_i64')}({a}))"
    if d == "uint64":
        return f"{ctx.call('f_to_u64')}({a})"
    return f"{T}({ctx.call('f_to_i32')}({a}))"  # 8/16-bit: through int32, keep the low bits


class Operands:
    """One op's operands as its spelling function reads them."""

    __slots__ = ("ctx", "prim", "args", "dts", "out", "T", "k", "f64")

    def __init__(self, ctx, prim, args, dts, out):
        self.ctx, self.prim, self.args, self.dts, self.out = ctx, prim, args, dts, out
        self.T = COMPUTE[out.name]
        self.k = dts[0].kind if dts else None  # the first argument's kind: b u i f
        self.f64 = out.name == "float64" or bool(dts) and dts[0].name == "float64"

    @property
    def a(self):
        return self.args[0]

    @property
    def b(self):
        return self.args[1]

    def raw(self, op: str, a: str, b: str) -> str:
        """`a op b`; 64-bit integers wrap around through library calls (Numba's integer
        arithmetic is `nsw`: LLVM may assume it never overflows, while NumPy wraps)."""
        if self.out.name in ("int64", "uint64"):
            return f"{self.ctx.call(_WRAP[op])}({a}, {b})"
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

    def floats_only(self, op: str) -> None:
        if self.k != "f":
            raise Unsupported(f"{op} on {self.dts[0].name}")


_WRAP = {"+": "wadd", "-": "wsub", "*": "wmul"}


def expr(ctx: Ctx, prim, args: list, arg_dts: list, out) -> str:
    """The expression computing `prim(*args)` in `out`'s compute type (before any
    half-precision rounding)."""
    op = prim.kernel_op
    spell = SPELL.get(op)
    if spell is None and f"{op}_f32" in mathlib.FUNCTIONS:  # a math-library function
        spell = _math_function(op)
    if spell is None or out.name not in COMPUTE or any(d.kind == "c" for d in arg_dts):
        raise Unsupported(f"no cpu spelling of {prim!r} on these dtypes")
    return spell(Operands(ctx, prim, args, arg_dts, out))


# -- unary --------------------------------------------------------------------------------------
def _abs(o):
    if o.k == "i":
        return f"{o.T}({o.a} if {o.a} >= 0 else {o.raw('-', f'{o.T}(0)', o.a)})"
    return f"abs({o.a})" if o.k == "f" else o.a


def _negative(o):
    if o.k == "b":
        raise Unsupported("negative of bool")
    return f"-{o.a}" if o.k == "f" else o.arith("-", f"{o.T}(0)", o.a)


def _sign(o):
    a, T = o.a, o.T
    if o.k == "b":
        return a
    if o.k == "u":
        return f"({T}(1) if {a} > 0 else {T}(0))"
    return f"{T}(({T}(1) if {a} > 0 else {T}(0)) - ({T}(1) if {a} < 0 else {T}(0)))"


def _round(o):
    a, T, d = o.a, o.T, o.prim.decimals
    if o.k != "f":
        if o.k == "b" or d >= 0:
            return a
        s = 10.0 ** (-d)
        return (f"{T}({o.ctx.call('f_to_i64')}({o.ctx.call('rint_f64')}(np.float64({a}) / {s!r})"
                f" * {s!r}))")
    rint = o.ctx.call("rint_f64" if o.f64 else "rint_f32")
    if d == 0:
        return f"{rint}({a})"
    if d > 0:
        return f"({rint}({a} * {T}({10.0 ** d!r})) / {T}({10.0 ** d!r}))"
    return f"({rint}({a} / {T}({10.0 ** -d!r})) * {T}({10.0 ** -d!r}))"


def _math_function(op):
    """`op_f32(a, ...)` / `op_f64(a, ...)`: every op the math library has a function for
    (exp, log2, sigmoid, arctan2, ...) is spelled by its name."""
    def spell(o):
        o.floats_only(op)
        return f"{o.math(op)}({', '.join(o.args)})"
    return spell


def _erfinv(o):
    o.floats_only("erfinv")
    if not o.f64:  # MLX's float algorithm, bit for bit (random.normal relies on it)
        return f"{o.ctx.call('erfinv_mlx_f32')}(np.float32({o.a}))"
    return f"{o.math('erfinv')}({o.a})"


def _scalar_unary(fn):
    """An inverse hyperbolic function of the scalar library (fn_f32 / fn_f64)."""
    return lambda o: f"{o.ctx.call(fn + ('_f64' if o.f64 else '_f32'))}({o.a})"


def _rounding(np_fn):
    return lambda o: f"np.{np_fn}({o.a})" if o.k == "f" else o.a


# -- binary -------------------------------------------------------------------------------------
def _add(o):
    return f"({o.a} | {o.b})" if o.k == "b" else o.arith("+", o.a, o.b)


def _subtract(o):
    return f"({o.a} != {o.b})" if o.k == "b" else o.arith("-", o.a, o.b)


def _multiply(o):
    return f"({o.a} & {o.b})" if o.k == "b" else o.arith("*", o.a, o.b)


def _by_kind(on_float, on_bool, int_lib: str):
    """A binary op spelled per argument kind: floats and bools by their functions, signed and
    unsigned integers by the scalar library's `{int_lib}i` / `{int_lib}u` (Python's rules)."""
    def spell(o):
        if o.k in "fb":
            return (on_float if o.k == "f" else on_bool)(o)
        return f"{o.T}({o.ctx.call(int_lib + o.k)}({o.a}, {o.b}))"
    return spell


_floor_divide = _by_kind(lambda o: f"np.floor({o.a} / {o.b})", lambda o: f"({o.a} & {o.b})",
                         "floordiv_")
_remainder = _by_kind(lambda o: f"{o.ctx.call('rem_f')}({o.a}, {o.b})",
                      lambda o: "np.bool_(False)", "rem_")


def _power(o):
    if o.k == "f":
        return f"{o.math('power')}({o.a}, {o.b})"
    if o.k == "b":
        return f"({o.a} | (not {o.b}))"
    return f"{o.T}({o.ctx.call('ipow' if o.k == 'i' else 'upow')}({o.a}, {o.b}))"


def _extremum(is_max: bool):
    def spell(o):
        a, b = o.a, o.b
        if o.k == "f":
            return f"{o.ctx.call('max_f' if is_max else 'min_f')}({a}, {b})"
        if o.k == "b":
            return f"({a} | {b})" if is_max else f"({a} & {b})"
        return f"({a} if {a} {'>' if is_max else '<'} {b} else {b})"
    return spell


def _logaddexp(o):
    o.floats_only("logaddexp")
    return f"{o.ctx.call('logaddexp_f64' if o.f64 else 'logaddexp_f32')}({o.a}, {o.b})"


def _shift(left: bool):
    def spell(o):
        if o.k not in "ui":
            raise Unsupported(f"shift of {o.dts[0].name}")
        fn = "shl" if left else ("shr_i" if o.k == "i" else "shr_u")
        return f"{o.T}({o.ctx.call(fn)}({o.a}, {o.b}, {_BITS[o.dts[0].name]}))"
    return spell


def _logical(sym: str):
    def spell(o):
        if o.k == "b":
            return f"({o.a} {sym} {o.b})"
        z = f"{COMPUTE[o.dts[0].name]}(0)"
        return f"(({o.a} != {z}) {sym} ({o.b} != {z}))"
    return spell


def _equal(o):
    if o.prim.equal_nan and o.k == "f":
        return f"{o.ctx.call('nan_equal')}({o.a}, {o.b})"
    return f"({o.a} == {o.b})"


SPELL = {
    **COMMON,
    "cast": lambda o: cast(o.ctx, o.a, o.dts[0], o.prim.dtype),
    "abs": _abs, "negative": _negative, "sign": _sign,
    "square": lambda o: o.a if o.k == "b" else o.arith("*", o.a, o.a),
    "sqrt": lambda o: f"np.sqrt({o.a})",
    "rsqrt": lambda o: f"({o.T}(1) / np.sqrt({o.a}))",
    "arcsinh": _scalar_unary("asinh"), "arccosh": _scalar_unary("acosh"),
    "arctanh": _scalar_unary("atanh"),
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "trunc": _rounding("trunc"),
    "round": _round,
    "logical_not": lambda o: f"(not {o.a})" if o.k == "b"
    else f"({o.a} == {COMPUTE[o.dts[0].name]}(0))",
    "bitwise_invert": lambda o: f"(not {o.a})" if o.k == "b" else f"{o.T}(~{o.a})",
    "erfinv": _erfinv,
    "add": _add, "subtract": _subtract, "multiply": _multiply,
    "floor_divide": _floor_divide, "remainder": _remainder, "power": _power,
    "maximum": _extremum(True), "minimum": _extremum(False),
    "logaddexp": _logaddexp,
    "left_shift": _shift(True), "right_shift": _shift(False),
    "logical_and": _logical("&"), "logical_or": _logical("|"),
    "equal": _equal,
    "select": lambda o: f"({o.b} if {o.a} else {o.args[2]})",
}
