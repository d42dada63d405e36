"""Upsample: nearest, linear and cubic interpolation of channels-last inputs (N, *spatial, C),
following MLX's index and weight formulas (align_corners, antialias)."""
from __future__ import annotations

import operator
from functools import reduce
from itertools import product
from math import ceil
from typing import Tuple, Union

import braze.core as mx

from .base import Module

__all__ = ["Upsample", "upsample_nearest", "upsample_linear", "upsample_cubic"]


def _scaled_indices(N, scale, align_corners, dim, ndims):
    M = int(scale * N)
    if align_corners:
        indices = mx.arange(M, dtype=mx.float32) * ((N - 1) / max(M - 1, 1))
    else:
        step = 1 / scale
        start = ((M - 1) * step - N + 1) / 2
        indices = mx.arange(M, dtype=mx.float32) * step - start
    shape = [1] * ndims
    shape[dim] = -1
    return indices.reshape(shape)


def _nearest_indices(N, scale, dim, ndims):
    M = int(scale * N)
    indices = mx.arange(M, dtype=mx.float32)
    if M > N:
        indices = mx.round((indices + 0.5) * (N / M) - 0.5)
    else:
        indices = indices * (N / M)
    shape = [1] * ndims
    shape[dim] = -1
    return indices.astype(mx.uint32).reshape(shape)


def _linear_indices(N, scale, align_corners, dim, ndims):
    indices = _scaled_indices(N, scale, align_corners, dim, ndims)
    indices = mx.clip(indices, 0, N - 1)
    lo = mx.floor(indices)
    hi = mx.ceil(indices)
    weight = mx.expand_dims(indices - lo, -1)
    return ((lo.astype(mx.uint32), 1 - weight), (hi.astype(mx.uint32), weight))


def _aa_indices(N, scale, align_corners, dim, ndims, kernel_fn, kernel_radius):
    indices = _scaled_indices(N, scale, align_corners, dim, ndims)
    inv_scale = 1.0 / scale if scale < 1 else 1.0
    num_taps = ceil(kernel_radius * inv_scale) + 1
    all_idx, all_w = [], []
    for k in range(-num_taps + 1, num_taps):
        idx = mx.floor(indices) + k
        w = kernel_fn(mx.abs(indices - idx) / inv_scale)
        all_idx.append(idx)
        all_w.append(mx.where((idx >= 0) & (idx < N), w, 0.0))
    w_sum = sum(all_w)
    w_sum = mx.where(w_sum > 0, w_sum, 1.0)
    return tuple((mx.clip(idx, 0, N - 1).astype(mx.uint32), mx.expand_dims(w / w_sum, -1))
                 for idx, w in zip(all_idx, all_w))


def _triangle_kernel(x):
    return mx.maximum(1.0 - x, 0.0)


def _cubic_kernel(x):
    a = -0.5
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    outer = (((x - 5) * x + 8) * x - 4) * a
    return mx.where(x <= 1.0, inner, mx.where(x <= 2.0, outer, 0.0))


def _linear_aa_indices(N, scale, align_corners, dim, ndims):
    return _aa_indices(N, scale, align_corners, dim, ndims, _triangle_kernel, 1.0)


def _cubic_aa_indices(N, scale, align_corners, dim, ndims):
    return _aa_indices(N, scale, align_corners, dim, ndims, _cubic_kernel, 2.0)


def _cubic_weight(ind, grid, dist):
    a = -0.75
    x = mx.abs(ind - grid)
    if dist == 1:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    return (((x - 5) * x + 8) * x - 4) * a


def _cubic_indices(N, scale, align_corners, dim, ndims):
    indices = _scaled_indices(N, scale, align_corners, dim, ndims)
    l1 = mx.floor(indices)
    r1 = mx.floor(indices + 1)
    l2 = l1 - 1
    r2 = r1 + 1
    out = []
    for grid, dist in ((l1, 1), (r1, 1), (l2, 2), (r2, 2)):
        w = _cubic_weight(indices, grid, dist)[..., None]
        out.append((mx.clip(grid, 0, N - 1).astype(mx.uint32), w))
    return tuple(out)


def _check_dims(x, scale_factor):
    if x.ndim - 2 != len(scale_factor):
        raise ValueError("[Upsample] A scale needs to be provided for each spatial dimension")


def upsample_nearest(x: mx.array, scale_factor: tuple) -> mx.array:
    """Nearest-neighbour upsampling by `scale_factor` (one per spatial axis)."""
    _check_dims(x, scale_factor)
    dims = x.ndim - 2
    if tuple(map(int, scale_factor)) == tuple(scale_factor):
        shape = list(x.shape)
        for d in range(dims):
            shape.insert(2 + 2 * d, 1)
        x = x.reshape(shape)
        for d in range(dims):
            shape[2 + 2 * d] = int(scale_factor[d])
        x = mx.broadcast_to(x, shape)
        for d in range(dims):
            shape[d + 1] *= shape[d + 2]
            shape.pop(d + 2)
        return x.reshape(shape)
    _, *N, _ = x.shape
    idx = [slice(None)] + [_nearest_indices(n, s, i, dims)
                           for i, (n, s) in enumerate(zip(N, scale_factor))]
    return x[tuple(idx)]


def _interpolate(x, scale_factor, indices_fn, align_corners=False):
    _check_dims(x, scale_factor)
    dims = x.ndim - 2
    _, *N, _ = x.shape
    indices = [indices_fn(n, s, align_corners, i, dims)
               for i, (n, s) in enumerate(zip(N, scale_factor))]
    out = None
    for idx_weight in product(*indices):
        idx, weight = zip(*idx_weight)
        term = reduce(operator.mul, weight) * x[(slice(None),) + idx]
        out = term if out is None else out + term
    return out


def _interpolate_separable(x, scale_factor, indices_fn, align_corners=False):
    _check_dims(x, scale_factor)
    dims = x.ndim - 2
    _, *N, _ = x.shape
    out = x
    for i, (n, s) in enumerate(zip(N, scale_factor)):
        acc = None
        for idx, weight in indices_fn(n, s, align_corners, i, dims):
            term = mx.take(out, idx.reshape(-1), axis=i + 1) * weight
            acc = term if acc is None else acc + term
        out = acc
    return out


def _no_aa_corners(align_corners, antialias):
    if antialias and align_corners:
        raise ValueError("[Upsample] antialias=True with align_corners=True is not supported. "
                         "Use align_corners=False for antialiased interpolation.")


def upsample_linear(x: mx.array, scale_factor: tuple, align_corners: bool = False,
                    antialias: bool = False) -> mx.array:
    """(Bi/tri)linear upsampling."""
    _no_aa_corners(align_corners, antialias)
    if antialias:
        return _interpolate_separable(x, scale_factor, _linear_aa_indices, align_corners)
    if not align_corners:
        return _interpolate_separable(x, scale_factor, _linear_indices, align_corners)
    return _interpolate(x, scale_factor, _linear_indices, align_corners)


def upsample_cubic(x: mx.array, scale_factor: tuple, align_corners: bool = False,
                   antialias: bool = False) -> mx.array:
    """(Bi)cubic upsampling."""
    _no_aa_corners(align_corners, antialias)
    if antialias:
        return _interpolate_separable(x, scale_factor, _cubic_aa_indices, align_corners)
    return _interpolate(x, scale_factor, _cubic_indices, align_corners)


class Upsample(Module):
    """Upsample (N, *spatial, C) inputs by `scale_factor` with mode "nearest", "linear" or
    "cubic"."""

    def __init__(self, scale_factor: Union[float, Tuple[float, ...]], mode: str = "nearest",
                 align_corners: bool = False, antialias: bool = False):
        super().__init__()
        if mode not in ("nearest", "linear", "cubic"):
            raise ValueError(f"[Upsample] Got unsupported upsampling algorithm: {mode}")
        if antialias and mode == "nearest":
            raise ValueError("[Upsample] Antialiasing is not supported for nearest neighbor "
                             "upsampling")
        if isinstance(scale_factor, (list, tuple)):
            scale_factor = tuple(map(float, scale_factor))
        else:
            scale_factor = float(scale_factor)
        _no_aa_corners(align_corners, antialias)
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.antialias = antialias

    def _extra_repr(self) -> str:
        r = (f"scale_factor={self.scale_factor}, mode={self.mode!r}, "
             f"align_corners={self.align_corners}")
        return r + (", antialias=True" if self.antialias else "")

    def __call__(self, x):
        dims = x.ndim - 2
        if dims <= 0:
            raise ValueError(f"[Upsample] The input should have at least 1 spatial dimension "
                             f"which means it should be at least 3D but {x.ndim}D was provided")
        sf = self.scale_factor
        if isinstance(sf, tuple):
            if len(sf) != dims:
                raise ValueError(f"[Upsample] One scale per spatial dimension is required but "
                                 f"scale_factor={sf} and the number of spatial dimensions were "
                                 f"{dims}")
        else:
            sf = (sf,) * dims
        if self.mode == "nearest":
            return upsample_nearest(x, sf)
        if self.mode == "linear":
            return upsample_linear(x, sf, self.align_corners, self.antialias)
        return upsample_cubic(x, sf, self.align_corners, self.antialias)
