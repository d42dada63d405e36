"""Initialisers (MLX's `mlx.nn.init`): each returns a function of an array that gives a new
array of the same shape."""
from __future__ import annotations

import math
from typing import Callable, Literal

import braze.core as mx

from . import _random

__all__ = ["constant", "normal", "uniform", "identity", "glorot_normal", "glorot_uniform",
           "he_normal", "he_uniform", "sparse", "orthogonal"]


def constant(value: float, dtype: mx.Dtype = mx.float32) -> Callable:
    """All elements equal to `value`."""
    def initializer(a):
        return mx.full(a.shape, value, dtype=dtype)
    return initializer


def normal(mean: float = 0.0, std: float = 1.0, dtype: mx.Dtype = mx.float32) -> Callable:
    """Samples from N(mean, std^2)."""
    def initializer(a):
        return _random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)
    return initializer


def uniform(low: float = 0.0, high: float = 1.0, dtype: mx.Dtype = mx.float32) -> Callable:
    """Samples from U(low, high)."""
    def initializer(a):
        return _random.uniform(low, high, a.shape, dtype=dtype)
    return initializer


def identity(dtype: mx.Dtype = mx.float32) -> Callable:
    """The identity matrix (square 2-D arrays only)."""
    def initializer(arr):
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(f"The input array must be a square matrix but got shape "
                             f"{arr.shape}.")
        return mx.eye(n=arr.shape[0], dtype=dtype)
    return initializer


def _calculate_fan_in_fan_out(x):
    if x.ndim < 2:
        raise ValueError("Glorot / He initialization requires at least 2 dimensional input "
                         f"but input with {x.ndim} dimensions.")
    fan_in, fan_out = x.shape[-1], x.shape[0]
    if x.ndim > 2:
        rf = math.prod(x.shape[1:-1])
        fan_in, fan_out = fan_in * rf, fan_out * rf
    return fan_in, fan_out


def glorot_normal(dtype: mx.Dtype = mx.float32) -> Callable:
    """N(0, gain^2 * 2 / (fan_in + fan_out))."""
    def initializer(a, gain: float = 1.0):
        fan_in, fan_out = _calculate_fan_in_fan_out(a)
        std = gain * math.sqrt(2.0 / (fan_in + fan_out))
        return _random.normal(shape=a.shape, scale=std, dtype=dtype)
    return initializer


def glorot_uniform(dtype: mx.Dtype = mx.float32) -> Callable:
    """U(-l, l) with l = gain * sqrt(6 / (fan_in + fan_out))."""
    def initializer(a, gain: float = 1.0):
        fan_in, fan_out = _calculate_fan_in_fan_out(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return _random.uniform(-limit, limit, a.shape, dtype=dtype)
    return initializer


def _fan(a, mode):
    fan_in, fan_out = _calculate_fan_in_fan_out(a)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"Invalid mode: {mode}. Valid modes are: fan_in, fan_out")


def he_normal(dtype: mx.Dtype = mx.float32) -> Callable:
    """N(0, (gain / sqrt(fan))^2), fan = fan_in (default) or fan_out."""
    def initializer(a, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0):
        std = gain / math.sqrt(_fan(a, mode))
        return _random.normal(shape=a.shape, scale=std, dtype=dtype)
    return initializer


def he_uniform(dtype: mx.Dtype = mx.float32) -> Callable:
    """U(-l, l) with l = gain * sqrt(3 / fan)."""
    def initializer(a, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0):
        limit = gain * math.sqrt(3.0 / _fan(a, mode))
        return _random.uniform(-limit, limit, a.shape, dtype=dtype)
    return initializer


def sparse(sparsity: float, mean: float = 0.0, std: float = 1.0,
           dtype: mx.Dtype = mx.float32) -> Callable:
    """N(mean, std^2) with a fraction `sparsity` of each row set to zero (2-D only)."""
    def initializer(a):
        if a.ndim != 2:
            raise ValueError("Only tensors with 2 dimensions are supported")
        rows, cols = a.shape
        num_zeros = int(math.ceil(sparsity * cols))
        order = mx.argsort(_random.uniform(shape=a.shape), axis=1)
        out = _random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)
        ranks = mx.argsort(order, axis=1)  # rank of each column in the row's random order
        return mx.where(ranks < num_zeros, mx.zeros_like(out), out)
    return initializer


def orthogonal(gain: float = 1.0, dtype: mx.Dtype = mx.float32) -> Callable:
    """A (semi-)orthogonal matrix times `gain` (2-D only), from the QR decomposition of a
    Gaussian matrix."""
    def initializer(a):
        import numpy as np

        if a.ndim != 2:
            raise ValueError("Orthogonal initialization requires a 2D array but got a "
                             f"{a.ndim}D array.")
        rows, cols = a.shape
        n = max(rows, cols)
        rmat = np.asarray(_random.normal(shape=(n, n)), dtype=np.float64)
        q, r = np.linalg.qr(rmat)
        q = q * np.sign(np.diag(r))
        return mx.array(q[:rows, :cols] * gain, dtype=dtype)
    return initializer
