"""Replay a stored tape onto real inputs (MLX's `compile_replace`).

Every node becomes a fresh lazy array with the *same primitive object* and the mapped inputs;
constants map to themselves and placeholders to the caller's arrays, so an identity output
returns the caller's own array. In shapeless mode each node's shape (and dtype) comes from its
primitive's `abstract_eval` on the new inputs; primitives whose output shape cannot follow
their inputs raise a ValueError naming the op and the line that created it.
"""
from __future__ import annotations

import operator

from ..array import TraceState, array
from ..prims.base import broadcast_shapes

#: primitives whose output shape is baked from trace-time sizes (MLX refuses the same ones)
SHAPELESS_REFUSED = frozenset({
    "Slice", "Pad", "Scatter", "AsStrided", "View", "Split", "FFT", "RandomBits", "Load",
    "Scan", "BlockMaskedMM", "SegmentedMM", "Depends", "CustomTransforms", "CustomVJP",
    "QRF", "SVD", "Inverse", "Cholesky", "LUF", "DynamicSlice",
})


def _shapeless_avals(a, ins, sites, fun_name):
    prim = a._prim
    kind = type(prim).__name__
    site = sites.get(id(a)) if sites else None
    where = f" (created at {site})" if site else ""
    if kind in SHAPELESS_REFUSED:
        raise ValueError(
            f"[compile] {prim.name} cannot infer its output shape, so `{fun_name}` cannot be "
            f"compiled with shapeless=True{where}. Compile it with shapeless=False (it then "
            "retraces for each new input shape), or express the operation with ops whose "
            "shape follows their inputs.")
    if kind == "Broadcast":  # a broadcast to a fixed shape keeps it
        try:
            ok = broadcast_shapes(ins[0].shape, prim.shape) == tuple(prim.shape)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"[Broadcast] Unable to infer broadcast shape: an input of shape "
                f"{ins[0].shape} does not broadcast to the traced shape {prim.shape} in "
                f"shapeless `{fun_name}`{where}.")
    elif kind in ("Reshape", "Unflatten"):  # they keep the requested shape (-1 re-inferred)
        try:
            return prim.abstract_eval(*ins)
        except ValueError as e:
            raise ValueError(
                f"{e} (sizes baked at trace time in shapeless `{fun_name}`{where}; use -1, "
                "or flatten/unflatten, so the shape follows the input).") from None
    try:
        return prim.abstract_eval(*ins)
    except (ValueError, TypeError) as e:
        raise ValueError(f"[compile] {prim.name} in shapeless `{fun_name}`{where}: {e}") from e


def replay(tape, real_inputs, shapeless=False, sites=None, fun_name="fun"):
    """Fresh lazy outputs of `tape` applied to `real_inputs` (flat, in placeholder order)."""
    env = {id(p): x for p, x in zip(tape.inputs, real_inputs)}
    get = env.get
    tracing = TraceState.depth > 0
    nodes = tape.nodes
    i, n = 0, len(nodes)
    while i < n:
        a = nodes[i]
        ins = tuple([get(id(x), x) for x in a._inputs])
        sibs = a._siblings
        if sibs is None:
            if shapeless:
                shape, dtype = _shapeless_avals(a, ins, sites, fun_name)[0]
            else:
                shape, dtype = a._shape, a._dtype
            out = array._node(shape, dtype, a._prim, ins)
            if tracing:
                out._tracer = any(x._tracer for x in ins)
            env[id(a)] = out
            i += 1
            continue
        k = len(sibs)
        if shapeless:
            avals = _shapeless_avals(a, ins, sites, fun_name)
        else:
            avals = [(s._shape, s._dtype) for s in nodes[i:i + k]]
        group = nodes[i:i + k]
        outs = tuple(array._node(s, d, a._prim, ins) for s, d in avals)
        tr = tracing and any(x._tracer for x in ins)
        for j, (o, g) in enumerate(zip(outs, group)):
            o._siblings = outs
            o._idx = g._idx
            o._tracer = tr
            env[id(g)] = o
        # keep the sibling tuple in output-index order
        ordered = tuple(sorted(outs, key=lambda o: o._idx))
        for o in outs:
            o._siblings = ordered
        i += k
    return [get(id(o), o) for o in tape.outputs]


# -- the compiled-call hit path: a precomputed replay plan -------------------------------------
_new = object.__new__


class ReplayPlan:
    """`replay` of one stored tape (not shapeless, outside any trace) as a tight loop.

    Values live in a flat list: the real inputs, then the tape's constants, then each node's
    fresh output in tape order; a step is (primitive, input getter, arity, shape, dtype) for a
    single-output node or (primitive, getter, arity, None, group) for a multi-output node.
    `run(real)` returns the same fresh lazy outputs as `replay(tape, real)`.
    """

    __slots__ = ("consts", "steps", "outs", "const_outs")

    def __init__(self, tape):
        slot = {id(p): k for k, p in enumerate(tape.inputs)}
        nodes = tape.nodes
        node_ids = {id(a) for a in nodes}
        consts = []
        for x in [x for a in nodes for x in a._inputs] + list(tape.outputs):
            if id(x) not in slot and id(x) not in node_ids:
                slot[id(x)] = len(tape.inputs) + len(consts)
                consts.append(x)
        n, nc = len(tape.inputs), len(consts)
        nxt = n + nc
        steps = []
        i, m = 0, len(nodes)
        while i < m:
            a = nodes[i]
            refs = [slot[id(x)] for x in a._inputs]
            get = operator.itemgetter(*refs) if refs else None
            sibs = a._siblings
            if sibs is None:
                steps.append((a._prim, get, len(refs), a._shape, a._dtype))
                slot[id(a)] = nxt
                nxt += 1
                i += 1
                continue
            k = len(sibs)
            group = nodes[i:i + k]
            order = sorted(range(k), key=lambda j: group[j]._idx)
            steps.append((a._prim, get, len(refs), None,
                          (tuple((g._shape, g._dtype, g._idx) for g in group), tuple(order))))
            for g in group:
                slot[id(g)] = nxt
                nxt += 1
            i += k
        self.outs = [slot[id(o)] for o in tape.outputs]
        self.const_outs = [j for j, r in enumerate(self.outs) if n <= r < n + nc]
        self.consts = consts
        self.steps = steps

    def run(self, real: list) -> list:
        vals = real + self.consts
        append = vals.append
        for prim, get, arity, shape, dtype in self.steps:
            if arity == 1:
                ins = (get(vals),)
            elif arity:
                ins = get(vals)
            else:
                ins = ()
            if shape is None:  # a multi-output node
                avals, order = dtype
                outs = tuple([array._node(s, d, prim, ins) for s, d, _ in avals])
                ordered = tuple([outs[j] for j in order])
                for o, (_, _, idx) in zip(outs, avals):
                    o._siblings = ordered
                    o._idx = idx
                    append(o)
                continue
            out = _new(array)
            out._shape = shape
            out._dtype = dtype
            out._data = None
            out._prim = prim
            out._inputs = ins
            out._siblings = None
            out._idx = 0
            out._mem = 0
            out._tracer = False
            out._nc = 0
            for x in ins:
                x._nc += 1
            append(out)
        return [vals[r] for r in self.outs]
