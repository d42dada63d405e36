"""Positional encodings: RoPE, SinusoidalPositionalEncoding, ALiBi (MLX's formulas)."""
from __future__ import annotations

import math
from typing import Optional

import braze.core as mx

from .base import Module

__all__ = ["RoPE", "SinusoidalPositionalEncoding", "ALiBi"]


class RoPE(Module):
    """Rotary positional encoding of the first `dims` features; positions run along axis -2.

    `traditional=True` rotates consecutive pairs of features, otherwise the first half against
    the second half. Frequencies are base^(-2i/dims); positions are (offset + t) * scale.
    """

    def __init__(self, dims: int, traditional: bool = False, base: float = 10000,
                 scale: float = 1.0):
        super().__init__()
        self.dims = dims
        self.traditional = traditional
        self.base = base
        self.scale = scale

    def _extra_repr(self):
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x, offset: int = 0):
        return mx.fast.rope(x, self.dims, traditional=self.traditional, base=self.base,
                            scale=self.scale, offset=offset)


class SinusoidalPositionalEncoding(Module):
    """Sinusoidal features of (typically integer) positions: [sin(x * f), cos(x * f)] for
    frequencies f geometrically spaced from max_freq down to min_freq, times `scale`
    (default sqrt(2 / dims))."""

    def __init__(self, dims: int, min_freq: float = 0.0001, max_freq: float = 1,
                 scale: Optional[float] = None, cos_first: bool = False,
                 full_turns: bool = False):
        super().__init__()
        if dims <= 0 or dims % 2 != 0:
            raise ValueError(f"[SinusoidalPositionalEncoding] dims must be positive and even "
                             f"but got {dims}.")
        if dims == 2:
            one_zero = mx.array([1.0])
        else:
            one_zero = 1 - mx.arange(0, dims // 2) / (dims // 2 - 1)
        lo, hi = math.log(min_freq), math.log(max_freq)
        self._sigmas = mx.exp(one_zero * (hi - lo) + lo)
        if full_turns:
            self._sigmas = self._sigmas * (2 * math.pi)
        self.scale = scale if scale is not None else (2 / dims) ** 0.5
        self.cos_first = cos_first

    def __call__(self, x):
        y = x[..., None] * self._sigmas
        cosy, siny = mx.cos(y), mx.sin(y)
        y = mx.concatenate([cosy, siny] if self.cos_first else [siny, cosy], axis=-1)
        if self.scale != 1:
            y = y * self.scale
        return y


class ALiBi(Module):
    """Attention with linear biases: adds -slope_h * |i - j| to attention scores."""

    @staticmethod
    def create_alibi_matrix(q_sequence_length: int, k_sequence_length: int, num_heads: int,
                            offset: int = 0, dtype: mx.Dtype = mx.float32) -> mx.array:
        """The ALiBi bias of shape (1, num_heads, q_sequence_length - offset,
        k_sequence_length): -|i - j| times each head's slope.
        """
        x1 = mx.arange(offset, q_sequence_length)
        x2 = mx.arange(0, k_sequence_length)
        dist = -mx.abs(mx.expand_dims(x1[:, None] - x2[None, :], axis=(0, 1)))
        slope = ALiBi.create_alibi_slope(num_heads=num_heads, dtype=dtype)
        return (dist * slope).astype(dtype)

    @staticmethod
    def create_alibi_slope(num_heads: int, dtype: mx.Dtype = mx.float32) -> mx.array:
        """The per-head ALiBi slopes, a geometric sequence, shaped (num_heads, 1, 1)."""
        def get_slopes(n):
            if math.log2(n).is_integer():
                start = 2 ** (-(2 ** -(math.log2(n) - 3)))
                return [start * start**i for i in range(n)]
            p = 2 ** math.floor(math.log2(n))
            return get_slopes(p) + get_slopes(2 * p)[0::2][: n - p]

        return mx.expand_dims(mx.array(get_slopes(num_heads), dtype=dtype), axis=(-1, -2))

    def __call__(self, attention_scores, offset: int = 0, mask=None):
        m = ALiBi.create_alibi_matrix(attention_scores.shape[-2] + offset,
                                      attention_scores.shape[-1], attention_scores.shape[1],
                                      offset, attention_scores.dtype)
        if mask is not None:
            m = m + mask
        return attention_scores + m
