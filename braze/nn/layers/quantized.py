"""Quantized layers (QuantizedLinear, QuantizedEmbedding, QQLinear) and `nn.quantize`, as in
MLX: the weights are stored as `mx.quantize` returns them (fp modes have no biases) and are
frozen; QQLinear also rounds its input (`mx.qqmm`) and keeps float weights while training."""
from __future__ import annotations

import math
from typing import Callable, Optional, Union

import braze.core as mx
from braze.utils import tree_map_with_path

from .. import _random
from .base import Module

__all__ = ["QuantizedLinear", "QuantizedEmbedding", "QQLinear", "quantize"]

_MODE_DEFAULTS = {"affine": (64, 4), "mxfp4": (32, 4), "nvfp4": (16, 4), "mxfp8": (32, 8)}


def _defaults_for_mode(mode, group_size, bits):
    """(group_size, bits) with the mode's defaults where None."""
    if mode not in _MODE_DEFAULTS:
        raise ValueError(f"Invalid quantization mode '{mode}'. Valid modes are: "
                         f"{', '.join(_MODE_DEFAULTS)}.")
    dg, db = _MODE_DEFAULTS[mode]
    return group_size or dg, bits or db


def _store_quantized(layer, weight, group_size, bits, mode):
    """Set weight, scales and biases (None for the fp modes) from a float matrix."""
    layer.weight, layer.scales, *biases = mx.quantize(weight, group_size, bits, mode=mode)
    layer.biases = biases[0] if biases else None


def _to_quantized_kwargs(params, group_size, bits, mode, quantize_input):
    """The keyword arguments nn.quantize passes to `to_quantized` for a predicate result."""
    if isinstance(params, bool):
        kw = {"group_size": group_size, "bits": bits, "mode": mode}
        if quantize_input:
            kw["quantize_input"] = quantize_input
        return kw
    if isinstance(params, dict):
        if "quantize_input" in params and not params["quantize_input"]:
            params = {k: v for k, v in params.items() if k != "quantize_input"}
        return params
    raise ValueError("``class_predicate`` must return a bool or a dict of parameters to pass "
                     "to ``to_quantized``")


def quantize(model: Module, group_size: int = None, bits: int = None, *, mode: str = "affine",
             quantize_input: bool = False,
             class_predicate: Optional[Callable[[str, Module], Union[bool, dict]]] = None) -> None:
    """Replace, in place, the leaf modules the predicate selects (default: every layer with a
    `to_quantized` method) by their quantized versions."""
    predicate = class_predicate or (lambda _, m: hasattr(m, "to_quantized"))

    def maybe_quantize(path, m):
        chosen = predicate(path, m)
        if not chosen:
            return m
        if not hasattr(m, "to_quantized"):
            raise ValueError(f"Unable to quantize model of type {type(m)}")
        return m.to_quantized(**_to_quantized_kwargs(chosen, group_size, bits, mode,
                                                     quantize_input))

    leaves = tree_map_with_path(maybe_quantize, model.leaf_modules(), is_leaf=Module.is_module)
    model.update_modules(leaves)


class QuantizedEmbedding(Module):
    """Embedding with a quantized (num_embeddings, dims) table; rows are dequantized on
    lookup. `as_linear` uses the table as a quantized output projection."""

    def __init__(self, num_embeddings: int, dims: int, group_size: int = None,
                 bits: int = None, mode: str = "affine"):
        super().__init__()
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        weight = _random.normal(shape=(num_embeddings, dims), scale=math.sqrt(1 / dims))
        _store_quantized(self, weight, group_size, bits, mode)
        self.num_embeddings = num_embeddings
        self.dims = dims
        self.freeze()

    def __call__(self, x):
        biases = self.get("biases")
        return mx.dequantize(self["weight"][x], scales=self["scales"][x],
                             biases=None if biases is None else biases[x],
                             group_size=self.group_size, bits=self.bits, mode=self.mode)

    def as_linear(self, x: mx.array) -> mx.array:
        """x @ dequantize(weight).T, computed by quantized_matmul."""
        return mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                   biases=self.get("biases"), transpose=True,
                                   group_size=self.group_size, bits=self.bits, mode=self.mode)

    def _extra_repr(self):
        return (f"{self.num_embeddings}, {self.dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    @classmethod
    def from_embedding(cls, embedding_layer: Module, group_size: int = None, bits: int = None,
                       mode: str = "affine") -> Module:
        """A QuantizedEmbedding holding `embedding_layer`'s table, quantized."""
        n, dims = embedding_layer.weight.shape
        ql = cls(n, dims, group_size, bits, mode=mode)
        _store_quantized(ql, embedding_layer.weight, group_size, bits, mode)
        return ql


class QuantizedLinear(Module):
    """y = x dequantize(W)^T + b with W stored quantized (frozen, as in MLX)."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group_size: int = None, bits: int = None, mode: str = "affine"):
        super().__init__()
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1 / input_dims)
        weight = _random.uniform(-scale, scale, (output_dims, input_dims))
        _store_quantized(self, weight, group_size, bits, mode)
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    def _extra_repr(self):
        out_dims, in_dims = self.weight.shape
        return (f"input_dims={in_dims * 32 // self.bits}, output_dims={out_dims}, "
                f"bias={'bias' in self}, group_size={self.group_size}, bits={self.bits}, "
                f"mode={self.mode}")

    def __call__(self, x):
        y = mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                biases=self.get("biases"), transpose=True,
                                group_size=self.group_size, bits=self.bits, mode=self.mode)
        return y + self["bias"] if "bias" in self else y

    @classmethod
    def from_linear(cls, linear_layer: Module, group_size: int = None, bits: int = None,
                    mode: str = "affine") -> Module:
        """A QuantizedLinear with `linear_layer`'s weight quantized and its bias kept."""
        output_dims, input_dims = linear_layer.weight.shape
        ql = cls(input_dims, output_dims, False, group_size, bits, mode=mode)
        _store_quantized(ql, linear_layer.weight, group_size, bits, mode)
        if "bias" in linear_layer:
            ql.bias = linear_layer.bias
        return ql


class QQLinear(Module):
    """y = qqmm(x, W): the input is rounded to the mode's values as well. In training mode W
    is a float matrix (rounded on the fly, and trainable); `eval()` stores it quantized."""

    def __init__(self, input_dims: int, output_dims: int, group_size: int = None,
                 bits: int = None, mode: str = "nvfp4"):
        super().__init__()
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1 / input_dims)
        self.weight = _random.uniform(-scale, scale, (output_dims, input_dims))
        self._quantized = False

    def _extra_repr(self):
        out_dims, in_dims = self.weight.shape
        if self.weight.dtype == mx.uint32:
            in_dims = in_dims * 32 // self.bits
        return (f"input_dims={in_dims}, output_dims={out_dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    def quantize(self) -> None:
        """Store the weight quantized (with its scales)."""
        if not self._quantized:
            self.weight, self.scales = mx.quantize(self.weight, self.group_size, self.bits,
                                                   mode=self.mode)
            self._quantized = True

    def dequantize(self) -> None:
        """Store the weight as floats again (dropping the scales)."""
        if self._quantized:
            self.weight = mx.dequantize(self.weight, scales=self.scales,
                                        group_size=self.group_size, bits=self.bits,
                                        mode=self.mode)
            del self["scales"]
            self._quantized = False

    def _set_training_mode(self, mode: bool):
        super()._set_training_mode(mode)
        if self._training:
            self.dequantize()
        else:
            self.quantize()

    def __call__(self, x):
        return mx.qqmm(x, self["weight"], scales=self.get("scales"), group_size=self.group_size,
                       bits=self.bits, mode=self.mode)

    @classmethod
    def from_linear(cls, linear_layer: Module, group_size: int = None, bits: int = None,
                    mode: str = "nvfp4") -> Module:
        """A QQLinear with `linear_layer`'s weight (which must have no bias)."""
        output_dims, input_dims = linear_layer.weight.shape
        if linear_layer.get("bias") is not None:
            raise NotImplementedError("QQLinear does not support bias yet.")
        ql = cls(input_dims, output_dims, group_size, bits, mode=mode)
        ql.weight = linear_layer.weight
        ql.train(linear_layer.training)
        return ql
