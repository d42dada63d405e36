"""Primitives: gather and scatter (MLX's Gather, GatherAxis, Scatter, ScatterAxis, MaskedScatter).

Index arrays may be negative (counted from the end). Out-of-range indices are undefined in MLX;
here they are clipped into range so a kernel never reads or writes outside its buffer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Primitive

REDUCE_TYPES = ("none", "sum", "prod", "max", "min")


def _fix_index(idx, n):
    idx = np.asarray(idx)
    if idx.dtype.kind == "b":
        idx = idx.astype(np.intp)
    if idx.dtype.kind == "u":
        idx = idx.astype(np.int64)
    if n == 0:
        return np.zeros(idx.shape, np.intp)
    idx = np.where(idx < 0, idx + n, idx)
    return np.clip(idx, 0, n - 1)


def _nd_index(x_shape, idx, axes, slice_sizes):
    """Open-mesh NumPy index: x[result] has shape idx_shape + slice_sizes."""
    idx = np.broadcast_arrays(*idx) if idx else []
    ishape = idx[0].shape if idx else ()
    k, nd = len(ishape), len(x_shape)
    out = []
    for d in range(nd):
        ar_shape = (1,) * (k + d) + (slice_sizes[d],) + (1,) * (nd - d - 1)
        ar = np.arange(slice_sizes[d]).reshape(ar_shape)
        if d in axes:
            n = x_shape[d]
            i = _fix_index(idx[axes.index(d)], n)
            if slice_sizes[d] != 1:
                i = np.clip(i, 0, max(n - slice_sizes[d], 0))
            out.append(i.reshape(ishape + (1,) * nd) + ar)
        else:
            out.append(ar)
    return tuple(out), ishape


@dataclass(frozen=True)
class Gather(Primitive):
    """out[i..., s...] = x[idx_0[i...] + s_a0, ..., s_other]: shape idx_shape + slice_sizes."""

    axes: tuple
    slice_sizes: tuple

    def abstract_eval(self, x, *indices):
        from .base import broadcast_shapes
        ishape = broadcast_shapes(*[i.shape for i in indices], op="gather") if indices else ()
        return [(tuple(ishape) + self.slice_sizes, x.dtype)]

    def eval_cpu(self, x, *indices):
        axes, nd = self.axes, x.ndim
        idx = [_fix_index(i, x.shape[a]) for i, a in zip(indices, axes)]
        if all(self.slice_sizes[d] == 1 for d in axes) and all(
                self.slice_sizes[d] == x.shape[d] for d in range(nd) if d not in axes):
            ishape = np.broadcast_shapes(*[i.shape for i in idx]) if idx else ()
            if len(axes) == 1:
                out = np.take(x, idx[0], axis=axes[0])
                out = np.moveaxis(out, range(axes[0], axes[0] + len(ishape)),
                                  range(len(ishape))) if axes[0] else out
            else:
                xt = np.moveaxis(x, axes, range(len(axes)))
                out = xt[tuple(idx)] if idx else xt
            shape = tuple(ishape) + tuple(1 if d in axes else x.shape[d] for d in range(nd))
            return [out.reshape(shape)]
        index, _ = _nd_index(x.shape, idx, axes, self.slice_sizes)
        return [x[index]]


@dataclass(frozen=True)
class GatherAxis(Primitive):
    """take_along_axis: out[..., i, ...] = x[..., idx[..., i, ...], ...] (shapes pre-broadcast)."""

    axis: int

    def abstract_eval(self, x, idx):
        return [(idx.shape, x.dtype)]

    def eval_cpu(self, x, idx):
        idx = _fix_index(idx, x.shape[self.axis])
        return [np.take_along_axis(x, idx, axis=self.axis)]


def _apply(out, index, updates, reduce_type):
    if reduce_type == "none":
        out[index] = updates
    elif reduce_type == "sum":
        np.add.at(out, index, updates)
    elif reduce_type == "prod":
        np.multiply.at(out, index, updates)
    elif reduce_type == "max":
        np.maximum.at(out, index, updates)
    else:
        np.minimum.at(out, index, updates)


@dataclass(frozen=True)
class Scatter(Primitive):
    """A copy of x with updates written (or accumulated) at the gathered positions.

    Inputs (x, *indices, updates); updates have shape idx_shape + slice_shape with
    len(slice_shape) == x.ndim.
    """

    reduce_type: str
    axes: tuple

    def abstract_eval(self, x, *rest):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x, *rest):
        indices, updates = rest[:-1], rest[-1]
        k = updates.ndim - x.ndim
        slice_sizes = updates.shape[k:]
        idx = list(indices) if indices else []
        index, ishape = _nd_index(x.shape, idx, self.axes, slice_sizes)
        out = np.array(x, copy=True)
        upd = np.broadcast_to(updates, tuple(ishape) + tuple(slice_sizes))
        _apply(out, index, upd, self.reduce_type)
        return [out]


@dataclass(frozen=True)
class ScatterAxis(Primitive):
    """put_along_axis: inputs (x, idx, updates) with idx and updates of the same shape."""

    reduce_type: str
    axis: int

    def abstract_eval(self, x, idx, updates):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x, idx, updates):
        ax = self.axis
        idx = _fix_index(idx, x.shape[ax])
        out = np.array(x, copy=True)
        index = []
        for d in range(x.ndim):
            if d == ax:
                index.append(idx)
            else:
                shp = [1] * x.ndim
                shp[d] = idx.shape[d]
                index.append(np.arange(idx.shape[d]).reshape(shp))
        _apply(out, tuple(index), updates, self.reduce_type)
        return [out]


@dataclass(frozen=True)
class MaskedScatter(Primitive):
    """a[mask] = values: the True positions (row-major) take values' elements in order."""

    def abstract_eval(self, x, mask, values):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x, mask, values):
        out = np.array(x, copy=True)
        m = np.broadcast_to(mask, x.shape)
        n = int(np.count_nonzero(m))
        flat = np.asarray(values).reshape(-1)
        if flat.size == 1:
            out[m] = flat[0]
        elif n:
            out[m] = flat[:n] if flat.size >= n else np.resize(flat, n)
        return [out]
