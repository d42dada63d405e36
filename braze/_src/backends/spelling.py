"""What every backend's op table shares: the signal for what a backend does not generate, and
the spellings that read the same in each backend's source (Python for Numba, C++ for CUDA).

A spelling function takes the op's operands as each backend's `spell.Operands` provides them:
`o.a`, `o.b`, `o.args` the argument expressions, `o.k` the first argument's kind (b u i f),
`o.T` / `o.AT` the result's / first argument's compute type, `o.floats_only(op)`, and the
backend's dialect: `o.OR` / `o.AND` (its operators on bools), `o.negate(x)` (boolean not, from
its `NOT` format), `o.choose(c, a, b)` (a conditional expression, from `CHOOSE`), `o.lib(fn,
*args)` (a helper of its kernel library), `o.typed(fn, *args)` (an integer helper computing in
`o.T`), `o.arith(sym, a, b)` (`a sym b` with integer wrap-around), `o.math(op)` (its math
function for `op`), `o.fabs(x)`, `o.rint(x, f64)` (round half to even in float32 / float64),
`o.F64` (the float64 type)."""
from __future__ import annotations


class Unsupported(Exception):
    """The region uses something this backend does not generate (complex numbers, an op
    without a spelling): it runs on another backend (the numpy reference for cpu)."""


class Operands:
    """One op's operands as its spelling function reads them. Each backend subclasses it with
    its dialect (the names listed above) and `COMPUTE`, its dtype -> compute type table."""

    __slots__ = ("prim", "args", "dts", "out", "T", "k", "f64")
    COMPUTE: dict = {}
    BACKEND = ""

    def __init__(self, prim, args, dts, out):
        self.prim, self.args, self.dts, self.out = prim, args, dts, out
        self.T = self.COMPUTE[out.name]
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
        return self.COMPUTE[self.dts[0].name]

    def negate(self, x: str) -> str:
        return self.NOT.format(x)

    def choose(self, c: str, a: str, b: str) -> str:
        return self.CHOOSE.format(c=c, a=a, b=b)

    def floats_only(self, op: str) -> None:
        if self.k != "f":
            raise Unsupported(f"{op} on {self.dts[0].name}")


#: the library helpers through which integer +, -, * wrap around
WRAP = {"+": "wadd", "-": "wsub", "*": "wmul"}


def lookup(operands: type, table: dict, by_math, prim, arg_dts, out):
    """The spelling function of `prim` on these dtypes: its `table` row, or `by_math(op)` (the
    backend's math-library spelling, None where it has no function); `Unsupported` if none or
    if a dtype has no compute type in the backend's `operands` class."""
    spell = table.get(prim.kernel_op) or by_math(prim.kernel_op)
    if spell is None or out.name not in operands.COMPUTE or any(d.kind == "c" for d in arg_dts):
        raise Unsupported(f"no {operands.BACKEND} spelling of {prim!r} on these dtypes")
    return spell


def same(o):
    """An op that is its first argument as it is (a broadcast, a real part of a real)."""
    return o.a


def divide(o):
    o.floats_only("divide")
    return f"({o.a} / {o.b})"


def compare(sym: str):
    return lambda o: f"({o.a} {sym} {o.b})"


def bitwise(sym: str):
    def spell(o):
        if o.k == "f":
            raise Unsupported("bitwise op on floats")
        return f"({o.a} {sym} {o.b})" if o.k == "b" else f"{o.T}({o.a} {sym} {o.b})"
    return spell


HALF = ("float16", "bfloat16")


def literal(dialect: type, inp) -> str:
    """Exact source for a baked constant (`IRInput`) in its compute type, in `dialect`'s
    spelling (an Operands class: `TRUE` / `FALSE`, `int_literal(dtype, v)`,
    `float_literal(inp, v)`)."""
    dt, v = inp.dtype, inp.py_value()
    if dt.kind == "c":
        raise Unsupported("complex constant")
    if dt.kind == "b":
        return dialect.TRUE if v else dialect.FALSE
    if dt.kind in "ui":
        return dialect.int_literal(dt, v)
    return dialect.float_literal(inp, v)


def cast(o, a: str, src, dst) -> str:
    """Source converting `a` (computed in `src`'s compute type) to dtype `dst` with braze's
    cast semantics (braze/_src/casts.py: x86-64 C conversions), in `o`'s dialect."""
    s, d = src.name, dst.name
    if "c" in (src.kind, dst.kind):
        raise Unsupported("complex cast")
    if s == d:
        return a
    C = o.COMPUTE
    T = C[d]
    if dst.kind == "b":
        return a if src.kind == "b" else f"({a} != {C[s]}(0))"
    if src.kind == "b":
        return o.choose(a, f"{T}(1)", f"{T}(0)")
    if dst.kind == "f":
        if d in HALF:  # through float32 from every dtype (braze's cast, as MLX)
            f32 = a if C[s] == C["float32"] else f"{C['float32']}({a})"
            return o.lib("round_f16" if d == "float16" else "round_bf16", f32)
        return a if C[s] == T else f"{T}({a})"
    if src.kind in "ui":
        return f"{T}({a})"  # keeps the low bits (modular)
    if d in ("int64", "int32", "uint64"):
        return o.lib({"int64": "f_to_i64", "int32": "f_to_i32", "uint64": "f_to_u64"}[d], a)
    if d == "uint32":  # through int64, keep the low bits
        return f"{T}({o.lib('f_to_i64', a)})"
    return f"{T}({o.lib('f_to_i32', a)})"  # 8/16-bit: through int32, keep the low bits


# -- unary ----------------------------------------------------------------------------------------
def absolute(o):
    if o.k == "i":
        return o.choose(f"{o.a} >= 0", o.a, o.arith("-", f"{o.T}(0)", o.a))
    return o.fabs(o.a) if o.k == "f" else o.a


def negative(o):
    if o.k == "b":
        raise Unsupported("negative of bool")
    return f"-{o.a}" if o.k == "f" else o.arith("-", f"{o.T}(0)", o.a)


def sign(o):
    """-1, 0 or 1 in the result type (0 for NaN)."""
    a, T = o.a, o.T
    if o.k == "b":
        return a
    pos = o.choose(f"{a} > 0", f"{T}(1)", f"{T}(0)")
    if o.k == "u":
        return pos
    return f"{T}({pos} - {o.choose(f'{a} < 0', f'{T}(1)', f'{T}(0)')})"


def round_half_even(o):
    """Round(decimals): half to even at 10**-decimals; integers only at negative decimals."""
    a, T, d = o.a, o.T, o.prim.decimals
    if o.k != "f":
        if o.k == "b" or d >= 0:
            return a
        s = repr(10.0 ** (-d))
        return f"{T}({o.lib('f_to_i64', o.rint(f'{o.F64}({a}) / {s}', True) + f' * {s}')})"
    if d == 0:
        return o.rint(a, o.f64)
    s = f"{T}({10.0 ** abs(d)!r})"
    return f"({o.rint(f'{a} * {s}', o.f64)} / {s})" if d > 0 else \
        f"({o.rint(f'{a} / {s}', o.f64)} * {s})"


# -- binary ---------------------------------------------------------------------------------------
def extremum(is_max: bool):
    """maximum / minimum: NaN propagates on floats (np.maximum), or / and on bools."""
    def spell(o):
        a, b = o.a, o.b
        if o.k == "f":
            return o.lib("max_f" if is_max else "min_f", a, b)
        if o.k == "b":
            return f"({a} {o.OR if is_max else o.AND} {b})"
        return o.choose(f"{a} {'>' if is_max else '<'} {b}", a, b)
    return spell


def shift(left: bool):
    """NumPy's shifts: 0 (or the sign) when the shift is negative or not below the width."""
    def spell(o):
        if o.k not in "ui":
            raise Unsupported(f"shift of {o.dts[0].name}")
        fn = "shl" if left else ("shr_i" if o.k == "i" else "shr_u")
        return o.typed(fn, o.a, o.b, str(8 * o.dts[0].itemsize))
    return spell


def logical(is_and: bool):
    """logical_and / logical_or: on any dtype, through `!= 0` where not bool."""
    def spell(o):
        sym = o.AND if is_and else o.OR
        if o.k == "b":
            return f"({o.a} {sym} {o.b})"
        z = f"{o.AT}(0)"
        return f"(({o.a} != {z}) {sym} ({o.b} != {z}))"
    return spell


def equal(o):
    if o.prim.equal_nan and o.k == "f":
        return o.lib("nan_equal", o.a, o.b)
    return f"({o.a} == {o.b})"


def arith(sym: str, on_bool):
    """+, -, *: `on_bool(o)` on bools, wrap-around on integers."""
    return lambda o: on_bool(o) if o.k == "b" else o.arith(sym, o.a, o.b)


def by_kind(on_float, on_bool, int_fn: str):
    """A binary op spelled per argument kind: floats and bools by their functions, signed and
    unsigned integers by the library's `{int_fn}i` / `{int_fn}u` (Python's rules)."""
    def spell(o):
        if o.k in "fb":
            return (on_float if o.k == "f" else on_bool)(o)
        return o.typed(int_fn + o.k, o.a, o.b)
    return spell


def power(o):
    if o.k == "f":
        return f"{o.math('power')}({o.a}, {o.b})"
    if o.k == "b":
        return f"({o.a} {o.OR} {o.negate(o.b)})"
    return o.typed("ipow" if o.k == "i" else "upow", o.a, o.b)


#: the rows every backend's table starts from (each adds or overrides its own)
COMMON = {
    # reads of the input as it is: broadcasting is done with strides
    "identity": same, "broadcast": same, "conjugate": same, "real": same,
    "imag": lambda o: f"{o.T}(0)",
    "divide": divide,
    "bitwise_and": bitwise("&"), "bitwise_or": bitwise("|"), "bitwise_xor": bitwise("^"),
    "not_equal": compare("!="), "less": compare("<"), "less_equal": compare("<="),
    "greater": compare(">"), "greater_equal": compare(">="),
    "cast": lambda o: cast(o, o.a, o.dts[0], o.prim.dtype),
    "abs": absolute, "negative": negative, "sign": sign, "round": round_half_even,
    "add": arith("+", lambda o: f"({o.a} {o.OR} {o.b})"),
    "subtract": arith("-", lambda o: f"({o.a} != {o.b})"),
    "multiply": arith("*", lambda o: f"({o.a} {o.AND} {o.b})"),
    "square": lambda o: o.a if o.k == "b" else o.arith("*", o.a, o.a),
    "power": power,
    "maximum": extremum(True), "minimum": extremum(False),
    "left_shift": shift(True), "right_shift": shift(False),
    "logical_and": logical(True), "logical_or": logical(False),
    "logical_not": lambda o: o.negate(o.a) if o.k == "b" else f"({o.a} == {o.AT}(0))",
    "bitwise_invert": lambda o: o.negate(o.a) if o.k == "b" else f"{o.T}(~{o.a})",
    "equal": equal,
    "select": lambda o: o.choose(o.a, o.b, o.args[2]),
}
