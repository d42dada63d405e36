"""The fuse pass: replace elementwise regions of a tape with `Compiled` nodes (MLX's rules).

The rules are those of MLX's `compile_fuse`:

- Walk the tape backwards. A node can be a *root* if it has a primitive that is not a
  `Broadcast` (rooting at a broadcast would materialise it at full size).
- From the root a depth-first search gathers the group. A node becomes an external input
  instead when the depth reaches `MAX_DEPTH` (11), it has no primitive, it is not fusable, or it
  is a function output whose shape differs from the root's. Below the root, a node with a
  consumer outside the group is a boundary too (so no intermediate is computed twice), except a
  `Broadcast`, which is *split*: a copy joins the group, the original stays for the others.
- A fused node that is a function output becomes an extra kernel output (a sibling of the
  root's output) and counts toward the `MAX_ARRAYS` (24) inputs-plus-outputs budget; when the
  budget is reached the group stops growing.
- A group of one primitive is not fused, unless NumPy computes it several times slower than a
  kernel (`numpy_slow`: logaddexp, erf, sigmoid, ...): braze's unfused op is NumPy's.
- Scalar constants among the group's inputs (size 1, data, no primitive, not function inputs)
  are baked into the KernelIR exactly.

A primitive is fusable when it declares a `kernel_op` (the elementwise operation it is inside a
kernel; `Broadcast` and `AsType` are fusable too: a broadcast is read with strides). The pass
rewires the tape's private node arrays in place and returns a new Tape whose nodes are the
surviving nodes and the `Compiled` nodes (all outputs of each, siblings adjacent, in topological
order). Its time is linear in the tape: every consumer question is answered from `_Uses` in time
bounded by the region's size.
"""
from __future__ import annotations

import numpy as np

from ..array import node
from .compiled import Compiled
from .kernel_ir import IRInput, IROp, KernelIR
from .tape import Tape, replace_input

MAX_DEPTH = 11
MAX_ARRAYS = 24


def is_fusable(prim) -> bool:
    """A primitive is fusable iff it says what it is inside a kernel (`kernel_op`)."""
    return prim.kernel_op is not None


def _is_broadcast(a) -> bool:
    return a._prim.kernel_op == "broadcast"  # DynamicBroadcast (shapeless traces) included


class _Uses:
    """The consumers of every array, kept up to date while regions are replaced.

    `of[id(x)]` maps `(id(consumer), slot)` to `(consumer, slot)`, one entry per sibling (as
    MLX's parents map). `inner[id(x)]` holds the entries of `of[id(x)]` whose consumer has
    joined the region being grown, so "are all consumers inside" is a length comparison and
    splitting a broadcast moves only its inside consumers: both cost the region's size, not
    the number of consumers (a scalar broadcast feeds thousands of nodes in a long chain).
    Order inside the maps does not matter: only membership decides the regions.
    """

    def __init__(self, nodes):
        # built directly rather than from tape.consumers: this map is the pass's own, updated
        # as regions are replaced, and building it once per trace is a tenth of the pass
        self.of = {}
        for a in nodes:
            for slot, x in enumerate(a._inputs):
                self.of.setdefault(id(x), {})[(id(a), slot)] = (a, slot)
        self.inner = {}

    def join(self, a):
        """`a` joined the region: its entries among its inputs' consumers are inside."""
        for slot, x in enumerate(a._inputs):
            key = (id(a), slot)
            if key in self.of.get(id(x), ()):
                self.inner.setdefault(id(x), {})[key] = (a, slot)

    def all_inside(self, a) -> bool:
        return len(self.inner.get(id(a), ())) == len(self.of.get(id(a), ()))

    def drop_inside(self, x):
        """Forget the consumers of `x` inside the region (they are being fused away)."""
        mine = self.inner.get(id(x))
        if mine:
            of = self.of[id(x)]
            for key in mine:
                del of[key]

    def add(self, x, p, slot):
        self.of.setdefault(id(x), {})[(id(p), slot)] = (p, slot)


def fuse(tape: Tape) -> Tape:
    """Fuse the elementwise regions of `tape` into `Compiled` nodes (see the module doc)."""
    nodes = list(tape.nodes)  # keeps every old node (and so every id used below) alive
    keep = []  # new arrays made during the pass (split broadcasts), alive until the end
    output_map = {}
    for o in tape.outputs:
        output_map.setdefault(id(o), o)
    input_ids = {id(x) for x in tape.inputs}
    uses = _Uses(nodes)
    new_tape = []
    global_cache = set()
    for i in range(len(nodes) - 1, -1, -1):
        arr = nodes[i]
        if id(arr) in global_cache:
            continue
        uses.inner = {}
        cache = {}
        if arr._prim is not None and not _is_broadcast(arr):
            _grow(arr, cache, uses, output_map, keep)
        if not cache or (len(cache) == 1 and not arr._prim.numpy_slow):
            new_tape.append(arr)
            continue
        inputs, fused = _region_order(arr, cache)
        old_outputs = []
        for f in fused[:-1]:
            if id(f) in output_map:
                old_outputs.append(f)
                uses.drop_inside(f)
            else:
                uses.of.pop(id(f), None)
            global_cache.add(id(f))
        old_outputs.append(arr)
        for o in old_outputs:
            if o._shape != arr._shape:  # pragma: no cover - unreachable given the stop rule
                raise RuntimeError("[compile] Compilation failed. Tried to fuse operations "
                                   "with different output shapes.")
        outs = compiled_nodes(_make_ir(inputs, fused, old_outputs, input_ids), inputs,
                              old_outputs)
        new_tape.extend(reversed(outs))
        _rewire_region(inputs, outs, old_outputs, uses, output_map)
    new_tape.reverse()
    outputs = [output_map.get(id(o), o) for o in tape.outputs]
    return Tape(tape.inputs, outputs, new_tape)


def _grow(root, cache, uses, output_map, keep):
    """Gather the region of `root` into `cache` (id -> array) by a depth-first search."""
    input_set = set()  # ids counted toward the inputs-plus-outputs budget
    shape = root._shape

    def recurse(a, depth):
        if id(a) in cache:
            return
        prim = a._prim
        if (depth >= MAX_DEPTH or prim is None or not is_fusable(prim)
                or (id(a) in output_map and a._shape != shape)):
            input_set.add(id(a))
            return
        if depth > 0 and not uses.all_inside(a):
            if prim.kernel_op == "broadcast" and len(input_set) < MAX_ARRAYS:
                recurse(_split(a, uses, keep), depth)
            else:
                input_set.add(id(a))
            return
        if id(a) in output_map:
            input_set.add(id(a))
        else:
            input_set.discard(id(a))
        if len(input_set) >= MAX_ARRAYS:
            return
        cache[id(a)] = a
        uses.join(a)
        for x in a._inputs:
            recurse(x, depth + 1)

    recurse(root, 0)


def _split(a, uses, keep):
    """A copy of broadcast `a` for its consumers inside the region; the others keep `a`."""
    b = node(a._shape, a._dtype, a._prim, a._inputs)
    b._tracer = a._tracer
    keep.append(b)
    mine = uses.inner.pop(id(a), {})
    of = uses.of[id(a)]
    for key, (p, slot) in mine.items():
        replace_input(p, slot, b)
        del of[key]
    uses.of[id(b)] = dict(mine)
    uses.inner[id(b)] = mine
    return b


def _region_order(root, cache):
    """(inputs, fused): the region's outside inputs in first-use order and its nodes in
    topological order (an iterative depth-first walk from the root)."""
    inputs, fused, in_seen, done = [], [], set(), {id(root)}
    stack = [(root, 0)]
    while stack:
        a, k = stack[-1]
        if k < len(a._inputs):
            stack[-1] = (a, k + 1)
            x = a._inputs[k]
            if id(x) not in cache:
                if id(x) not in in_seen:
                    in_seen.add(id(x))
                    inputs.append(x)
            elif id(x) not in done:
                done.add(id(x))
                stack.append((x, 0))
        else:
            stack.pop()
            fused.append(a)
    return inputs, fused


def _rewire_region(inputs, outs, old_outputs, uses, output_map):
    """The inputs' consumers inside the region become the compiled outputs; the old
    outputs' consumers (and the function outputs) move to the compiled outputs."""
    for k, x in enumerate(inputs):
        uses.drop_inside(x)
        for o in outs:
            uses.add(x, o, k)
    for new, old in zip(outs, old_outputs):
        _merge_one(new, old, uses)
        if id(old) in output_map:
            output_map[id(old)] = new


def compiled_nodes(ir, inputs, old_outputs) -> list:
    """The output nodes (siblings) of a new `Compiled` node for `ir`, one per old output."""
    prim = Compiled(ir)
    ins = tuple(inputs)
    outs = [node(o._shape, o._dtype, prim, ins) for o in old_outputs]
    if len(outs) > 1:
        t = tuple(outs)
        for k, o in enumerate(outs):
            o._siblings, o._idx = t, k
    tracer = any(o._tracer for o in old_outputs)
    for o in outs:
        o._tracer = tracer
    return outs


def _merge_one(dst, src, uses):
    """Every consumer of `src` reads `dst` instead (MLX's merge_one)."""
    src_uses = uses.of.pop(id(src), None)
    if src_uses is None:
        return
    for p, slot in src_uses.values():
        replace_input(p, slot, dst)
        uses.add(dst, p, slot)


def _make_ir(inputs, fused, old_outputs, input_ids, rows=None, reduce_ndim=0) -> KernelIR:
    """The KernelIR of a region: `inputs` (scalar constants among them baked when `_bake`
    allows), the `fused` nodes in topological order (`rows[id(node)]`: a per-row value, for
    row regions), `old_outputs` the nodes whose values leave the region."""
    ref = {}
    specs = []
    for k, x in enumerate(inputs):
        ref[id(x)] = k
        if (x._prim is None and x._data is not None and x.size == 1
                and id(x) not in input_ids and _bake(x._data)):
            specs.append(IRInput.constant(x._data))
        else:
            specs.append(IRInput(x._dtype))
    n = len(inputs)
    ops_ = []
    for i, f in enumerate(fused):
        ref[id(f)] = n + i
        ops_.append(IROp(f._prim, tuple(ref[id(x)] for x in f._inputs), f._dtype,
                         bool(rows and rows[id(f)])))
    return KernelIR(tuple(specs), tuple(ops_), tuple(ref[id(o)] for o in old_outputs),
                    reduce_ndim)


def _bake(data) -> bool:
    """Whether a scalar constant is written into a kernel's source. Non-integral finite floats
    (0.999, 1/C of a mean, eps, a learning rate) are read at run time instead, as scalar
    inputs: one kernel then serves every value, where baking them built a kernel per value
    (a training loop with a decaying learning rate, a mean over rows of each length)."""
    arr = np.asarray(data)
    if arr.dtype.kind not in "fc":
        return True
    v = complex(arr.reshape(-1)[0])
    return not (np.isfinite(v.real) and v.imag == 0 and v.real != int(v.real))
