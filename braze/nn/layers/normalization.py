"""Normalisation layers: LayerNorm, RMSNorm, GroupNorm, InstanceNorm, BatchNorm (channels
last, MLX's parameters and defaults)."""
from __future__ import annotations

import braze.core as mx

from .base import Module

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm", "BatchNorm"]


def _in_float32(x):
    """Half floats are normalised in float32 (and rounded once after), as MLX's kernels do."""
    return (x.astype(mx.float32), x.dtype) if x.dtype in (mx.float16, mx.bfloat16) else (x, None)


def _check_eps(name, eps):
    if eps <= 0.0:
        raise ValueError(f"[{name}] 'eps' must be positive but got {eps}.")


def _check_last(name, x, dims):
    if x.ndim == 0 or x.shape[-1] != dims:
        raise ValueError(f"[{name}] Expected input with last dimension {dims} (dims), got an "
                         f"array of shape {x.shape}.")


class InstanceNorm(Module):
    """Normalise each channel of each sample over the spatial axes (N, ..., C)."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = False):
        super().__init__()
        _check_eps("InstanceNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        if x.ndim < 3:
            raise ValueError(f"[InstanceNorm] Expects inputs with at least 3 dimensions "
                             f"(N, ..., C) but the input has shape {x.shape}.")
        _check_last("InstanceNorm", x, self.dims)
        axes = tuple(range(1, x.ndim - 1))
        y, dt = _in_float32(x)
        mean = mx.mean(y, axis=axes, keepdims=True)
        var = mx.var(y, axis=axes, keepdims=True)
        y = (y - mean) * mx.rsqrt(var + self.eps)
        if dt is not None:
            y = y.astype(dt)
        return self.weight * y + self.bias if "weight" in self else y


class LayerNorm(Module):
    """Normalise over the last axis; optional learnable scale (ones) and bias (zeros)."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = True, bias: bool = True):
        super().__init__()
        _check_eps("LayerNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))
        self.eps = eps
        self.dims = dims

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        _check_last("LayerNorm", x, self.dims)
        weight = self["weight"] if "weight" in self else None
        bias = self["bias"] if "bias" in self else None
        return mx.fast.layer_norm(x, weight, bias, self.eps)


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""

    def __init__(self, dims: int, eps: float = 1e-5):
        super().__init__()
        _check_eps("RMSNorm", eps)
        self.weight = mx.ones((dims,))
        self.eps = eps

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x):
        _check_last("RMSNorm", x, self["weight"].shape[0])
        return mx.fast.rms_norm(x, self["weight"], self.eps)


class GroupNorm(Module):
    """Normalise groups of channels over the spatial axes and the channels of a group.

    MLX's default splits the channels with a stride (channel c belongs to group
    c % num_groups); `pytorch_compatible=True` uses contiguous groups as PyTorch does.
    """

    def __init__(self, num_groups: int, dims: int, eps: float = 1e-5, affine: bool = True,
                 pytorch_compatible: bool = False):
        super().__init__()
        _check_eps("GroupNorm", eps)
        if num_groups <= 0:
            raise ValueError(f"[GroupNorm] The number of groups ({num_groups}) must be a "
                             "positive integer.")
        if dims <= 0:
            raise ValueError(f"[GroupNorm] The number of features ({dims}) must be a positive "
                             "integer.")
        if dims % num_groups != 0:
            raise ValueError(f"[GroupNorm] The number of features ({dims}) must be evenly "
                             f"divisible by the number of groups ({num_groups}).")
        if affine:
            self.bias = mx.zeros((dims,))
            self.weight = mx.ones((dims,))
        self.num_groups = num_groups
        self.dims = dims
        self.eps = eps
        self.pytorch_compatible = pytorch_compatible

    def _extra_repr(self):
        return (f"{self.num_groups}, {self.dims}, eps={self.eps}, "
                f"affine={'weight' in self}, pytorch_compatible={self.pytorch_compatible}")

    def _pytorch_compatible_group_norm(self, x):
        g = self.num_groups
        batch, *rest, dims = x.shape
        gs = dims // g
        x = x.reshape(batch, -1, g, gs)
        x = x.transpose(0, 2, 1, 3).reshape(batch, g, -1)
        x = mx.fast.layer_norm(x, None, None, self.eps)
        x = x.reshape(batch, g, -1, gs)
        return x.transpose(0, 2, 1, 3).reshape(batch, *rest, dims)

    def _group_norm(self, x):
        g = self.num_groups
        batch, *rest, dims = x.shape
        x = x.reshape(batch, -1, g)
        means = mx.mean(x, axis=1, keepdims=True)
        var = mx.var(x, axis=1, keepdims=True)
        x = (x - means) * mx.rsqrt(var + self.eps)
        return x.reshape(batch, *rest, dims)

    def __call__(self, x):
        if x.ndim < 2:
            raise ValueError(f"[GroupNorm] Expected input of shape (N, ..., C), got {x.shape}.")
        _check_last("GroupNorm", x, self.dims)
        fn = self._pytorch_compatible_group_norm if self.pytorch_compatible else \
            self._group_norm
        x = fn(x)
        return self.weight * x + self.bias if "weight" in self else x


class BatchNorm(Module):
    """Batch normalisation over all axes but the last.

    In training mode the batch statistics normalise and (with `track_running_stats`) update
    `running_mean` / `running_var` (unbiased variance) with `momentum`; in evaluation mode the
    running statistics are used. The running statistics are part of `state` and `parameters()`
    but frozen, so they never receive gradients.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        _check_eps("BatchNorm", eps)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if self.track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(keys=["running_mean", "running_var"], recurse=False)

    def _always_frozen(self):
        """`unfreeze` (direct or recursive from a parent) keeps the running statistics
        frozen."""
        return ("running_mean", "running_var") if self.track_running_stats else ()

    def _extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={'weight' in self}, track_running_stats={self.track_running_stats}")

    @staticmethod
    def _calc_stats(x, ddof=0):
        axes = tuple(range(0, x.ndim - 1))
        return mx.mean(x, axis=axes), mx.var(x, axis=axes, ddof=ddof)

    def __call__(self, x):
        if x.ndim < 2 or x.ndim > 4:
            raise ValueError(f"[BatchNorm] Expected input tensor to have 2, 3 or 4 dimensions, "
                             f"but got shape {x.shape}.")
        _check_last("BatchNorm", x, self.num_features)
        if self.training:
            n = 1
            for s in x.shape[:-1]:
                n *= s
            if n == 1:
                raise ValueError("[BatchNorm] Training requires more than one value per "
                                 f"channel, got input of shape {x.shape}.")
        mean, var = self._calc_stats(x)
        if self.training and self.track_running_stats:
            mu = self.momentum
            _, unbiased = self._calc_stats(x, ddof=1)
            self.running_mean = (1 - mu) * self.running_mean + mu * mx.stop_gradient(mean)
            self.running_var = (1 - mu) * self.running_var + mu * mx.stop_gradient(unbiased)
        elif self.track_running_stats:
            mean, var = self.running_mean, self.running_var
        x = (x - mean) * mx.rsqrt(var + self.eps)
        return self.weight * x + self.bias if "weight" in self else x
