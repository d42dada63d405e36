"""The element-body emitter of the cuda kernels: one `__device__` function per kernel that
computes the region for one element.

`element(x0, x1, ..., y0, ...)` takes each run-time input's element in its storage type and a
reference to each output element: it converts half-precision values to float, computes one
line per op (spelled by spell.py, rounded to float16/bfloat16 unless the primitive is `exact`)
and stores the outputs, narrowed back. Every loop strategy (render.py) calls it, so the
arithmetic is written once per kernel whatever the loads. Names: `x{k}` an input element,
`c{k}` a baked constant, `v{k}` an input's value in its compute type, `t{i}` op results,
`y{j}` outputs.
"""
from __future__ import annotations

from ..spelling import Unsupported
from . import spell
from .prelude import HALF_NAME as HALF
from .prelude import NAME as PRELUDE


def signature(head: str, params: list, width: int = 100) -> list:
    """`head` and the parameters, wrapped as clang-format would: continuation lines indented
    by four, each at most `width` characters when the parameters allow."""
    one = head + ", ".join(params) + ") {"
    if len(one) <= width:
        return [one]
    lines, cur = [head], "   "
    for p in params:
        piece = f" {p},"
        if len(cur) + len(piece) > width and cur.strip():
            lines.append(cur)
            cur = "   "
        cur += piece
    return lines + [cur[:-1] + ") {"]


class Body:
    """The element function of one region; `names[ref]` is the expression holding a value."""

    def __init__(self, ir):
        self.ir = ir
        self.names = [None] * (ir.n_inputs + len(ir.ops))
        self.run = [k for k in range(ir.n_inputs) if not ir.inputs[k].const]
        for k, inp in enumerate(ir.inputs):
            if inp.dtype.kind == "c":
                raise Unsupported("complex input")
        for r in ir.outputs:
            if ir.dtype_of(r).kind == "c":
                raise Unsupported("complex output")

    def storage(self, ref: int) -> str:
        return spell.STORAGE[self.ir.dtype_of(ref).name]

    def compute(self, ref: int) -> str:
        return spell.COMPUTE[self.ir.dtype_of(ref).name]

    def value(self, i: int) -> str:
        ir, op = self.ir, self.ir.ops[i]
        args = [self.names[a] for a in op.args]
        e = spell.expr(op.prim, args, [ir.dtype_of(a) for a in op.args], op.dtype)
        if op.dtype.name in spell.HALF and not op.prim.exact:
            e = f"{spell.ROUND[op.dtype.name]}({e})"
        return e

    def lines(self) -> list:
        """The element function's body: constants, input conversions, ops, stores."""
        ir, out = self.ir, []
        for k, inp in enumerate(ir.inputs):
            if inp.const:
                self.names[k] = f"c{k}"
                out.append(f"const {self.compute(k)} c{k} = {spell.literal(inp)};"
                           f"  // c{k}: {inp.dtype.name} = {inp.literal()}")
            elif inp.dtype.name in spell.HALF:
                self.names[k] = f"v{k}"
                out.append(f"const float v{k} = {spell.LOAD[inp.dtype.name]}(x{k});"
                           f"  // in{k}: {inp.dtype.name}")
            else:
                self.names[k] = f"x{k}"
        for i in range(len(ir.ops)):
            r = ir.n_inputs + i
            e = self.value(i)
            if e in self.names[:r]:  # the argument as it is (a broadcast, a same-type cast)
                self.names[r] = e
                continue
            self.names[r] = f"t{i}"
            out.append(f"const {self.compute(r)} t{i} = {e};  // {ir.describe(i)}")
        for j, ref in enumerate(ir.outputs):
            st = spell.STORE.get(ir.dtype_of(ref).name)
            val = f"{st}({self.names[ref]})" if st else self.names[ref]
            out.append(f"y{j} = {val};  // out{j} <- {ir.ref_name(ref)}")
        return out

    def function(self) -> list:
        """`__device__ __forceinline__ void element(...) { ... }`."""
        ir = self.ir
        body = self.lines()
        params = [f"{self.storage(k)} x{k}" for k in self.run]
        params += [f"{self.storage(r)}& y{j}" for j, r in enumerate(ir.outputs)]
        head = signature("__device__ __forceinline__ void element(", params)
        return head + ["  " + ln for ln in body] + ["}"]

    def module(self, title: str, lines: list) -> str:
        """The translation unit: a comment with the IR, the prelude, the element function (in
        an anonymous namespace: kernels of one program never clash), the kernel."""
        ir = self.ir
        head = [f"// {title} (IR key {ir.key})", "//"]
        head += ["// " + ln for ln in str(ir).splitlines()[1:]]
        half = any(ir.dtype_of(r).name in spell.HALF for r in range(ir.n_inputs + len(ir.ops)))
        head += [f'#include "{HALF if half else PRELUDE}"', "", "namespace {", ""]
        head += self.function() + ["", "}  // namespace", ""]
        return "\n".join(head + lines) + "\n"
