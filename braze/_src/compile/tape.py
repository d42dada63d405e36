"""The Tape: a traced function's graph, the unit every compile pass takes and returns, and the
graph edits every pass makes through this module.

A tape owns its node arrays: passes may rewrite `_inputs`, replace nodes and drop nodes freely,
because `Tape.copy()` (taken right after tracing) gives the tape private node objects that share
only the (immutable) primitives with the graph the user's function built. Every edit of a node's
inputs goes through `set_inputs` / `replace_input` / `rewire`, which keep the consumer counts
(`_nc`, read by buffer donation) right; `consumers` and `toposort` answer the graph questions.
"""
from __future__ import annotations

from ..array import node


class Tape:
    """inputs: the placeholders, in flat argument order (no primitive, no data).
    outputs: the flat outputs (node arrays, inputs or constants).
    nodes: every array with a primitive reachable from the outputs, inputs before consumers;
        each output of a multi-output node appears once, siblings next to each other.
    Constants are arrays with data and no primitive; they appear only inside `_inputs`.
    """

    def __init__(self, inputs, outputs, nodes):
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.nodes = list(nodes)

    @classmethod
    def from_outputs(cls, inputs, outputs) -> "Tape":
        """Collect the nodes between placeholders `inputs` and `outputs` (iterative walk)."""
        stop = {id(x) for x in inputs}
        order, seen = [], set(stop)
        for root in outputs:
            if id(root) in seen:
                continue
            stack = [(root, iter(root._inputs))]
            seen.add(id(root))
            while stack:
                node, it = stack[-1]
                for x in it:
                    if id(x) not in seen:
                        seen.add(id(x))
                        stack.append((x, iter(x._inputs)))
                        break
                else:
                    stack.pop()
                    if node._prim is not None:
                        order.append(node)
        # keep siblings together, each once, at the position of the first one reached
        nodes, placed = [], set()
        for a in order:
            group = a._siblings if a._siblings is not None else (a,)
            for s in group:
                if id(s) not in placed:
                    placed.add(id(s))
                    nodes.append(s)
        return cls(inputs, outputs, nodes)

    def copy(self) -> "Tape":
        """Private node objects (sharing primitives); inputs and constants keep their identity."""
        new = {}
        for a in self.nodes:
            if id(a) in new:
                continue
            group = a._siblings if a._siblings is not None else (a,)
            ins = tuple(new.get(id(x), x) for x in a._inputs)
            copies = tuple(node(s._shape, s._dtype, s._prim, ins) for s in group)
            if len(copies) > 1:
                for i, c in enumerate(copies):
                    c._siblings = copies
                    c._idx = i
            for s, c in zip(group, copies):
                c._tracer = s._tracer
                new[id(s)] = c
        return Tape(self.inputs, [new.get(id(o), o) for o in self.outputs],
                    [new[id(a)] for a in self.nodes])

    def check(self, after: str) -> None:
        """Raise RuntimeError when the tape breaks its contract (BRAZE_CHECKS=1 runs this after
        every pass): nodes in topological order, each once, siblings together; every input and
        output a placeholder, a constant or a node of the tape."""
        known = {id(x) for x in self.inputs}
        i, nodes = 0, self.nodes
        while i < len(nodes):
            group = nodes[i]._siblings or (nodes[i],)
            if tuple(nodes[i:i + len(group)]) != tuple(group):
                raise RuntimeError(f"[compile] after {after}: siblings of node {i} are apart")
            for x in group[0]._inputs:
                if id(x) not in known and (x._prim is not None or x._data is None):
                    raise RuntimeError(f"[compile] after {after}: node {i} "
                                       f"({group[0]._prim!r}) reads an array the tape does "
                                       "not compute before it")
            for s in group:
                if id(s) in known:
                    raise RuntimeError(f"[compile] after {after}: node {i} appears twice")
                known.add(id(s))
            i += len(group)
        for o in self.outputs:
            if id(o) not in known and (o._prim is not None or o._data is None):
                raise RuntimeError(f"[compile] after {after}: an output is not computed")

    def text(self) -> str:
        """Readable Python-like listing: one line per node, `%n = Prim(params)(%a, %b)`."""
        names = {}

        def name(x):
            if id(x) not in names:
                if x._prim is None and x._data is not None:
                    names[id(x)] = _const_text(x)
                    return names[id(x)]
                names[id(x)] = f"%{len(names)}"
            return names[id(x)]

        lines = []
        for i, x in enumerate(self.inputs):
            names[id(x)] = f"%in{i}"
            lines.append(f"%in{i}: {x.dtype.name}{list(x.shape)}")
        for a in self.nodes:
            args = ", ".join(name(x) for x in a._inputs)
            lines.append(f"{name(a)}: {a.dtype.name}{list(a.shape)} = {a._prim!r}({args})")
            ir = getattr(a._prim, "ir", None)  # a fused region: its IR below its first output
            if ir is not None and not a._idx:
                lines += ["  " + ln for ln in str(ir).splitlines()[1:]]
        lines.append("return " + ", ".join(name(o) for o in self.outputs))
        return "\n".join(lines)


def _const_text(x) -> str:
    if x.size == 1:
        return f"const({x._data.reshape(-1)[0].item()!r}:{x.dtype.name})"
    return f"const({x.dtype.name}{list(x.shape)})"


# -- graph edits ------------------------------------------------------------------------------
def set_inputs(node, new_inputs) -> None:
    """Rewire `node` (and its siblings, which share inputs) to `new_inputs`."""
    new_inputs = tuple(new_inputs)
    group = node._siblings if node._siblings is not None else (node,)
    for s in group:
        for x in s._inputs:
            x._nc -= 1
        s._inputs = new_inputs
        for x in new_inputs:
            x._nc += 1


def replace_input(node, slot: int, new) -> None:
    """node._inputs[slot] = new (this node only: a broadcast copy or a split region's input)."""
    ins = node._inputs
    old = ins[slot]
    if old is new:
        return
    node._inputs = ins[:slot] + (new,) + ins[slot + 1:]
    old._nc -= 1
    new._nc += 1


def rewire(tape: Tape, subst: dict) -> None:
    """Replace every input `x` with `subst[id(x)]` (chains resolved) in nodes and outputs."""
    if not subst:
        return

    def find(x):
        while id(x) in subst:
            x = subst[id(x)]
        return x

    done = set()
    for a in tape.nodes:
        key = id(a._siblings) if a._siblings is not None else id(a)
        if key in done:
            continue
        done.add(key)
        ins = a._inputs
        if any(id(x) in subst for x in ins):
            set_inputs(a, [find(x) for x in ins])
    tape.outputs = [find(o) for o in tape.outputs]


# -- graph questions --------------------------------------------------------------------------
def consumers(nodes, slots: bool = True) -> dict:
    """id(x) -> [(consumer, slot), ...] for every input slot of `nodes`, in tape order; with
    `slots=False`, id(x) -> [consumer, ...], each consumer once."""
    out = {}
    for a in nodes:
        for slot, x in enumerate(a._inputs):
            lst = out.setdefault(id(x), [])
            if slots:
                lst.append((a, slot))
            elif not lst or lst[-1] is not a:  # a node's slots are adjacent
                lst.append(a)
    return out


def toposort(nodes) -> list:
    """`nodes` in an order where inputs come first, as close to their given order as possible
    (each sibling group kept together, at its first member's place)."""
    member = {id(a) for a in nodes}
    out, done = [], set()
    for a in nodes:
        if id(a) in done:
            continue
        stack = [(a, 0)]
        while stack:
            b, k = stack[-1]
            ins = b._inputs
            if k < len(ins):
                stack[-1] = (b, k + 1)
                x = ins[k]
                if id(x) in member and id(x) not in done:
                    stack.append((x, 0))
                continue
            stack.pop()
            if id(b) in done:
                continue
            for s in b._siblings if b._siblings is not None else (b,):
                done.add(id(s))
                out.append(s)
    return out
