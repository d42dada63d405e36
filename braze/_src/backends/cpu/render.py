"""The `cpu` renderer: a KernelIR + variant -> the Python source of a Numba loop function.

`render_kernel(ir, variant)` is the one entry: the variant picks the loop strategy, flat
(`contiguous`) or `strided` here, `rows` in render_rows.py; every strategy writes its element
body with `body.Body` (loads, ops spelled by spell.py, half-precision rounding, stores).
A flat kernel module looks like this (`x * 2 + 1` on float32, contiguous variant)::

    @njit(SIGNATURE, error_model="numpy", nogil=True, boundscheck=False, cache=CACHE)
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

Dtypes (spell.py): kernels compute bool, integers, float32 and float64 in their own type
(every op result is cast back to its dtype, so integers wrap as in NumPy); float16 and bfloat16
buffers are read as uint16 bit patterns, widened to float32, and every half-precision op result
is rounded to its dtype (round to nearest even), as NumPy's / ml_dtypes' loops do. complex64 is
not rendered (`Unsupported`): such regions run on the numpy backend.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..base import Variant
from .body import Body, alias_lines, alias_suffix, written
from .spell import STORAGE, Unsupported


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


def render_kernel(ir, variant, fn_name: str = "kernel") -> str:
    """The source of the kernel module for `ir` and `variant` (see the module doc)."""
    if variant.kind == "rows":
        from .render_rows import render_row_kernel
        return render_row_kernel(ir, variant, fn_name)
    return _Flat(ir, variant).module(fn_name)


class _Flat:
    """The flat and strided loop strategies: one element per iteration of the flattened
    output's index range [start, stop)."""

    def __init__(self, ir, variant: CpuVariant):
        self.ir, self.variant = ir, variant
        self.body = Body(ir)
        self.strided = variant.kind == "strided"
        self.run = [k for k in range(ir.n_inputs) if not ir.inputs[k].const]
        if len(variant.scalars) != len(self.run):
            raise ValueError("variant scalars do not match the region's inputs")
        self.vec = [k for k, c in zip(self.run, variant.scalars) if c == "V"]

    def module(self, fn_name: str) -> str:
        ir, v = self.ir, self.variant
        pre, loads = self._inputs()
        body, invariant = self._ops(pre)
        stores = self._stores(pre, invariant)
        params = ["start", "stop"] + (["shape", "strides", "offsets"] if self.strided else [])
        params += [f"in{k}" for k in self.run] + [f"out{j}" for j in range(len(ir.outputs))]
        lines = [f"def {fn_name}({', '.join(params)}):"] + ["    " + p for p in pre]
        loop = self._strided_loop if self.strided else self._flat_loop
        lines += ["    " + ln for ln in loop(loads + body + stores)]
        lead = ["types.int64", "types.int64"] + (["_I64_1", "_I64_2", "_I64_1"]
                                                 if self.strided else [])
        out_types = [STORAGE[ir.dtype_of(r).name] for r in ir.outputs]
        sig = self.body.signature(lead, self.run, out_types, written(self.run, v.alias))
        return self.body.module(f"braze kernel {ir.name}{v.suffix}", sig, lines)

    def _inputs(self):
        """(lines before the loop: constants, scalar loads; element loads in the loop)."""
        ir, b = self.ir, self.body
        pre = [b.const_line(k) for k in range(ir.n_inputs) if ir.inputs[k].const]
        loads = []
        nd = self.variant.ndim
        for k, c in zip(self.run, self.variant.scalars):
            dt = ir.inputs[k].dtype
            if dt.kind == "c":
                raise Unsupported("complex input")
            if c == "S":
                b.names[k] = f"s{k}"
                pre.append(f"s{k} = {b.load(k, f'in{k}[0]')}  # in{k}: {dt.name} scalar")
            else:
                b.names[k] = f"v{k}"
                idx = f"np.uint64(p{k} + j * st{k}_{nd - 1})" if self.strided else "i"
                loads.append(f"v{k} = {b.load(k, f'in{k}[{idx}]')}  # in{k}: {dt.name}")
        return pre, loads

    def _ops(self, pre):
        """The op lines in the loop; ops whose arguments are all loop-invariant (constants,
        scalars, such ops) go to `pre` instead: besides saving work, that keeps LLVM from
        hoisting them itself, which on some all-scalar bodies (float16 rounding around exp)
        never finishes."""
        ir, b = self.ir, self.body
        invariant = {k for k in range(ir.n_inputs) if k not in self.vec}
        body = []
        for i, op in enumerate(ir.ops):
            line = b.op_line(i)
            if all(a in invariant for a in op.args):
                invariant.add(ir.n_inputs + i)
                pre += [line] if line else []
            elif line:
                body.append(line)
        return body, invariant

    def _stores(self, pre, invariant):
        ir, b = self.ir, self.body
        stores = []
        for j, ref in enumerate(ir.outputs):
            if ir.dtype_of(ref).kind == "c":
                raise Unsupported("complex output")
            val = b.stored(ref, b.names[ref])
            if ref in invariant and val != b.names[ref]:  # convert a loop-invariant value once
                pre.append(f"r{j} = {val}  # out{j}: stored bits")
                val = f"r{j}"
            target = f"row{j}[j]" if self.strided else f"out{j}[i]"
            stores.append(f"{target} = {val}  # out{j} <- {ir.ref_name(ref)}")
        return stores

    def _flat_loop(self, inner) -> list:
        # slices, so the index is provably non-negative (no wrap-around checks: vectorizes)
        aliased = dict(self.variant.alias)  # output -> input
        lines = [f"in{k} = in{k}[start:stop]" for k in self.vec]
        lines += [f"out{j} = out{j}[start:stop]" for j in range(len(self.ir.outputs))
                  if j not in aliased]
        lines += alias_lines(self.variant.alias, self.vec)
        lines.append("for i in range(stop - start):")
        return lines + ["    " + s for s in inner]

    def _strided_loop(self, inner) -> list:
        """Rows of the last (collapsed) dimension: shapes and strides are arguments, so one
        kernel serves every shape of this rank."""
        nd = self.variant.ndim
        lines = alias_lines(self.variant.alias)
        lines += [f"n{d} = shape[{d}]" for d in range(nd)]
        for si, k in enumerate(self.vec):
            lines.append(f"o{k} = offsets[{si}]  # in{k}: first element")
            lines += [f"st{k}_{d} = strides[{si}, {d}]" for d in range(nd)]
        last = f"n{nd - 1}"
        row = [f"r = i // {last}", f"j0 = i - r * {last}", f"cnt = min({last} - j0, stop - i)"]
        for d in range(nd - 2, -1, -1):  # the row's multi-index, innermost first
            row += ["i0 = r"] if d == 0 else [f"i{d} = r % n{d}", f"r = r // n{d}"]
        for k in self.vec:
            terms = [f"o{k}"] + [f"i{d} * st{k}_{d}" for d in range(nd - 1)]
            row.append(f"p{k} = {' + '.join(terms + [f'j0 * st{k}_{nd - 1}'])}")
        row += [f"row{j} = out{j}[i:i + cnt]" for j in range(len(self.ir.outputs))]
        row.append("for j in range(cnt):")
        row += ["    " + s for s in inner] + ["i += cnt"]
        return lines + ["i = start", "while i < stop:"] + ["    " + s for s in row]
