"""Reverse and forward mode autodiff: vjp, jvp, grad, value_and_grad.

As in MLX: the primals are copied into tracers, the function runs (cheap: arrays are lazy) and
builds a graph, then the graph is walked backwards (vjp) or forwards (jvp) asking each primitive
for its rule. Rules emit ordinary ops, so transforms nest and their results can be compiled.
"""
from __future__ import annotations

import contextlib

from .. import tree as T
from ..array import TraceState, array
from ..graph import all_nodes
from ..prims.base import bind
from ..prims.core import Copy

_COPY = Copy()


@contextlib.contextmanager
def trace_scope():
    """Mark a transformation trace as active (tracers keep their graph while it is)."""
    TraceState.depth += 1
    try:
        yield
    finally:
        TraceState.depth -= 1


def make_tracers(arrays):
    out = []
    for p in arrays:
        t = bind(_COPY, (p,))
        t._tracer = True
        out.append(t)
    return out


def _dependent_tape(outputs, tracers):
    """Arrays reachable from outputs that depend on a tracer, inputs first; and that id set."""
    order = all_nodes(outputs)
    dep = {id(t) for t in tracers}
    tape = []
    for a in order:
        if id(a) in dep:
            continue
        if a._prim is not None and any(id(x) in dep for x in a._inputs):
            dep.add(id(a))
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


def _accumulate(cots, x, v, op):
    if v.shape != x.shape:
        raise ValueError(f"[{op}] A vjp rule returned shape {v.shape} for an input of shape "
                         f"{x.shape}.")
    prev = cots.get(id(x))
    cots[id(x)] = v if prev is None else prev + v


def backward(outputs, cotangents, tracers, op="vjp"):
    """Cotangents of `tracers` given cotangents of `outputs` (None entries contribute nothing)."""
    tape, dep = _dependent_tape(outputs, tracers)
    cots = {}
    for o, c in zip(outputs, cotangents):
        if c is not None:
            _accumulate(cots, o, c, op)
    done = set()
    for a in reversed(tape):
        outs = _node_outputs(a)
        key = _node_key(a)
        if key in done:
            continue
        done.add(key)
        cts = [cots.pop(id(o), None) for o in outs]
        if all(c is None for c in cts) or not a._prim.differentiable:
            continue
        cts = [c if c is not None else _zeros_like(o) for c, o in zip(cts, outs)]
        argnums = [i for i, x in enumerate(a._inputs) if id(x) in dep]
        vjps = a._prim.vjp(list(a._inputs), cts, argnums, list(outs))
        for i, v in zip(argnums, vjps):
            _accumulate(cots, a._inputs[i], v, op)
    return [cots.get(id(t)) for t in tracers]


def forward(outputs, tracers, tangents):
    """Tangents of `outputs` given tangents of `tracers`."""
    tape, _ = _dependent_tape(outputs, tracers)
    tans = {id(t): v for t, v in zip(tracers, tangents)}
    done = set()
    for a in tape:
        outs = _node_outputs(a)
        key = _node_key(a)
        if key in done:
            continue
        done.add(key)
        argnums = [i for i, x in enumerate(a._inputs) if id(x) in tans]
        if not argnums:
            continue
        if not a._prim.differentiable:
            res = [_zeros_like(o) for o in outs]
        else:
            res = a._prim.jvp(list(a._inputs), [tans[id(a._inputs[i])] for i in argnums],
                              argnums)
        for o, t in zip(outs, res):
            tans[id(o)] = t
    return [tans.get(id(o)) if id(o) in tans else _zeros_like(o) for o in outputs]


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


def _check_cotangent_shapes(outs, cots, op, what="cotangent"):
    if len(outs) != len(cots):
        raise ValueError(f"[{op}] The function has {len(outs)} outputs but {len(cots)} "
                         f"{what}s were given.")
    for o, c in zip(outs, cots):
        if tuple(o.shape) != tuple(c.shape):
            raise ValueError(f"[{op}] Output shape {o.shape} does not match {what} shape "
                             f"{c.shape}.")


def vjp(fun, primals, cotangents):
    """MLX's `mx.vjp(fun, primals, cotangents) -> (outputs, vjps)`; primals are a list."""
    if not callable(fun):
        raise TypeError(f"[vjp] Expected a callable, got {type(fun).__name__}.")
    primals, cotangents = list(primals), list(cotangents)
    flat_p, p_def = T.flatten(primals)
    _check_arrays(flat_p, "Primals", "vjp")
    _check_arrays(T.flatten(cotangents)[0], "Cotangents", "vjp")
    with trace_scope():
        tracers = make_tracers(flat_p)
        out = fun(*T.unflatten(p_def, tracers))
        outs, o_def = _flat_outputs(out, "vjp")
        cots = T.flatten(cotangents)[0]
        _check_cotangent_shapes(outs, cots, "vjp")
        grads = backward(outs, cots, tracers, "vjp")
    grads = [g if g is not None else _zeros_like(p) for g, p in zip(grads, flat_p)]
    return outs, T.unflatten(p_def, grads)


def jvp(fun, primals, tangents):
    """MLX's `mx.jvp(fun, primals, tangents) -> (outputs, jvps)`."""
    if not callable(fun):
        raise TypeError(f"[jvp] Expected a callable, got {type(fun).__name__}.")
    flat_p, p_def = T.flatten(list(primals))
    flat_t, _ = T.flatten(list(tangents))
    _check_arrays(flat_p, "Primals", "jvp")
    _check_arrays(flat_t, "Tangents", "jvp")
    if len(flat_p) != len(flat_t):
        raise ValueError(f"[jvp] Got {len(flat_p)} primals but {len(flat_t)} tangents.")
    for p, t in zip(flat_p, flat_t):
        if tuple(p.shape) != tuple(t.shape):
            raise ValueError(f"[jvp] Primal shape {p.shape} does not match tangent shape "
                             f"{t.shape}.")
    with trace_scope():
        tracers = make_tracers(flat_p)
        out = fun(*T.unflatten(p_def, tracers))
        outs, _ = _flat_outputs(out, "jvp")
        tans = forward(outs, tracers, flat_t)
    return outs, tans


def _normalize_argnums(argnums, argnames, op):
    if isinstance(argnames, str):
        argnames = (argnames,)
    argnames = tuple(argnames)
    if argnums is None:
        argnums = () if argnames else (0,)
        single = not argnames
    elif isinstance(argnums, int) and not isinstance(argnums, bool):
        argnums, single = (argnums,), True
    elif isinstance(argnums, (tuple, list)):
        argnums, single = tuple(argnums), False
    else:
        raise ValueError(f"[{op}] argnums must be an int or a tuple of ints, got {argnums!r}.")
    for i in argnums:
        if not isinstance(i, int) or i < 0:
            raise ValueError(f"[{op}] argnums must be non-negative ints, got {argnums!r}.")
    if len(set(argnums)) != len(argnums):
        raise ValueError(f"[{op}] Duplicate argnums {argnums}.")
    return argnums, argnames, single


def value_and_grad(fun, argnums=None, argnames=()):
    """MLX's `mx.value_and_grad`: returns a function computing (value, grads)."""
    return _make_grad(fun, argnums, argnames, "value_and_grad", with_value=True)


def grad(fun, argnums=None, argnames=()):
    """MLX's `mx.grad`: returns a function computing the gradient of a scalar function."""
    return _make_grad(fun, argnums, argnames, "grad", with_value=False)


def _make_grad(fun, argnums, argnames, op, with_value):
    if not callable(fun):
        raise TypeError(f"[{op}] Expected a callable, got {type(fun).__name__}.")
    argnums, argnames, single = _normalize_argnums(argnums, argnames, op)

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
            d = T.unflatten(d_def, tracers)
            args2 = list(args)
            for k, i in enumerate(argnums):
                args2[i] = d[k]
            kwargs2 = dict(kwargs)
            for k, n in enumerate(argnames):
                kwargs2[n] = d[len(argnums) + k]
            out = fun(*args2, **kwargs2)
            loss = out[0] if isinstance(out, (tuple, list)) and out else out
            if not isinstance(loss, array):
                raise ValueError(
                    f"[{op}] The return value of the function whose gradient we want to compute "
                    f"should be a scalar array; but {type(loss).__name__} was returned.")
            if loss.size != 1:
                raise ValueError(
                    f"[{op}] The return value of the function whose gradient we want to compute "
                    f"should be a scalar array; but an array of shape {loss.shape} was "
                    f"returned.")
            from ..ops.creation import ones_like
            grads = backward([loss], [ones_like(loss)], tracers, op)
        grads = [g if g is not None else _zeros_like(p) for g, p in zip(grads, flat)]
        g = T.unflatten(d_def, grads)
        pos, kw = g[: len(argnums)], dict(zip(argnames, g[len(argnums):]))
        if argnames:
            result = (pos[0] if single and pos else (tuple(pos) if pos else None), kw)
        else:
            result = pos[0] if single else tuple(pos)
        return (out, result) if with_value else result

    _copy_metadata(wrapper, fun)
    return wrapper


def _copy_metadata(wrapper, fun):
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(wrapper, attr, getattr(fun, attr))
        except (AttributeError, TypeError):
            pass
