"""Public ops: shape (reshape, transpose, broadcast, concatenate, split, pad, ...).

Identity requests (reshape to the same shape, broadcast to the same shape, a full slice) return
the input itself, as MLX does, so they add no node to the graph.
"""
from __future__ import annotations

import builtins
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import dtypes as D
from ..array import LIST_STACK, TraceState, array, view_of
from ..memory import check_allocation
from ..prims.base import bind, bind_avals
from ..prims.core import Broadcast
from ..prims.shape import (
    AsStrided,
    Concatenate,
    ExpandDims,
    Flatten,
    Pad,
    Reshape,
    Slice,
    Split,
    Squeeze,
    Transpose,
    Unflatten,
    View,
    resolve_shape,
)
from ._helpers import (
    AxisError,
    as_array,
    astype,
    attach_methods,
    broadcast_arrays_,
    check_dims,
    normalize_axis,
)
from ._helpers import broadcast_shapes as _bshapes
from ._typing import ArrayLike, Axes, Dtype, StreamOrDevice

__all__ = [
    "reshape", "flatten", "unflatten", "squeeze", "expand_dims", "transpose", "permute_dims",
    "swapaxes", "moveaxis", "broadcast_to", "broadcast_arrays", "broadcast_shapes",
    "atleast_1d", "atleast_2d", "atleast_3d", "concatenate", "concat", "stack", "unstack",
    "split", "tile", "repeat", "pad", "flip", "roll", "diag", "diagonal", "trace", "view",
    "diff", "matrix_transpose", "contiguous", "as_strided",
]


def _is_int(v) -> bool:
    if type(v) is int:  # the common case first: every op's axes and sizes come through here
        return True
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _int_tuple(seq, op: str, what: str) -> tuple:
    """An int or a sequence of ints -> tuple of Python ints; TypeError naming the value."""
    if type(seq) is tuple:
        for s in seq:
            if type(s) is not int:
                break
        else:  # already a tuple of Python ints
            return seq
    if _is_int(seq):
        return (int(seq),)
    if isinstance(seq, (list, tuple)) and all(_is_int(s) for s in seq):
        return tuple(int(s) for s in seq)
    raise TypeError(f"[{op}] Expected {what} as an int or a sequence of ints, got {seq!r}.")


def _pshape(shape) -> str:
    return "(" + ",".join(str(s) for s in shape) + ")"


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _arr(a, op):
    return as_array(a, op)


# -- reshape family ---------------------------------------------------------------------------
_infer_shape = resolve_shape  # shape with its -1 inferred; ValueError naming the op


def reshape(a: ArrayLike, /, shape: Sequence[int], *, stream: StreamOrDevice = None) -> array:
    """Reshape `a` to `shape` (one entry may be -1)."""
    a = _arr(a, "reshape")
    shape = check_dims(_int_tuple(shape, "reshape", "a shape"), "reshape")
    out = _infer_shape(a.size, shape, "reshape")
    if out == a._shape:
        return a
    if a._data is None and not TraceState.depth:
        return _new_reshape(a, out)
    return bind(Reshape(shape), (a,))  # the requested shape, -1 kept (MLX's Reshape)


def _reshape_method(self, *shape: Union[int, Sequence[int]],
                    stream: StreamOrDevice = None) -> array:
    """Reshape to `shape` (given as one sequence or as separate ints); see `mx.reshape`."""
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    return reshape(self, shape, stream=stream)


def flatten(a: ArrayLike, /, start_axis: int = 0, end_axis: int = -1, *,
            stream: StreamOrDevice = None) -> array:
    """Flatten the axes `start_axis` through `end_axis` (inclusive) into one.

    Negative axes count from the end; both are then clamped to the array's axes. A 0-d array
    becomes shape (1,).
    """
    a = _arr(a, "flatten")
    for ax in (start_axis, end_axis):
        if isinstance(ax, bool) or not isinstance(ax, (int, np.integer)):
            raise TypeError(f"[flatten] Axes must be integers, got {type(ax).__name__}.")
    # MLX's rule: negative axes count from the end, then both are clamped to [0, ndim - 1];
    # a 0-d array becomes shape (1,) whatever the axes
    nd = a.ndim
    s = max(0, int(start_axis) + (nd if start_axis < 0 else 0))
    e = min(nd - 1, int(end_axis) + (nd if end_axis < 0 else 0))
    if nd == 0:
        return bind(Reshape((1,)), (a,))
    if s > e:
        raise ValueError(f"[flatten] start_axis ({start_axis}) must be less than or equal to "
                         f"end_axis ({end_axis}).")
    if s >= nd:
        raise ValueError(f"[flatten] Invalid start_axis {start_axis} for array with {nd} "
                         "dimensions.")
    if e < 0:
        raise ValueError(f"[flatten] Invalid end_axis {end_axis} for array with {nd} "
                         "dimensions.")
    if s == e:
        return a
    return bind(Flatten(s, e), (a,))


def unflatten(a: ArrayLike, /, axis: int, shape: Sequence[int], *,
              stream: StreamOrDevice = None) -> array:
    """Split axis `axis` into `shape` (one entry may be -1); the inverse of `flatten`."""
    a = _arr(a, "unflatten")
    ax = normalize_axis(axis, a.ndim, "unflatten")
    shape = _int_tuple(shape, "unflatten", "a shape")
    if not shape:
        raise ValueError("[unflatten] The shape must not be empty.")
    n = a._shape[ax]
    try:
        _infer_shape(n, shape, "unflatten")
    except ValueError:
        raise ValueError(f"[unflatten] Cannot unflatten axis {axis} with size {n} into shape "
                         f"{_pshape(shape)}.") from None
    if len(shape) == 1:
        return a
    return bind(Unflatten(ax, shape), (a,))  # the requested shape, -1 kept


def squeeze(a: ArrayLike, /, axis: Axes = None, *, stream: StreamOrDevice = None) -> array:
    """Remove axes of size 1: those in `axis`, or all of them when `axis` is None.

    Raises ValueError for an axis whose size is not 1.
    """
    a = _arr(a, "squeeze")
    if axis is None:
        axes = tuple(i for i, s in enumerate(a._shape) if s == 1)
    else:
        raw = _int_tuple(axis, "squeeze", "axis")
        axes = [normalize_axis(x, a.ndim, "squeeze") for x in raw]
        if len(set(axes)) != len(axes):
            raise ValueError(f"[squeeze] Received duplicate axes {raw}.")
        for x, ax in zip(raw, axes):
            if a._shape[ax] != 1:
                raise ValueError(f"[squeeze] Cannot squeeze axis {x} with size "
                                 f"{a._shape[ax]} which is not equal to 1.")
        axes = tuple(sorted(axes))
    if not axes:
        return a
    return bind(Squeeze(axes), (a,))


def expand_dims(a: ArrayLike, /, axis: Union[int, Sequence[int]], *,
                stream: StreamOrDevice = None) -> array:
    """Insert axes of size 1 at the positions `axis` (of the output)."""
    a = _arr(a, "expand_dims")
    raw = _int_tuple(axis, "expand_dims", "axis")
    out_ndim = a.ndim + len(raw)
    axes = []
    for x in raw:
        if not -out_ndim <= x < out_ndim:
            raise AxisError(f"[expand_dims] Axis {x} is out of bounds for array with "
                            f"{out_ndim} dimensions.")
        axes.append(x % out_ndim)
    if len(set(axes)) != len(axes):
        raise ValueError(f"[expand_dims] Received duplicate axes {raw}.")
    if not axes:
        return a
    return bind(ExpandDims(tuple(sorted(axes))), (a,))


def _transpose(a, axes, op):
    nd = len(a._shape)
    if axes is None:
        if nd < 2:
            return a
        return _permuted(a, tuple(range(nd - 1, -1, -1)))
    raw = _int_tuple(axes, op, "axes")
    if len(raw) != nd:
        raise ValueError(f"[{op}] Received {len(raw)} axes {raw} for array with "
                         f"{nd} dimensions.")
    perm = []
    for x in raw:
        if not -nd <= x < nd:
            raise AxisError(f"[{op}] Invalid axis ({x}) for array with {nd} dimensions.")
        perm.append(x % nd)
    if len(set(perm)) != nd:
        raise ValueError(f"[{op}] Repeat axes not allowed, got {raw}.")
    perm = tuple(perm)
    if perm == tuple(range(nd)):
        return a
    return _permuted(a, perm)


def _permuted(a, perm):
    if a._data is not None and not TraceState.depth:
        # an evaluated array's transpose is a NumPy view: made now it costs less than a node
        # and its evaluation (a Linear's `weight.T`, every call); updates of `a` see the
        # view's reference to the buffer and copy
        return view_of(a._data.transpose(perm), a._dtype)
    if not TraceState.depth and _moves_unit_axes_only(a._shape, perm):
        # the same memory order: a decode step's heads, (1, 1, H, D) -> (1, H, 1, D), are a
        # reshape, which folds into the reshape that made them
        return _new_reshape(a, tuple([a._shape[p] for p in perm]))
    return bind(Transpose(perm), (a,))


def _moves_unit_axes_only(shape, perm) -> bool:
    """Whether `perm` keeps the axes longer than 1 in their order."""
    last = -1
    for p in perm:
        if shape[p] != 1:
            if p < last:
                return False
            last = p
    return True


def _new_reshape(a, shape):
    """A new node: `a` reshaped to `shape` (no -1), for callers outside transforms; a pure
    reshape of an unevaluated `a` reshapes a's input instead (one view node, not two)."""
    if (a._data is None and a._prim is not None and a._prim.pure_reshape
            and len(a._inputs) == 1 and a._inputs[0]._shape != shape):
        a = a._inputs[0]
    return bind_avals(Reshape(shape), (a,), [(shape, a._dtype)])


def transpose(a: ArrayLike, /, axes: Optional[Sequence[int]] = None, *,
              stream: StreamOrDevice = None) -> array:
    """Permute the axes of `a` to `axes` (reversed when `axes` is None)."""
    return _transpose(_arr(a, "transpose"), axes, "transpose")


def permute_dims(a: ArrayLike, /, axes: Optional[Sequence[int]] = None, *,
                 stream: StreamOrDevice = None) -> array:
    """Permute the axes of `a` to `axes` (reversed when None); the same as `transpose`."""
    return _transpose(_arr(a, "permute_dims"), axes, "permute_dims")


def _transpose_method(self, *axes: Union[int, Sequence[int], None],
                      stream: StreamOrDevice = None) -> array:
    """Permute the axes (given as one sequence or as separate ints); see `mx.transpose`."""
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (list, tuple))):
        axes = axes[0]
    elif not axes:
        axes = None
    return _transpose(self, axes, "transpose")


def swapaxes(a: ArrayLike, /, axis1: int, axis2: int, *, stream: StreamOrDevice = None) -> array:
    """Swap the axes `axis1` and `axis2`."""
    a = _arr(a, "swapaxes")
    i = normalize_axis(axis1, a.ndim, "swapaxes")
    j = normalize_axis(axis2, a.ndim, "swapaxes")
    perm = list(range(a.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return _transpose(a, tuple(perm), "swapaxes")


def moveaxis(a: ArrayLike, /, source: int, destination: int, *,
             stream: StreamOrDevice = None) -> array:
    """Move axis `source` to position `destination`, keeping the others' order."""
    a = _arr(a, "moveaxis")
    s = normalize_axis(source, a.ndim, "moveaxis")
    d = normalize_axis(destination, a.ndim, "moveaxis")
    perm = [i for i in range(a.ndim) if i != s]
    perm.insert(d, s)
    return _transpose(a, tuple(perm), "moveaxis")


# -- broadcasting -----------------------------------------------------------------------------
def broadcast_shapes(*shapes: Sequence[int]) -> Tuple[int, ...]:
    """The shape that the given shapes broadcast to (NumPy rules).

    Raises ValueError if they do not broadcast together or if no shape is given.
    """
    if not shapes:
        raise ValueError("[broadcast_shapes] Must provide at least one shape.")
    shapes = [_int_tuple(s, "broadcast_shapes", "a shape") for s in shapes]
    return _bshapes(*shapes, op="broadcast_shapes")


def _broadcast_to(a: array, shape: tuple, op: str) -> array:
    if a._shape == shape:
        return a
    if len(a._shape) > len(shape) or any(
            s != 1 and s != t for s, t in zip(reversed(a._shape), reversed(shape))):
        raise ValueError(f"[{op}] Cannot broadcast array of shape {_pshape(a._shape)} to "
                         f"shape {_pshape(shape)}.")
    return bind(Broadcast(shape), (a,))


def broadcast_to(a: ArrayLike, /, shape: Sequence[int], *, stream: StreamOrDevice = None) -> array:
    """Broadcast `a` to `shape` (NumPy rules); ValueError if it cannot."""
    a = _arr(a, "broadcast_to")
    shape = check_dims(_int_tuple(shape, "broadcast_to", "a shape"), "broadcast_to")
    if any(s < 0 for s in shape):
        raise ValueError(f"[broadcast_to] Negative dimensions not allowed, got {shape}.")
    return _broadcast_to(a, shape, "broadcast_to")


def broadcast_arrays(*arrays: ArrayLike, stream: StreamOrDevice = None) -> Tuple[array, ...]:
    """Broadcast the arrays against each other; returns a tuple of arrays."""
    arrays = [_arr(a, "broadcast_arrays") for a in arrays]
    if not arrays:
        return ()
    # shape-following broadcasts in shapeless compile traces, like the binary ops
    return tuple(broadcast_arrays_(arrays, "broadcast_arrays"))


def _atleast(arys, n, op):
    outs = []
    for x in arys:
        x = _arr(x, op)
        if x.ndim < n:  # ExpandDims, not a Reshape with baked sizes
            if n == 3 and x.ndim == 2:
                axes = (2,)
            elif n == 3 and x.ndim == 1:
                axes = (0, 2)
            else:
                axes = tuple(range(n - x.ndim))
            x = bind(ExpandDims(axes), (x,))
        outs.append(x)
    return outs[0] if len(outs) == 1 else outs


def atleast_1d(*arys: ArrayLike, stream: StreamOrDevice = None) -> Union[array, List[array]]:
    """View each input with at least 1 dimension.

    Returns:
        One array for one input, else a list of arrays.
    """
    return _atleast(arys, 1, "atleast_1d")


def atleast_2d(*arys: ArrayLike, stream: StreamOrDevice = None) -> Union[array, List[array]]:
    """View each input with at least 2 dimensions (a 1-d `x` becomes `x[None]`).

    Returns:
        One array for one input, else a list of arrays.
    """
    return _atleast(arys, 2, "atleast_2d")


def atleast_3d(*arys: ArrayLike, stream: StreamOrDevice = None) -> Union[array, List[array]]:
    """View each input with at least 3 dimensions (NumPy's placement of the new axes).

    Returns:
        One array for one input, else a list of arrays.
    """
    return _atleast(arys, 3, "atleast_3d")


# -- joining and splitting --------------------------------------------------------------------
def _array_list(arrays, op):
    if isinstance(arrays, array) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"[{op}] Expected a list of arrays, got {type(arrays).__name__}.")
    if not arrays:
        raise ValueError(f"[{op}] No arrays provided for {op}.")
    arrays = [_arr(a, op) for a in arrays]
    dt = D.promote_types(*[a._dtype for a in arrays])
    return [astype(a, dt) for a in arrays]


def _concat(arrays, axis, op):
    arrays = _array_list(arrays, op)
    if axis is None:
        arrays = [reshape(a, (-1,)) for a in arrays]
        axis = 0
    nd = arrays[0].ndim
    for a in arrays[1:]:
        if a.ndim != nd:
            raise ValueError(f"[{op}] All the input arrays must have the same number of "
                             f"dimensions. However, got arrays with dimensions {nd} and "
                             f"{a.ndim}.")
    if nd == 0:
        raise AxisError(f"[{op}] Axis {axis} is out of bounds for array with 0 dimensions.")
    ax = normalize_axis(axis, nd, op)
    s0 = arrays[0]._shape
    for a in arrays[1:]:
        if any(x != y for i, (x, y) in enumerate(zip(s0, a._shape)) if i != ax):
            shapes = ", ".join(_pshape(b._shape) for b in arrays)
            raise ValueError(f"[{op}] All the input array dimensions must match exactly except "
                             f"for the concatenation axis. However, the provided shapes are "
                             f"{shapes}, and the concatenation axis is {axis}.")
    if len(arrays) == 1:
        return arrays[0]
    n = check_dims((builtins.sum(a._shape[ax] for a in arrays),), op)[0]
    check_allocation(op, s0[:ax] + (n,) + s0[ax + 1:], arrays[0]._dtype)
    return bind(Concatenate(ax), tuple(arrays))


def concatenate(arrays: Sequence[ArrayLike], axis: Optional[int] = 0, *,
                stream: StreamOrDevice = None) -> array:
    """Join a list of arrays along `axis` (flattened first when `axis` is None).

    The inputs are promoted to a common dtype; all other axes must match.
    """
    return _concat(arrays, axis, "concatenate")


def concat(arrays: Sequence[ArrayLike], axis: Optional[int] = 0, *,
           stream: StreamOrDevice = None) -> array:
    """Join a list of arrays along `axis`; the same as `concatenate`."""
    return _concat(arrays, axis, "concat")


def stack(arrays: Sequence[ArrayLike], axis: int = 0, *, stream: StreamOrDevice = None) -> array:
    """Stack arrays of one shape along a new axis `axis` (promoted to a common dtype)."""
    arrays = _array_list(arrays, "stack")
    if axis is None:
        axis = 0
    s0 = arrays[0]._shape
    for a in arrays[1:]:
        if a._shape != s0:
            raise ValueError(f"[stack] All arrays must have the same shape, got "
                             f"{_pshape(s0)} and {_pshape(a._shape)}.")
    nd = len(s0) + 1
    if not _is_int(axis):
        raise TypeError(f"[stack] Expected an int axis, got {axis!r}.")
    if not -nd <= axis < nd:
        raise AxisError(f"[stack] Invalid axis {axis} for output with {nd} dimensions.")
    ax = int(axis) % nd
    parts = [bind(ExpandDims((ax,)), (a,)) for a in arrays]
    if len(parts) == 1:
        return parts[0]
    check_allocation("stack", s0[:ax] + (len(parts),) + s0[ax:], arrays[0]._dtype)
    return bind(Concatenate(ax), tuple(parts))


def unstack(x: ArrayLike, /, *, axis: int = 0, stream: StreamOrDevice = None) -> Tuple[array, ...]:
    """Split `x` along `axis` into a tuple of arrays with that axis removed."""
    x = _arr(x, "unstack")
    if x.ndim == 0:
        raise ValueError("[unstack] No axis to unstack in a 0-dimensional array.")
    ax = normalize_axis(axis, x.ndim, "unstack")
    n = x._shape[ax]
    if n == 0:
        return ()
    if n == 1:
        return (bind(Squeeze((ax,)), (x,)),)
    parts = bind(Split(tuple(range(1, n)), ax), (x,))
    return tuple(bind(Squeeze((ax,)), (p,)) for p in parts)


def split(a: ArrayLike, /, indices_or_sections: Union[int, Sequence[int]], axis: int = 0, *,
          stream: StreamOrDevice = None) -> List[array]:
    """Split `a` along `axis`.

    Args:
        indices_or_sections: An int: the number of equal parts (ValueError if the axis does
            not divide). A sequence: the indices at which to split.

    Returns:
        A list of arrays.
    """
    a = _arr(a, "split")
    if a.ndim == 0:
        raise ValueError("[split] Cannot split a 0-dimensional array.")
    ax = normalize_axis(axis, a.ndim, "split")
    n = a._shape[ax]
    if _is_int(indices_or_sections):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"[split] num_splits must be positive and non-zero but got {k}.")
        if n % k:
            raise ValueError(f"[split] Array split does not result in sub arrays with equal "
                             f"size: attempting {k} splits along axis {axis} for shape "
                             f"{_pshape(a._shape)}.")
        indices = tuple(i * (n // k) for i in range(1, k))
    elif isinstance(indices_or_sections, (list, tuple)) and all(
            _is_int(i) for i in indices_or_sections):
        indices = tuple(builtins.min(builtins.max(int(i) + n if i < 0 else int(i), 0), n)
                        for i in indices_or_sections)
    else:
        raise TypeError(f"[split] Expected indices_or_sections as an int or a sequence of "
                        f"ints, got {indices_or_sections!r}.")
    if not indices:
        return [a]
    return bind(Split(indices, ax), (a,))


def tile(a: ArrayLike, reps: Union[int, Sequence[int]], /, *,
         stream: StreamOrDevice = None) -> array:
    """Repeat `a` `reps` times along each axis (NumPy's `tile`)."""
    a = _arr(a, "tile")
    reps = _int_tuple(reps, "tile", "reps")
    if any(r < 0 for r in reps):
        raise ValueError(f"[tile] Negative repetitions are not allowed, got {reps}.")
    nd = builtins.max(a.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - a.ndim) + a._shape
    if all(r == 1 for r in reps):
        return reshape(a, shape)
    x = reshape(a, shape)
    # (s0, s1, ...) -> (r0, s0, r1, s1, ...) -> (r0*s0, r1*s1, ...)
    exp = []
    bshape = []
    for r, s in zip(reps, shape):
        exp.extend((1, s))
        bshape.extend((r, s))
    x = reshape(x, tuple(exp))
    out = check_dims(tuple(r * s for r, s in zip(reps, shape)), "tile")
    check_allocation("tile", out, a._dtype)  # the reshape of the broadcast copies
    x = _broadcast_to(x, tuple(bshape), "tile")
    return reshape(x, out)


def repeat(array: ArrayLike, repeats: int, axis: Optional[int] = None, *,  # noqa: A002  (MLX's name)
           stream: StreamOrDevice = None) -> array:
    """Repeat each element `repeats` times along `axis` (of the flattened array if None)."""
    a = _arr(array, "repeat")
    if not _is_int(repeats):
        raise TypeError(f"[repeat] Expected repeats as an int, got {repeats!r}.")
    repeats = int(repeats)
    if repeats < 0:
        raise ValueError(f"[repeat] Number of repeats cannot be negative, got {repeats}.")
    if axis is None:
        a = reshape(a, (-1,))
        axis = 0
    if a.ndim == 0:
        a = reshape(a, (1,))
    ax = normalize_axis(axis, a.ndim, "repeat")
    if repeats == 1:
        return a
    s = a._shape
    check_dims((s[ax] * repeats,), "repeat")
    check_allocation("repeat", s[:ax] + (s[ax] * repeats,) + s[ax + 1:], a._dtype)
    x = bind(ExpandDims((ax + 1,)), (a,))
    x = _broadcast_to(x, s[:ax + 1] + (repeats,) + s[ax + 1:], "repeat")
    return reshape(x, s[:ax] + (s[ax] * repeats,) + s[ax + 1:])


# -- slicing composites -----------------------------------------------------------------------
def _slice(a, starts, stops, strides):
    from ..prims.shape import slice_shape
    starts, stops, strides = tuple(starts), tuple(stops), tuple(strides)
    if slice_shape(starts, stops, strides) == a._shape and all(st == 1 for st in strides):
        return a
    return bind(Slice(starts, stops, strides), (a,))


def _axis_slice(a, ax, start, stop, step=1):
    starts = [0] * a.ndim
    stops = list(a._shape)
    strides = [1] * a.ndim
    starts[ax], stops[ax], strides[ax] = slice(start, stop, step).indices(a._shape[ax])
    return _slice(a, starts, stops, strides)


def flip(a: ArrayLike, /, axis: Axes = None, *, stream: StreamOrDevice = None) -> array:
    """Reverse the order of the elements along `axis` (all axes when None)."""
    a = _arr(a, "flip")
    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        raw = _int_tuple(axis, "flip", "axis")
        axes = tuple(normalize_axis(x, a.ndim, "flip") for x in raw)
        if len(set(axes)) != len(axes):
            raise ValueError(f"[flip] Received duplicate axes {raw}.")
    if not axes:
        return a
    starts, stops, strides = [0] * a.ndim, list(a._shape), [1] * a.ndim
    for ax in axes:
        starts[ax], stops[ax], strides[ax] = slice(None, None, -1).indices(a._shape[ax])
    return bind(Slice(tuple(starts), tuple(stops), tuple(strides)), (a,))


def roll(a: ArrayLike, shift: Union[int, Sequence[int]], axis: Axes = None, /, *,
         stream: StreamOrDevice = None) -> array:
    """Shift the elements by `shift` along `axis`; they wrap around.

    With `axis` None the array is rolled as if flattened. `shift` and `axis` may be sequences
    of the same length (or one of them a single value).
    """
    a = _arr(a, "roll")
    shifts = _int_tuple(shift, "roll", "shift")
    if axis is None:  # MLX: the shifts add up, applied to the flattened array
        flat = reshape(a, (-1,))
        return reshape(roll(flat, builtins.sum(shifts), 0), a._shape)
    axes = _int_tuple(axis, "roll", "axis")
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"[roll] Got {len(shifts)} shifts {shift} and {len(axes)} axes {axis}.")
    total = {}
    for s, x in zip(shifts, axes):
        ax = normalize_axis(x, a.ndim, "roll")
        total[ax] = total.get(ax, 0) + s
    out = a
    for ax, s in total.items():
        n = out._shape[ax]
        if n == 0 or s % n == 0:
            continue
        k = s % n
        out = _concat([_axis_slice(out, ax, n - k, n), _axis_slice(out, ax, 0, n - k)],
                      ax, "roll")
    return out


def diff(a: ArrayLike, /, n: int = 1, axis: int = -1, *, stream: StreamOrDevice = None) -> array:
    """The n-th discrete difference along `axis` (a[1:] - a[:-1], n times)."""
    from .elementwise import subtract
    a = _arr(a, "diff")
    if not _is_int(n) or not _is_int(axis):
        raise TypeError(f"[diff] Expected int n and axis, got n={n!r}, axis={axis!r}.")
    if not -a.ndim <= axis < a.ndim:
        raise AxisError("[diff] Axis is out of bounds for the array.")
    if n < 0:
        raise ValueError("[diff] Order `n` must be non-negative.")
    ax = int(axis) % a.ndim
    for _ in range(n):
        m = a._shape[ax]
        a = subtract(_axis_slice(a, ax, 1, m), _axis_slice(a, ax, 0, builtins.max(m - 1, 0)))
    return a


def as_strided(a: ArrayLike, /, shape: Optional[Sequence[int]] = None,
               strides: Optional[Sequence[int]] = None, offset: int = 0, *,
               stream: StreamOrDevice = None) -> array:
    """A strided read of `a` as if it were row contiguous (strides and offset in elements).

    Unlike MLX, which reads whatever memory the strides reach, a read outside the array is a
    ValueError."""
    a = _arr(a, "as_strided")
    shape = a._shape if shape is None else _int_tuple(shape, "as_strided", "a shape")
    if any(d < 0 for d in shape):
        raise ValueError("[as_strided] Negative dimensions not allowed.")
    if strides is None:
        strides = tuple(_prod(shape[i + 1:]) for i in range(len(shape)))
    strides = _int_tuple(strides, "as_strided", "strides")
    if len(strides) != len(shape) or not _is_int(offset) or offset < 0:
        raise ValueError(f"[as_strided] Expected one stride per dimension and a non-negative "
                         f"offset, got shape {shape}, strides {strides}, offset {offset!r}.")
    if _prod(shape):
        lo = offset + builtins.sum(builtins.min(0, (d - 1) * s) for d, s in zip(shape, strides))
        hi = offset + builtins.sum(builtins.max(0, (d - 1) * s) for d, s in zip(shape, strides))
        if lo < 0 or hi >= a.size:
            raise ValueError(f"[as_strided] Shape {shape}, strides {strides} and offset "
                             f"{offset} read outside an array of {a.size} elements.")
    return bind(AsStrided(shape, strides, int(offset)), (reshape(a, (-1,)),))


def matrix_transpose(a: ArrayLike, /, *, stream: StreamOrDevice = None) -> array:
    """Swap the last two axes (MLX 0.32's matrix_transpose; at least 2-D)."""
    a = _arr(a, "matrix_transpose")
    if a.ndim < 2:
        raise ValueError("[matrix_transpose] Input array must have at least 2 dimensions.")
    perm = tuple(range(a.ndim - 2)) + (a.ndim - 1, a.ndim - 2)
    return _transpose(a, perm, "matrix_transpose")


def contiguous(a: ArrayLike, /, allow_col_major: bool = False, *,
               stream: StreamOrDevice = None) -> array:
    """The same values in a row-contiguous array (braze's buffers already are, once computed;
    a new array, as MLX's Contiguous node)."""
    from ..prims.core import COPY
    return bind(COPY, (_arr(a, "contiguous"),))


def _diag_length(n, m, k):
    if k >= 0:
        return builtins.max(0, builtins.min(n, m - k))
    return builtins.max(0, builtins.min(n + k, m))


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1,
             stream: StreamOrDevice = None) -> array:
    """The diagonal with `offset` of the 2-d sub-arrays on `axis1` and `axis2`.

    The two axes are removed and the diagonal is the last axis of the result.
    """
    return _diagonal(a, offset, axis1, axis2, "diagonal")


def _diagonal(a, offset, axis1, axis2, op):
    a = _arr(a, op)
    if a.ndim < 2:
        raise ValueError(f"[{op}] Array must have at least two dimensions, but got "
                         f"{a.ndim} dimensions.")
    if not _is_int(offset):
        raise TypeError(f"[{op}] Expected an int offset, got {offset!r}.")
    offset = int(offset)
    i = normalize_axis(axis1, a.ndim, op)
    j = normalize_axis(axis2, a.ndim, op)
    if i == j:
        raise ValueError(f"[{op}] axis1 and axis2 cannot be the same axis, got "
                         f"{axis1} and {axis2}.")
    perm = tuple(d for d in range(a.ndim) if d not in (i, j)) + (i, j)
    x = _transpose(a, perm, op)
    n, m = x._shape[-2], x._shape[-1]
    L = _diag_length(n, m, offset)
    r0, c0 = (0, builtins.min(offset, m)) if offset >= 0 else (builtins.min(-offset, n), 0)
    batch = x._shape[:-2]
    nd = x.ndim
    w = m - c0
    # rows r0..r0+L, columns c0..m; flattened, the diagonal is every (w+1)-th element
    x = _slice(x, [0] * (nd - 2) + [r0, c0], list(batch) + [r0 + L, m], [1] * nd)
    x = reshape(x, batch + (L * w,))
    return _slice(x, [0] * (nd - 1), list(batch) + [L * w], [1] * (nd - 2) + [w + 1])


def diag(a: ArrayLike, /, k: int = 0, *, stream: StreamOrDevice = None) -> array:
    """The `k`-th diagonal of a 2-d array, or a 2-d array with the 1-d `a` on its `k`-th
    diagonal.
    """
    a = _arr(a, "diag")
    if not _is_int(k):
        raise TypeError(f"[diag] Expected an int k, got {k!r}.")
    k = int(k)
    if a.ndim == 2:
        return diagonal(a, k, 0, 1)
    if a.ndim != 1:
        raise ValueError(f"[diag] array must be 1-D or 2-D, got array with {a.ndim} "
                         f"dimensions.")
    n = a._shape[0]
    # [v0, 0 x n, v1, 0 x n, ...] cut to n*n elements is the n x n diagonal matrix
    z = bind(Broadcast((n, n)), (_zero(a._dtype),))
    rows = _concat([reshape(a, (n, 1)), z], 1, "diag")
    flat = _axis_slice(reshape(rows, (n * (n + 1),)), 0, 0, n * n)
    m = reshape(flat, (n, n))
    if k >= 0:
        return pad(m, ((0, k), (k, 0)))
    return pad(m, ((-k, 0), (0, -k)))


def _zero(dt):
    return array._from_data(np.zeros((), dt.np_dtype))


def trace(a: ArrayLike, /, offset: int = 0, axis1: int = 0, axis2: int = 1,
          dtype: Optional[Dtype] = None, *, stream: StreamOrDevice = None) -> array:
    """The sum along the diagonal with `offset` of the 2-d sub-arrays on `axis1` and `axis2`.

    The sum is cast to `dtype` when one is given.
    """
    from .reduction import sum as _sum
    d = _diagonal(a, offset, axis1, axis2, "trace")
    dt = None if dtype is None else D.to_dtype(dtype, "trace")
    out = _sum(d, axis=-1)
    if dt is not None:
        out = astype(out, dt)
    return out


# -- padding ----------------------------------------------------------------------------------
def _pad_widths(pad_width, nd):
    def bad():
        return ValueError(f"[pad] Invalid pad_width {pad_width!r} for array with {nd} "
                          f"dimensions.")
    if _is_int(pad_width):
        return [(int(pad_width), int(pad_width))] * nd
    if not isinstance(pad_width, (list, tuple)):
        raise TypeError(f"[pad] Expected pad_width as an int, a pair or a list of pairs, "
                        f"got {pad_width!r}.")
    if all(_is_int(p) for p in pad_width):
        if len(pad_width) == 1:
            return [(int(pad_width[0]),) * 2] * nd
        if len(pad_width) == 2:
            return [(int(pad_width[0]), int(pad_width[1]))] * nd
        raise bad()
    pairs = []
    for p in pad_width:
        if _is_int(p):
            pairs.append((int(p), int(p)))
        elif isinstance(p, (list, tuple)) and len(p) in (1, 2) and all(_is_int(v) for v in p):
            pairs.append((int(p[0]), int(p[-1])))
        else:
            raise bad()
    if len(pairs) == 1:
        return pairs * nd
    if len(pairs) != nd:
        raise ValueError(f"[pad] Invalid number of padding sizes {len(pairs)} passed to pad "
                         f"for array with {nd} dimensions.")
    return pairs


def pad(a: ArrayLike, pad_width: Union[int, Tuple[int], Tuple[int, int], List[Tuple[int, int]]],
        mode: str = "constant", constant_values: ArrayLike = 0, *,
        stream: StreamOrDevice = None) -> array:
    """Pad `a` with `pad_width` elements before and after each axis.

    Args:
        pad_width: An int (every side), a pair (before, after) for every axis, or one pair
            per axis.
        mode: ``"constant"`` (fill with `constant_values`, a scalar), ``"edge"``,
            ``"reflect"`` or ``"symmetric"`` (NumPy's modes).
    """
    a = _arr(a, "pad")
    widths = _pad_widths(pad_width, a.ndim)
    for ax, (lo, hi) in enumerate(widths):
        if lo < 0 or hi < 0:
            raise ValueError(f"[pad] Invalid padding size ({lo}, {hi}) for axis {ax}. Padding "
                             f"sizes must be non-negative.")
    if mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ValueError(f"[pad] Invalid padding mode {mode!r}; expected 'constant', 'edge', "
                         f"'reflect' or 'symmetric'.")
    if all(lo == 0 and hi == 0 for lo, hi in widths):
        return a
    shape = check_dims(tuple(n + lo + hi for n, (lo, hi) in zip(a._shape, widths)), "pad")
    check_allocation("pad", shape, a._dtype)
    if mode == "constant":
        v = _arr(constant_values, "pad")
        if isinstance(constant_values, float) and a._dtype is D.float64:
            v = array(constant_values, D.float64)  # MLX: exact, not through float32
        if v.size != 1:
            raise ValueError(f"[pad] constant_values must be a scalar, got shape "
                             f"{_pshape(v._shape)}.")
        v = astype(reshape(v, ()), a._dtype)
        axes = tuple(i for i, (lo, hi) in enumerate(widths) if lo or hi)
        return bind(Pad(axes, tuple(widths[i][0] for i in axes),
                        tuple(widths[i][1] for i in axes)), (a, v))
    out = a
    for ax, (lo, hi) in enumerate(widths):
        if not lo and not hi:
            continue
        n = out._shape[ax]
        if n == 0:
            raise ValueError(f"[pad] Cannot pad an empty axis {ax} in mode {mode!r}.")
        parts = []
        if mode == "edge":
            if lo:
                e = _axis_slice(out, ax, 0, 1)
                parts.append(_broadcast_to(e, e._shape[:ax] + (lo,) + e._shape[ax + 1:], "pad"))
            parts.append(out)
            if hi:
                e = _axis_slice(out, ax, n - 1, n)
                parts.append(_broadcast_to(e, e._shape[:ax] + (hi,) + e._shape[ax + 1:], "pad"))
        else:
            parts = _reflect_parts(out, ax, lo, hi, mode == "symmetric")
        out = _concat(parts, ax, "pad")
    return out


def _reflect_parts(x, ax, lo, hi, symmetric):
    """NumPy's reflect/symmetric padding built from flipped slices (repeated as needed)."""
    n = x._shape[ax]
    if not symmetric and n == 1:
        e = x
        return ([_broadcast_to(e, e._shape[:ax] + (lo,) + e._shape[ax + 1:], "pad")] if lo
                else []) + [x] + ([_broadcast_to(e, e._shape[:ax] + (hi,) + e._shape[ax + 1:],
                                                 "pad")] if hi else [])
    # index map computed in NumPy, realized as concatenated unit slices grouped in runs
    idx = np.pad(np.arange(n), (lo, hi), mode="symmetric" if symmetric else "reflect")
    parts = []
    start = 0
    while start < len(idx):
        step = 0
        end = start + 1
        if end < len(idx) and abs(int(idx[end]) - int(idx[start])) == 1:
            step = int(idx[end]) - int(idx[start])
            while end < len(idx) and int(idx[end]) - int(idx[end - 1]) == step:
                end += 1
        s0 = int(idx[start])
        if step >= 0:
            parts.append(_axis_slice(x, ax, s0, s0 + (end - start)))
        else:
            stop = s0 - (end - start)
            parts.append(_axis_slice(x, ax, s0, stop if stop >= 0 else None, -1))
        start = end
    return parts


def view(a: ArrayLike, dtype: Dtype, stream: StreamOrDevice = None) -> array:
    """Reinterpret the bytes of `a` as `dtype`.

    A larger or smaller itemsize changes the size of the last axis, whose size in bytes must
    be a multiple of the new itemsize.
    """
    a = _arr(a, "view")
    if dtype is None:  # NumPy reads None as float64; MLX refuses it
        raise TypeError("[view] Expected a dtype, got None.")
    dt = D.to_dtype(dtype, "view")
    if dt is a._dtype:
        return a
    if a._dtype.size != dt.size:
        if a.ndim == 0:
            raise ValueError(f"[view] Changing the type of a scalar is only allowed for types "
                             f"with the same size, got {a._dtype.name} to {dt.name}.")
        last = a._shape[-1] * a._dtype.size
        if last % dt.size:
            raise ValueError(f"[view] When viewing as a larger dtype, the size in bytes of the "
                             f"last axis must be a multiple of the requested type size, got "
                             f"{last} bytes for {dt.name}.")
    return bind(View(dt), (a,))


def _T(self) -> array:
    """The array with its axes reversed (`transpose()`)."""
    return _transpose(self, None, "transpose")


def _split_method(self, indices_or_sections: Union[int, Sequence[int]], axis: int = 0, *,
                  stream: StreamOrDevice = None) -> List[array]:
    """Split along `axis`; see `mx.split`."""
    return split(self, indices_or_sections, axis)


def _flatten_method(self, start_axis: int = 0, end_axis: int = -1, *,
                    stream: StreamOrDevice = None) -> array:
    """Flatten the axes `start_axis` through `end_axis`; see `mx.flatten`."""
    return flatten(self, start_axis, end_axis)


def _squeeze_method(self, axis: Axes = None, *, stream: StreamOrDevice = None) -> array:
    """Remove axes of size 1; see `mx.squeeze`."""
    return squeeze(self, axis)


def _swapaxes_method(self, axis1: int, axis2: int, *, stream: StreamOrDevice = None) -> array:
    """Swap two axes; see `mx.swapaxes`."""
    return swapaxes(self, axis1, axis2)


def _moveaxis_method(self, source: int, destination: int, *,
                     stream: StreamOrDevice = None) -> array:
    """Move an axis to a new position; see `mx.moveaxis`."""
    return moveaxis(self, source, destination)


def _diag_method(self, k: int = 0, *, stream: StreamOrDevice = None) -> array:
    """The `k`-th diagonal, or a diagonal matrix; see `mx.diag`."""
    return diag(self, k)


def _diagonal_method(self, offset: int = 0, axis1: int = 0, axis2: int = 1,
                     stream: StreamOrDevice = None) -> array:
    """A diagonal of the 2-d sub-arrays; see `mx.diagonal`."""
    return diagonal(self, offset, axis1, axis2)


def _view_method(self, dtype: Dtype, *, stream: StreamOrDevice = None) -> array:
    """Reinterpret the bytes as `dtype`; see `mx.view`."""
    return view(self, dtype)


attach_methods({
    "reshape": _reshape_method, "flatten": _flatten_method, "squeeze": _squeeze_method,
    "transpose": _transpose_method, "T": property(_T), "swapaxes": _swapaxes_method,
    "moveaxis": _moveaxis_method, "split": _split_method, "diag": _diag_method,
    "diagonal": _diagonal_method, "view": _view_method,
})
LIST_STACK.make = stack  # `mx.array([x, y])` of arrays (array.py cannot import ops)
