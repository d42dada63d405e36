"""MultiHeadAttention and the Transformer encoder/decoder stacks (MLX's structure, parameter
names and defaults: pre-norm by default, ReLU MLP of width 4 * dims)."""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import braze.core as mx

from .activations import relu
from .base import Module
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm

__all__ = ["MultiHeadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


def _checkpoint(layer):
    from ..utils import checkpoint
    return checkpoint(layer)


class MultiHeadAttention(Module):
    """Scaled dot-product attention over `num_heads` heads with query/key/value/output
    projections (no bias by default). Inputs are (B, L, features); `mask` is added to the
    scores (see `create_additive_causal_mask`) or a boolean keep-mask."""

    def __init__(self, dims: int, num_heads: int, query_input_dims: Optional[int] = None,
                 key_input_dims: Optional[int] = None, value_input_dims: Optional[int] = None,
                 value_dims: Optional[int] = None, value_output_dims: Optional[int] = None,
                 bias: bool = False):
        super().__init__()
        if dims % num_heads != 0:
            raise ValueError("The input feature dimensions should be divisible by the number "
                             f"of heads ({dims} % {num_heads}) != 0")
        query_input_dims = query_input_dims or dims
        key_input_dims = key_input_dims or dims
        value_input_dims = value_input_dims or key_input_dims
        value_dims = value_dims or dims
        value_output_dims = value_output_dims or dims
        self.num_heads = num_heads
        self.query_proj = Linear(query_input_dims, dims, bias=bias)
        self.key_proj = Linear(key_input_dims, dims, bias=bias)
        self.value_proj = Linear(value_input_dims, value_dims, bias=bias)
        self.out_proj = Linear(value_dims, value_output_dims, bias=bias)

    def __call__(self, queries, keys, values, mask=None):
        queries = self.query_proj(queries)
        keys = self.key_proj(keys)
        values = self.value_proj(values)
        h = self.num_heads
        queries = mx.unflatten(queries, -1, (h, -1)).transpose(0, 2, 1, 3)
        keys = mx.unflatten(keys, -1, (h, -1)).transpose(0, 2, 1, 3)
        values = mx.unflatten(values, -1, (h, -1)).transpose(0, 2, 1, 3)
        scale = math.sqrt(1 / queries.shape[-1])
        out = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=scale, mask=mask)
        out = out.transpose(0, 2, 1, 3).flatten(-2, -1)
        return self.out_proj(out)

    @staticmethod
    def create_additive_causal_mask(N: int, dtype: mx.Dtype = mx.float32) -> mx.array:
        """(N, N) mask: 0 on and below the diagonal, the dtype's lowest value above it."""
        indices = mx.arange(N)
        mask = indices[:, None] < indices[None]
        return mask.astype(dtype) * mx.finfo(dtype).min


class TransformerEncoderLayer(Module):
    """Self-attention and an MLP, each with a residual connection and LayerNorm."""

    def __init__(self, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 norm_first: bool = True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def __call__(self, x, mask):
        if self.norm_first:
            y = self.ln1(x)
            y = self.attention(y, y, y, mask)
            x = x + self.dropout1(y)
            y = self.ln2(x)
            y = self.linear1(y)
            y = self.activation(y)
            y = self.dropout2(y)
            y = self.linear2(y)
            return x + y
        y = self.attention(x, x, x, mask)
        x = self.ln1(x + self.dropout1(y))
        y = self.linear1(x)
        y = self.activation(y)
        y = self.dropout2(y)
        y = self.linear2(y)
        return self.ln2(x + y)


class TransformerEncoder(Module):
    """`num_layers` encoder layers and a final LayerNorm."""

    def __init__(self, num_layers: int, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[mx.array], mx.array] = relu,
                 norm_first: bool = True, checkpoint: bool = False):
        super().__init__()
        self.layers = [TransformerEncoderLayer(dims, num_heads, mlp_dims, dropout, activation,
                                               norm_first) for _ in range(num_layers)]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, mask):
        for layer in self.layers:
            layer = _checkpoint(layer) if self.checkpoint else layer
            x = layer(x, mask)
        return self.ln(x)


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over `memory`, and an MLP."""

    def __init__(self, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 norm_first: bool = True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.self_attention = MultiHeadAttention(dims, num_heads)
        self.cross_attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.ln3 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def __call__(self, x, memory, x_mask, memory_mask):
        if self.norm_first:
            y = self.ln1(x)
            y = self.self_attention(y, y, y, x_mask)
            x = x + self.dropout1(y)
            y = self.ln2(x)
            y = self.cross_attention(y, memory, memory, memory_mask)
            x = x + self.dropout2(y)
            y = self.ln3(x)
            y = self.linear1(y)
            y = self.activation(y)
            y = self.dropout3(y)
            y = self.linear2(y)
            return x + y
        y = self.self_attention(x, x, x, x_mask)
        x = self.ln1(x + self.dropout1(y))
        y = self.cross_attention(x, memory, memory, memory_mask)
        x = self.ln2(x + self.dropout2(y))
        y = self.linear1(x)
        y = self.activation(y)
        y = self.dropout3(y)
        y = self.linear2(y)
        return self.ln3(x + y)


class TransformerDecoder(Module):
    """`num_layers` decoder layers and a final LayerNorm."""

    def __init__(self, num_layers: int, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[mx.array], mx.array] = relu,
                 norm_first: bool = True, checkpoint: bool = False):
        super().__init__()
        self.layers = [TransformerDecoderLayer(dims, num_heads, mlp_dims, dropout, activation,
                                               norm_first) for _ in range(num_layers)]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, memory, x_mask, memory_mask):
        for layer in self.layers:
            layer = _checkpoint(layer) if self.checkpoint else layer
            x = layer(x, memory, x_mask, memory_mask)
        return self.ln(x)


class Transformer(Module):
    """Encoder-decoder Transformer (Vaswani et al.) with MLX's defaults (dims 512, 8 heads,
    6 + 6 layers, pre-norm)."""

    def __init__(self, dims: int = 512, num_heads: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 custom_encoder: Optional[Any] = None, custom_decoder: Optional[Any] = None,
                 norm_first: bool = True, checkpoint: bool = False):
        super().__init__()
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            num_encoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first,
            checkpoint)
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            num_decoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first,
            checkpoint)

    def __call__(self, src, tgt, src_mask, tgt_mask, memory_mask):
        memory = self.encoder(src, src_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)
