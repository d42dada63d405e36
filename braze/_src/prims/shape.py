"""Primitives: shape family (views, copies and rearrangements; no arithmetic).

Kernels return NumPy views where NumPy can (reshape of contiguous data, transpose, slices,
broadcast, split); the scheduler writes in place only into a buffer nothing else can see
(donation, `scheduler.eval_update`).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..scheduler import CompileTraces, eval_update
from .base import Primitive, bind, broadcast_shapes, lazy_dataclass, ops
from .core import sum_like, sum_to_shape
from .unary import STOP_GRADIENT


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _pshape(shape) -> str:
    return "(" + ",".join(str(s) for s in shape) + ")"


_RESOLVED: dict = {}  # (size, shape with a -1) -> the inferred shape: a model asks the same


def resolve_shape(size: int, shape: tuple, op: str, full_shape=None) -> tuple:
    """`shape` with its one -1 entry inferred from `size`; ValueError naming `op` if the
    request is malformed or does not hold `size` elements."""
    if -1 not in shape:
        if _prod(shape) == size and min(shape, default=0) >= 0:
            return shape  # nothing to infer (most calls: every Unflatten and its evaluation)
    else:
        got = _RESOLVED.get((size, shape))
        if got is not None:
            return got
        got = _infer(size, shape, op, full_shape)
        if len(_RESOLVED) >= 1024:
            _RESOLVED.clear()
        _RESOLVED[(size, shape)] = got
        return got
    return _infer(size, shape, op, full_shape)


def _infer(size: int, shape: tuple, op: str, full_shape) -> tuple:

    def shown():
        return _pshape(full_shape if full_shape is not None else shape)

    n_infer = shape.count(-1)
    if n_infer > 1:
        raise ValueError(f"[{op}] Reshape can only infer one dimension, got shape {shown()}.")
    if min(shape, default=0) < -1:
        raise ValueError(f"[{op}] Cannot reshape array of size {size} into shape {shown()}.")
    if n_infer:
        rest = _prod(s for s in shape if s != -1)
        if rest == 0:
            if size == 0:
                raise ValueError(f"[{op}] Cannot infer the shape of an empty array "
                                 f"for shape {shown()}.")
            raise ValueError(f"[{op}] Cannot reshape array of size {size} into shape "
                             f"{shown()}.")
        if size % rest:
            raise ValueError(f"[{op}] Cannot reshape array of size {size} into shape "
                             f"{shown()}.")
        shape = tuple([size // rest if s == -1 else s for s in shape])
    if _prod(shape) != size:
        raise ValueError(f"[{op}] Cannot reshape array of size {size} into shape {shown()}.")
    return shape


# -- helpers shared by the transform rules ----------------------------------------------------
def _to_front(x, ax):
    """Move the batch axis `ax` of x to position 0."""
    return x if ax == 0 else ops.moveaxis(x, ax, 0)


def _batched(x, ax, n):
    """x with its batch axis first; an unbatched x (ax None) is broadcast to a batch of n."""
    if ax is None:
        return ops.broadcast_to(ops.expand_dims(x, 0), (n,) + tuple(x.shape))
    return _to_front(x, ax)


def batch_size(inputs, axes):
    for x, ax in zip(inputs, axes):
        if ax is not None:
            return x.shape[ax]
    raise ValueError("vmap rule called without a batched input.")


def _tangent(tangents, argnums, i, like):
    """The tangent of input i, or zeros when that input is not being differentiated."""
    return tangents[argnums.index(i)] if i in argnums else ops.zeros_like(like)


def reshape_like(x, like):
    """`x` reshaped to the shape of the array `like`. In a shapeless compile trace this binds
    `ReshapeLike`, which reads like's run-time shape, so a traced gradient of a reshape
    follows new sizes; otherwise a plain reshape."""
    if CompileTraces.dynamic:
        return bind(RESHAPE_LIKE, (x, bind(STOP_GRADIENT, (like,))))
    return ops.reshape(x, like.shape)


class _ReshapeRules:
    """vjp/jvp of the pure reshapes: the cotangent is reshaped back; the tangent is reshaped
    the same way as the primal."""

    pure_reshape = True
    foldable = True

    def vjp(self, primals, cotangents, argnums, outputs):
        return [reshape_like(cotangents[0], primals[0])]

    def jvp(self, primals, tangents, argnums):
        return [bind(self, (tangents[0],))]


@lazy_dataclass
class Reshape(_ReshapeRules, Primitive):
    """Reshape to `shape` *as requested*: one entry may be -1, inferred from the input's size
    each time the output shape is computed (as MLX does), so a shapeless compile replay
    re-infers it."""

    shape: tuple

    def out_shape(self, in_shape):
        shape = self.shape
        if -1 not in shape and _prod(shape) == _prod(in_shape):
            return shape
        return resolve_shape(_prod(in_shape), shape, "reshape")

    def abstract_eval(self, x):
        return [(self.out_shape(x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [x.reshape(self.out_shape(x.shape))]

    def vmap(self, inputs, axes):
        x = _to_front(inputs[0], axes[0])
        return [ops.reshape(x, (x.shape[0],) + tuple(self.shape))], [0]

    def following(self, in_shape, out_shape):
        """For shapeless replay: a primitive whose output follows the input's sizes when
        the requested shape was computed from the traced input's (`x.shape[0] * x.shape[1]`),
        or None when the requested shape already follows (-1) or the dims do not line up."""
        if -1 in self.shape:
            return None
        blocks = reshape_blocks(in_shape, out_shape)
        return ReshapeFollowing(tuple(self.shape), blocks) if blocks else None


def reshape_blocks(in_shape, out_shape):
    """The reshape as blocks (input axes, output dims): each block's input axes hold the
    elements of its output dims, in order (a merge: several axes into one dim; a copy; a
    split: one axis into several dims); None when a size is 0 or the shapes do not pair up."""
    if 0 in in_shape or 0 in out_shape:
        return None
    blocks, i, j, n, m = [], 0, 0, len(in_shape), len(out_shape)
    while i < n or j < m:
        if j < m and out_shape[j] == 1 and (i == n or in_shape[i] != 1):
            blocks.append(((), (1,)))
            j += 1
            continue
        if i < n and in_shape[i] == 1 and (j == m or out_shape[j] != 1):
            blocks.append(((i,), ()))
            i += 1
            continue
        if i == n or j == m:
            return None
        ins, outs, pi, pj = [i], [out_shape[j]], in_shape[i], out_shape[j]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj and i < n:
                ins.append(i)
                pi, i = pi * in_shape[i], i + 1
            elif pj < pi and j < m:
                outs.append(out_shape[j])
                pj, j = pj * out_shape[j], j + 1
            else:
                return None
        blocks.append((tuple(ins), tuple(outs)))
    return tuple(blocks)


@lazy_dataclass
class ReshapeFollowing(Primitive):
    """A reshape whose output dims follow the input (shapeless replay of a Reshape whose
    shape came from the traced sizes, see `Reshape.following`). An input the requested
    `shape` fits gets it, as Reshape would; otherwise a block of input axes merged into one
    dim gives their product, and a split keeps its traced dims (its axes must hold them)."""

    shape: tuple  # as requested at the trace
    blocks: tuple  # ((input axes, traced output dims), ...), see reshape_blocks

    def out_shape(self, in_shape):
        if _prod(self.shape) == _prod(in_shape):
            return self.shape
        out = []
        for axes, dims in self.blocks:
            if len(dims) == 1:
                out.append(_prod([in_shape[a] for a in axes]))
            elif dims:
                if _prod([in_shape[a] for a in axes]) != _prod(dims):
                    raise ValueError(f"[reshape] Cannot split an axis of size "
                                     f"{_prod([in_shape[a] for a in axes])} into {dims} (the "
                                     "traced dims; use -1 for the one that follows).")
                out.extend(dims)
        return tuple(out)

    def abstract_eval(self, x):
        return [(self.out_shape(x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [x.reshape(self.out_shape(x.shape))]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [reshape_like(cotangents[0], primals[0])]

    def jvp(self, primals, tangents, argnums):
        return [bind(self, (tangents[0],))]

    def vmap(self, inputs, axes):
        x = _to_front(inputs[0], axes[0])
        n = x.shape[0]
        shifted = tuple((tuple(a + 1 for a in ax), dims) for ax, dims in self.blocks)
        prim = ReshapeFollowing((n,) + self.shape, (((0,), (n,)),) + shifted)
        return [bind(prim, (x,))], [0]


@lazy_dataclass
class ReshapeLike(Primitive):
    """Inputs (x, like): x reshaped to like's shape (same size). The shape-following vjp of
    Reshape and Flatten in shapeless compile traces; `like` only lends its shape."""

    shape_only_from = 1

    def abstract_eval(self, x, like):
        if _prod(x.shape) != _prod(like.shape):
            raise ValueError(f"[reshape] Cannot reshape array of size {_prod(x.shape)} into "
                             f"shape {_pshape(like.shape)}.")
        return [(tuple(like.shape), x.dtype)]

    def eval_cpu(self, x, like):
        return [np.reshape(x, like.shape)]

    def vjp(self, primals, cotangents, argnums, outputs):
        x, like = primals
        return [reshape_like(cotangents[0], x) if i == 0 else ops.zeros_like(like)
                for i in argnums]

    def jvp(self, primals, tangents, argnums):
        if 0 not in argnums:
            return [ops.zeros_like(bind(self, tuple(primals)))]
        return [bind(self, (tangents[argnums.index(0)], primals[1]))]

    def vmap(self, inputs, axes):
        n = batch_size(inputs, axes)
        x, like = (_batched(a, ax, n) for a, ax in zip(inputs, axes))
        return [bind(self, (x, like))], [0]


RESHAPE_LIKE = ReshapeLike()


@lazy_dataclass
class Flatten(_ReshapeRules, Primitive):
    """Merge axes start_axis..end_axis (both inclusive, non-negative) into one."""

    start_axis: int
    end_axis: int

    def out_shape(self, shape):
        s, e = self.start_axis, self.end_axis
        if not shape:
            return (1,)
        return tuple(shape[:s]) + (_prod(shape[s:e + 1]),) + tuple(shape[e + 1:])

    def abstract_eval(self, x):
        return [(self.out_shape(x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [x.reshape(self.out_shape(x.shape))]

    def vmap(self, inputs, axes):
        x = _to_front(inputs[0], axes[0])
        if x.ndim == 1:  # per-example scalars flatten to (1,)
            return [ops.reshape(x, (x.shape[0], 1))], [0]
        return [bind(Flatten(self.start_axis + 1, self.end_axis + 1), (x,))], [0]


@lazy_dataclass
class Unflatten(_ReshapeRules, Primitive):
    """Split axis `axis` (non-negative) into `shape` as requested: one entry may be -1,
    inferred from the axis' size each time (so a shapeless compile replay re-infers it)."""

    axis: int
    shape: tuple

    def out_shape(self, shape):
        ax = self.axis
        n = shape[ax]
        mid = self.shape
        if -1 in mid or _prod(mid) != n:
            try:
                mid = resolve_shape(n, mid, "unflatten")
            except ValueError:
                raise ValueError(f"[unflatten] Cannot unflatten axis {ax} with size {n} into "
                                 f"shape {_pshape(self.shape)}.") from None
        return tuple(shape[:ax]) + mid + tuple(shape[ax + 1:])

    def abstract_eval(self, x):
        return [(self.out_shape(x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [x.reshape(self.out_shape(x.shape))]

    def vjp(self, primals, cotangents, argnums, outputs):
        # the inverse that follows the cotangent's shape (no baked sizes)
        return [bind(Flatten(self.axis, self.axis + len(self.shape) - 1), (cotangents[0],))]

    def vmap(self, inputs, axes):
        x = _to_front(inputs[0], axes[0])
        return [bind(Unflatten(self.axis + 1, self.shape), (x,))], [0]


@lazy_dataclass
class ExpandDims(_ReshapeRules, Primitive):
    axes: tuple  # non-negative positions in the output, sorted

    def out_shape(self, shape):
        out = list(shape)
        for ax in self.axes:
            out.insert(ax, 1)
        return tuple(out)

    def abstract_eval(self, x):
        return [(self.out_shape(x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [x.reshape(self.out_shape(x.shape))]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [bind(Squeeze(self.axes), (cotangents[0],))]  # follows the cotangent's shape

    def vmap(self, inputs, axes):
        x = _to_front(inputs[0], axes[0])
        return [bind(ExpandDims(tuple(a + 1 for a in self.axes)), (x,))], [0]


@lazy_dataclass
class Squeeze(_ReshapeRules, Primitive):
    axes: tuple  # non-negative, sorted

    def out_shape(self, shape):
        return tuple(s for i, s in enumerate(shape) if i not in self.axes)

    def abstract_eval(self, x):
        return [(self.out_shape(x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [x.reshape(self.out_shape(x.shape))]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [bind(ExpandDims(self.axes), (cotangents[0],))]  # follows the cotangent's shape

    def vmap(self, inputs, axes):
        x = _to_front(inputs[0], axes[0])
        return [bind(Squeeze(tuple(a + 1 for a in self.axes)), (x,))], [0]


def broadcast_axes_shape(shapes, ignore_axes, op="BroadcastAxes"):
    """MLX's BroadcastAxes::output_shape: broadcast `shapes` with the (negative)
    `ignore_axes` left out, then put the first shape's sizes back at those axes."""
    rest = []
    for sh in shapes:
        sh = list(sh)
        if len(sh) < len(ignore_axes):
            raise ValueError(f"[{op}] Shape {tuple(sh)} has fewer dimensions than the "
                             f"ignored axes {ignore_axes}.")
        for ax in sorted(ignore_axes):  # most negative first: positions stay valid
            del sh[len(sh) + ax]
        rest.append(tuple(sh))
    out = list(broadcast_shapes(*rest, op=op))
    first = shapes[0]
    dims = len(ignore_axes) + len(out)
    for ax in sorted(ignore_axes):  # ascending, so each axis lands at its final position
        out.insert(dims + ax, first[ax])
    return tuple(out)


@lazy_dataclass
class BroadcastAxes(Primitive):
    """MLX's BroadcastAxes, with inputs (x, *others): x broadcast against all inputs except
    along `ignore_axes` (negative, sorted), which keep x's sizes. Shapeless compile traces use
    it for matmul's batch axes (the others come in through stop_gradient and only lend their
    shapes); `shape` is the trace-time output shape, for dumps."""

    ignore_axes: tuple
    shape: tuple

    def abstract_eval(self, x, *others):
        shape = broadcast_axes_shape([x.shape] + [o.shape for o in others], self.ignore_axes)
        return [(shape, x.dtype)]

    def eval_cpu(self, x, *others):
        shape = broadcast_axes_shape([x.shape] + [o.shape for o in others], self.ignore_axes)
        return [x.view() if x.shape == shape else np.broadcast_to(x, shape)]

    def vjp(self, primals, cotangents, argnums, outputs):
        ct = cotangents[0]
        return [sum_like(ct, primals[0]) if i == 0 else ops.zeros_like(primals[i])
                for i in argnums]

    def jvp(self, primals, tangents, argnums):
        if 0 in argnums:
            return [bind(self, (tangents[argnums.index(0)],) + tuple(primals[1:]))]
        return [ops.zeros_like(bind(self, tuple(primals)))]

    def vmap(self, inputs, axes):
        rank = max(x.ndim - (ax is not None) for x, ax in zip(inputs, axes))
        moved = []  # batch axis first (size 1 when unbatched), per-example ranks aligned
        for x, ax in zip(inputs, axes):
            if ax is None:
                k = rank - x.ndim + 1
                x = ops.expand_dims(x, tuple(range(k))) if k else x
            else:
                x = ops.moveaxis(x, ax, 0)
                k = rank - (x.ndim - 1)
                x = ops.expand_dims(x, tuple(range(1, 1 + k))) if k else x
            moved.append(x)
        shape = broadcast_axes_shape([m.shape for m in moved], self.ignore_axes)
        return [bind(BroadcastAxes(self.ignore_axes, shape), tuple(moved))], [0]


@lazy_dataclass
class Transpose(Primitive):
    axes: tuple
    foldable = True

    @property
    def swaps_matrix_axes(self) -> bool:
        n = len(self.axes)
        return n >= 2 and self.axes == (*range(n - 2), n - 1, n - 2)

    def abstract_eval(self, x):
        shape = x.shape
        return [(tuple([shape[a] for a in self.axes]), x.dtype)]

    def eval_cpu(self, x):
        return [x.transpose(self.axes)]

    def vjp(self, primals, cotangents, argnums, outputs):
        inv = [0] * len(self.axes)
        for i, a in enumerate(self.axes):
            inv[a] = i
        return [bind(Transpose(tuple(inv)), (cotangents[0],))]

    def jvp(self, primals, tangents, argnums):
        return [bind(self, (tangents[0],))]

    def vmap(self, inputs, axes):
        ax = axes[0]
        perm = (ax,) + tuple(a + (a >= ax) for a in self.axes)
        return [bind(Transpose(perm), (inputs[0],))], [0]


def _py_slices(start, stop, strides):
    out = []
    for s, e, st in zip(start, stop, strides):
        if st < 0 and e < 0:
            e = None  # stop "before index 0" when walking backwards
        out.append(slice(s, e, st))
    return tuple(out)


def _kept_slices(prim) -> tuple:
    """The Python slices of a Slice or SliceUpdate, made once and kept beside its frozen
    fields (a KV cache writes and reads a slice of its buffer every decode step)."""
    sl = prim.__dict__.get("_slices")
    if sl is None:
        sl = prim.__dict__["_slices"] = _py_slices(prim.start, prim.stop, prim.strides)
    return sl


def slice_shape(start, stop, strides):
    return tuple(len(range(s, e, st)) for s, e, st in zip(start, stop, strides))


@lazy_dataclass
class Slice(Primitive):
    """x[start:stop:strides] per axis with normalized (slice.indices) bounds."""
    reinfers_shape = False  # bounds fixed at trace time
    foldable = True

    start: tuple
    stop: tuple
    strides: tuple

    def abstract_eval(self, x):
        return [(slice_shape(self.start, self.stop, self.strides), x.dtype)]

    def eval_cpu(self, x):
        return [x[_kept_slices(self)]]

    def vjp(self, primals, cotangents, argnums, outputs):
        x = primals[0]
        up = SliceUpdate(self.start, self.stop, self.strides)
        return [bind(up, (ops.zeros_like(x), cotangents[0]))]

    def jvp(self, primals, tangents, argnums):
        return [bind(self, (tangents[0],))]

    def vmap(self, inputs, axes):
        x = _to_front(inputs[0], axes[0])
        n = x.shape[0]
        prim = Slice((0,) + self.start, (n,) + self.stop, (1,) + self.strides)
        return [bind(prim, (x,))], [0]


def _relative(slices) -> tuple:
    """Python slices from (start, stop, step) triples that may hold None and negatives."""
    return tuple(slice(*t) for t in slices)


def relative_shape(slices, shape) -> tuple:
    return tuple(len(range(*slice(*t).indices(n))) for t, n in zip(slices, shape))


@lazy_dataclass
class RelativeSlice(Primitive):
    """x[slices] with the bounds as written (None, negatives from the end), resolved against
    the input's shape each time: what basic slicing records in a shapeless compile trace, so
    `x[:, :-1]` follows the input at replay (a Slice's bounds are fixed)."""

    slices: tuple  # per axis (start, stop, step), None allowed

    def abstract_eval(self, x):
        return [(relative_shape(self.slices, x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [x[_relative(self.slices)]]

    def vjp(self, primals, cotangents, argnums, outputs):
        x = primals[0]
        return [bind(RelativeSliceUpdate(self.slices), (ops.zeros_like(x), cotangents[0]))]

    def jvp(self, primals, tangents, argnums):
        return [bind(self, (tangents[0],))]

    def vmap(self, inputs, axes):
        x = _to_front(inputs[0], axes[0])
        return [bind(RelativeSlice(((None, None, None),) + self.slices), (x,))], [0]


class InPlaceUpdate:
    """Mixin of an update primitive: its output is its first input with some elements
    rewritten by `write(buffer, *other inputs)`, in a copy of that input or, when nothing
    else can see it, in its own buffer (the scheduler's `eval_update`; MLX donates it too)."""

    node_eval = True
    foldable = True  # its `eval_cpu` writes into a copy

    def eval_cpu(self, x, *rest):
        out = np.array(x, copy=True)
        self.write(out, *rest)
        return [out]

    def eval_node(self, node):
        return eval_update(self, node)


@lazy_dataclass
class RelativeSliceUpdate(InPlaceUpdate, Primitive):
    """A copy of x with x[slices] = update, the bounds as RelativeSlice keeps them."""

    slices: tuple

    def abstract_eval(self, x, update):
        return [(x.shape, x.dtype)]

    def write(self, out, update):
        out[_relative(self.slices)] = update

    def vjp(self, primals, cotangents, argnums, outputs):
        x, update = primals
        ct = cotangents[0]
        return [bind(self, (ct, ops.zeros_like(update))) if i == 0
                else bind(RelativeSlice(self.slices), (ct,)) for i in argnums]

    def jvp(self, primals, tangents, argnums):
        x, update = primals
        return [bind(self, (_tangent(tangents, argnums, 0, x),
                            _tangent(tangents, argnums, 1, update)))]

    def vmap(self, inputs, axes):
        n = batch_size(inputs, axes)
        x, update = (_batched(a, ax, n) for a, ax in zip(inputs, axes))
        prim = RelativeSliceUpdate(((None, None, None),) + self.slices)
        return [bind(prim, (x, update))], [0]


@lazy_dataclass
class SliceUpdate(InPlaceUpdate, Primitive):
    """A copy of x with x[start:stop:strides] = update (update already has the slice's shape)."""

    start: tuple
    stop: tuple
    strides: tuple

    def abstract_eval(self, x, update):
        return [(x.shape, x.dtype)]

    def write(self, out, update):
        out[_kept_slices(self)] = update

    def vjp(self, primals, cotangents, argnums, outputs):
        x, update = primals
        ct = cotangents[0]
        out = []
        for i in argnums:
            if i == 0:
                out.append(bind(self, (ct, ops.zeros_like(update))))
            else:
                out.append(bind(Slice(self.start, self.stop, self.strides), (ct,)))
        return out

    def jvp(self, primals, tangents, argnums):
        x, update = primals
        return [bind(self, (_tangent(tangents, argnums, 0, x),
                            _tangent(tangents, argnums, 1, update)))]

    def vmap(self, inputs, axes):
        n = batch_size(inputs, axes)
        x, update = (_batched(a, ax, n) for a, ax in zip(inputs, axes))
        prim = SliceUpdate((0,) + self.start, (n,) + self.stop, (1,) + self.strides)
        return [bind(prim, (x, update))], [0]


def _dynamic_starts(x_shape, starts, axes, sizes):
    """Start offsets clamped so the window lies inside the array (MLX leaves this undefined)."""
    starts = np.asarray(starts).reshape(-1)
    out = []
    for i, (ax, sz) in enumerate(zip(axes, sizes)):
        n = x_shape[ax]
        s = int(starts[i]) if i < starts.size else 0
        if s < 0:
            s += n
        out.append(min(max(s, 0), max(n - sz, 0)))
    return out


@lazy_dataclass
class DynamicSlice(Primitive):
    """MLX's slice(a, start_indices, axes, slice_size): start offsets come from an array."""
    reinfers_shape = False  # slice sizes fixed at trace time

    axes: tuple
    slice_size: tuple

    def abstract_eval(self, x, starts):
        shape = list(x.shape)
        for ax, sz in zip(self.axes, self.slice_size):
            shape[ax] = sz
        return [(tuple(shape), x.dtype)]

    def eval_cpu(self, x, starts):
        st = _dynamic_starts(x.shape, starts, self.axes, self.slice_size)
        idx = [slice(None)] * x.ndim
        for ax, s, sz in zip(self.axes, st, self.slice_size):
            idx[ax] = slice(s, s + sz)
        return [x[tuple(idx)]]

    def vjp(self, primals, cotangents, argnums, outputs):
        x, starts = primals
        out = []
        for i in argnums:
            if i == 0:
                up = DynamicSliceUpdate(self.axes)
                out.append(bind(up, (ops.zeros_like(x), cotangents[0], starts)))
            else:  # integer start offsets have no derivative
                out.append(ops.zeros_like(starts))
        return out

    def jvp(self, primals, tangents, argnums):
        x, starts = primals
        return [bind(self, (_tangent(tangents, argnums, 0, x), starts))]

    def vmap(self, inputs, axes):
        x, starts = inputs
        ax_x, ax_s = axes
        if ax_s is None:
            x = _to_front(x, ax_x)
            prim = DynamicSlice(tuple(a + 1 for a in self.axes), self.slice_size)
            return [bind(prim, (x, starts))], [0]
        # per-example offsets: one Gather whose index along each sliced axis is that
        # example's start (Gather clamps windows into range exactly as DynamicSlice does)
        from .indexing import Gather
        starts = _to_front(starts, ax_s)  # (n, len(axes))
        n = starts.shape[0]
        idx = [ops.reshape(bind(Slice((0, k), (n, k + 1), (1, 1)), (starts,)), (n,))
               for k in range(len(self.axes))]
        if ax_x is None:
            sizes = list(x.shape)
            for a, sz in zip(self.axes, self.slice_size):
                sizes[a] = sz
            return [bind(Gather(self.axes, tuple(sizes)), (x, *idx))], [0]
        x = _to_front(x, ax_x)
        sizes = [1] + list(x.shape[1:])
        for a, sz in zip(self.axes, self.slice_size):
            sizes[a + 1] = sz
        rows = ops.arange(n, dtype=idx[0].dtype) if idx else ops.arange(n)
        g = bind(Gather((0,) + tuple(a + 1 for a in self.axes), tuple(sizes)), (x, rows, *idx))
        return [ops.reshape(g, (n,) + tuple(sizes[1:]))], [0]


@lazy_dataclass
class DynamicSliceUpdate(InPlaceUpdate, Primitive):
    axes: tuple

    def abstract_eval(self, x, update, starts):
        return [(x.shape, x.dtype)]

    def write(self, out, update, starts):
        sizes = [update.shape[ax] for ax in self.axes]
        st = _dynamic_starts(out.shape, starts, self.axes, sizes)
        idx = [slice(None)] * out.ndim
        for ax, s, sz in zip(self.axes, st, sizes):
            idx[ax] = slice(s, s + sz)
        out[tuple(idx)] = update

    def vjp(self, primals, cotangents, argnums, outputs):
        x, update, starts = primals
        ct = cotangents[0]
        out = []
        for i in argnums:
            if i == 0:
                out.append(bind(self, (ct, ops.zeros_like(update), starts)))
            elif i == 1:
                sizes = tuple(update.shape[a] for a in self.axes)
                g = bind(DynamicSlice(self.axes, sizes), (ct, starts))
                out.append(sum_to_shape(g, update.shape))
            else:
                out.append(ops.zeros_like(starts))
        return out

    def jvp(self, primals, tangents, argnums):
        x, update, starts = primals
        return [bind(self, (_tangent(tangents, argnums, 0, x),
                            _tangent(tangents, argnums, 1, update), starts))]

    def vmap(self, inputs, axes):
        x, update, starts = inputs
        ax_x, ax_u, ax_s = axes
        n = batch_size(inputs, axes)
        x = _batched(x, ax_x, n)
        # the update gets the batch axis too, and its broadcast (size-1) axes are filled in
        # where the update does not cover all of x (those are not in `axes`)
        u = _batched(update, ax_u, n)
        full = list(x.shape)
        for a in self.axes:
            full[a + 1] = u.shape[a + 1]
        u = ops.broadcast_to(u, tuple(full))
        if ax_s is None:
            return [bind(DynamicSliceUpdate(tuple(a + 1 for a in self.axes)),
                         (x, u, starts))], [0]
        from .indexing import Scatter
        starts = _to_front(starts, ax_s)
        idx = [ops.reshape(bind(Slice((0, k), (n, k + 1), (1, 1)), (starts,)), (n,))
               for k in range(len(self.axes))]
        rows = ops.arange(n, dtype=idx[0].dtype) if idx else ops.arange(n)
        u = ops.expand_dims(u, 1)  # (n, 1, *slice): one index per example
        prim = Scatter("none", (0,) + tuple(a + 1 for a in self.axes))
        return [bind(prim, (x, rows, *idx, u))], [0]


@lazy_dataclass
class Concatenate(Primitive):
    axis: int
    foldable = True

    def abstract_eval(self, *xs):
        shape = list(xs[0].shape)
        shape[self.axis] = sum(x.shape[self.axis] for x in xs)
        return [(tuple(shape), xs[0].dtype)]

    def eval_cpu(self, *xs):
        return [np.concatenate(xs, axis=self.axis)]

    def vjp(self, primals, cotangents, argnums, outputs):
        ct = cotangents[0]
        offsets = [0]
        for x in primals:
            offsets.append(offsets[-1] + x.shape[self.axis])
        out = []
        for i in argnums:
            start = [0] * ct.ndim
            stop = list(ct.shape)
            start[self.axis], stop[self.axis] = offsets[i], offsets[i + 1]
            out.append(bind(Slice(tuple(start), tuple(stop), (1,) * ct.ndim), (ct,)))
        return out

    def jvp(self, primals, tangents, argnums):
        ts = [_tangent(tangents, argnums, i, x) for i, x in enumerate(primals)]
        return [bind(self, tuple(ts))]

    def vmap(self, inputs, axes):
        n = batch_size(inputs, axes)
        xs = [_batched(x, ax, n) for x, ax in zip(inputs, axes)]
        return [bind(Concatenate(self.axis + 1), tuple(xs))], [0]


@lazy_dataclass
class Pad(Primitive):
    """Constant padding; inputs (x, value) with value a 0-d array of x's dtype."""
    reinfers_shape = False  # as in MLX: widths chosen for the traced sizes

    axes: tuple
    low_pad: tuple
    high_pad: tuple

    def abstract_eval(self, x, value):
        shape = list(x.shape)
        for ax, lo, hi in zip(self.axes, self.low_pad, self.high_pad):
            shape[ax] += lo + hi
        return [(tuple(shape), x.dtype)]

    def eval_cpu(self, x, value):
        shape = list(x.shape)
        idx = [slice(None)] * x.ndim
        for ax, lo, hi in zip(self.axes, self.low_pad, self.high_pad):
            shape[ax] += lo + hi
            idx[ax] = slice(lo, lo + x.shape[ax])
        out = np.full(shape, np.asarray(value).reshape(()), dtype=x.dtype)
        out[tuple(idx)] = x
        return [out]

    def _interior(self, ct, x_shape, lead=0):
        start = [0] * ct.ndim
        stop = list(ct.shape)
        for ax, lo in zip(self.axes, self.low_pad):
            start[ax + lead] = lo
            stop[ax + lead] = lo + x_shape[ax]
        return bind(Slice(tuple(start), tuple(stop), (1,) * ct.ndim), (ct,))

    def vjp(self, primals, cotangents, argnums, outputs):
        x, value = primals
        ct = cotangents[0]
        out = []
        for i in argnums:
            inner = self._interior(ct, x.shape)
            if i == 0:
                out.append(inner)
            else:  # every padded position reads the value
                total = ops.sum(ct) - ops.sum(inner)
                out.append(ops.reshape(total, value.shape))
        return out

    def jvp(self, primals, tangents, argnums):
        x, value = primals
        return [bind(self, (_tangent(tangents, argnums, 0, x),
                            _tangent(tangents, argnums, 1, value)))]

    def vmap(self, inputs, axes):
        x, value = inputs
        ax_x, ax_v = axes
        n = batch_size(inputs, axes)
        x = _batched(x, ax_x, n)
        prim = Pad(tuple(a + 1 for a in self.axes), self.low_pad, self.high_pad)
        if ax_v is None:
            return [bind(prim, (x, value))], [0]
        # a value per example: pad with zeros, then fill the border from the batched value
        # (deliberately beyond MLX, whose Pad::vmap refuses a batched value with a ValueError;
        # tests/test_transforms_shape.py checks this against per-example results)
        zero = ops.zeros((), x.dtype)
        padded = bind(prim, (x, zero))
        inside = bind(prim, (ops.ones(x.shape, D.bool_), ops.zeros((), D.bool_)))
        v = ops.reshape(_to_front(value, ax_v), (n,) + (1,) * (x.ndim - 1))
        return [ops.where(inside, padded, v)], [0]


@lazy_dataclass
class Split(Primitive):
    """Split along `axis` at the (sorted, clipped) `indices`; one output per piece."""
    reinfers_shape = False  # split points fixed at trace time

    indices: tuple
    axis: int

    def abstract_eval(self, x):
        n = x.shape[self.axis]
        bounds = (0,) + self.indices + (n,)
        outs = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            shape = list(x.shape)
            shape[self.axis] = max(0, min(hi, n) - min(lo, n))
            outs.append((tuple(shape), x.dtype))
        return outs

    def eval_cpu(self, x):
        return list(np.split(x, list(self.indices), axis=self.axis))

    def vjp(self, primals, cotangents, argnums, outputs):
        return [bind(Concatenate(self.axis), tuple(cotangents))
                if len(cotangents) > 1 else cotangents[0]]

    def jvp(self, primals, tangents, argnums):
        outs = bind(self, (tangents[0],))
        return outs if isinstance(outs, list) else [outs]

    def vmap(self, inputs, axes):
        x = _to_front(inputs[0], axes[0])
        outs = bind(Split(self.indices, self.axis + 1), (x,))
        outs = outs if isinstance(outs, list) else [outs]
        return outs, [0] * len(outs)


@lazy_dataclass
class View(Primitive):
    """Reinterpret the bytes as `dtype`; the last axis scales by the itemsize ratio."""
    reinfers_shape = False  # as in MLX

    dtype: D.Dtype

    def abstract_eval(self, x):
        shape = list(x.shape)
        if shape and x.dtype.size != self.dtype.size:
            shape[-1] = shape[-1] * x.dtype.size // self.dtype.size
        return [(tuple(shape), self.dtype)]

    def eval_cpu(self, x):
        if x.ndim == 0:  # (np.ascontiguousarray would make it 1-d)
            return [x.reshape(1).view(self.dtype.np_dtype).reshape(())]
        return [np.ascontiguousarray(x).view(self.dtype.np_dtype)]

    differentiable = False  # a bit reinterpretation has no derivative

    def vmap(self, inputs, axes):
        x, ax = inputs[0], axes[0]
        if x.dtype.size != self.dtype.size and ax == x.ndim - 1:
            x, ax = _to_front(x, ax), 0  # the last axis is the one that rescales
        return [bind(self, (x,))], [ax]


def strided_index(shape, strides, offset) -> np.ndarray:
    """The flat input position read by every output element of as_strided (int64)."""
    idx = np.full(shape, offset, dtype=np.int64)
    for ax, (n, s) in enumerate(zip(shape, strides)):
        idx += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(shape) - ax - 1))
    return idx


@lazy_dataclass
class AsStrided(Primitive):
    """A strided read of a flat (1-D) input: out[i...] = x[offset + sum(i_k * strides_k)].
    A copy, not a view: buffers are never shared with overlapping strides."""
    reinfers_shape = False  # shape and strides fixed at trace time

    shape: tuple
    strides: tuple
    offset: int

    def abstract_eval(self, x):
        return [(self.shape, x.dtype)]

    def eval_cpu(self, x):
        return [x[strided_index(self.shape, self.strides, self.offset)]]

    def vjp(self, primals, cotangents, argnums, outputs):
        x, g = primals[0], cotangents[0]
        idx = ops.array(strided_index(self.shape, self.strides, self.offset).reshape(-1))
        flat = ops.reshape(g, (-1,))
        return [ops.zeros_like(x).at[idx].add(flat)]

    def jvp(self, primals, tangents, argnums):
        return [bind(self, (tangents[0],))]

    def vmap(self, inputs, axes):
        x, ax = inputs[0], axes[0]
        x = _to_front(x, ax)
        b, n = x.shape[0], x.shape[1]
        prim = AsStrided((b,) + self.shape, (n,) + self.strides, self.offset)
        return [bind(prim, (ops.reshape(x, (-1,)),))], [0]
