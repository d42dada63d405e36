"""The `numpy` reference backend: a `Compiled` region is interpreted node by node with each
primitive's `eval_cpu`, exactly the semantics of the unfused graph.

- Inputs keep their own shapes; the arguments of a multi-input op are broadcast to their common
  shape (zero-copy views) before its kernel runs, and a `Broadcast` inside the region is the
  identity (the kernel realises broadcasting, as MLX's kernels do with strides). Outputs are
  broadcast to the output shape at the end and are always fresh (or donated) buffers.
- Baked constants are read from the IR (their exact bytes), never from the input buffers.
- Donation: an output produced by a plain NumPy ufunc is computed straight into a donated input
  buffer with `out=` when that input is read by no later op.
"""
from __future__ import annotations

import numpy as np

from ...prims.core import Broadcast
from ...np_errors import quiet
from ..base import Backend

_IDENTITY = "{0}"


def _is_identity(prim) -> bool:
    return isinstance(prim, Broadcast) or getattr(prim, "codegen", None) == _IDENTITY


def _ufunc_into(prim, args, out):
    """Run `prim` as its NumPy ufunc writing into `out`; False if that is not exactly its
    kernel (not a plain ufunc, or dtypes that would need a cast)."""
    fn = getattr(type(prim), "fn", None)
    if not isinstance(fn, np.ufunc) or fn.nout != 1 or fn.nin != len(args):
        return False
    dt = out.dtype
    for a in args:
        if a.dtype != dt:
            return False
    try:
        fn(*args, out=out, casting="no")
    except TypeError:  # no loop for this dtype without a cast
        return False
    return True


class NumpyBackend(Backend):
    name = "numpy"

    def run_compiled(self, ir, inputs, out_shape=None, donatable=None) -> list:
        # MLX never warns about floating-point exceptions inside a kernel
        return quiet(self._run, ir, inputs, out_shape, donatable)

    def _run(self, ir, inputs, out_shape, donatable) -> list:
        n = len(ir.inputs)
        vals = [None] * (n + len(ir.ops))
        for k, spec in enumerate(ir.inputs):
            vals[k] = spec.array() if spec.const else inputs[k]
        if out_shape is None:
            out_shape = ir.output_shape([x.shape for x in inputs])
        donors = self.assign_donors(ir, inputs, out_shape, donatable)
        # output slot -> donor input, for the op that produces it
        want = {}
        if any(d is not None for d in donors):
            for j, d in enumerate(donors):
                if d is not None:
                    want.setdefault(ir.outputs[j], d)
            last = ir.last_uses()
        donated = set()
        for i, op in enumerate(ir.ops):
            r = n + i
            args = [vals[a] for a in op.args]
            if _is_identity(op.prim):
                vals[r] = args[0]
                continue
            if len(args) > 1:
                shapes = {a.shape for a in args}
                if len(shapes) > 1:
                    args = np.broadcast_arrays(*args)
            d = want.get(r)
            if (d is not None and last[d] <= i and args and args[0].shape == out_shape
                    and _ufunc_into(op.prim, args, inputs[d])):
                vals[r] = inputs[d]
                donated.add(id(inputs[d]))
                continue
            vals[r] = op.prim.eval_cpu(*args)[0]
        outs = []
        seen = set()
        in_ids = {id(x) for x in inputs} | {id(v) for v in vals[:n]}
        for j, ref in enumerate(ir.outputs):
            v = vals[ref]
            npd = ir.dtype_of(ref).np_dtype
            if id(v) in donated and id(v) not in seen:
                seen.add(id(v))
                outs.append(v)
                continue
            if not isinstance(v, np.ndarray):
                v = np.asarray(v)
            if v.dtype != npd:
                v = v.astype(npd)
            if (v.shape != out_shape or v.base is not None or id(v) in in_ids
                    or id(v) in seen):
                v = np.array(np.broadcast_to(v, out_shape), dtype=npd)
            seen.add(id(v))
            outs.append(v)
        return outs
