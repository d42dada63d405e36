"""Reverse and forward mode autodiff: vjp, jvp, grad, value_and_grad.

As in MLX: the primals are copied into tracers, the function runs (cheap: arrays are lazy) and
builds a graph, then the graph is walked backwards (vjp) or forwards (jvp) asking each primitive
for its rule. Rules emit ordinary ops, so transforms nest and their results can be compiled.

Rule protocol (see prims/base.py): `vjp(primals, cotangents, argnums, outputs)` returns one
cotangent per entry of `argnums` (None means "no contribution", i.e. zero);
`jvp(primals, tangents, argnums)` returns one tangent per output.

The walk only descends into arrays flagged `_tracer` (everything computed from a tracer while a
trace is active is flagged), so a large constant graph behind the function's inputs costs
nothing. A primitive may narrow the walk with `walked_inputs(kind) -> n` (kind is "vjp",
"jvp" or "vmap"): only its first n inputs are then seen by that transform (CustomTransforms
uses it to hide the forward graph its custom rule replaces).
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Sequence

from .. import tree as T
from ..array import TraceState, array
from ..prims.base import bind
from ..prims.core import Copy

_COPY = Copy()


class TransformTypeError(TypeError, ValueError):
    """A transform argument of the wrong type: MLX raises TypeError, braze's contract says
    ValueError; this is both."""


@contextlib.contextmanager
def trace_scope():
    """Mark a transformation trace as active (tracers keep their graph while it is)."""
    TraceState.depth += 1
    try:
        yield
    finally:
        TraceState.depth -= 1
        if not TraceState.depth:
            TraceState.overwritten.clear()


def original_values(tracers):
    """The tracers' values as passed in: a function that overwrote an argument in place
    (`a[1:2] = v`, `a += 1`) moved that value to another object, which is what we differentiate
    with respect to."""
    moved = TraceState.overwritten
    return [moved.get(id(t), t) for t in tracers] if moved else tracers


def make_tracers(arrays):
    out = []
    for p in arrays:
        t = bind(_COPY, (p,))
        t._tracer = True
        out.append(t)
    return out


def walked_inputs(a, kind):
    """The inputs of node `a` that transform `kind` looks through."""
    f = getattr(a._prim, "walked_inputs", None)
    return a._inputs if f is None else a._inputs[: f(kind)]


def _dependent_tape(outputs, tracers, kind, stop=()):
    """The nodes between `tracers` and `outputs` that depend on a tracer, inputs first, one
    entry per node (a multi-output node is listed once, at its first sibling: that position is
    after all its inputs and before every consumer of any sibling); and the dependent id set.

    Iterative DFS over tracer-flagged arrays only, stopping at the tracers themselves and at
    the arrays `stop` (whose history cannot matter).
    """
    dep = {id(t) for t in tracers}
    visited = dep | {id(x) for x in stop}
    order = []
    for r in outputs:
        if id(r) in visited or not r._tracer:
            continue
        visited.add(id(r))
        stack = [(r, walked_inputs(r, kind), 0)]
        while stack:
            node, ins, i = stack[-1]
            if i < len(ins):
                stack[-1] = (node, ins, i + 1)
                c = ins[i]
                if id(c) not in visited and c._tracer:
                    visited.add(id(c))
                    stack.append((c, walked_inputs(c, kind), 0))
            else:
                stack.pop()
                order.append((node, ins))
    tape, seen = [], set()
    for a, ins in order:
        if a._prim is None or not any(id(x) in dep for x in ins):
            continue
        # stop_gradient (a no-op without a derivative): as in MLX its output depends on
        # nothing, so indices may be built from it
        if kind == "vjp" and a._prim.noop and not a._prim.differentiable:
            continue
        for o in _node_outputs(a):
            dep.add(id(o))
        key = _node_key(a)
        if key not in seen:
            seen.add(key)
            tape.append(a)
    return tape, dep


def _node_outputs(a):
    return a._siblings if a._siblings is not None else (a,)


def _node_key(a):
    """One key per node: a multi-output node's siblings share theirs."""
    return id(a._siblings) if a._siblings is not None else id(a)


def _zeros_like(a):
    from ..ops.creation import zeros_like
    return zeros_like(a)


def _accumulate(cots, x, v, op, prim):
    if tuple(v.shape) != tuple(x.shape):
        raise ValueError(f"[{op}] The vjp rule of {prim} returned a cotangent of shape "
                         f"{tuple(v.shape)} for an input of shape {tuple(x.shape)}.")
    prev = cots.get(id(x))
    cots[id(x)] = v if prev is None else prev + v


def backward(outputs, cotangents, tracers, op="vjp", stop=()):
    """Cotangents of `tracers` given cotangents of `outputs` (None entries contribute nothing).

    Returns one entry per tracer, None where no cotangent reached it.
    """
    tape, dep = _dependent_tape(outputs, tracers, "vjp", stop)
    cots = {}
    for o, c in zip(outputs, cotangents):
        if c is not None:
            _accumulate(cots, o, c, op, "the function")
    for a in reversed(tape):
        outs = _node_outputs(a)
        cts = [cots.pop(id(o), None) for o in outs]
        prim = a._prim
        if not prim.differentiable or all(c is None for c in cts):
            continue
        cts = [c if c is not None else _zeros_like(o) for c, o in zip(cts, outs)]
        ins = walked_inputs(a, "vjp")
        argnums = [i for i, x in enumerate(ins) if id(x) in dep]
        vjps = prim.vjp(list(a._inputs), cts, argnums, list(outs))
        if len(vjps) != len(argnums):
            raise ValueError(f"[{op}] The vjp rule of {prim.name} returned {len(vjps)} "
                             f"cotangents for {len(argnums)} inputs.")
        for i, v in zip(argnums, vjps):
            if v is not None:
                _accumulate(cots, ins[i], v, op, prim.name)
    return [cots.get(id(t)) for t in tracers]


def forward(outputs, tracers, tangents, op="jvp", stop=()):
    """Tangents of `outputs` given tangents of `tracers` (zeros where independent)."""
    tape, _ = _dependent_tape(outputs, tracers, "jvp", stop)
    tans = {id(t): v for t, v in zip(tracers, tangents)}
    zero_dtype = {}  # id(output) -> dtype of its zero tangent (that of the incoming tangent)
    for a in tape:
        outs = _node_outputs(a)
        ins = walked_inputs(a, "jvp")
        argnums = [i for i, x in enumerate(ins) if id(x) in tans]
        if not argnums:
            continue
        prim = a._prim
        if not prim.differentiable:
            # zero tangents: left absent, filled in only where an output needs one, in the
            # dtype of the tangent coming in (MLX: `a > 0` has a float tangent, not a bool)
            dt = tans[id(ins[argnums[0]])].dtype
            for o in outs:
                zero_dtype[id(o)] = dt
            continue
        res = prim.jvp(list(a._inputs), [tans[id(ins[i])] for i in argnums], argnums)
        if len(res) != len(outs):
            raise ValueError(f"[{op}] The jvp rule of {prim.name} returned {len(res)} "
                             f"tangents for {len(outs)} outputs.")
        for o, t in zip(outs, res):
            if t is not None:
                tans[id(o)] = t
    return [tans[id(o)] if id(o) in tans else _zero_tangent(o, zero_dtype.get(id(o)))
            for o in outputs]


def _zero_tangent(o, dtype):
    if dtype is None:
        return _zeros_like(o)
    from ..ops.creation import zeros
    return zeros(o.shape, dtype)


# -- rules of a primitive that stands for a graph of others (a fused Compiled region) ------
def _traced(fun, primals, argnums):
    """`fun(inputs)` with tracers for the inputs at `argnums`, and those tracers."""
    tracers = make_tracers([primals[i] for i in argnums])
    ins = list(primals)
    for i, t in zip(argnums, tracers):
        ins[i] = t
    return fun(ins), tracers


def expanded_vjp(fun, primals, cotangents, argnums):
    """A vjp rule for a primitive equal to `fun(inputs)`, a graph of other primitives: the
    graph is built and differentiated by their own rules."""
    with trace_scope():
        outs, tracers = _traced(fun, primals, argnums)
        return backward(outs, cotangents, tracers, stop=primals)


def expanded_jvp(fun, primals, tangents, argnums):
    """A jvp rule for a primitive equal to `fun(inputs)` (see expanded_vjp)."""
    with trace_scope():
        outs, tracers = _traced(fun, primals, argnums)
        return forward(outs, tracers, tangents, stop=primals)


# -- public API -------------------------------------------------------------------------------
def _check_arrays(xs, what, op):
    for x in xs:
        if not isinstance(x, array):
            raise ValueError(f"[{op}] {what} must be arrays (or trees of arrays), got "
                             f"{type(x).__name__}.")


def _flat_outputs(out, op):
    leaves, treedef = T.flatten(out)
    _check_arrays(leaves, "The function's outputs", op)
    return leaves, treedef


def _check_callable(fun, op):
    if not callable(fun):
        raise TransformTypeError(f"[{op}] Expected a callable, got {type(fun).__name__}.")


def _as_list(xs, what, op):
    if not isinstance(xs, (list, tuple)):
        raise TransformTypeError(f"[{op}] {what} must be a list of arrays, got "
                                 f"{type(xs).__name__}.")
    return list(xs)


def vjp(fun: Callable, primals: Sequence[Any], cotangents: Sequence[Any]) -> tuple:
    """MLX's `mx.vjp(fun, primals, cotangents) -> (outputs, vjps)`.

    `primals` is a list (or tuple) of the function's positional arguments; braze also allows
    trees of arrays there, and the vjps come back in the same structure. `cotangents` has one
    array per output leaf (outputs may be an array or a tree of arrays); the outputs are
    returned as a flat list, as in MLX.
    """
    _check_callable(fun, "vjp")
    primals = _as_list(primals, "primals", "vjp")
    cotangents = _as_list(cotangents, "cotangents", "vjp")
    flat_p, p_def = T.flatten(primals)
    _check_arrays(flat_p, "Primals", "vjp")
    cots = T.flatten(cotangents)[0]
    _check_arrays(cots, "Cotangents", "vjp")
    with trace_scope():
        tracers = make_tracers(flat_p)
        out = fun(*T.unflatten(p_def, tracers))
        outs, _ = _flat_outputs(out, "vjp")
        if len(outs) != len(cots):
            raise ValueError(f"[vjp] Number of outputs to compute gradients for ({len(outs)}) "
                             f"does not match number of cotangents ({len(cots)}).")
        for o, c in zip(outs, cots):
            if tuple(o.shape) != tuple(c.shape):
                raise ValueError(f"[vjp] Output shape {tuple(o.shape)} does not match "
                                 f"cotangent shape {tuple(c.shape)}.")
        grads = backward(outs, cots, original_values(tracers), "vjp")
        grads = [g if g is not None else _zeros_like(p) for g, p in zip(grads, flat_p)]
    return outs, T.unflatten(p_def, grads)


def jvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple:
    """MLX's `mx.jvp(fun, primals, tangents) -> (outputs, jvps)`, both flat lists."""
    _check_callable(fun, "jvp")
    primals = _as_list(primals, "primals", "jvp")
    tangents = _as_list(tangents, "tangents", "jvp")
    flat_p, p_def = T.flatten(primals)
    flat_t, _ = T.flatten(tangents)
    _check_arrays(flat_p, "Primals", "jvp")
    _check_arrays(flat_t, "Tangents", "jvp")
    if len(flat_p) != len(flat_t):
        raise ValueError(f"[jvp] Number of primals ({len(flat_p)}) does not match number of "
                         f"tangents ({len(flat_t)}).")
    for p, t in zip(flat_p, flat_t):
        if tuple(p.shape) != tuple(t.shape):
            raise ValueError(f"[jvp] Primal shape {tuple(p.shape)} does not match tangent "
                             f"shape {tuple(t.shape)}.")
    with trace_scope():
        tracers = make_tracers(flat_p)
        out = fun(*T.unflatten(p_def, tracers))
        outs, _ = _flat_outputs(out, "jvp")
        tans = forward(outs, original_values(tracers), flat_t, "jvp")
    return outs, tans


def _normalize_argnums(argnums, argnames, op):
    if isinstance(argnames, str):
        argnames = (argnames,)
    elif not isinstance(argnames, (list, tuple)) or not all(isinstance(n, str)
                                                           for n in argnames):
        raise TransformTypeError(f"[{op}] argnames must be a string or a sequence of "
                                 f"strings, got {argnames!r}.")
    argnames = tuple(argnames)
    if argnums is None:
        argnums = () if argnames else (0,)
    elif isinstance(argnums, int) and not isinstance(argnums, bool):
        argnums = (argnums,)
    elif isinstance(argnums, (tuple, list)) and all(
            isinstance(i, int) and not isinstance(i, bool) for i in argnums):
        argnums = tuple(argnums)
    else:
        raise TransformTypeError(f"[{op}] argnums must be an int or a sequence of ints, got "
                                 f"{argnums!r}.")
    for i in argnums:
        if i < 0:
            raise ValueError(f"[{op}] Can't compute the gradient of negative argument "
                             f"index {i}.")
    seen = set()
    for i in argnums:
        if i in seen:
            raise ValueError(f"[{op}] Duplicate argument index {i} is not allowed.")
        seen.add(i)
    if len(set(argnames)) != len(argnames):
        raise ValueError(f"[{op}] Duplicate argnames {argnames} are not allowed.")
    if not argnums and not argnames:
        raise ValueError(f"[{op}] Gradient wrt no argument requested.")
    return argnums, argnames


def value_and_grad(fun: Callable, argnums: int | Sequence[int] | None = None,
                   argnames: str | Sequence[str] = ()) -> Callable:
    """MLX's `mx.value_and_grad`: a function returning `(value, grads)`.

    The function may return a scalar array, or a tuple whose first element is the scalar loss
    (the rest is auxiliary output); `value` is the function's full return value.
    """
    return _make_grad(fun, argnums, argnames, "value_and_grad", with_value=True)


def grad(fun: Callable, argnums: int | Sequence[int] | None = None,
         argnames: str | Sequence[str] = ()) -> Callable:
    """MLX's `mx.grad`: a function returning the gradient of a scalar-valued function.

    Gradients come back in the structure of the differentiated arguments: one (tree) for a
    single argnum, a tuple for several; with `argnames`, `(positional_or_None, {name: grad})`.
    """
    return _make_grad(fun, argnums, argnames, "grad", with_value=False)


def _loss_of(out, op, with_value):
    if with_value:
        if isinstance(out, array):
            loss = out
        elif type(out) is tuple and out and isinstance(out[0], array):
            loss = out[0]
        else:
            what = (f"a tuple whose first element is {type(out[0]).__name__}"
                    if type(out) is tuple and out else type(out).__name__)
            raise ValueError(
                f"[{op}] The return value of the function whose gradient we want to compute "
                f"should be either a scalar array or a tuple with the first value being a "
                f"scalar array; but {what} was returned.")
    else:
        if not isinstance(out, array):
            raise ValueError(
                f"[{op}] The return value of the function whose gradient we want to compute "
                f"should be a scalar array; but {type(out).__name__} was returned.")
        loss = out
    if loss.ndim != 0:
        raise ValueError(
            f"[{op}] The return value of the function whose gradient we want to compute "
            f"should be a scalar array; but an array of shape {tuple(loss.shape)} was "
            f"returned.")
    return loss


def _make_grad(fun, argnums, argnames, op, with_value):
    _check_callable(fun, op)
    argnums, argnames = _normalize_argnums(argnums, argnames, op)
    single = len(argnums) == 1

    def wrapper(*args, **kwargs):
        for i in argnums:
            if i >= len(args):
                raise ValueError(
                    f"[{op}] Can't compute the gradient of argument index {i} because the "
                    f"function is called with only {len(args)} positional arguments.")
        for n in argnames:
            if n not in kwargs:
                raise ValueError(
                    f"[{op}] Can't compute the gradient of keyword argument '{n}' because the "
                    f"function is called with the keyword arguments {sorted(kwargs)}.")
        diff = [args[i] for i in argnums] + [kwargs[n] for n in argnames]
        flat, d_def = T.flatten(diff)
        _check_arrays(flat, "Arguments to differentiate", op)
        with trace_scope():
            tracers = make_tracers(flat)
            it = iter(tracers)
            d = [_fill_in_place(x, it) for x in diff]
            args2 = list(args)
            for k, i in enumerate(argnums):
                args2[i] = d[k]
            kwargs2 = dict(kwargs)
            for k, n in enumerate(argnames):
                kwargs2[n] = d[len(argnums) + k]
            try:
                out = fun(*args2, **kwargs2)
            finally:
                back = {id(t): p for t, p in zip(tracers, flat)}
                for x in d:
                    _restore_in_place(x, back)
            loss = _loss_of(out, op, with_value)
            from ..ops.creation import ones_like
            grads = backward([loss], [ones_like(loss)], original_values(tracers), op)
            grads = [g if g is not None else _zeros_like(p) for g, p in zip(grads, flat)]
        g = T.unflatten(d_def, grads)
        pos, kw = g[: len(argnums)], dict(zip(argnames, g[len(argnums):]))
        pos = (pos[0] if single else tuple(pos)) if pos else None
        result = (pos, kw) if argnames else pos
        return (out, result) if with_value else result

    _copy_metadata(wrapper, fun)
    return wrapper


# MLX hands the function the caller's own lists and dicts with the arrays swapped for tracers,
# and afterwards puts the arrays back wherever a tracer still sits: what the function stored
# in them (`model[1] = mx.array(2.0)`) stays. Tuples cannot change, so they are rebuilt.
def _fill_in_place(tree, it):
    if isinstance(tree, list):
        for i, v in enumerate(tree):
            tree[i] = _fill_in_place(v, it)
        return tree
    if isinstance(tree, dict):
        for k in list(tree):
            tree[k] = _fill_in_place(tree[k], it)
        return tree
    if isinstance(tree, tuple):
        items = [_fill_in_place(v, it) for v in tree]
        return type(tree)(*items) if hasattr(type(tree), "_fields") else type(tree)(items)
    node = T.node_parts(tree)
    if node is not None:  # a dataclass or registered container: rebuilt, not changed
        children, rebuild = node
        return rebuild([_fill_in_place(v, it) for v in children])
    return next(it)


def _restore_in_place(tree, back):
    if isinstance(tree, (list, dict)):
        keys = range(len(tree)) if isinstance(tree, list) else list(tree)
        for k in keys:
            v = tree[k]
            if id(v) in back and isinstance(v, array):
                tree[k] = back[id(v)]
            else:
                _restore_in_place(v, back)
    elif isinstance(tree, tuple):
        for v in tree:
            _restore_in_place(v, back)
    elif T.node_parts(tree) is not None:  # its lists and dicts were filled in place
        for v in T.node_parts(tree)[0]:
            _restore_in_place(v, back)


def _copy_metadata(wrapper, fun):
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(wrapper, attr, getattr(fun, attr))
        except (AttributeError, TypeError):
            pass
    try:
        wrapper.__wrapped__ = fun
    except (AttributeError, TypeError):
        pass
