"""The executor: a compiled call's whole plan as one lazy node, run on NumPy buffers in a loop.

Outside any transform, a call of a compiled function with fixed shapes returns the outputs of
one `PlanCall` node instead of a fresh node per step of its plan (`ReplayPlan.run`). When it
is evaluated, `Executor.run_node` runs the steps in order on plain buffers: no array, no
scheduler visit and no consumer count per step, which cost about 2 us a step (a small training
step has ~90). Evaluating any output evaluates them all (a compiled call's outputs are used
together; MLX evaluates the compiled graph's nodes instead).

Buffers are given back as the scheduler gives them back: a value is dropped after its last
step, and a kernel or an update writes into a buffer that nothing else can see (the scheduler's
donation rule, here per step): an intermediate at its last use, or an input of the call that
only this node references (a training step's parameters and optimizer state). Whether anything
else sees a buffer is read from its reference count at that step, so a live view of it (a
reshape a later step reads) keeps it.

A step that raises (Ctrl-C, an error, out of memory) leaves the outputs lazy on a graph of
ordinary nodes: the values computed so far, then the remaining steps (`_recover`). An input
whose buffer an earlier step took is no longer read by it, so evaluating again continues where
the call stopped and gives what an uninterrupted call gives.
"""
from __future__ import annotations

import operator
import sys
from dataclasses import dataclass

import numpy as np

from .. import memory
from ..array import node, node_group, view_of
from ..prims.base import Primitive, bind
from ..prims.core import Copy
from ..prims.shape import InPlaceUpdate
from ..scheduler import DONATION
from .compiled import Compiled, Expanded, _evaluating, backend, free_inputs

_getrefcount = sys.getrefcount
_data_of = operator.attrgetter("_data")
_COPY = Copy()

# how a step runs
_CALL, _KERNEL, _UPDATE, _RESHAPE = range(4)
#: fewer steps than this keep a node per step (one node costs what the executor saves)
MIN_STEPS = 2


def supported(prim) -> bool:
    """Whether the executor can run a step of `prim`: a primitive evaluated from its buffers,
    a fused region, or an update (the other node-evaluated ones need their graph node)."""
    return not prim.node_eval or isinstance(prim, (Compiled, InPlaceUpdate))


class Executor:
    """A plan's steps over positions in one flat list of buffers: the call's inputs, the
    plan's constants, then each step's outputs.

    A step is (how it runs, primitive, input positions, first output position, output
    (shape, NumPy dtype)s, input slots that may be donated, positions that die at it, the
    region's shape for a fused region).
    """

    __slots__ = ("n_in", "n_vals", "steps", "outs", "avals", "dtypes", "ext", "rebuild")

    def __init__(self, n_real, n_in, in_avals, steps, outs):
        """`n_real` call inputs, then the plan's constants: `n_in` in all (the node's
        inputs), `in_avals` their (shape, dtype)s; `steps`: (primitive, input positions,
        output (shape, dtype)s) per step; `outs`: the positions the node outputs."""
        self.n_in = n_in
        self.rebuild = steps
        avals = list(in_avals)
        for prim, args, out_avals in steps:
            avals.extend(out_avals)
        self.n_vals = len(avals)
        self.avals = avals
        self.dtypes = [d for _, d in avals]
        self.outs = tuple(outs)
        last = {}
        for s, (prim, args, _) in enumerate(steps):
            for i in args:
                last[i] = s
        keep = set(outs)
        pos = n_in
        built = []
        ext = set()
        for s, (prim, args, out_avals) in enumerate(steps):
            dies = tuple(sorted({i for i in args if last[i] == s and i not in keep}))
            region = None
            if isinstance(prim, Compiled):
                kind = _KERNEL
                region = out_avals[0][0] if not prim.ir.reduce_ndim else \
                    prim.output_shape([avals[i][0] for i in args])
                may = region.count(1) != len(region)  # one element: cheaper to allocate
            elif isinstance(prim, InPlaceUpdate):
                kind, may = _UPDATE, True
            else:
                kind, may = (_RESHAPE if prim.pure_reshape else _CALL), False
            donate = ()
            if may and DONATION:
                donate = tuple(k for k, i in enumerate(args)
                               if i in dies and args.count(i) == 1
                               and not n_real <= i < n_in  # constants stay as they are
                               and (kind == _KERNEL or k == 0))
                ext.update(args[k] for k in donate if args[k] < n_in)
            outs_np = tuple((shape, dt.np_dtype) for shape, dt in out_avals)
            built.append((kind, prim, args, pos, outs_np, donate, dies, region))
            pos += len(out_avals)
        self.steps = built
        self.ext = tuple(sorted(ext))

    # -- evaluation ----------------------------------------------------------------------------
    def run_node(self, node_) -> list:
        """The output buffers of the PlanCall node `node_`, its inputs' buffers donated where
        nothing else sees them."""
        ins = node_._inputs
        free = free_inputs(node_, ins, self.ext) if self.ext else None
        return self.run(list(map(_data_of, ins)), ins, free, node_)

    def run(self, vals, ins=None, free=None, node_=None) -> list:
        """The output buffers for the input buffers `vals` (a list it extends and consumes);
        `ins`, `free`, `node_`: the node's inputs, which of them may be donated, the node."""
        vals.extend([None] * (self.n_vals - len(vals)))
        own = [0] * self.n_vals  # bytes this call counts for each intermediate
        counters = memory.Counters
        n_in = self.n_in
        s = -1
        xs = None
        try:
            for s, (kind, prim, args, pos, outs_np, donate, dies, region) in \
                    enumerate(self.steps):
                xs = list(map(vals.__getitem__, args))
                for i in dies:  # the list `xs` alone holds them now (see `_free`)
                    vals[i] = None
                took = False
                if kind == _KERNEL:
                    flags = None
                    if donate:
                        flags = [False] * len(args)
                        for k in donate:
                            flags[k] = _free(xs, k, args[k], n_in, free)
                        took = any(flags)
                        if not took:
                            flags = None
                    _evaluating.origin = prim.origin
                    outs = backend().run_compiled(prim.ir, xs, region, flags)
                elif kind == _CALL:
                    outs = prim.eval_cpu(*xs)
                elif kind == _RESHAPE:
                    outs = [xs[0].reshape(outs_np[0][0])]
                elif donate and _free(xs, 0, args[0], n_in, free) and \
                        xs[0].flags.writeable and xs[0].flags.c_contiguous:
                    prim.write(xs[0], *xs[1:])  # an update in its input's own buffer
                    outs = [xs[0]]
                    took = True
                else:
                    outs = prim.eval_cpu(*xs)
                for j in range(len(outs_np)):
                    o = outs[j]
                    shape, npd = outs_np[j]
                    if type(o) is not np.ndarray or o.dtype is not npd or o.shape != shape:
                        o = _fixed(o, shape, npd, prim)
                    vals[pos + j] = o
                    if o.base is None and o.nbytes:
                        for k in range(len(xs) if took else 0):  # a donated buffer's count
                            if xs[k] is o:
                                i = args[k]
                                if i < n_in:
                                    x = ins[i]
                                    counters.active -= x._mem
                                    x._mem = 0
                                    own[pos + j] = o.nbytes
                                    counters.active += o.nbytes
                                else:
                                    own[pos + j], own[i] = own[i], 0
                                break
                        else:
                            own[pos + j] = o.nbytes
                            counters.active += o.nbytes
                            if counters.active > counters.peak:
                                counters.peak = counters.active
                o = outs = None
                for i in dies:
                    if own[i]:
                        counters.active -= own[i]
                        own[i] = 0
                xs = None
        except BaseException:
            if xs is not None:  # the failed step's inputs, as they were
                for k, i in enumerate(self.steps[s][2]):
                    vals[i] = xs[k]
            for i in range(self.n_vals):
                counters.active -= own[i]
            if node_ is not None:
                _recover(self, node_, vals, s)
            raise
        for i in self.outs:  # the scheduler counts the outputs' bytes as it sets them
            counters.active -= own[i]
        return [vals[i] for i in self.outs]


def _free(xs, k, i, n_in, free) -> bool:
    """Whether the step may write into input slot k's buffer (position i): an input of the
    call only this node references (`free`), or an intermediate, that no other value (a view
    of it), array or caller holds."""
    d = xs[k]
    if type(d) is not np.ndarray or d.base is not None:
        return False
    if i < n_in:
        # the input array's `_data`, the list `xs`, the local `d`, getrefcount's argument
        return free is not None and free.get(i, False) and _getrefcount(d) == 4
    return _getrefcount(d) == 3  # `xs`, `d`, the argument


def _fixed(o, shape, npd, prim):
    """A step's result as an ndarray of the exact dtype and shape the plan promised."""
    o = np.asarray(o)
    if o.dtype != npd:
        o = o.astype(npd)
    if o.shape != shape:
        raise RuntimeError(f"[eval] {prim.name} produced shape {o.shape}, expected {shape}.")
    return o


def _recover(ex, node_, vals, failed):
    """After step `failed` raised: the node's outputs become lazy copies of a graph of
    ordinary nodes, the values computed so far as constants and the remaining steps as
    nodes, so evaluating them again continues from there."""
    ins = node_._inputs
    arrays = list(ins) + [None] * (ex.n_vals - len(ins))
    for i in range(len(ins), ex.n_vals):
        if vals[i] is not None:
            arrays[i] = view_of(vals[i], ex.dtypes[i])
    _step_nodes(ex, arrays, max(failed, 0))
    sibs = node_._siblings or (node_,)
    for x in ins:
        x._nc -= len(sibs)
    for out, i in zip(sibs, ex.outs):
        src = arrays[i]
        out._prim = _COPY
        out._inputs = (src,)
        out._siblings = None
        out._idx = 0
        src._nc += 1


def _step_nodes(ex, arrays, start):
    """Fill `arrays` (a value per position) with lazy nodes for the steps from `start` on
    whose outputs are missing."""
    for s in range(start, len(ex.steps)):
        prim, args, out_avals = ex.rebuild[s]
        pos = ex.steps[s][3]
        if any(arrays[pos + j] is None for j in range(len(out_avals))):
            xs = tuple(arrays[i] for i in args)
            if len(out_avals) == 1:
                (shape, dtype), = out_avals
                arrays[pos] = node(shape, dtype, prim, xs)
            else:
                arrays[pos:pos + len(out_avals)] = node_group(out_avals, prim, xs)


@dataclass(frozen=True, eq=False, repr=False)
class PlanCall(Expanded, Primitive):
    """One call of a compiled function: its plan's steps as a single node (`Executor`)."""

    executor: Executor
    fun_name: str = ""

    node_eval = True

    @property
    def name(self) -> str:
        return f"compiled {self.fun_name}" if self.fun_name else "compiled"

    @property
    def foldable(self) -> bool:
        return False

    def __repr__(self):
        return f"PlanCall({self.fun_name})"

    def abstract_eval(self, *inputs) -> list:
        return [self.executor.avals[i] for i in self.executor.outs]

    def eval_cpu(self, *xs) -> list:
        return self.executor.run(list(xs))

    def eval_node(self, node_) -> list:
        return self.executor.run_node(node_)

    def expand(self, inputs) -> list:
        """The plan's steps as ordinary nodes on `inputs`: one array per output."""
        ex = self.executor
        arrays = list(inputs) + [None] * (ex.n_vals - len(inputs))
        for s, (prim, args, out_avals) in enumerate(ex.rebuild):
            pos = ex.steps[s][3]
            outs = bind(prim, tuple(arrays[i] for i in args))
            arrays[pos:pos + len(out_avals)] = outs if isinstance(outs, list) else [outs]
        return [arrays[i] for i in ex.outs]

    def unfold(self, inputs) -> list:
        """The outputs as a graph of the plan's steps, one node each (what graph displays
        show: the fused regions and the other primitives the call runs)."""
        ex = self.executor
        arrays = list(inputs) + [None] * (ex.n_vals - len(inputs))
        _step_nodes(ex, arrays, 0)
        return [arrays[i] for i in ex.outs]
