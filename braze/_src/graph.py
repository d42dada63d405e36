"""Graph walks (iterative: deep graphs never hit the recursion limit) and DOT export."""
from __future__ import annotations


def toposort(roots):
    """Unevaluated arrays reachable from `roots`, inputs before consumers.

    A multi-output node appears once (by whichever sibling is reached first).
    The visited set holds the arrays themselves (their hash is the identity's, and a set
    compares identity before `__eq__`), which saves an `id()` call per edge.
    """
    r = roots[0] if roots else None
    if r is not None and r._data is None and _one_node(roots, r):
        # one node on evaluated inputs (a compiled call, its outputs siblings): no walk
        for c in r._inputs:
            if c._data is None:
                break
        else:
            return [r]
    order = []
    visited = set()
    add = visited.add
    for r in roots:
        if r._data is not None or r in visited:
            continue
        if r._siblings is None:
            add(r)
        else:
            visited.update(r._siblings)
        stack = [(r, iter(r._inputs))]
        push = stack.append
        while stack:
            node, it = stack[-1]
            for c in it:
                if c._data is None and c not in visited:
                    if c._siblings is None:
                        add(c)
                    else:
                        visited.update(c._siblings)
                    push((c, iter(c._inputs)))
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


def _letters(n: int) -> str:
    """MLX's NodeNamer sequence: 1 -> A, 26 -> Z, 27 -> AA, ..."""
    out = []
    while n > 0:
        out.append(chr(ord("A") + (n - 1) % 26))
        n = (n - 1) // 26
    return "".join(reversed(out))


def to_dot(outputs, named_outputs=None) -> str:
    """Graphviz DOT text of the graph behind `outputs`, exactly as MLX's `export_to_dot` writes
    it: arrays are quoted names (`"A"`, `"B"`, ... in first-seen order, or the keyword names
    given in `named_outputs`), arrays without a primitive are `rank=source`, outputs nobody
    consumes are `rank=sink`, and each primitive is `{ <id> [label ="Name", shape=rectangle]; }`
    with an edge from each input (repeated inputs repeat the edge) and to each output."""
    memo = {}
    named_outputs = {k: _shown(a, memo) for k, a in (named_outputs or {}).items()}
    roots = [_shown(a, memo) for a in outputs] + list(named_outputs.values())
    names = {}
    for n, a in named_outputs.items():  # named arrays take their slot in the sequence
        names.setdefault(id(a), n)
    counter = [len(named_outputs)]

    def name(a):
        n = names.get(id(a))
        if n is None:
            counter[0] += 1
            n = names[id(a)] = _letters(counter[0])
        return f'"{n}"'

    # MLX's traversal: inputs before consumers, a node once (siblings together)
    order, seen = [], set()
    for r in roots:
        if id(r) in seen:
            continue
        stack = [(r, 0)]
        _mark(r, seen)
        while stack:
            node, i = stack[-1]
            ins = node._inputs
            if i < len(ins):
                stack[-1] = (node, i + 1)
                c = _shown(ins[i], memo)
                if id(c) not in seen:
                    _mark(c, seen)
                    stack.append((c, 0))
            else:
                stack.pop()
                order.append(node)
    consumed = set()
    for a in order:
        for s in (a._siblings if a._siblings is not None else (a,)):
            for x in s._inputs:
                consumed.add(id(_shown(x, memo)))
    out_ids = {id(o) for o in roots}
    lines = ["digraph {"]
    for a in order:
        if a._prim is None:
            lines.append(f"{{ rank=source; {name(a)}; }}")
            continue
        pid = id(a._siblings) if a._siblings is not None else id(a)
        lines.append(f'{{ {pid} [label ="{a._prim.name}", shape=rectangle]; }}')
        for x in a._inputs:
            lines.append(f"{name(_shown(x, memo))} -> {pid}")
        for o in (a._siblings if a._siblings is not None else (a,)):
            sink = "rank=sink; " if id(o) in out_ids and id(o) not in consumed else ""
            lines.append(f"{{ {sink}{name(o)}; }}")
            lines.append(f"{pid} -> {name(o)}")
    lines.append("}")
    return "\n".join(lines)


def _shown(a, memo):
    """The array a display shows for `a`: for an output of a node that runs several steps
    as one (a compiled call's, whose primitive can `unfold`), that output in the graph of
    its steps (built once per node in `memo`, which keeps it alive)."""
    unfold = getattr(a._prim, "unfold", None)
    if unfold is None:
        return a
    owner = a._siblings if a._siblings is not None else a
    got = memo.get(id(owner))
    if got is None:
        got = memo[id(owner)] = (unfold(a._inputs), owner)
    return got[0][a._idx]


def _one_node(roots, r) -> bool:
    """Whether `roots` are `r` alone or outputs of r's node (a compiled step's state)."""
    if len(roots) == 1:
        return True
    sibs = r._siblings
    if sibs is None:
        return False
    for x in roots:
        if x._siblings is not sibs:
            return False
    return True
