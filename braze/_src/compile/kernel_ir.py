"""KernelIR: the backend-neutral description of one fused elementwise region.

A region reads N inputs, runs a list of elementwise primitives in topological order and writes
one or more outputs, all of the same shape: the broadcast of the input shapes (the shape rule of
MLX's `Compiled::output_shapes`). Nothing in the IR depends on shapes or layouts, so one IR
serves every shape of a shapeless function; backends pick a variant (contiguous, strided) at
run time from the buffers they are given.

Value references (`Ref`) are integers: `0 .. len(inputs)-1` name the inputs, and
`len(inputs) + i` names the result of `ops[i]`.

Scalar constants (size-1 arrays with data and no primitive that are not function inputs) that
are booleans, integers or integral, infinite or NaN floats are *baked*: their exact bytes are
stored in the IR, so they round-trip bit for bit, and kernels for different constants get
different keys. Other floats (0.999, eps, 1/C, a learning rate) are ordinary run-time inputs, so
one kernel serves every value (fuse.py `_bake`). A baked constant's array stays an input of the
`Compiled` node (so the shape rule sees its shape), but a backend never reads it at run time.

The IR is a frozen dataclass: equal regions compare equal and hash equal (constants compare by
their bytes, so two NaN constants are equal), `str()` renders it readably, and `key` is a stable
hex digest (independent of the process) for in-memory and on-disk kernel caches.
"""
from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .. import dtypes as D
from ..prims.core import Broadcast


@dataclass(frozen=True)
class IRInput:
    """One input of a region: its dtype and, for a baked scalar constant, its exact bytes."""

    dtype: D.Dtype
    #: the raw bytes of the constant's single element in `dtype`, or None for a run-time input
    value: bytes | None = None

    @property
    def const(self) -> bool:
        return self.value is not None

    @staticmethod
    def constant(data: np.ndarray) -> "IRInput":
        """The baked constant holding the single element of `data` (any size-1 shape)."""
        flat = np.ascontiguousarray(data).reshape(-1)[:1]
        return IRInput(D.from_numpy(flat.dtype), flat.tobytes())

    def array(self) -> np.ndarray:
        """The constant as a 0-d NumPy array of its dtype (bit-exact)."""
        return np.frombuffer(self.value, dtype=self.dtype.np_dtype).reshape(())

    def py_value(self):
        """The constant as a Python bool/int/float/complex (exact: float16/bfloat16 widen
        exactly to float)."""
        v = self.array()[()]
        k = self.dtype.kind
        if k == "b":
            return bool(v)
        if k in "ui":
            return int(v)
        if k == "c":
            return complex(v)
        return float(v)

    def literal(self) -> str:
        """Python source text for the constant, exact: `float('nan')`, `float('-inf')`, the
        shortest round-trip `repr` of finite floats, `True`, integers as they are."""
        v = self.py_value()
        if isinstance(v, float):
            return _float_literal(v)
        if isinstance(v, complex):
            return f"complex({_float_literal(v.real)}, {_float_literal(v.imag)})"
        return repr(v)


def _float_literal(v: float) -> str:
    if math.isnan(v):
        return "float('nan')" if math.copysign(1.0, v) > 0 else "-float('nan')"
    if math.isinf(v):
        return "float('inf')" if v > 0 else "float('-inf')"
    return repr(v)


@dataclass(frozen=True)
class IROp:
    """`prim` applied to the values `args` (refs), giving one value of dtype `dtype`.

    In a row region (`KernelIR.reduce_ndim > 0`), `row` marks a value with one element per row
    (a reduction's result, or elementwise ops on such values); the others are full-shape.
    `fold` marks a sum that a row algorithm may accumulate early (compile/row_algorithms.py):
    ("online", v, max) or ("chan", v, mu), refs."""

    prim: object
    args: tuple
    dtype: D.Dtype
    row: bool = False
    fold: tuple = ()


@dataclass(frozen=True)
class KernelIR:
    """A fused region: inputs, ops in topological order, output refs.

    `reduce_ndim == 0`: an elementwise region. `reduce_ndim == k > 0`: a *row region*, whose
    reductions (`Reduce`/`ArgReduce` ops) all reduce the last k axes of the region's full
    shape; its ops are full-shape or row values (`IROp.row`), and a row output has the full
    shape with the last k dimensions set to 1 (docs/kernels.md, "Row kernels")."""

    inputs: tuple
    ops: tuple
    outputs: tuple
    reduce_ndim: int = 0

    # -- structure -----------------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.inputs)

    def dtype_of(self, ref: int) -> D.Dtype:
        n = len(self.inputs)
        return self.inputs[ref].dtype if ref < n else self.ops[ref - n].dtype

    def is_row(self, ref: int) -> bool:
        """Whether value `ref` has one element per row (inputs never do: they are read with
        their own broadcast strides)."""
        n = len(self.inputs)
        return ref >= n and self.ops[ref - n].row

    @property
    def row_outputs(self) -> tuple:
        return tuple(self.is_row(r) for r in self.outputs)

    def row_shape(self, shape: tuple) -> tuple:
        """The shape of a row value in a region of full shape `shape`."""
        k = self.reduce_ndim
        return tuple(shape[:len(shape) - k]) + (1,) * k

    def output_shapes(self, shape: tuple) -> tuple:
        """Each output's shape in a region of full shape `shape`."""
        if not self.reduce_ndim:
            return (shape,) * len(self.outputs)
        row = self.row_shape(shape)
        return tuple(row if r else shape for r in self.row_outputs)

    @functools.cached_property
    def output_dtypes(self) -> tuple:  # cached: every launch of the region reads it
        return tuple(self.dtype_of(r) for r in self.outputs)

    @property
    def const_mask(self) -> tuple:
        return tuple(i.const for i in self.inputs)

    @property
    def name(self) -> str:
        """MLX's primitive name: "Compiled" + the primitive names in tape order."""
        return "Compiled" + "".join(op.prim.name for op in self.ops)

    def last_uses(self) -> list:
        """For every ref, the index of the last op that reads it (-1: none)."""
        last = [-1] * (len(self.inputs) + len(self.ops))
        for i, op in enumerate(self.ops):
            for r in op.args:
                last[r] = i
        return last

    def output_shape(self, input_shapes) -> tuple:
        """The region's (full) shape: the broadcast of the input shapes (MLX's rule).

        A `Broadcast` inside the region (the only way a region can be larger than its inputs,
        e.g. `exp(broadcast_to(x, s))`) contributes its target when it is compatible; a target
        that no longer fits (a shapeless call with new shapes) is ignored, as in MLX, where the
        kernel realises broadcasting with strides.
        """
        from ..prims.base import broadcast_shapes
        out = broadcast_shapes(*input_shapes, op="compile")
        for op in self.ops:
            # a static broadcast only: a DynamicBroadcast's shape follows its inputs
            if type(op.prim) is Broadcast:
                try:
                    out = broadcast_shapes(out, op.prim.shape)
                except ValueError:
                    pass
        return out

    # -- identity ------------------------------------------------------------------------------
    def kernel_text(self) -> str:
        """Canonical text of everything a kernel depends on: no shapes, no object ids.

        Broadcast targets are left out (a kernel realises broadcasting with strides), so one
        kernel serves every shape; constants are written as their exact bytes.
        """
        lines = [f"in{i}:{inp.dtype.name}" + (f"=0x{inp.value.hex()}" if inp.const else "")
                 for i, inp in enumerate(self.inputs)]
        for i, op in enumerate(self.ops):
            fold = f"/{op.fold[0]}:{op.fold[1]},{op.fold[2]}" if op.fold else ""
            lines.append(f"t{i}:{op.dtype.name}{'/row' if op.row else ''}{fold}="
                         f"{_op_identity(op.prim)}({','.join(map(str, op.args))})")
        lines.append("out:" + ",".join(map(str, self.outputs)))
        if self.reduce_ndim:
            lines.append(f"reduce_ndim:{self.reduce_ndim}")
        return "\n".join(lines)

    @functools.cached_property
    def key(self) -> str:
        """A stable hex digest of `kernel_text()` (same in every process); kept in the
        instance dict, which a frozen dataclass allows and a launch reads without a call."""
        return hashlib.sha256(self.kernel_text().encode()).hexdigest()[:32]

    # -- printing ------------------------------------------------------------------------------
    def ref_name(self, ref: int) -> str:
        n = len(self.inputs)
        if ref < n:
            return f"c{ref}" if self.inputs[ref].const else f"in{ref}"
        return f"t{ref - n}"

    def describe(self, i: int) -> str:
        """`t3: float32 = Multiply(t2, c1)`: op i as the IR dump prints it (and as kernels
        comment the line computing it)."""
        op = self.ops[i]
        text = repr(op.prim)
        text = text[:-2] if text.endswith("()") else text
        row = " (per row)" if op.row else ""
        return f"t{i}: {op.dtype.name}{row} = {text}({', '.join(map(self.ref_name, op.args))})"

    def __str__(self) -> str:
        lines = [f"{self.name} (key {self.key})"]
        lines += [f"  {self.ref_name(i)}: {inp.dtype.name}"
                  + (f" = {inp.literal()}" if inp.const else "")
                  for i, inp in enumerate(self.inputs)]
        for i, op in enumerate(self.ops):
            fold = ""
            if op.fold:
                how, v, r = op.fold
                fold = (f"  [online with max {self.ref_name(r)}]" if how == "online" else
                        f"  [Chan's update of {self.ref_name(v)} around {self.ref_name(r)}]")
            lines.append(f"  {self.describe(i)}{fold}")
        lines.append("  return " + ", ".join(self.ref_name(r) for r in self.outputs))
        lines.append("  shape: broadcast of the input shapes")
        if self.reduce_ndim:
            lines.append(f"  rows: reductions over the last {self.reduce_ndim} axes")
        return "\n".join(lines)


def _op_identity(prim) -> str:
    # a broadcast's target shape is not part of the kernel (strides realise it)
    return "Broadcast" if prim.kernel_op == "broadcast" else repr(prim)
