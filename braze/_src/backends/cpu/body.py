"""The element-body emitter shared by every cpu loop strategy, and the kernel module around it.

A strategy (render.py: flat and strided loops; render_rows.py: row loops) decides where each
line goes and how buffers are indexed; `Body` writes the lines themselves: baked constants,
loads (half-precision bit patterns widened to float32), one line per op (spelled by spell.py,
rounded to float16/bfloat16 unless the primitive is `exact`), stores (narrowed back). Names:
`in{k}` input buffers, `c{k}` constants, `s{k}` scalar inputs, `v{k}` loaded elements, `t{i}`
op results, `out{j}` output buffers.

The module is exactly what is compiled, whichever cache path: `CACHE` is true when it is
loaded from a file in the kernel cache directory (Numba then keeps its machine code there),
and the decorator is `kernel_njit` (no-alias pointer arguments, compiler.py).
"""
from __future__ import annotations

from . import spell
from .lib import math as mathlib


class Body:
    """Lines of one kernel's element body; `names[ref]` is the expression holding a value."""

    def __init__(self, ir):
        self.ir = ir
        self.ctx = spell.Ctx()
        self.names = [None] * (ir.n_inputs + len(ir.ops))

    def const_line(self, k: int) -> str:
        inp = self.ir.inputs[k]
        self.names[k] = f"c{k}"
        return f"c{k} = {spell.literal(inp)}  # c{k}: {inp.dtype.name} = {inp.literal()}"

    def load(self, k: int, src: str) -> str:
        """`src` (a buffer element of input k) as a value of its compute type."""
        ld = spell.LOAD.get(self.ir.inputs[k].dtype.name)
        return f"{self.ctx.call(ld)}({src})" if ld else src

    def value(self, i: int) -> str:
        """The expression of op i on its arguments' names, rounded to half precision when
        its dtype is a half type and the primitive's result may not be representable."""
        ir, op = self.ir, self.ir.ops[i]
        args = [self.names[a] for a in op.args]
        e = spell.expr(self.ctx, op.prim, args, [ir.dtype_of(a) for a in op.args], op.dtype)
        if op.dtype.name in spell.HALF and not op.prim.exact:
            e = f"{self.ctx.call(spell.ROUND[op.dtype.name])}({e})"
        return e

    def op_line(self, i: int) -> str:
        """`t{i} = ...`, or "" when op i is its argument as it is (a broadcast, a cast to the
        same compute type): later lines then read the argument's name, no alias line."""
        r = self.ir.n_inputs + i
        e = self.value(i)
        if e in self.names[:r]:
            self.names[r] = e
            return ""
        self.names[r] = f"t{i}"
        return f"t{i} = {e}  # {self.ir.describe(i)}"

    def stored(self, ref: int, val: str) -> str:
        """`val` (the compute-type value of `ref`) as the bits its output buffer holds."""
        st = spell.STORE.get(self.ir.dtype_of(ref).name)
        return f"{self.ctx.call(st)}({val})" if st else val

    def signature(self, lead, run_inputs, outputs, written=()) -> str:
        """`SIGNATURE = types.void(...)`: the leading argument types, then one 1-D buffer per
        run-time input (writable at the positions `written`) and per output ref."""
        ir = self.ir
        sig = list(lead)
        for p, k in enumerate(run_inputs):
            ro = "" if p in written else ", readonly=True"
            sig.append(f"types.Array(types.{spell.STORAGE[ir.inputs[k].dtype.name]}, 1, 'C'{ro})")
        sig += [f"types.Array(types.{t}, 1, 'C')" for t in outputs]
        return "SIGNATURE = types.void(" + ", ".join(sig) + ")"

    def module(self, title: str, signature: str, lines: list, imports=()) -> str:
        """The kernel module: docstring (the IR), imports, the signature, the function."""
        ir = self.ir
        head = [f'"""{title} (IR key {ir.key})', ""]
        head += ["  " + ln for ln in str(ir).splitlines()[1:]]
        head += ['"""', "import numpy as np", "from numba import types", "",
                 "from braze._src.backends.cpu.compiler import kernel_njit as njit"]
        if self.ctx.names:  # lib.scalar re-exports the math functions
            head.append("from braze._src.backends.cpu.lib.scalar import "
                        + ", ".join(sorted(self.ctx.names)))
        head.append("from braze._src.backends.cpu.lib.math import _bits_f32, _bits_f64")
        head += list(imports)
        head += ["", "_I64_1 = types.Array(types.int64, 1, 'C', readonly=True)",
                 "_I64_2 = types.Array(types.int64, 2, 'C', readonly=True)", signature,
                 "# Numba's on-disk cache, for a module loaded from the kernel cache directory",
                 'CACHE = "__file__" in globals()', "", "",
                 '@njit(SIGNATURE, error_model="numpy", nogil=True, boundscheck=False, '
                 'cache=CACHE)']
        return "\n".join(head + lines) + "\n"


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


def written(run_inputs, alias) -> set:
    """Positions (among the run-time inputs) of the inputs an output is written into."""
    donors = {k for _, k in alias}
    return {pos for pos, k in enumerate(run_inputs) if k in donors}


def math_functions(source: str) -> list:
    """The math-library functions a rendered kernel calls (to compile them first)."""
    return [n for n in mathlib.FUNCTIONS if n + "(" in source]
