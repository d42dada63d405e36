"""The `numpy` reference backend: a `Compiled` region is interpreted node by node with each
primitive's `eval_cpu`, exactly the semantics of the unfused graph.

- Inputs keep their own shapes; the arguments of a multi-input op are broadcast to their common
  shape (zero-copy views) before its kernel runs, and a `Broadcast` inside the region is the
  identity (the kernel realises broadcasting, as MLX's kernels do with strides). Outputs are
  broadcast to the output shape at the end and are always fresh (or donated) buffers.
- Baked constants are read from the IR (their exact bytes), never from the input buffers.
- A row region (`reduce_ndim > 0`) runs the same way: a reduction's argument is broadcast to
  the region's full shape first, and per-row outputs keep the row shape.
- Donation: an output produced by a plain NumPy ufunc is computed straight into a donated input
  buffer with `out=` when that input is read by no later op.
"""
from __future__ import annotations

import numpy as np

from ...np_errors import quiet
from ..base import Backend


def _is_identity(prim) -> bool:
    return prim.kernel_op in ("identity", "broadcast")


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


def _native_broadcast(prim) -> bool:
    """Whether `prim`'s kernel is exactly its NumPy ufunc (the table-generated eval_cpu), so
    arguments of different shapes may be passed unbroadcast (NumPy broadcasts identically)."""
    fn = getattr(type(prim), "fn", None)
    ev = getattr(type(prim), "eval_cpu", None)
    return (isinstance(fn, np.ufunc) and ev is not None
            and getattr(ev, "__qualname__", "").startswith("_make_eval."))


class _Plan:
    """What `_run` needs of an IR, computed once per IR."""

    __slots__ = ("n", "consts", "steps", "outputs", "out_dtypes", "last", "row_outputs")

    def __init__(self, ir):
        self.n = len(ir.inputs)
        self.consts = [(k, spec.array()) for k, spec in enumerate(ir.inputs) if spec.const]
        # (prim, arg refs, 0: identity / 1: NumPy broadcasts natively / 2: broadcast first /
        #  3: a row region's reduction: its argument broadcast to the full shape)
        self.steps = [(op.prim, tuple(op.args),
                       0 if _is_identity(op.prim) else 3 if ir.reduce_ndim and op.row
                       and op.prim.reduction
                       else 1 if _native_broadcast(op.prim) else 2)
                      for op in ir.ops]
        self.row_outputs = ir.row_outputs
        self.outputs = tuple(ir.outputs)
        self.out_dtypes = tuple(ir.dtype_of(r).np_dtype for r in ir.outputs)
        self.last = ir.last_uses()


class NumpyBackend(Backend):
    name = "numpy"

    def run_compiled(self, ir, inputs, out_shape=None, donatable=None) -> list:
        # MLX never warns about floating-point exceptions inside a kernel
        return quiet(self._run, ir, inputs, out_shape, donatable)

    def __init__(self):
        self._plans = {}  # id(ir) -> (ir, _Plan)

    def _plan(self, ir) -> _Plan:
        hit = self._plans.get(id(ir))
        if hit is not None and hit[0] is ir:
            return hit[1]
        plan = _Plan(ir)
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[id(ir)] = (ir, plan)
        return plan

    def run_known(self, ir, inputs, shape, known) -> list:
        """The outputs of row region `ir` over full shape `shape` when the values of some
        ops are given (`known`: ref -> array): only the ops the outputs still need run (the
        cpu backend's column-split reductions finish here)."""
        return quiet(self._run_known, ir, inputs, shape, known)

    def _run_known(self, ir, inputs, shape, known) -> list:
        plan = self._plan(ir)
        n = plan.n
        vals = dict(known)
        vals.update(plan.consts)
        for k in range(n):
            vals.setdefault(k, inputs[k])
        need, todo = set(), list(ir.outputs)
        while todo:
            r = todo.pop()
            if r in vals or r in need:
                continue
            need.add(r)
            todo.extend(plan.steps[r - n][1])
        for r in sorted(need):
            prim, refs, how = plan.steps[r - n]
            args = [vals[a] for a in refs]
            if how == 0:
                vals[r] = args[0]
                continue
            if how in (2, 3) and len(args) > 1 and len({a.shape for a in args}) > 1:
                args = np.broadcast_arrays(*args)
            vals[r] = prim.eval_cpu(*args)[0]
        return [np.array(np.broadcast_to(vals[r], s), dtype=d) for r, d, s in
                zip(plan.outputs, plan.out_dtypes, ir.output_shapes(shape))]

    def _run(self, ir, inputs, out_shape, donatable) -> list:
        plan = self._plan(ir)
        n = plan.n
        vals = list(inputs)
        for k, c in plan.consts:
            vals[k] = c
        if out_shape is None:
            out_shape = ir.output_shape([x.shape for x in inputs])
        donors = self.assign_donors(ir, inputs, out_shape, donatable) if donatable else None
        # output slot -> donor input, for the op that produces it
        want = None
        if donors and any(d is not None for d in donors):
            want = {}
            for j, d in enumerate(donors):
                if d is not None:
                    want.setdefault(plan.outputs[j], d)
            last = plan.last
        donated = set()
        for i, (prim, refs, how) in enumerate(plan.steps):
            if how == 0:
                vals.append(vals[refs[0]])
                continue
            args = [vals[a] for a in refs]
            if how == 3:
                if args[0].shape != out_shape:
                    args = [np.broadcast_to(args[0], out_shape)]
                vals.append(prim.eval_cpu(*args)[0])
                continue
            if how == 2 and len(args) > 1:
                s0 = args[0].shape
                for a in args:
                    if a.shape != s0:
                        args = np.broadcast_arrays(*args)
                        break
            if want is not None:
                d = want.get(n + i)
                if d is not None and how == 1 and len(args) > 1:
                    args = np.broadcast_arrays(*args)  # `out=` below needs the full shape
                if (d is not None and last[d] <= i and args and args[0].shape == out_shape
                        and _ufunc_into(prim, args, inputs[d])):
                    vals.append(inputs[d])
                    donated.add(id(inputs[d]))
                    continue
            vals.append(prim.eval_cpu(*args)[0])
        outs = []
        seen = set()
        shapes = ir.output_shapes(out_shape)
        for ref, npd, shape in zip(plan.outputs, plan.out_dtypes, shapes):
            v = vals[ref]
            if donated and id(v) in donated and id(v) not in seen:
                seen.add(id(v))
                outs.append(v)
                continue
            if type(v) is not np.ndarray:
                v = np.asarray(v)
            if v.dtype != npd:
                v = v.astype(npd)
            if (v.shape != shape or v.base is not None or id(v) in seen
                    or any(v is x for x in inputs) or any(v is x for x in vals[:n])):
                v = np.array(np.broadcast_to(v, shape), dtype=npd)
            seen.add(id(v))
            outs.append(v)
        return outs
