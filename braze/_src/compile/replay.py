"""Replay a stored tape onto real inputs (MLX's `compile_replace`): the one replay path.

Every node becomes a fresh lazy array with the *same primitive object* and the mapped inputs;
constants map to themselves and placeholders to the caller's arrays. A function output that
is an argument or a constant is copied (in-place ops on it must change neither the caller's
array nor the cached tape). A `ReplayPlan` turns a tape into a flat list of steps once; every
call of a compiled function runs the plan of its cache entry. Outside transforms, a plan of
two or more steps is one PlanCall node (`execute.py`), and a plan of one single-element kernel
on evaluated inputs runs at once. In shapeless mode each node's shape and dtype come from its
primitive's `abstract_eval` on the new inputs; a primitive that cannot re-infer its shape
(`reinfers_shape = False`) raises a ValueError naming the op and the line that created it.
"""
from __future__ import annotations

import operator

from ..array import TraceState, evaluated, node, node_group
from ..prims.base import bind, broadcast_shapes
from ..prims.core import Copy
from . import execute

_COPY = Copy()

#: nonzero while a checked call runs (api.py): its outputs stay lazy nodes, so that a
#: mismatch names the kernel that produced it
KEEP_LAZY = [0]


def _shapeless_avals(prim, ins, site, fun_name):
    """The output (shape, dtype)s of `prim` re-inferred from the new inputs `ins`."""
    if not prim.reinfers_shape:
        raise ValueError(
            f"[compile] {prim.name} cannot infer its output shape, so `{fun_name}` cannot be "
            f"compiled with shapeless=True{_where(site)}. Compile it with shapeless=False (it "
            "then retraces for each new input shape), or express the operation with ops whose "
            "shape follows their inputs.")
    try:
        avals = prim.abstract_eval(*ins)
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"[compile] {prim.name} in shapeless `{fun_name}`{_where(site)}: {e} The trace "
            "baked sizes that this input does not fit: use -1 in reshapes, flatten/unflatten, "
            "or ops whose shape follows their inputs (or shapeless=False).") from None
    if prim.kernel_op is not None:  # elementwise: each input broadcasts to the output
        shape = avals[0][0]
        for x in ins[:prim.shape_only_from]:  # shape-only inputs do not count (None: all)
            if x._shape != shape and not _broadcasts(x._shape, shape):
                raise ValueError(
                    f"[{prim.name}] Unable to infer broadcast shape: an input of shape "
                    f"{x._shape} does not broadcast to the traced shape {shape} in shapeless "
                    f"`{fun_name}`{_where(site)}.")
    return avals


def _where(site) -> str:
    return f" (created at {site})" if site else ""


def _broadcasts(shape, to) -> bool:
    try:
        return broadcast_shapes(shape, to) == tuple(to)
    except ValueError:
        return False


class ReplayPlan:
    """A tape as a tight loop of steps.

    Values live in a flat list: the real inputs, then the tape's constants, then each node's
    fresh outputs in tape order (a multi-output node's in output order). A step is
    (primitive, arity, first input, second input, getter of three or more inputs, shape,
    dtype, creation site), the inputs as positions in that list; a multi-output node has shape
    None and its outputs' (shape, dtype)s in the dtype slot.
    """

    __slots__ = ("consts", "steps", "outs", "const_outs", "input_outs", "seen", "call",
                 "call_avals", "call_index", "call_reads", "now")

    def __init__(self, tape, sites=None, shapeless=False, n_fun_out=None, one_node=True):
        """`n_fun_out`: how many of the tape's outputs are the function's (the rest are
        written-back state); None: all of them. `one_node`: a call outside transforms may
        return one PlanCall node's outputs (`execute.py`) instead of a node per step."""
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
        sites = sites or {}
        steps = []
        program = []  # (primitive, input positions, output avals) per step: the executor's
        i, m = 0, len(nodes)
        while i < m:
            a = nodes[i]
            refs = [slot[id(x)] for x in a._inputs]
            prim = _following(a) if shapeless else a._prim
            # one or two inputs (nearly every node) are read by indexing, more by a getter
            head = (prim, len(refs), *(refs + [0, 0])[:2],
                    operator.itemgetter(*refs) if len(refs) > 2 else None)
            site = sites.get(id(a))
            sibs = a._siblings
            if sibs is None:
                steps.append((*head, a._shape, a._dtype, site))
                program.append((prim, tuple(refs), ((a._shape, a._dtype),)))
                slot[id(a)] = nxt
                nxt += 1
                i += 1
                continue
            k = len(sibs)
            steps.append((*head, None, tuple((s._shape, s._dtype) for s in sibs), site))
            program.append((prim, tuple(refs), steps[-1][6]))
            for g in nodes[i:i + k]:
                slot[id(g)] = nxt + g._idx
            nxt += k
            i += k
        self.outs = [slot[id(o)] for o in tape.outputs]
        self.const_outs = [j for j, r in enumerate(self.outs) if n <= r < n + nc]
        # function outputs that are arguments: each a new array (MLX's: `y += 1` on the
        # result must not change the caller's argument); state written back keeps its object
        fun_outs = self.outs if n_fun_out is None else self.outs[:n_fun_out]
        self.input_outs = [j for j, r in enumerate(fun_outs) if r < n]
        self.consts = consts
        self.steps = steps
        self.seen = {}  # shapeless: the inputs' (shape, dtype)s -> every step's outputs' avals
        self.call = None  # the PlanCall primitive a call outside transforms gets, if any
        self.now = None  # a one-element kernel a call outside transforms runs at once
        if not shapeless and len(program) == 1:
            prim, refs, avals = program[0]
            one = getattr(prim, "one_element", None)
            shape = one(avals) if one is not None else None
            if shape is not None:
                self.now = (prim, refs, shape, avals, n + nc)
        if one_node and not shapeless and len(program) >= execute.MIN_STEPS and all(
                execute.supported(p) for p, _, _ in program):
            self._make_call(tape, consts, program)

    def _make_call(self, tape, consts, program):
        """The PlanCall primitive of the plan (`execute.py`): its node's outputs are the
        plan's outputs computed by a step, each once."""
        n, nc = len(tape.inputs), len(tape.inputs) + len(consts)
        made = [r for r in self.outs if r >= nc]
        if not made:
            return
        # the node's inputs are the inputs and constants a step reads (graph walks see no
        # other: an implicit random key a function never reads is not one of its inputs)
        used = sorted({i for _, refs, _ in program for i in refs if i < nc})
        pos = {i: k for k, i in enumerate(used)}
        old, nxt = nc, len(used)  # a step's first output position: in the plan, in the node
        steps = []
        for prim, refs, avals in program:
            steps.append((prim, tuple(pos[i] for i in refs), avals))
            for j in range(len(avals)):
                pos[old + j] = nxt + j
            old += len(avals)
            nxt += len(avals)
        index = {}
        for r in made:
            index.setdefault(pos[r], len(index))
        values = list(tape.inputs) + consts
        ex = execute.Executor(sum(1 for i in used if i < n), len(used),
                              [(values[i]._shape, values[i]._dtype) for i in used], steps,
                              list(index))
        origin = next((getattr(p, "origin", "") for p, _, _ in program
                       if getattr(p, "origin", "")), "")
        self.call = execute.PlanCall(ex, origin)
        self.call_avals = tuple(ex.avals[r] for r in index)
        self.call_index = {r: index[pos[r]] for r in made}
        self.call_reads = tuple(used)

    def run(self, real: list, shapeless: str | None = None) -> list:
        """Fresh lazy outputs for the flat `real` inputs (in placeholder order). `shapeless`:
        the function's name, when shapes are re-inferred from the inputs."""
        slow = shapeless is not None or TraceState.depth > 0
        if self.now is not None and not slow:
            outs = self._run_now(real)
            if outs is not None:
                return outs
        if self.call is not None and not slow:
            return self._run_call(real)
        vals = real + self.consts
        append, extend = vals.append, vals.extend
        known = found = None
        if shapeless is not None:  # shapes follow from the inputs': inferred once per shapes
            key = tuple([(x._shape, x._dtype) for x in real])
            known = self.seen.get(key)
            if known is None:
                found = []
        for i, (prim, arity, a, b, get, shape, dtype, site) in enumerate(self.steps):
            if arity == 2:
                ins = (vals[a], vals[b])
            elif arity == 1:
                ins = (vals[a],)
            else:
                ins = get(vals) if arity else ()
            if slow:
                if known is not None:
                    avals = known[i]
                elif found is not None:
                    avals = _shapeless_avals(prim, ins, site, shapeless)
                    found.append(avals)
                else:
                    avals = dtype if shape is None else ((shape, dtype),)
                extend(_rebuilt(prim, ins, shape is None, avals))
            elif shape is not None:
                append(node(shape, dtype, prim, ins))
            else:
                extend(node_group(dtype, prim, ins))
        if found is not None:
            if len(self.seen) >= 16:
                self.seen.clear()
            self.seen[key] = found
        return self._finish(real, [vals[r] for r in self.outs])

    def _run_call(self, real):
        """The outputs of one PlanCall node on `real` (see `execute.py`)."""
        vals = real + self.consts
        ins = tuple(map(vals.__getitem__, self.call_reads))
        avals = self.call_avals
        if len(avals) == 1:
            (shape, dtype), = avals
            made = (node(shape, dtype, self.call, ins),)
        else:
            made = node_group(avals, self.call, ins)
        index = self.call_index
        nc = len(vals)
        return self._finish(real, [made[index[r]] if r >= nc else vals[r] for r in self.outs])

    def _run_now(self, real):
        """The outputs of the plan's one-element kernel, computed now: for a tiny call, a lazy
        node and its eval cost more than the kernel. None (the call stays lazy) when an input
        is not evaluated yet or a checked call runs."""
        if KEEP_LAZY[0]:
            return None
        prim, refs, shape, avals, first = self.now
        vals = real + self.consts
        xs = []
        for r in refs:
            d = vals[r]._data
            if d is None:
                return None
            xs.append(d)
        made = [evaluated(d, dtype, shape)
                for d, (_, dtype) in zip(prim.run_now(xs, shape), avals)]
        return self._finish(real, [made[r - first] if r >= first else vals[r]
                                   for r in self.outs])

    def _finish(self, real, outs):
        """`outs` with the function's outputs that are inputs or constants copied."""
        for j in self.const_outs:
            o = outs[j]
            if not any(o is r for r in real):
                outs[j] = bind(_COPY, (o,))
        for j in self.input_outs:
            outs[j] = bind(_COPY, (outs[j],))
        return outs


def _following(a):
    """The primitive a shapeless replay runs for node `a`: its own, or one whose shape
    follows the input where the trace baked sizes computed from the traced ones (a
    primitive's `following(input shape, output shape)`, e.g. Reshape's)."""
    follow = getattr(a._prim, "following", None)
    if follow is None or len(a._inputs) != 1:
        return a._prim
    return follow(tuple(a._inputs[0]._shape), tuple(a._shape)) or a._prim


def _rebuilt(prim, ins, group, avals):
    """A step's fresh outputs of (shape, dtype)s `avals` (`group`: a multi-output node),
    flagged as tracers when a transform traces their inputs."""
    tracer = TraceState.depth > 0 and any(x._tracer for x in ins)
    if group:
        return node_group(avals, prim, ins, tracer)
    (shape, dtype), = avals
    return (node(shape, dtype, prim, ins, tracer),)


def replay(tape, real_inputs, shapeless=False, sites=None, fun_name="fun"):
    """Fresh lazy outputs of `tape` applied to `real_inputs` (flat, in placeholder order)."""
    plan = ReplayPlan(tape, sites, shapeless, one_node=False)
    return plan.run(list(real_inputs), fun_name if shapeless else None)
