"""Pooling layers over channels-last inputs (N, *spatial, C): MaxPool1d/2d/3d and
AvgPool1d/2d/3d, with MLX's arguments (`stride` defaults to `kernel_size`; padding is filled
with -inf for max pooling and 0 for average pooling, and the zeros count in the average).

Windows are gathered with one strided slice per kernel offset and reduced, so the layers are
differentiable through ordinary ops.
"""
from __future__ import annotations

import itertools
from typing import Optional, Tuple, Union

import braze.core as mx

from .base import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d"]


def _value_or_list(x, n, msg):
    if isinstance(x, (list, tuple)):
        if len(x) != n:
            raise ValueError(msg)
        return list(x)
    if not isinstance(x, int):
        raise ValueError(msg)
    return [x] * n


def _pool(x, reduce, kernel, stride, axes):
    nd = len(kernel)
    spatial = x.shape[1:-1]
    if all(s % k == 0 and k == st for s, k, st in zip(spatial, kernel, stride)):
        # non-overlapping windows: a reshape and a reduction
        shape = [x.shape[0]]
        for s, k in zip(spatial, kernel):
            shape += [s // k, k]
        shape.append(x.shape[-1])
        x = x.reshape(shape)
        return reduce(x, tuple(2 + 2 * i for i in range(nd)))
    out = [(s - k) // st + 1 for s, k, st in zip(spatial, kernel, stride)]
    taps = []
    for offs in itertools.product(*[range(k) for k in kernel]):
        idx = (slice(None),) + tuple(slice(o, o + (n - 1) * st + 1, st)
                                     for o, n, st in zip(offs, out, stride)) + (slice(None),)
        taps.append(x[idx])
    return reduce(mx.stack(taps, axis=-2), -2)


class _Pool(Module):
    def __init__(self, reduce, padding_value, nd, kernel_size: Union[int, Tuple[int, ...]],
                 stride: Optional[Union[int, Tuple[int, ...]]],
                 padding: Union[int, Tuple[int, ...]]):
        super().__init__()
        name = type(self).__name__
        plural = "integer" if nd == 1 else "integers"
        msg = "[{}] '{}' must be an integer or a tuple containing {} {}"
        kernel_size = _value_or_list(kernel_size, nd, msg.format(name, "kernel_size", nd, plural))
        stride = kernel_size if stride is None else \
            _value_or_list(stride, nd, msg.format(name, "stride", nd, plural))
        padding = _value_or_list(padding, nd, msg.format(name, "padding", nd, plural))
        for what, values in (("kernel_size", kernel_size), ("stride", stride)):
            if any(v <= 0 for v in values):
                raise ValueError(f"[{name}] '{what}' must be positive but got {tuple(values)}.")
        if any(p < 0 for p in padding):
            raise ValueError(f"[{name}] 'padding' must be non-negative but got "
                             f"{tuple(padding)}.")
        self._reduce = reduce
        self._kernel_size = kernel_size
        self._stride = stride
        self._padding = [(p, p) for p in padding]
        self._padding_value = padding_value
        self._axes = tuple(range(-nd - 1, -1))
        self._nd = nd

    def _extra_repr(self):
        return (f"kernel_size={tuple(self._kernel_size)}, stride={tuple(self._stride)}, "
                f"padding={tuple(p[0] for p in self._padding)}")

    def __call__(self, x):
        name = type(self).__name__
        if x.ndim != self._nd + 2:
            raise ValueError(f"[{name}] Expected input with {self._nd + 2} dimensions "
                             f"(N, {'spatial, ' * self._nd}C), got shape {x.shape}.")
        if any(p[0] > 0 for p in self._padding):
            x = mx.pad(x, [(0, 0)] + self._padding + [(0, 0)],
                       constant_values=self._padding_value)
        for s, k in zip(x.shape[1:-1], self._kernel_size):
            if s < k:
                raise ValueError(f"[{name}] The kernel size {tuple(self._kernel_size)} is "
                                 f"larger than the (padded) input of shape {x.shape}.")
        return _pool(x, self._reduce, self._kernel_size, self._stride, self._axes)


def _max(x, axis):
    return mx.max(x, axis=axis)


def _mean(x, axis):
    return mx.mean(x, axis=axis)


class MaxPool1d(_Pool):
    """Max over windows of (N, L, C) inputs."""

    def __init__(self, kernel_size: Union[int, Tuple[int, ...]],
                 stride: Optional[Union[int, Tuple[int, ...]]] = None,
                 padding: Union[int, Tuple[int, ...]] = 0):
        super().__init__(_max, -float("inf"), 1, kernel_size, stride, padding)


class AvgPool1d(_Pool):
    """Mean over windows of (N, L, C) inputs."""

    def __init__(self, kernel_size: Union[int, Tuple[int, ...]],
                 stride: Optional[Union[int, Tuple[int, ...]]] = None,
                 padding: Union[int, Tuple[int, ...]] = 0):
        super().__init__(_mean, 0, 1, kernel_size, stride, padding)


class MaxPool2d(_Pool):
    """Max over windows of (N, H, W, C) inputs."""

    def __init__(self, kernel_size: Union[int, Tuple[int, ...]],
                 stride: Optional[Union[int, Tuple[int, ...]]] = None,
                 padding: Union[int, Tuple[int, ...]] = 0):
        super().__init__(_max, -float("inf"), 2, kernel_size, stride, padding)


class AvgPool2d(_Pool):
    """Mean over windows of (N, H, W, C) inputs."""

    def __init__(self, kernel_size: Union[int, Tuple[int, ...]],
                 stride: Optional[Union[int, Tuple[int, ...]]] = None,
                 padding: Union[int, Tuple[int, ...]] = 0):
        super().__init__(_mean, 0, 2, kernel_size, stride, padding)


class MaxPool3d(_Pool):
    """Max over windows of (N, D, H, W, C) inputs."""

    def __init__(self, kernel_size: Union[int, Tuple[int, ...]],
                 stride: Optional[Union[int, Tuple[int, ...]]] = None,
                 padding: Union[int, Tuple[int, ...]] = 0):
        super().__init__(_max, -float("inf"), 3, kernel_size, stride, padding)


class AvgPool3d(_Pool):
    """Mean over windows of (N, D, H, W, C) inputs."""

    def __init__(self, kernel_size: Union[int, Tuple[int, ...]],
                 stride: Optional[Union[int, Tuple[int, ...]]] = None,
                 padding: Union[int, Tuple[int, ...]] = 0):
        super().__init__(_mean, 0, 3, kernel_size, stride, padding)
