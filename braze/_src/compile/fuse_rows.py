"""The row-fusion pass: reductions fused with their elementwise producers and consumers.

MLX stops fusion at every reduction; this pass (run before the elementwise `fuse`) takes a
reduction over the *trailing* k axes of a full shape S, the elementwise region feeding it and
the elementwise region consuming its result broadcast back (softmax, layernorm, rmsnorm,
logsumexp, their backward graphs) into one `Compiled` node whose `KernelIR` has
`reduce_ndim == k`. A backend runs it row by row (docs/kernels.md, "Row kernels").

A region for (S, k) may hold:
- `Reduce` (sum, prod, max, min, and, or) over exactly the last k axes of an input of shape S,
  and `ArgReduce` over the last axis (k == 1): their results are *row values* (shape S with the
  last k dimensions 1);
- fusable elementwise nodes of shape S (full values) or of the row shape (row values).

Growth (per seed reduction, latest first): the nodes reachable forward from the seed through
such nodes give the roots (those without a consumer among them); then the region grows
backwards, latest node first, from the roots through the nodes its members read, and a node
joins when it qualifies and none of its consumers is an outside node that leads back into the
region (a *feed*): the region stays convex, so replacing it by one node cannot make a cycle.
A member with consumers outside, or that is a function output, becomes a kernel output.
Softmax and LogSumExp over trailing axes are first expanded into their primitives (same
formulas as their `eval_cpu`) by the `decompose` pass (`expand_composites`), so they fuse too.

`BRAZE_COMPILE_MODE=no_reduce_fusion` skips the pass.
"""
from __future__ import annotations

import heapq

import numpy as np

from .. import dtypes as D
from ..array import array, node
from ..prims.binary import ADD, DIVIDE, EQUAL, SELECT, SUBTRACT
from ..prims.compile_support import DynamicBroadcast
from ..prims.core import AsType, Broadcast
from ..prims.reduce import ArgReduce, LogSumExp, Reduce, Softmax
from ..prims.unary import ABS, EXP, Log
from .fuse import _make_ir, compiled_nodes, is_fusable
from .tape import Tape, consumers, replace_input, set_inputs, toposort

#: inputs + outputs of one row kernel, and its ops
MAX_ARRAYS = 48
MAX_OPS = 256
ROW_REDUCE_TYPES = ("sum", "prod", "max", "min", "and", "or")


def _trailing(axes, ndim) -> int:
    """k when `axes` are exactly the last k axes of an `ndim`-dimensional array, else 0."""
    k = len(axes)
    return k if k and tuple(axes) == tuple(range(ndim - k, ndim)) else 0


def _reduction_space(a):
    """(S, k) when node `a` is a reduction a row kernel can run, else None."""
    prim = a._prim
    if a._siblings is not None or not a._inputs:
        return None
    x = a._inputs[0]
    if x._dtype.kind == "c":
        return None
    if type(prim) is Reduce and prim.reduce_type in ROW_REDUCE_TYPES:
        k = _trailing(prim.axes, len(x._shape))
    elif type(prim) is ArgReduce:
        k = 1 if prim.axis == len(x._shape) - 1 else 0
    else:
        return None
    S = x._shape
    if not k or _row_shape(S, k) == S:
        return None
    return S, k


def _row_shape(S, k):
    return tuple(S[:len(S) - k]) + (1,) * k


class _Space:
    """Which nodes may join a row region of full shape S reducing the last k axes."""

    def __init__(self, S, k):
        self.S, self.k, self.R = S, k, _row_shape(S, k)

    def row(self, a) -> bool | None:
        """True (row value), False (full value) or None (cannot join)."""
        if a._prim is None or a._siblings is not None or a._dtype.kind == "c":
            return None
        sp = _reduction_space(a)
        if sp is not None:
            return True if sp == (self.S, self.k) else None
        if not is_fusable(a._prim) or any(x._dtype.kind == "c" for x in a._inputs):
            return None
        if a._shape == self.S:
            return False
        if a._shape == self.R:
            return True
        return None


# -- expansion of the composite reductions ----------------------------------------------------
def _const(value, dt):
    return array(np.array(value, dtype=dt.np_dtype))


def _mk(prim, inputs, shape, dtype, tracer):
    a = node(shape, dtype, prim, tuple(inputs))
    a._tracer = tracer
    return a


class _Builder:
    """Nodes of an expansion of `a` (Softmax/LogSumExp of x): full-shape or per-row values in
    the accumulation type (float32 for half inputs), registered with `made`."""

    def __init__(self, a, made):
        x = a._inputs[0]
        self.S, self.dt, self.tr, self.axes = x._shape, x._dtype, a._tracer, a._prim.axes
        self.acc = D.float32 if self.dt.name in ("float16", "bfloat16") else self.dt
        self.R = _row_shape(self.S, len(self.axes))
        self.made = made
        self.x = x if self.acc == self.dt else self.full(AsType(self.acc), x)

    def full(self, prim, *ins):
        return self.made(prim, ins, self.S, self.acc, self.tr)

    def row(self, prim, *ins, dtype=None):
        return self.made(prim, ins, self.R, dtype or self.acc, self.tr)

    def exp_shifted(self, m):
        """exp(x - broadcast(m))."""
        return self.full(EXP, self.full(SUBTRACT, self.x, self.full(DynamicBroadcast(self.S), m,
                                                                        self.x)))

    def finish(self, prim, args, full):
        """The node `a` becomes: prim(*args), cast back from the accumulation type."""
        if self.acc == self.dt:
            return prim, args
        return AsType(self.dt), ((self.full if full else self.row)(prim, *args),)


def _expand_softmax(a, made):
    """exp(x - max) / sum(exp(x - max)) in the accumulation type (Softmax.eval_cpu)."""
    b = _Builder(a, made)
    e = b.exp_shifted(b.row(Reduce("max", b.axes), b.x))
    s = b.row(Reduce("sum", b.axes), e)
    return b.finish(DIVIDE, (e, b.full(DynamicBroadcast(b.S), s, e)), full=True)


def _expand_softmax_unit(a, made):
    """Softmax over axes of size 1 (rows of one element): the max and the sum of a row are its
    element, so exp(x - x) / exp(x - x), elementwise (1, or NaN where x is not finite)."""
    b = _Builder(a, made)
    e = b.full(EXP, b.full(SUBTRACT, b.x, b.x))
    return b.finish(DIVIDE, (e, e), full=True)


def _expand_logsumexp(a, made):
    """log(sum(exp(x - m))) + m with m the max, 0 where infinite (LogSumExp.eval_cpu)."""
    b = _Builder(a, made)
    m = b.row(Reduce("max", b.axes), b.x)
    inf = b.row(EQUAL, b.row(ABS, m), _const(np.inf, b.acc), dtype=D.bool_)
    m = b.row(SELECT, inf, _const(0.0, b.acc), m)
    s = b.row(Reduce("sum", b.axes), b.exp_shifted(m))
    return b.finish(ADD, (b.row(Log("e"), s), m), full=False)


def expand_composites(tape: Tape) -> Tape:
    """Softmax / LogSumExp over trailing axes become their primitives (the node object stays,
    with the last primitive of the expansion, so its consumers need no rewiring). Empty arrays
    keep the composite: its max over no elements is not an error, a Reduce's is."""
    nodes = []
    changed = False
    for a in tape.nodes:
        prim = a._prim
        x = a._inputs[0] if a._inputs else None
        if (type(prim) not in (Softmax, LogSumExp) or a._siblings is not None
                or x._dtype.kind != "f" or x._dtype.name not in
                ("float16", "bfloat16", "float32", "float64")
                or not _trailing(prim.axes, len(x._shape)) or 0 in x._shape):
            nodes.append(a)
            continue
        unit = _row_shape(x._shape, len(prim.axes)) == x._shape  # rows of one element
        if unit and type(prim) is not Softmax:
            nodes.append(a)
            continue
        new = []

        def made(p, ins, shape, dtype, tracer):
            n = _mk(p, ins, shape, dtype, tracer)
            new.append(n)
            return n

        fn = (_expand_softmax_unit if unit else _expand_softmax) if type(prim) is Softmax \
            else _expand_logsumexp
        last, ins = fn(a, made)
        a._prim = last
        set_inputs(a, ins)
        nodes.extend(new)
        nodes.append(a)
        changed = True
    return Tape(tape.inputs, tape.outputs, nodes) if changed else tape


# -- shape-only reads -----------------------------------------------------------------------
def _shape_slots(a):
    """The input slots of node `a` that are read for their shape only."""
    k = a._prim.shape_only_from
    return () if k is None else range(k, len(a._inputs))


def _shape_source(x):
    """An array with x's shape computed no later than x: down through fusable elementwise
    producers to the earliest operand of the same shape (often a placeholder)."""
    best = x
    todo = [x]
    seen = set()
    while todo:
        a = todo.pop()
        if id(a) in seen or a._prim is None or not is_fusable(a._prim):
            continue
        seen.add(id(a))
        for y in a._inputs:
            if y._shape == x._shape:
                best = y
                todo.append(y)
                break
    return best


def rewire_shape_reads(tape: Tape) -> None:
    """Point shape-only reads (`mean`'s NumberOfElements in a shapeless trace, the "like"
    inputs of shape-following broadcasts and sums) at an earlier array of the same shape, so
    they do not pin a region's intermediate values (they would make it an output or split
    the region)."""
    for a in tape.nodes:
        for slot in _shape_slots(a):
            x = a._inputs[slot]
            y = _shape_source(x)
            if y is not x:
                replace_input(a, slot, y)


# -- grouping --------------------------------------------------------------------------------
def _grow(seed, space, nodes, pos, cons, taken, output_ids):
    """The members (ids -> row flag) of the region around `seed`, or None."""
    # roots: the ends of the forward closure of the seed through qualifying nodes
    reach, todo = {id(seed)}, [seed]
    sinks = []
    while todo:
        a = todo.pop()
        nxt = [c for c in cons.get(id(a), ()) if id(c) not in taken and space.row(c) is not None]
        if not nxt:
            sinks.append(a)
        for c in nxt:
            if id(c) not in reach:
                reach.add(id(c))
                todo.append(c)
    members = _walk_back(sinks, space, nodes, pos, cons, taken)
    if id(seed) not in members or len(members) < 2:
        return None
    order = sorted(pos[i] for i in members)
    n_in = len({id(x) for i in order for x in nodes[i]._inputs} - set(members))
    n_out = sum(1 for i in order if _is_output(nodes[i], members, cons, output_ids))
    return members if n_in + n_out <= MAX_ARRAYS else None


def _is_output(a, members, cons, output_ids) -> bool:
    return id(a) in output_ids or (not _splits(a, members) and any(
        id(c) not in members for c in cons.get(id(a), ())))


def _walk_back(roots, space, nodes, pos, cons, taken):
    """Grow the region backwards from the roots, in decreasing tape position: a root, or a
    node a member reads, joins when it qualifies and none of its consumers is an outside
    node that leads back into the region (a *feed*), so the region stays convex and
    replacing it by one node cannot make a cycle. Only the candidates are visited, and
    whether a consumer is a feed is found by a forward search (`_Feeds`), not by walking
    the whole tape before the region."""
    members = {}
    feeds = _Feeds(members, {id(r) for r in roots}, max(pos[id(r)] for r in roots), pos,
                   cons)
    heap = [-pos[id(r)] for r in roots]
    heapq.heapify(heap)
    done = set()
    while heap:
        p = heapq.heappop(heap)
        if p in done:
            continue
        done.add(p)
        a = nodes[-p]
        if id(a) in taken or len(members) >= MAX_OPS:
            continue
        row = space.row(a)
        if row is None or any(feeds.is_feed(c) for c in cons.get(id(a), ())):
            continue
        members[id(a)] = row
        for x in a._inputs:
            q = pos.get(id(x))
            if q is not None and -q not in done:
                heapq.heappush(heap, -q)
    return members


class _Feeds:
    """Which nodes are feeds: outside nodes (not members) at or before the last root that
    are roots or have a path forward to a member or a root. When a consumer `c` of a
    candidate is asked about, every member `c` can reach is already known (it comes later
    in the tape than the candidate, and candidates are visited latest first), so answers
    are remembered for the whole walk."""

    def __init__(self, members, roots, start, pos, cons):
        self.members, self.roots, self.start, self.pos, self.cons = \
            members, roots, start, pos, cons
        self.memo = {}

    def _leads_in(self, c) -> bool | None:
        """True/False when known without looking further forward, else None."""
        i = id(c)
        if i in self.members:
            return None  # only for consumers: a member is not a feed but is a target
        if self.pos.get(i, self.start + 1) > self.start:
            return False
        if i in self.roots:
            return True
        return self.memo.get(i)

    def is_feed(self, c) -> bool:
        if id(c) in self.members:
            return False
        known = self._leads_in(c)
        if known is not None:
            return known
        return self._search(c)

    def _search(self, c) -> bool:
        """Depth-first forward from `c` (consumers latest first, the likeliest to lead into
        the region soon); every node left on the stack when a target is found leads in."""
        memo, members = self.memo, self.members
        stack = [(c, reversed(self.cons.get(id(c), ())))]
        while stack:
            node, it = stack[-1]
            found = False
            for d in it:
                if id(d) in members:
                    found = True
                    break
                known = self._leads_in(d)
                if known:
                    found = True
                    break
                if known is None:
                    memo[id(d)] = False  # provisional: on the stack (a DAG has no cycles)
                    stack.append((d, reversed(self.cons.get(id(d), ()))))
                    break
            else:
                memo[id(node)] = False
                stack.pop()
                continue
            if found:
                for n, _ in stack:
                    memo[id(n)] = True
                return True
        return False


def _splits(a, members) -> bool:
    """A broadcast of region inputs is never a kernel output: the region computes its own
    copy (strides) and the node stays in the tape for its other consumers (as `fuse` splits
    broadcasts)."""
    return isinstance(a._prim, Broadcast) and not any(id(x) in members for x in a._inputs)


def _emit(members, nodes, pos, cons, output_ids, input_ids, space):
    """The Compiled node replacing a region: (output nodes, old nodes they replace)."""
    order = sorted((nodes[pos[i]] for i in members), key=lambda a: pos[id(a)])
    ids = set(members)
    inputs, seen = [], set()
    for a in order:
        for x in a._inputs:
            if id(x) not in ids and id(x) not in seen:
                seen.add(id(x))
                inputs.append(x)
    outs = [a for a in order if _is_output(a, ids, cons, output_ids)]
    new = compiled_nodes(_make_ir(inputs, order, outs, input_ids, members, space.k),
                         inputs, outs)
    split = {id(a) for a in order if _splits(a, ids)
             and any(id(c) not in ids for c in cons.get(id(a), ()))}
    return new, outs, split


def fuse_rows(tape: Tape) -> Tape:
    """Replace row regions of `tape` by `Compiled` row kernels (see the module doc)."""
    rewire_shape_reads(tape)
    input_ids = {id(x) for x in tape.inputs}
    nodes = list(tape.nodes)
    if not any(_reduction_space(a) is not None for a in nodes):
        return tape
    pos = {id(a): i for i, a in enumerate(nodes)}
    cons = consumers(nodes, slots=False)
    output_ids = {id(o) for o in tape.outputs}
    taken = set()
    regions = []
    for i in range(len(nodes) - 1, -1, -1):
        a = nodes[i]
        if id(a) in taken:
            continue
        sp = _reduction_space(a)
        if sp is None:
            continue
        space = _Space(*sp)
        members = _grow(a, space, nodes, pos, cons, taken, output_ids)
        if members is None:
            continue
        taken.update(members)
        regions.append((members, space))
    if not regions:
        return tape
    replace = {}  # id(old output) -> new node
    placed = {}   # id(last member) -> the new nodes, placed there
    split = set()  # broadcasts a region copied that stay for their other consumers
    for members, space in regions:
        new, old, kept = _emit(members, nodes, pos, cons, output_ids, input_ids, space)
        split |= kept
        for o, n in zip(old, new):
            replace[id(o)] = n
        last = max(pos[i] for i in members)
        placed[last] = new
    keep = []
    for i, a in enumerate(nodes):
        if i in placed:
            keep.extend(placed[i])
        if id(a) in taken and id(a) not in split:
            continue
        keep.append(a)
    # consumers outside the regions (and the Compiled nodes' own inputs) read the new outputs
    for a in keep:
        for slot, x in enumerate(a._inputs):
            r = replace.get(id(x))
            if r is not None:
                replace_input(a, slot, r)
    outputs = [replace.get(id(o), o) for o in tape.outputs]
    # a region's outputs sit at its last member, which a consumer of an earlier member may
    # precede
    return Tape(tape.inputs, outputs, toposort(keep))
