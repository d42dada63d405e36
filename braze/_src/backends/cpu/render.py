"""The `cpu` renderer: a KernelIR + variant -> the Python source of a Numba loop function.

A kernel module looks like this (`x * 2 + 1` on float32, contiguous variant)::

    @njit(SIGNATURE, error_model="numpy", nogil=True, cache=CACHE)
    def kernel(start, stop, in0, out0):
        c1 = np.float32(2.0)  # c1: float32 constant
        c2 = np.float32(1.0)  # c2: float32 constant
        for i in range(start, stop):
            v0 = in0[i]  # in0: float32
            t0 = np.float32(v0 * c1)  # t0: float32 = Multiply(in0, c1)
            t1 = np.float32(t0 + c2)  # t1: float32 = Add(t0, c2)
            out0[i] = t1  # out0 <- t1

Ops that depend only on constants and scalar inputs are computed once before the loop (an all-
scalar kernel is a fill loop). Every launch covers the index range [start, stop) of the
flattened output, so the thread pool can split it. Arguments, in order: start, stop, then for
the strided variant `shape` (int64 [ndim]), `strides` (int64 [n_strided, ndim], element
strides, 0 for broadcast dimensions, negative allowed) and `offsets` (int64 [n_strided], the
element offset of each input's first element inside its buffer argument), then one 1-D buffer
per run-time input (baked constants are literals, not arguments), then one 1-D buffer per
output.

Variants (`CpuVariant`): `contiguous` (every non-scalar input has the output's shape and the
same dense layout: one flat loop) or `strided` with `ndim` collapsed dimensions (one kernel
per rank serves every shape: shapes and strides are arguments; the last dimension is an inner
loop). Both are specialised on which inputs are *scalars* (one element, loaded once before the
loop), which is part of the variant, as the `S`/`V` letters are part of MLX's kernel names.

Dtypes: kernels compute bool, integers, float32 and float64 in their own type (every op result
is cast back to its dtype, so integers wrap as in NumPy); float16 and bfloat16 buffers are
read as uint16 bit patterns, widened to float32, and every half-precision op result is rounded
to its dtype (round to nearest even), as NumPy's / ml_dtypes' loops do. complex64 is not
rendered (`Unsupported`): such regions run on the numpy backend.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from ..base import Variant
from .lib import math as mathlib


class Unsupported(Exception):
    """The region uses something this renderer does not generate (complex numbers, an
    unknown primitive): the backend runs it on the numpy reference backend."""


@dataclass(frozen=True)
class CpuVariant(Variant):
    """A `Variant` plus which run-time inputs are scalars ("S") or arrays ("V"), one letter per
    non-constant input, in order."""

    scalars: str = ""
    #: (output j, input k) pairs: output j is written into input k's (donated) buffer
    alias: tuple = ()

    @property
    def suffix(self) -> str:
        base = "_contiguous" if self.kind == "contiguous" else f"_strided_{self.ndim}"
        return base + (f"_{self.scalars}" if self.scalars else "") + alias_suffix(self.alias)


def alias_suffix(alias) -> str:
    return "".join(f"_o{j}in{k}" for j, k in alias)


def alias_lines(alias, sliced=None) -> list:
    """Kernel lines that make each donated output the same array as its input. A kernel's
    pointer arguments are `noalias` (compiler.py), so an output sharing an input's buffer must
    not be a separate argument: through one array LLVM keeps every load of an element before
    the store that overwrites it. `sliced`: the inputs already cut to [start, stop) in a
    contiguous kernel (None: whole buffers, indexed by the kernel)."""
    out = []
    for j, k in alias:
        src = f"in{k}" if sliced is None or k in sliced else f"in{k}[start:stop]"
        out.append(f"out{j} = {src}  # out{j} is written into in{k}'s donated buffer")
    return out


# numba scalar constructor for the type each dtype is computed in
_CT = {
    "bool": "np.bool_", "int8": "np.int8", "int16": "np.int16", "int32": "np.int32",
    "int64": "np.int64", "uint8": "np.uint8", "uint16": "np.uint16", "uint32": "np.uint32",
    "uint64": "np.uint64", "float16": "np.float32", "bfloat16": "np.float32",
    "float32": "np.float32", "float64": "np.float64",
}
# numba type of the buffer elements
STORAGE = {
    "bool": "boolean", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "uint16", "bfloat16": "uint16", "float32": "float32", "float64": "float64",
}
HALF = ("float16", "bfloat16")
_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16,
         "uint32": 32, "uint64": 64}
_ROUND = {"float16": "round_f16", "bfloat16": "round_bf16"}
_LOAD = {"float16": "f16_to_f32", "bfloat16": "bf16_to_f32"}
_STORE = {"float16": "f32_to_f16", "bfloat16": "f32_to_bf16"}
# ops whose half-precision result is already representable (no rounding needed)
_EXACT = {"Abs", "Negative", "Sign", "Floor", "Ceil", "Trunc", "Maximum", "Minimum", "Select",
          "StopGradient", "Broadcast", "DynamicBroadcast", "Conjugate", "Real"}
_CMP = {"NotEqual": "!=", "Less": "<", "LessEqual": "<=", "Greater": ">",
        "GreaterEqual": ">="}


def _kind(dt) -> str:
    return dt.kind  # b u i f c (bfloat16 is "f")


def literal(inp) -> str:
    """Typed, exact Python source for a baked constant."""
    dt = inp.dtype
    k = _kind(dt)
    v = inp.py_value()
    if k == "c":
        raise Unsupported("complex constant")
    if k == "b":
        return "True" if v else "False"
    if k in "ui":
        return f"{_CT[dt.name]}({v})"
    if dt.name == "float64":
        text = inp.literal()
        if math.isnan(v):  # keep the exact NaN payload
            bits = struct.unpack("<q", struct.pack("<d", v))[0]
            return f"_bits_f64(np.int64({bits}))"
        return f"np.float64({text})"
    # float32, float16, bfloat16: the exact value as float32
    if math.isnan(v):
        import numpy as np
        bits = int(np.array(inp.array(), dtype=np.float32).view(np.int32))
        return f"_bits_f32(np.int32({bits}))"
    return f"np.float32({inp.literal()})"


class _Ctx:
    """Names and imports collected while rendering one kernel."""

    def __init__(self):
        self.runtime = set()
        self.mathlib = set()

    def rt(self, name: str) -> str:
        self.runtime.add(name)
        return name

    def ml(self, name: str) -> str:
        self.mathlib.add(name)
        return name


def _cast(ctx: _Ctx, a: str, src, dst) -> str:
    """Source converting value `a` (computed as `src`'s compute type) to `dst`."""
    s, d = src.name, dst.name
    ks, kd = _kind(src), _kind(dst)
    if "c" in (ks, kd):
        raise Unsupported("complex cast")
    if s == d:
        return a
    T = _CT[d]
    if kd == "b":
        return a if ks == "b" else f"({a} != {_CT[s]}(0))"
    if ks == "b":
        return f"({T}(1) if {a} else {T}(0))"
    if kd == "f":
        if d in HALF:  # through float32 from every dtype (braze's cast, as MLX)
            return f"{ctx.rt(_ROUND[d])}(np.float32({a}))"
        return f"{T}({a})"
    # -> integer
    if ks in "ui":
        return f"{T}({a})"
    if d == "int64":
        return f"{ctx.rt('f_to_i64')}({a})"
    if d == "int32":
        return f"{ctx.rt('f_to_i32')}({a})"
    # float -> integer: braze's cast (braze/_src/casts.py), x86-64 C semantics
    if d == "uint32":  # through int64, keep the low bits
        return f"np.uint32({ctx.rt('f_to_i64')}({a}))"
    if d == "uint64":
        return f"{ctx.rt('f_to_u64')}({a})"
    return f"{T}({ctx.rt('f_to_i32')}({a}))"  # 8/16-bit: through int32, keep the low bits


def _mathfn(ctx: _Ctx, prim, dt) -> str:
    name = mathlib.function_name(prim, "float64" if dt.name == "float64" else "float32")
    if name is None:
        raise Unsupported(f"no math function for {prim!r}")
    return ctx.ml(name)


def _w(T: str, kind: str, expr: str) -> str:
    """Cast an arithmetic result back to its dtype: integers (Numba widens them to 64 bits)
    and bools; float arithmetic already stays in its type."""
    return f"({expr})" if kind == "f" else f"{T}({expr})"


_WRAP = {"+": "wadd", "-": "wsub", "*": "wmul"}


def _arith(ctx: _Ctx, out, op: str, a: str, b: str) -> str:
    """`a op b`; for 64-bit integers with two's-complement wrap-around (Numba's own integer
    arithmetic is `nsw`: LLVM may assume it never overflows, e.g. turn max - min into
    abs(a - b), while NumPy wraps)."""
    if out.name in ("int64", "uint64"):
        return f"{ctx.rt(_WRAP[op])}({a}, {b})"
    return f"{a} {op} {b}"


_RT_UNARY = {"ArcSinh": "asinh", "ArcCosh": "acosh", "ArcTanh": "atanh"}


def op_expr(ctx: _Ctx, prim, args: list, arg_dts: list, out) -> str:
    """The expression computing `prim(*args)` in `out`'s compute type (before any
    half-precision rounding)."""
    name = type(prim).__name__
    T = _CT.get(out.name)
    if T is None or any(_kind(d) == "c" for d in arg_dts):
        raise Unsupported(f"{name} on complex")
    a = args[0] if args else None
    b = args[1] if len(args) > 1 else None
    ka = _kind(arg_dts[0]) if arg_dts else None
    f64 = out.name == "float64" or (arg_dts and arg_dts[0].name == "float64")
    if name in ("Broadcast", "DynamicBroadcast", "StopGradient", "Conjugate", "Real"):
        return a
    if name == "AsType":
        return _cast(ctx, a, arg_dts[0], prim.dtype)
    if name == "Imag":
        return f"{T}(0)"
    # -- unary --------------------------------------------------------------------------------
    if name == "Abs":
        if ka == "i":
            return f"{T}({a} if {a} >= 0 else {_arith(ctx, out, '-', f'{T}(0)', a)})"
        return f"abs({a})" if ka == "f" else a
    if name == "Negative":
        if ka == "b":
            raise Unsupported("negative of bool")
        return f"-{a}" if ka == "f" else f"{T}({_arith(ctx, out, '-', f'{T}(0)', a)})"
    if name == "Sign":
        if ka == "b":
            return a
        if ka == "u":
            return f"({T}(1) if {a} > 0 else {T}(0))"
        return f"{T}(({T}(1) if {a} > 0 else {T}(0)) - ({T}(1) if {a} < 0 else {T}(0)))"
    if name == "Square":
        return _w(T, ka, _arith(ctx, out, "*", a, a)) if ka != "b" else f"{a}"
    if name == "Sqrt":
        return f"np.sqrt({a})"
    if name == "Rsqrt":
        return f"({T}(1) / np.sqrt({a}))"
    if name in _RT_UNARY:
        return f"{ctx.rt(_RT_UNARY[name] + ('_f64' if f64 else '_f32'))}({a})"
    if name in ("Floor", "Ceil", "Trunc"):
        return f"np.{name.lower()}({a})" if ka == "f" else a
    if name == "Round":
        d = prim.decimals
        if ka != "f":
            if ka == "b" or d >= 0:
                return a
            s = 10.0 ** (-d)
            return (f"{T}({ctx.rt('f_to_i64')}({ctx.rt('rint_f64')}(np.float64({a}) / {s!r})"
                    f" * {s!r}))")
        rint = ctx.rt("rint_f64" if f64 else "rint_f32")
        if d == 0:
            return f"{rint}({a})"
        if d > 0:
            return f"({rint}({a} * {T}({10.0 ** d!r})) / {T}({10.0 ** d!r}))"
        return f"({rint}({a} / {T}({10.0 ** -d!r})) * {T}({10.0 ** -d!r}))"
    if name == "LogicalNot":
        return f"(not {a})" if ka == "b" else f"({a} == {_CT[arg_dts[0].name]}(0))"
    if name == "BitwiseInvert":
        return f"(not {a})" if ka == "b" else f"{T}(~{a})"
    if name in ("Log", "Exp", "Expm1", "Log1p", "Sin", "Cos", "Tan", "ArcSin", "ArcCos",
                "ArcTan", "Sinh", "Cosh", "Tanh", "Erf", "ErfInv", "Sigmoid"):
        if ka != "f":
            raise Unsupported(f"{name} on {arg_dts[0].name}")
        if name == "ErfInv" and not f64:  # MLX's float algorithm, bit for bit (random.normal)
            return f"{ctx.rt('erfinv_mlx_f32')}(np.float32({a}))"
        return f"{_mathfn(ctx, prim, out)}({a})"
    # -- binary -------------------------------------------------------------------------------
    if name == "Add":
        return f"({a} | {b})" if ka == "b" else _w(T, ka, _arith(ctx, out, "+", a, b))
    if name == "Subtract":
        return f"({a} != {b})" if ka == "b" else _w(T, ka, _arith(ctx, out, "-", a, b))
    if name == "Multiply":
        return f"({a} & {b})" if ka == "b" else _w(T, ka, _arith(ctx, out, "*", a, b))
    if name == "Divide":
        if ka != "f":
            raise Unsupported("integer divide")
        return f"({a} / {b})"
    if name == "FloorDivide":
        if ka == "f":
            return f"np.floor({a} / {b})"
        if ka == "b":
            return f"({a} & {b})"
        return f"{T}({ctx.rt('floordiv_' + ka)}({a}, {b}))"
    if name == "Remainder":
        if ka == "f":
            return f"{ctx.rt('rem_f')}({a}, {b})"
        if ka == "b":
            return "np.bool_(False)"
        return f"{T}({ctx.rt('rem_' + ka)}({a}, {b}))"
    if name == "Power":
        if ka == "f":
            return f"{_mathfn(ctx, prim, out)}({a}, {b})"
        if ka == "b":
            return f"({a} | (not {b}))"
        return f"{T}({ctx.rt('ipow' if ka == 'i' else 'upow')}({a}, {b}))"
    if name in ("Maximum", "Minimum"):
        if ka == "f":
            return f"{ctx.rt('max_f' if name == 'Maximum' else 'min_f')}({a}, {b})"
        if ka == "b":
            return f"({a} | {b})" if name == "Maximum" else f"({a} & {b})"
        op = ">" if name == "Maximum" else "<"
        return f"({a} if {a} {op} {b} else {b})"
    if name == "LogAddExp":
        if ka != "f":
            raise Unsupported("logaddexp on integers")
        return f"{ctx.rt('logaddexp_f64' if f64 else 'logaddexp_f32')}({a}, {b})"
    if name == "ArcTan2":
        if ka != "f":
            raise Unsupported("arctan2 on integers")
        return f"{_mathfn(ctx, prim, out)}({a}, {b})"
    if name in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        op = {"BitwiseAnd": "&", "BitwiseOr": "|", "BitwiseXor": "^"}[name]
        if ka == "f":
            raise Unsupported("bitwise op on floats")
        return f"({a} {op} {b})" if ka == "b" else f"{T}({a} {op} {b})"
    if name in ("LeftShift", "RightShift"):
        if ka not in "ui":
            raise Unsupported(f"{name} on {arg_dts[0].name}")
        bits = _BITS[arg_dts[0].name]
        fn = "shl" if name == "LeftShift" else ("shr_i" if ka == "i" else "shr_u")
        return f"{T}({ctx.rt(fn)}({a}, {b}, {bits}))"
    if name in ("LogicalAnd", "LogicalOr"):
        op = "&" if name == "LogicalAnd" else "|"
        if ka == "b":
            return f"({a} {op} {b})"
        z = f"{_CT[arg_dts[0].name]}(0)"
        return f"(({a} != {z}) {op} ({b} != {z}))"
    if name in _CMP:
        return f"({a} {_CMP[name]} {b})"
    if name == "Equal":
        if prim.equal_nan and ka == "f":
            return f"{ctx.rt('nan_equal')}({a}, {b})"
        return f"({a} == {b})"
    if name == "Select":
        return f"({b} if {a} else {args[2]})"
    raise Unsupported(f"no code for {prim!r}")


def square_power(ir, op, args):
    """`a * a` for a float Power whose exponent is the baked constant 2 (`x ** 2`): the same
    correctly rounded result (NaN, infinities and -0 included) without a call to pow, which
    costs ~20x a multiply and does not vectorize as well. None otherwise."""
    if type(op.prim).__name__ != "Power" or op.dtype.kind != "f":
        return None
    e = op.args[1]
    n = ir.n_inputs
    while e >= n and type(ir.ops[e - n].prim).__name__ in ("Broadcast", "DynamicBroadcast"):
        e = ir.ops[e - n].args[0]  # the exponent is usually a broadcast scalar
    if e >= n or not ir.inputs[e].const or ir.inputs[e].py_value() != 2.0:
        return None
    return f"({args[0]} * {args[0]})"


def _prim_text(prim) -> str:
    r = repr(prim)
    return r[:-2] if r.endswith("()") else r


def _describe(ir, i: int, op) -> str:
    args = ", ".join(ir.ref_name(r) for r in op.args)
    return f"t{i}: {op.dtype.name} = {_prim_text(op.prim)}({args})"


def render(ir, variant: CpuVariant, fn_name: str = "kernel", cache: bool = False) -> str:
    """The source of a kernel module for `ir` and `variant` (see the module doc)."""
    ctx = _Ctx()
    n = ir.n_inputs
    names = [None] * (n + len(ir.ops))
    pre = []    # before the loop
    loads = []  # at the top of the loop body
    params = ["start", "stop"]
    strided = variant.kind == "strided"
    nd = variant.ndim
    if strided:
        params += ["shape", "strides", "offsets"]
    run_inputs = [k for k in range(n) if not ir.inputs[k].const]
    if len(variant.scalars) != len(run_inputs):
        raise ValueError("variant scalars do not match the region's inputs")
    sig_in = []
    vec = []  # (k, strided index) of array inputs
    for pos, k in enumerate(run_inputs):
        dt = ir.inputs[k].dtype
        if _kind(dt) == "c":
            raise Unsupported("complex input")
        arg = f"in{k}"
        params.append(arg)
        sig_in.append(STORAGE[dt.name])
        ld = _LOAD.get(dt.name)
        if variant.scalars[pos] == "S":
            names[k] = f"s{k}"
            src = f"{arg}[0]"
            pre.append(f"s{k} = {ctx.rt(ld) + '(' + src + ')' if ld else src}"
                       f"  # in{k}: {dt.name} scalar")
        else:
            names[k] = f"v{k}"
            idx = "i" if not strided else f"np.uint64(p{k} + j * st{k}_{nd - 1})"
            src = f"{arg}[{idx}]"
            loads.append(f"v{k} = {ctx.rt(ld) + '(' + src + ')' if ld else src}"
                         f"  # in{k}: {dt.name}")
            vec.append((k, len(vec)))
    consts = []
    for k in range(n):
        inp = ir.inputs[k]
        if inp.const:
            names[k] = f"c{k}"
            consts.append(f"c{k} = {literal(inp)}  # c{k}: {inp.dtype.name} = {inp.literal()}")
    pre = consts + pre
    # Ops whose arguments are all loop-invariant (constants, scalar inputs, such ops) are
    # computed once before the loop. Besides saving work, this keeps LLVM's optimiser from
    # hoisting them itself: on some all-scalar bodies (float16 rounding around exp) it never
    # finishes.
    invariant = {k for k in range(n) if ir.inputs[k].const or names[k].startswith("s")}
    body = []
    for i, op in enumerate(ir.ops):
        r = n + i
        args = [names[a] for a in op.args]
        dts = [ir.dtype_of(a) for a in op.args]
        expr = square_power(ir, op, args) or op_expr(ctx, op.prim, args, dts, op.dtype)
        pname = type(op.prim).__name__
        if op.dtype.name in HALF and pname not in _EXACT and pname != "AsType":
            expr = f"{ctx.rt(_ROUND[op.dtype.name])}({expr})"
        names[r] = f"t{i}"
        line = f"t{i} = {expr}  # {_describe(ir, i, op)}"
        if all(a in invariant for a in op.args):
            invariant.add(r)
            pre.append(line)
        else:
            body.append(line)
    sig_out = []
    stores = []
    for j, ref in enumerate(ir.outputs):
        dt = ir.dtype_of(ref)
        params.append(f"out{j}")
        sig_out.append(STORAGE[dt.name])
        st = _STORE.get(dt.name)
        val = names[ref]
        if ref < n and _kind(ir.inputs[ref].dtype) == "c":
            raise Unsupported("complex output")
        val = f"{ctx.rt(st)}({val})" if st else val
        if ref in invariant and st:  # convert a loop-invariant result once
            pre.append(f"r{j} = {val}  # out{j}: stored bits")
            val = f"r{j}"
        target = f"out{j}" if not strided else f"row{j}"
        stores.append(f"{target}[{'i' if not strided else 'j'}] = {val}"
                      f"  # out{j} <- {ir.ref_name(ref)}")

    lines = []
    lines.append(f"def {fn_name}({', '.join(params)}):")
    ind = "    "
    for p in pre:
        lines.append(ind + p)
    aliased = dict(variant.alias)  # output -> input
    if not strided:
        # slices, so the index is provably non-negative (no wrap-around checks: vectorizes)
        for k, _ in vec:
            lines.append(ind + f"in{k} = in{k}[start:stop]")
        for j in range(len(ir.outputs)):
            if j not in aliased:
                lines.append(ind + f"out{j} = out{j}[start:stop]")
        lines += [ind + a for a in alias_lines(variant.alias, [k for k, _ in vec])]
        lines.append(ind + "for i in range(stop - start):")
        for s in loads + body + stores:
            lines.append(ind * 2 + s)
    else:
        # shapes and strides are arguments: one kernel serves every shape of this rank
        lines += [ind + a for a in alias_lines(variant.alias)]
        for d in range(nd):
            lines.append(ind + f"n{d} = shape[{d}]")
        for k, si in vec:
            lines.append(ind + f"o{k} = offsets[{si}]  # in{k}: first element")
            for d in range(nd):
                lines.append(ind + f"st{k}_{d} = strides[{si}, {d}]")
        last = f"n{nd - 1}"
        lines.append(ind + "i = start")
        lines.append(ind + "while i < stop:")
        lines.append(ind * 2 + f"r = i // {last}")
        lines.append(ind * 2 + f"j0 = i - r * {last}")
        lines.append(ind * 2 + f"cnt = min({last} - j0, stop - i)")
        for d in range(nd - 2, -1, -1):  # the row's multi-index, innermost first
            if d == 0:
                lines.append(ind * 2 + "i0 = r")
            else:
                lines.append(ind * 2 + f"i{d} = r % n{d}")
                lines.append(ind * 2 + f"r = r // n{d}")
        for k, _ in vec:
            terms = [f"o{k}"] + [f"i{d} * st{k}_{d}" for d in range(nd - 1)]
            terms.append(f"j0 * st{k}_{nd - 1}")
            lines.append(ind * 2 + f"p{k} = {' + '.join(terms)}")
        for j in range(len(ir.outputs)):
            lines.append(ind * 2 + f"row{j} = out{j}[i:i + cnt]")
        lines.append(ind * 2 + "for j in range(cnt):")
        for s in loads + body + stores:
            lines.append(ind * 3 + s)
        lines.append(ind * 2 + "i += cnt")

    sig = ["types.int64", "types.int64"]
    if strided:
        sig += ["_I64_1", "_I64_2", "_I64_1"]
    return module_source(f"braze kernel {ir.name}{variant.suffix}", ir, ctx, sig, sig_in,
                         sig_out, cache, [], lines, _written(run_inputs, variant.alias))


def _written(run_inputs, alias) -> set:
    """Positions (among the run-time inputs) of the inputs an output is written into."""
    donors = {k for _, k in alias}
    return {pos for pos, k in enumerate(run_inputs) if k in donors}


def module_source(title, ir, ctx, sig, sig_in, sig_out, cache, imports, lines,
                  written=()) -> str:
    """A kernel module: docstring (the IR), imports, the signature (`sig`: the leading
    arguments' types, then the input and output buffers' element types; inputs at the
    positions `written` are writable), the decorated function `lines`."""
    head = [f'"""{title} (IR key {ir.key})', ""]
    head += ["  " + ln for ln in str(ir).splitlines()[1:]]
    head += ['"""', "import numpy as np", "from numba import njit, types", ""]
    rt = sorted(ctx.runtime | ctx.mathlib)  # lib.scalar re-exports the math functions
    if rt:
        head.append("from braze._src.backends.cpu.lib.scalar import " + ", ".join(rt))
    head.append("from braze._src.backends.cpu.lib.math import _bits_f32, _bits_f64")
    head += imports
    head.append("")
    sig = list(sig)
    sig += [f"types.Array(types.{t}, 1, 'C'{'' if p in written else ', readonly=True'})"
            for p, t in enumerate(sig_in)]
    sig += [f"types.Array(types.{t}, 1, 'C')" for t in sig_out]
    head.append("_I64_1 = types.Array(types.int64, 1, 'C', readonly=True)")
    head.append("_I64_2 = types.Array(types.int64, 2, 'C', readonly=True)")
    head.append("SIGNATURE = types.void(" + ", ".join(sig) + ")")
    head.append(f"CACHE = {bool(cache)}  # Numba's on-disk cache (modules in the kernel cache)")
    head.append("")
    head.append("")
    head.append('@njit(SIGNATURE, error_model="numpy", nogil=True, boundscheck=False, '
                'cache=CACHE)')
    return "\n".join(head + lines) + "\n"


def math_functions(source: str) -> list:
    """The math-library functions a rendered kernel calls (to compile them first)."""
    return [n for n in mathlib.FUNCTIONS if n + "(" in source]
