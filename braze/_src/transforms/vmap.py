"""vmap: trace the function on unbatched placeholders, then replay its graph with each
primitive's `vmap` rule.

A rule has the signature `vmap(inputs, axes) -> (outputs, out_axes)`, where an axis is the
position of the batch dimension in that array, or None when the array is not batched.

`in_axes` and `out_axes` are prefix trees: an int or None covers a whole subtree; a list or
tuple matches a list or tuple of the same length (either kind for either); a dict matches a
dict with the same keys. At the top level `in_axes` is matched against the tuple of positional
arguments (a dict there describes a single argument, and a one-entry `out_axes` a single
output, as in MLX). Non-array leaves are allowed where their axis is None (they are passed through).
"""
from __future__ import annotations

from typing import Any, Callable

from .. import tree as T
from ..array import array, node
from ..ops._helpers import AxisError
from ..prims.base import bind
from .autodiff import (
    TransformTypeError,
    _dependent_tape,
    _node_outputs,
    original_values,
    trace_scope,
    walked_inputs,
)

# An axis out of range: MLX raises IndexError, braze's contract says ValueError; it is both.
VmapAxisError = AxisError


def _placeholder(x: array, axis: int) -> array:
    """An array with x's per-example shape and no data: evaluating it is an error."""
    return node(x.shape[:axis] + x.shape[axis + 1:], x.dtype, None, (), True)


def _is_axis(a):
    return a is None or isinstance(a, int)


def _prefix_leaves(prefix, tree, op, what, path="", out=None):
    """For each leaf of `tree`, the leaf of `prefix` that covers it."""
    if out is None:
        out = []
    if _is_axis(prefix):
        out.extend([prefix] * len(T.flatten(tree)[0]))
        return out
    where = f" at {path}" if path else ""
    if isinstance(prefix, (list, tuple)) and isinstance(tree, (list, tuple)):
        if len(prefix) != len(tree):
            raise ValueError(f"[{op}] {what}{where} has {len(prefix)} entries but the value it "
                             f"describes has {len(tree)}.")
        for i, (p, t) in enumerate(zip(prefix, tree)):
            _prefix_leaves(p, t, op, what, f"{path}[{i}]", out)
        return out
    if isinstance(prefix, dict) and isinstance(tree, dict):
        if set(prefix) != set(tree):
            raise ValueError(f"[{op}] {what}{where} has keys {sorted(map(str, prefix))} but the "
                             f"value it describes has keys {sorted(map(str, tree))}.")
        for k in tree:
            _prefix_leaves(prefix[k], tree[k], op, what, f"{path}[{k!r}]", out)
        return out
    if isinstance(prefix, (list, tuple, dict)):
        raise ValueError(f"[{op}] {what}{where} is a {type(prefix).__name__} but the value it "
                         f"describes is a {type(tree).__name__}.")
    raise TransformTypeError(f"[{op}] {what} entries must be ints or None, got "
                             f"{type(prefix).__name__} ({prefix!r}).")


def _check_axis(ax, x, op):
    if ax is None:
        return None
    if not isinstance(x, array):
        raise ValueError(f"[{op}] Only arrays can be vectorized; got {type(x).__name__} with "
                         f"in_axes {ax}.")
    if not -x.ndim <= ax < x.ndim:
        raise VmapAxisError(f"[{op}] Invalid vectorization axis {ax} for array with shape "
                            f"{tuple(x.shape)}.")
    return ax % x.ndim


def replay(outputs, placeholders, inputs, axes, stop=()):
    """Rebuild `outputs` from the batched `inputs`; returns [(array, batch axis or None)].
    The walk from the outputs does not look behind the arrays `stop`."""
    tape, _ = _dependent_tape(outputs, placeholders, "vmap", stop)
    mapped = {id(p): (x, ax) for p, x, ax in zip(placeholders, inputs, axes)}
    for a in tape:
        outs = _node_outputs(a)
        n_walk = len(walked_inputs(a, "vmap"))
        ins, in_axes = [], []
        for k, x in enumerate(a._inputs):
            v, ax = mapped.get(id(x), (x, None)) if k < n_walk else (x, None)
            ins.append(v)
            in_axes.append(ax)
        if all(ax is None for ax in in_axes):  # a rule upstream returned unbatched values
            new = bind(a._prim, tuple(ins))
            new, new_axes = (new if isinstance(new, list) else [new]), [None] * len(outs)
        else:
            new, new_axes = a._prim.vmap(ins, in_axes)
        if len(new) != len(outs) or len(new_axes) != len(outs):
            raise ValueError(f"[vmap] The vmap rule of {a._prim.name} returned {len(new)} "
                             f"outputs and {len(new_axes)} axes for {len(outs)} outputs.")
        for o, n, ax in zip(outs, new, new_axes):
            mapped[id(o)] = (n, ax)
    return [mapped.get(id(o), (o, None)) for o in outputs]


def expanded_vmap(fun, inputs, axes):
    """A vmap rule for a primitive equal to `fun(inputs)`, a graph of other primitives: the
    graph is built on per-example placeholders and replayed with their own rules."""
    with trace_scope():
        holders = [_placeholder(x, ax) if ax is not None else x for x, ax in zip(inputs, axes)]
        outs = fun(holders)
        batched = [k for k, ax in enumerate(axes) if ax is not None]
        results = replay(outs, [holders[k] for k in batched], [inputs[k] for k in batched],
                         [axes[k] for k in batched], stop=inputs)
    return [v for v, _ in results], [ax for _, ax in results]


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0) -> Callable:
    """MLX's `mx.vmap(fun, in_axes=0, out_axes=0)`.

    braze also accepts `None` in `out_axes` for outputs that do not depend on a vectorized
    input (they are returned unbatched), and lists as well as tuples in the axis trees.
    """
    if not callable(fun):
        raise TransformTypeError(f"[vmap] Expected a callable, got {type(fun).__name__}.")
    for spec, what in ((in_axes, "in_axes"), (out_axes, "out_axes")):
        if not isinstance(spec, (list, tuple, dict)) and not _is_axis(spec):
            raise TransformTypeError(f"[vmap] {what} must be an int, None, or a tree of them; "
                                     f"got {spec!r}.")
    def wrapper(*args, **kwargs):
        op = "vmap"
        if kwargs:
            raise TypeError("[vmap] Keyword arguments are not supported.")
        args = list(args)
        # a dict describes the one positional argument (MLX: as the tuple `(in_axes,)`)
        spec = [in_axes] if isinstance(in_axes, dict) else (
            list(in_axes) if isinstance(in_axes, (list, tuple)) else in_axes)
        if isinstance(spec, list) and len(spec) != len(args):
            raise ValueError(f"[vmap] in_axes has {len(spec)} entries but the function is "
                             f"called with {len(args)} positional arguments.")
        flat, a_def = T.flatten(args)
        axes = _prefix_leaves(spec, args, op, "in_axes")
        axes = [_check_axis(ax, x, op) for ax, x in zip(axes, flat)]
        sizes = [x.shape[ax] for x, ax in zip(flat, axes) if ax is not None]
        if not sizes:
            raise ValueError("[vmap] At least one of in_axes must be non-None (no input is "
                             "vectorized).")
        n = sizes[0]
        for s in sizes:
            if s != n:
                raise ValueError(f"[vmap] Inconsistent axis sizes: {n} and {s}.")
        with trace_scope():
            holders = [_placeholder(x, ax) if ax is not None else x for x, ax in zip(flat, axes)]
            out = fun(*T.unflatten(a_def, holders))
            outs, o_def = T.flatten(out)
            for o in outs:
                if not isinstance(o, array):
                    raise ValueError(f"[vmap] The function must return arrays (or trees of "
                                     f"arrays), got {type(o).__name__}.")
            # a placeholder the function updated in place (`a[idx] = v`) holds the new value
            # now; its old one, which the graph reads, moved to another object
            batched = original_values([holders[i] for i, ax in enumerate(axes) if ax is not None])
            real = [flat[i] for i, ax in enumerate(axes) if ax is not None]
            real_axes = [ax for ax in axes if ax is not None]
            results = replay(outs, batched, real, real_axes)
            o_spec = list(out_axes) if isinstance(out_axes, tuple) else out_axes
            if isinstance(out, array) and isinstance(o_spec, list) and len(o_spec) == 1:
                o_spec = o_spec[0]  # MLX: one output is the 1-tuple its axes describe
            if isinstance(out, tuple) and isinstance(o_spec, list):
                out_cmp = list(out)
            else:
                out_cmp = out
            o_axes = _prefix_leaves(o_spec, out_cmp, op, "out_axes")
            final = [_place_batch_axis(v, ax, want, n, op)
                     for (v, ax), want in zip(results, o_axes)]
        return T.unflatten(o_def, final)

    try:
        wrapper.__name__ = getattr(fun, "__name__", "vmap")
        wrapper.__doc__ = getattr(fun, "__doc__", None)
        wrapper.__wrapped__ = fun
    except (AttributeError, TypeError):
        pass
    return wrapper


def _place_batch_axis(v, ax, want, n, op):
    from ..prims.base import ops
    if want is None:
        if ax is not None:
            raise ValueError("[vmap] An output with out_axes None depends on a vectorized "
                             "input.")
        return v
    ndim = v.ndim + (0 if ax is not None else 1)
    if not -ndim <= want < ndim:
        raise VmapAxisError(f"[{op}] Invalid output vectorization axis {want} for an output "
                            f"with {ndim} dimensions.")
    want %= ndim
    if ax is None:  # not batched: every example gets the same value
        v = ops.expand_dims(v, want)
        shape = list(v.shape)
        shape[want] = n
        return ops.broadcast_to(v, tuple(shape))
    return v if ax == want else ops.moveaxis(v, ax, want)
