"""Embedding: a lookup table of shape (num_embeddings, dims), initialised from
N(0, 1/dims)."""
from __future__ import annotations

import math

import braze.core as mx

from .. import _random
from .base import Module
from .quantized import QuantizedEmbedding

__all__ = ["Embedding"]


class Embedding(Module):
    """Maps integer indices to rows of `weight`; `as_linear` uses the table as an output
    projection (weight tying)."""

    def __init__(self, num_embeddings: int, dims: int):
        super().__init__()
        scale = math.sqrt(1 / dims)
        self.weight = _random.normal(shape=(num_embeddings, dims), scale=scale)

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"

    def __call__(self, x):
        kind = getattr(getattr(x, "dtype", None), "kind", None)
        if kind is not None and kind not in "iu":
            raise ValueError(f"[Embedding] Expected integer indices, got an array of dtype "
                             f"{x.dtype.name} and shape {x.shape}.")
        return self.weight[x]

    def as_linear(self, x: mx.array) -> mx.array:
        """x @ weight.T: scores against every embedding."""
        if x.shape[-1] != self.weight.shape[1]:
            raise ValueError(f"[Embedding.as_linear] Expected input with last dimension "
                             f"{self.weight.shape[1]} (dims), got shape {x.shape}.")
        return x @ self.weight.T

    def to_quantized(self, group_size: int = None, bits: int = None, mode: str = "affine",
                     quantize_input: bool = False) -> Module:
        """A QuantizedEmbedding approximating this layer (inputs are indices: they cannot be
        quantized)."""
        if quantize_input:
            raise ValueError("Quantized input is not supported.")
        return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)
