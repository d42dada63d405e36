"""Primitives: shape family (views, copies and rearrangements; no arithmetic).

Kernels return NumPy views where NumPy can (reshape of contiguous data, transpose, slices,
broadcast, split); the scheduler never writes into a buffer it did not allocate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as D
from .base import Primitive


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@dataclass(frozen=True)
class Reshape(Primitive):
    shape: tuple

    def abstract_eval(self, x):
        return [(self.shape, x.dtype)]

    def eval_cpu(self, x):
        return [np.reshape(x, self.shape)]


@dataclass(frozen=True)
class Flatten(Primitive):
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
        return [np.reshape(x, self.out_shape(x.shape))]


@dataclass(frozen=True)
class Unflatten(Primitive):
    """Split axis `axis` into `shape` (fully specified, no -1)."""

    axis: int
    shape: tuple

    def out_shape(self, shape):
        return tuple(shape[:self.axis]) + self.shape + tuple(shape[self.axis + 1:])

    def abstract_eval(self, x):
        return [(self.out_shape(x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [np.reshape(x, self.out_shape(x.shape))]


@dataclass(frozen=True)
class ExpandDims(Primitive):
    axes: tuple  # non-negative positions in the output, sorted

    def out_shape(self, shape):
        out = list(shape)
        for ax in self.axes:
            out.insert(ax, 1)
        return tuple(out)

    def abstract_eval(self, x):
        return [(self.out_shape(x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [np.reshape(x, self.out_shape(x.shape))]


@dataclass(frozen=True)
class Squeeze(Primitive):
    axes: tuple  # non-negative, sorted

    def out_shape(self, shape):
        return tuple(s for i, s in enumerate(shape) if i not in self.axes)

    def abstract_eval(self, x):
        return [(self.out_shape(x.shape), x.dtype)]

    def eval_cpu(self, x):
        return [np.reshape(x, self.out_shape(x.shape))]


@dataclass(frozen=True)
class Transpose(Primitive):
    axes: tuple

    def abstract_eval(self, x):
        return [(tuple(x.shape[a] for a in self.axes), x.dtype)]

    def eval_cpu(self, x):
        return [np.transpose(x, self.axes)]


def _py_slices(start, stop, strides):
    out = []
    for s, e, st in zip(start, stop, strides):
        if st < 0 and e < 0:
            e = None  # stop "before index 0" when walking backwards
        out.append(slice(s, e, st))
    return tuple(out)


def slice_shape(start, stop, strides):
    return tuple(len(range(s, e, st)) for s, e, st in zip(start, stop, strides))


@dataclass(frozen=True)
class Slice(Primitive):
    """x[start:stop:strides] per axis with normalized (slice.indices) bounds."""

    start: tuple
    stop: tuple
    strides: tuple

    def abstract_eval(self, x):
        return [(slice_shape(self.start, self.stop, self.strides), x.dtype)]

    def eval_cpu(self, x):
        return [x[_py_slices(self.start, self.stop, self.strides)]]


@dataclass(frozen=True)
class SliceUpdate(Primitive):
    """A copy of x with x[start:stop:strides] = update (update already has the slice's shape)."""

    start: tuple
    stop: tuple
    strides: tuple

    def abstract_eval(self, x, update):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x, update):
        out = np.array(x, copy=True)
        out[_py_slices(self.start, self.stop, self.strides)] = update
        return [out]


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


@dataclass(frozen=True)
class DynamicSlice(Primitive):
    """MLX's slice(a, start_indices, axes, slice_size): start offsets come from an array."""

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


@dataclass(frozen=True)
class DynamicSliceUpdate(Primitive):
    axes: tuple

    def abstract_eval(self, x, update, starts):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x, update, starts):
        sizes = [update.shape[ax] for ax in self.axes]
        st = _dynamic_starts(x.shape, starts, self.axes, sizes)
        idx = [slice(None)] * x.ndim
        for ax, s, sz in zip(self.axes, st, sizes):
            idx[ax] = slice(s, s + sz)
        out = np.array(x, copy=True)
        out[tuple(idx)] = update
        return [out]


@dataclass(frozen=True)
class Concatenate(Primitive):
    axis: int

    def abstract_eval(self, *xs):
        shape = list(xs[0].shape)
        shape[self.axis] = sum(x.shape[self.axis] for x in xs)
        return [(tuple(shape), xs[0].dtype)]

    def eval_cpu(self, *xs):
        return [np.concatenate(xs, axis=self.axis)]


@dataclass(frozen=True)
class Pad(Primitive):
    """Constant padding; inputs (x, value) with value a 0-d array of x's dtype."""

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


@dataclass(frozen=True)
class Split(Primitive):
    """Split along `axis` at the (sorted, clipped) `indices`; one output per piece."""

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


@dataclass(frozen=True)
class View(Primitive):
    """Reinterpret the bytes as `dtype`; the last axis scales by the itemsize ratio."""

    dtype: D.Dtype

    def abstract_eval(self, x):
        shape = list(x.shape)
        if shape and x.dtype.size != self.dtype.size:
            shape[-1] = shape[-1] * x.dtype.size // self.dtype.size
        return [(tuple(shape), self.dtype)]

    def eval_cpu(self, x):
        x = np.ascontiguousarray(x)
        if x.ndim == 0:
            return [x.reshape(1).view(self.dtype.np_dtype).reshape(())]
        return [x.view(self.dtype.np_dtype)]
