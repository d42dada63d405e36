"""The fuse pass: replace elementwise regions of a tape with `Compiled` nodes (MLX's rules).

Reference: mlx-compile.md §4.2 (MLX's `compile_fuse`). In short:

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
- A group of one primitive is not fused.
- Scalar constants among the group's inputs (size 1, data, no primitive, not function inputs)
  are baked into the KernelIR exactly.

A primitive is fusable when it declares `codegen` (DESIGN.md §2). The pass rewires the tape's
private node arrays in place and returns a new Tape whose nodes are the surviving nodes and the
`Compiled` nodes (all outputs of each, siblings adjacent, in topological order).
"""
from __future__ import annotations

from ..array import array
from ..prims.core import AsType, Broadcast
from .compiled import Compiled
from .kernel_ir import IRInput, IROp, KernelIR
from .tape import Tape

MAX_DEPTH = 11
MAX_ARRAYS = 24


def is_fusable(prim) -> bool:
    """A primitive is fusable iff it says how it reads inside a kernel (`codegen`).

    `Broadcast` and `AsType` are fusable too (MLX emits both as a cast; broadcasting is done with
    strides) while prims/core.py does not declare their `codegen` yet.
    """
    if getattr(prim, "codegen", None) is not None:
        return True
    return isinstance(prim, (Broadcast, AsType))


def _is_broadcast(a) -> bool:
    return isinstance(a._prim, Broadcast)  # DynamicBroadcast (shapeless traces) included


def _set_input(node, slot, new):
    """node._inputs[slot] = new, keeping the consumer counts `_nc` right."""
    ins = node._inputs
    old = ins[slot]
    if old is new:
        return
    node._inputs = ins[:slot] + (new,) + ins[slot + 1:]
    old._nc -= 1
    new._nc += 1


def fuse(tape: Tape) -> Tape:
    """Fuse the elementwise regions of `tape` into `Compiled` nodes (see the module doc)."""
    nodes = list(tape.nodes)  # keeps every old node (and so every id used below) alive
    keep = []  # new arrays made during the pass (split broadcasts), alive until the end
    output_map = {}
    for o in tape.outputs:
        output_map.setdefault(id(o), o)
    input_ids = {id(x) for x in tape.inputs}

    # consumers: id(array) -> [(consumer array, slot)], one entry per sibling (as MLX's map)
    parents = {}
    for a in nodes:
        for slot, x in enumerate(a._inputs):
            parents.setdefault(id(x), []).append((a, slot))

    new_tape = []
    global_cache = set()
    for i in range(len(nodes) - 1, -1, -1):
        arr = nodes[i]
        if id(arr) in global_cache:
            continue

        cache = {}        # id -> array: the group found so far
        input_set = set()  # ids counted toward the inputs-plus-outputs budget

        def recurse(a, depth, shape):
            if id(a) in cache:
                return
            prim = a._prim
            if (depth >= MAX_DEPTH or prim is None or not is_fusable(prim)
                    or (id(a) in output_map and a._shape != shape)):
                input_set.add(id(a))
                return
            if depth > 0:
                all_in = all(id(p) in cache for p, _ in parents[id(a)])
                if not all_in:
                    if isinstance(prim, Broadcast) and len(input_set) < MAX_ARRAYS:
                        recurse(_split(a), depth, shape)
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
            for x in a._inputs:
                recurse(x, depth + 1, shape)

        def _split(a):
            """A copy of broadcast `a` for its consumers inside the group."""
            b = array._node(a._shape, a._dtype, a._prim, a._inputs)
            b._tracer = a._tracer
            keep.append(b)
            mine, others = [], []
            for p, slot in parents[id(a)]:
                (mine if id(p) in cache else others).append((p, slot))
            for p, slot in mine:
                _set_input(p, slot, b)
            parents[id(a)] = others
            parents[id(b)] = mine
            return b

        if arr._prim is not None and not _is_broadcast(arr):
            recurse(arr, 0, arr._shape)

        if len(cache) <= 1:
            new_tape.append(arr)
            continue

        # second pass: the group's tape in topological order and its ordered inputs
        inputs, fused, in_seen, done = [], [], set(), set()
        stack = [(arr, 0)]
        done.add(id(arr))
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

        old_outputs = []
        for f in fused[:-1]:
            if id(f) in output_map:
                old_outputs.append(f)
                parents[id(f)] = [(p, s) for p, s in parents.get(id(f), ())
                                  if id(p) not in cache]
            else:
                parents.pop(id(f), None)
            global_cache.add(id(f))
        old_outputs.append(arr)
        for o in old_outputs:
            if o._shape != arr._shape:  # pragma: no cover - unreachable given the stop rule
                raise RuntimeError("[compile] Compilation failed. Tried to fuse operations "
                                   "with different output shapes.")

        outs = compiled_nodes(_make_ir(inputs, fused, old_outputs, input_ids), inputs,
                              old_outputs)
        new_tape.extend(reversed(outs))

        # the inputs' consumers inside the group are replaced by the compiled outputs
        for k, x in enumerate(inputs):
            pairs = [(p, s) for p, s in parents.get(id(x), ()) if id(p) not in cache]
            pairs.extend((o, k) for o in outs)
            parents[id(x)] = pairs
        # the old outputs' consumers (and the function outputs) move to the compiled outputs
        for new, old in zip(outs, old_outputs):
            _merge_one(new, old, parents)
            if id(old) in output_map:
                output_map[id(old)] = new

    new_tape.reverse()
    outputs = [output_map.get(id(o), o) for o in tape.outputs]
    return Tape(tape.inputs, outputs, new_tape)


def compiled_nodes(ir, inputs, old_outputs) -> list:
    """The output nodes (siblings) of a new `Compiled` node for `ir`, one per old output."""
    prim = Compiled(ir)
    ins = tuple(inputs)
    outs = [array._node(o._shape, o._dtype, prim, ins) for o in old_outputs]
    if len(outs) > 1:
        t = tuple(outs)
        for k, o in enumerate(outs):
            o._siblings, o._idx = t, k
    tracer = any(o._tracer for o in old_outputs)
    for o in outs:
        o._tracer = tracer
    return outs


def _merge_one(dst, src, parents):
    """Every consumer of `src` reads `dst` instead (MLX's merge_one)."""
    src_parents = parents.pop(id(src), None)
    if src_parents is None:
        return
    pairs = parents.setdefault(id(dst), [])
    for p, slot in src_parents:
        _set_input(p, slot, dst)
        pairs.append((p, slot))
    pairs[:] = [(p, s) for p, s in pairs if p is not src]


def _make_ir(inputs, fused, old_outputs, input_ids, rows=None, reduce_ndim=0,
             bake=None) -> KernelIR:
    """The KernelIR of a region: `inputs` (scalar constants among them baked when `bake`
    allows), the `fused` nodes in topological order (`rows[id(node)]`: a per-row value, for
    row regions), `old_outputs` the nodes whose values leave the region."""
    ref = {}
    specs = []
    for k, x in enumerate(inputs):
        ref[id(x)] = k
        if (x._prim is None and x._data is not None and x.size == 1
                and id(x) not in input_ids and (bake is None or bake(x._data))):
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
