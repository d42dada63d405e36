"""vmap: trace the function on unbatched placeholders, then replay its graph with each
primitive's `vmap` rule.

A rule has the signature `vmap(inputs, axes) -> (outputs, out_axes)`, where an axis is the
position of the batch dimension in that array, or None when the array is not batched.
"""
from __future__ import annotations

from .. import tree as T
from ..array import array
from .autodiff import _dependent_tape, _node_key, _node_outputs, trace_scope


def _placeholder(x: array, axis: int) -> array:
    """An array with x's per-example shape and no data: evaluating it is an error."""
    shape = x.shape[:axis] + x.shape[axis + 1:]
    p = array._node(shape, x.dtype, None, ())
    p._tracer = True
    return p


def _prefix_leaves(prefix, tree, op, what):
    """For each leaf of `tree`, the leaf of `prefix` that covers it (MLX's in_axes rules)."""
    if prefix is None or (isinstance(prefix, int) and not isinstance(prefix, bool)):
        return [prefix] * len(T.flatten(tree)[0])
    if isinstance(prefix, (list, tuple)) and isinstance(tree, (list, tuple)):
        if len(prefix) != len(tree):
            raise ValueError(f"[{op}] {what} has {len(prefix)} entries but the function has "
                             f"{len(tree)} {'arguments' if what == 'in_axes' else 'outputs'}.")
        return [a for p, t in zip(prefix, tree) for a in _prefix_leaves(p, t, op, what)]
    if isinstance(prefix, dict) and isinstance(tree, dict):
        if set(prefix) != set(tree):
            raise ValueError(f"[{op}] {what} keys {sorted(prefix)} do not match {sorted(tree)}.")
        return [a for k in tree for a in _prefix_leaves(prefix[k], tree[k], op, what)]
    raise ValueError(f"[{op}] {what} must be an int, None, or a tree matching the "
                     f"{'arguments' if what == 'in_axes' else 'outputs'}; got {prefix!r}.")


def _check_axis(ax, x, op):
    if ax is None:
        return None
    if not isinstance(x, array):
        raise ValueError(f"[{op}] Only arrays can be vectorized, got {type(x).__name__}.")
    if not -x.ndim <= ax < x.ndim:
        raise ValueError(f"[{op}] Invalid vectorization axis {ax} for array with shape "
                         f"{x.shape}.")
    return ax % x.ndim


def replay(outputs, placeholders, inputs, axes):
    """Rebuild `outputs` from the batched `inputs`; returns [(array, batch axis or None)]."""
    tape, _ = _dependent_tape(outputs, placeholders)
    mapped = {id(p): (x, ax) for p, x, ax in zip(placeholders, inputs, axes)}
    done = set()
    for a in tape:
        outs = _node_outputs(a)
        key = _node_key(a)
        if key in done:
            continue
        done.add(key)
        ins, in_axes = [], []
        for x in a._inputs:
            v, ax = mapped.get(id(x), (x, None))
            ins.append(v)
            in_axes.append(ax)
        new, new_axes = a._prim.vmap(ins, in_axes)
        for o, n, ax in zip(outs, new, new_axes):
            mapped[id(o)] = (n, ax)
    return [mapped.get(id(o), (o, None)) for o in outputs]


def vmap(fun, in_axes=0, out_axes=0):
    """MLX's `mx.vmap(fun, in_axes=0, out_axes=0)`."""
    if not callable(fun):
        raise TypeError(f"[vmap] Expected a callable, got {type(fun).__name__}.")

    def wrapper(*args):
        op = "vmap"
        spec = in_axes if not isinstance(in_axes, (list, tuple)) else tuple(in_axes)
        flat, a_def = T.flatten(list(args))
        axes = _prefix_leaves(spec if not isinstance(spec, tuple) else list(spec),
                              list(args), op, "in_axes")
        axes = [_check_axis(ax, x, op) for ax, x in zip(axes, flat)]
        sizes = {x.shape[ax] for x, ax in zip(flat, axes) if ax is not None}
        if not sizes:
            raise ValueError("[vmap] At least one input must be vectorized (in_axes all None).")
        if len(sizes) > 1:
            s = sorted(sizes)
            raise ValueError(f"[vmap] Inconsistent axis sizes: {s[0]} and {s[1]}.")
        n = sizes.pop()
        with trace_scope():
            holders = [_placeholder(x, ax) if ax is not None else x for x, ax in zip(flat, axes)]
            out = fun(*T.unflatten(a_def, holders))
            outs, o_def = T.flatten(out)
            for o in outs:
                if not isinstance(o, array):
                    raise ValueError(f"[vmap] The function must return arrays (or trees of "
                                     f"arrays), got {type(o).__name__}.")
            batched = [holders[i] for i, ax in enumerate(axes) if ax is not None]
            real = [flat[i] for i, ax in enumerate(axes) if ax is not None]
            real_axes = [ax for ax in axes if ax is not None]
            results = replay(outs, batched, real, real_axes)
        o_spec = out_axes if not isinstance(out_axes, tuple) else list(out_axes)
        o_axes = _prefix_leaves(o_spec, out, op, "out_axes") if isinstance(
            o_spec, (list, dict)) else [o_spec] * len(outs)
        final = [_place_batch_axis(v, ax, want, n, op) for (v, ax), want in zip(results, o_axes)]
        return T.unflatten(o_def, final)

    return wrapper


def _place_batch_axis(v, ax, want, n, op):
    from ..prims.base import ops
    if want is None:
        if ax is not None:
            raise ValueError("[vmap] An output with out_axes=None depends on a vectorized input.")
        return v
    ndim = v.ndim + (0 if ax is not None else 1)
    if not -ndim <= want < ndim:
        raise ValueError(f"[vmap] Invalid out_axes {want} for an output with {ndim} dimensions.")
    want %= ndim
    if ax is None:  # not batched: every example gets the same value
        v = ops.expand_dims(v, want)
        shape = list(v.shape)
        shape[want] = n
        return ops.broadcast_to(v, tuple(shape))
    return v if ax == want else ops.moveaxis(v, ax, want)
