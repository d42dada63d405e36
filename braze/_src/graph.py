"""Graph walks (iterative: deep graphs never hit the recursion limit) and DOT export."""
from __future__ import annotations


def toposort(roots):
    """Unevaluated arrays reachable from `roots`, inputs before consumers.

    A multi-output node appears once (by whichever sibling is reached first).
    """
    order = []
    visited = set()
    add = visited.add
    for r in roots:
        if r._data is not None or id(r) in visited:
            continue
        _mark(r, visited)
        stack = [(r, iter(r._inputs))]
        while stack:
            node, it = stack[-1]
            for c in it:
                if c._data is None and id(c) not in visited:
                    if c._siblings is None:
                        add(id(c))
                    else:
                        _mark(c, visited)
                    stack.append((c, iter(c._inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def _mark(a, visited):
    if a._siblings is None:
        visited.add(id(a))
    else:
        for s in a._siblings:
            visited.add(id(s))


def all_nodes(roots):
    """Every array reachable from roots (evaluated ones included), inputs first."""
    order, visited = [], set()
    for r in roots:
        if id(r) in visited:
            continue
        visited.add(id(r))
        stack = [(r, 0)]
        while stack:
            node, i = stack[-1]
            ins = node._inputs
            if i < len(ins):
                stack[-1] = (node, i + 1)
                c = ins[i]
                if id(c) not in visited:
                    visited.add(id(c))
                    stack.append((c, 0))
            else:
                stack.pop()
                order.append(node)
    return order


def to_dot(outputs, named_outputs=None) -> str:
    """Graphviz DOT text of the graph behind `outputs`, one node per primitive, as MLX writes it."""
    named_outputs = named_outputs or {}
    roots = list(outputs) + list(named_outputs.values())
    names = {id(a): n for n, a in named_outputs.items()}
    lines = ["digraph {"]
    ids = {}
    done_prims = set()

    def node_id(a):
        key = id(a._siblings) if a._siblings is not None else id(a)
        if key not in ids:
            ids[key] = len(ids)
        return ids[key]

    counter = 0
    arr_ids = {}

    def arr_id(a):
        nonlocal counter
        if id(a) not in arr_ids:
            arr_ids[id(a)] = counter
            counter += 1
        return arr_ids[id(a)]

    for a in all_nodes(roots):
        aid = arr_id(a)
        label = names.get(id(a), f"{a.dtype.name} {list(a.shape)}")
        lines.append(f'{{ rank=same; a{aid} [label ="{label}", shape=box]; }}')
        if a._prim is None:
            continue
        nid = node_id(a)
        if nid not in done_prims:
            done_prims.add(nid)
            lines.append(f'{{ rank=same; p{nid} [label ="{a._prim.name}"]; }}')
            for x in a._inputs:
                lines.append(f"a{arr_id(x)} -> p{nid}")
        lines.append(f"p{nid} -> a{aid}")
    lines.append("}")
    return "\n".join(lines) + "\n"
