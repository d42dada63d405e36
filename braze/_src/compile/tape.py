"""The Tape: a traced function's graph, the unit every compile pass takes and returns.

A tape owns its node arrays: passes may rewrite `_inputs`, replace nodes and drop nodes freely,
because `Tape.copy()` (taken right after tracing) gives the tape private node objects that share
only the (immutable) primitives with the graph the user's function built.
"""
from __future__ import annotations

from ..array import array


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
            copies = tuple(array._node(s._shape, s._dtype, s._prim, ins) for s in group)
            if len(copies) > 1:
                for i, c in enumerate(copies):
                    c._siblings = copies
                    c._idx = i
            for s, c in zip(group, copies):
                c._tracer = s._tracer
                new[id(s)] = c
        return Tape(self.inputs, [new.get(id(o), o) for o in self.outputs],
                    [new[id(a)] for a in self.nodes])

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
        lines.append("return " + ", ".join(name(o) for o in self.outputs))
        return "\n".join(lines)


def _const_text(x) -> str:
    if x.size == 1:
        return f"const({x._data.reshape(-1)[0].item()!r}:{x.dtype.name})"
    return f"const({x.dtype.name}{list(x.shape)})"
