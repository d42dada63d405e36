"""Sharded linear layers (MLX's `mlx.nn.layers.distributed`): each member of a
`mx.distributed` group holds a slice of a linear layer's weight.

"all-to-sharded" layers slice the output features (every member computes its part of the
output; the input's gradient is summed over the group); "sharded-to-all" layers slice the input
features and sum the partial products over the group. On a one-process group (braze's default)
the slices are the whole weight and the collectives are identities.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable, Optional, Union

import braze.core as mx
from braze.utils import tree_map_with_path

from .. import _random
from .base import Module
from .linear import Linear

__all__ = ["shard_inplace", "shard_linear", "AllToShardedLinear", "ShardedToAllLinear",
           "QuantizedAllToShardedLinear", "QuantizedShardedToAllLinear"]


@lru_cache
def sum_gradients(group):
    """Identity whose vjp sums the cotangent over `group`."""
    if group.size() == 1:
        return lambda x: x

    @mx.custom_function
    def f(x):
        return x

    @f.vjp
    def f(x, dx, _):
        return mx.distributed.all_sum(dx, group=group)

    return f


def _split(weight, segments, axis):
    """mx.split, also accepting fractions of the axis as split points."""
    if isinstance(segments, int) or isinstance(segments[0], int):
        return mx.split(weight, segments, axis=axis)
    n = weight.shape[axis]
    return mx.split(weight, [int(s * n) for s in segments], axis=axis)


def _sharding_spec(s):
    if isinstance(s, int):
        return s, 1
    if isinstance(s, tuple):
        return s
    raise ValueError("The sharding function should return int or tuple[int, list]")


def _shard(parameters: dict, predicate: Callable, group=None):
    """The parameter tree with each array the predicate names replaced by this rank's slice
    (of every segment, concatenated back)."""
    group = group or mx.distributed.init()
    n, r = group.size(), group.rank()

    def shard_one(path, weight):
        if not isinstance(weight, mx.array):
            return weight
        s = predicate(path, weight)
        if s is None:
            return weight
        axis, segments = _sharding_spec(s)
        parts = [_split(p, n, axis)[r] for p in _split(weight, segments, axis)]
        return mx.contiguous(mx.concatenate(parts, axis=axis))

    return tree_map_with_path(shard_one, parameters)


def _all_to_sharded(segments):
    def predicate(path, weight):
        if path.endswith("bias"):
            return -1, segments
        return max(weight.ndim - 2, 0), segments
    return predicate


def _sharded_to_all(segments):
    def predicate(path, weight):
        return None if path.endswith("bias") else (-1, segments)
    return predicate


def _check_sharding(sharding):
    if sharding not in ("all-to-sharded", "sharded-to-all"):
        raise ValueError(f"Sharding type sharding={sharding!r} not supported, choose one of "
                         "'all-to-sharded' or 'sharded-to-all'")


def _predicate(sharding, segments):
    _check_sharding(sharding)
    return _all_to_sharded(segments) if sharding == "all-to-sharded" else \
        _sharded_to_all(segments)


def shard_inplace(module: Module, sharding: Union[str, Callable], *, segments: Union[int, list] = 1,
                  group: Optional[mx.distributed.Group] = None) -> None:
    """Replace the module's parameters by this rank's slices (the module itself is unchanged,
    so it communicates only if it does so natively). `sharding` is a string or a callable
    (path, weight) -> axis or (axis, segments)."""
    if isinstance(sharding, str):
        sharding = _predicate(sharding, segments)
    module.update(_shard(module.parameters(), sharding, group))


def shard_linear(module: Module, sharding: str, *, segments: Union[int, list] = 1,
                 group: Optional[mx.distributed.Group] = None) -> Module:
    """A new sharded layer (plain or quantized, like `module`) that communicates as needed."""
    _check_sharding(sharding)
    plain = isinstance(module, Linear)
    if sharding == "all-to-sharded":
        make = AllToShardedLinear.from_linear if plain else \
            QuantizedAllToShardedLinear.from_quantized_linear
    else:
        make = ShardedToAllLinear.from_linear if plain else \
            QuantizedShardedToAllLinear.from_quantized_linear
    return make(module, segments=segments, group=group)


def _check_divisible(n, size, what):
    if n % size:
        if what == "output":
            raise ValueError(f"Cannot shard the output of size {n} across {size} devices.")
        raise ValueError(f"The input of size {n} cannot be sharded across {size} devices.")


class AllToShardedLinear(Module):
    """This rank's output_dims / N output features of a linear layer."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group: Optional[mx.distributed.Group] = None):
        super().__init__()
        self.group = group or mx.distributed.init()
        n = self.group.size()
        _check_divisible(output_dims, n, "output")
        scale = math.sqrt(1.0 / input_dims)
        self.weight = _random.uniform(-scale, scale, (output_dims // n, input_dims))
        if bias:
            self.bias = _random.uniform(-scale, scale, (output_dims // n,))

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        return (f"input_dims={in_dims}, output_dims={out_dims * self.group.size()}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        x = sum_gradients(self.group)(x)
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T

    @classmethod
    def from_linear(cls, linear_layer: Module, *, segments: Union[int, list] = 1,
                    group: Optional[mx.distributed.Group] = None) -> Module:
        """A sharded copy of `linear_layer`, holding this rank's slice of its weights
        (`segments`: how many parts of the weight are sharded separately, e.g. 3 for a fused QKV).
        """
        group = group or mx.distributed.init()
        output_dims, input_dims = linear_layer.weight.shape
        sl = cls(input_dims, output_dims, "bias" in linear_layer, group)
        sl.update(_shard(linear_layer.parameters(), _all_to_sharded(segments), group))
        return sl


class ShardedToAllLinear(Module):
    """This rank's input_dims / N input features of a linear layer; outputs are summed over
    the group, so every rank gets the full result."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group: Optional[mx.distributed.Group] = None):
        super().__init__()
        self.group = group or mx.distributed.init()
        n = self.group.size()
        _check_divisible(input_dims, n, "input")
        scale = math.sqrt(1.0 / input_dims)
        self.weight = _random.uniform(-scale, scale, (output_dims, input_dims // n))
        if bias:
            self.bias = _random.uniform(-scale, scale, (output_dims,))

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        return (f"input_dims={in_dims * self.group.size()}, output_dims={out_dims}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        x = mx.distributed.all_sum(x @ self["weight"].T, group=self.group)
        return x + self["bias"] if "bias" in self else x

    @classmethod
    def from_linear(cls, linear_layer: Module, *, segments: Union[int, list] = 1,
                    group: Optional[mx.distributed.Group] = None) -> Module:
        """A sharded copy of `linear_layer`, holding this rank's slice of its weights
        (`segments`: how many parts of the weight are sharded separately, e.g. 3 for a fused QKV).
        """
        group = group or mx.distributed.init()
        output_dims, input_dims = linear_layer.weight.shape
        sl = cls(input_dims, output_dims, "bias" in linear_layer, group)
        sl.update(_shard(linear_layer.parameters(), _sharded_to_all(segments), group))
        return sl


class _QuantizedSharded(Module):
    """What the two quantized sharded layers share: quantized, frozen parameters, sharded
    along the input (`_shards_input`) or the output features."""

    _shards_input = False

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group_size: int = 64, bits: int = 4, mode: str = "affine",
                 group: Optional[object] = None):
        super().__init__()
        self.group = group or mx.distributed.init()
        n = self.group.size()
        if self._shards_input:
            _check_divisible(input_dims, n, "input")
            weight_shape, bias_dims = (output_dims, input_dims // n), output_dims
        else:
            _check_divisible(output_dims, n, "output")
            weight_shape, bias_dims = (output_dims // n, input_dims), output_dims // n
        self._init_quantized(weight_shape, bias_dims if bias else None, group_size, bits, mode)

    def _init_quantized(self, weight_shape, bias_dims, group_size, bits, mode):
        self.group_size, self.bits, self.mode = group_size, bits, mode
        scale = math.sqrt(1.0 / (weight_shape[1] * (self.group.size()
                                                     if self._shards_input else 1)))
        weight = _random.uniform(-scale, scale, weight_shape)
        self.weight, self.scales, *biases = mx.quantize(weight, group_size, bits, mode=mode)
        self.biases = biases[0] if biases else None
        if bias_dims is not None:
            self.bias = mx.zeros((bias_dims,))
        self.freeze()

    def unfreeze(self, *args, **kwargs):
        """Unfreeze contained layers; this layer's own parameters stay frozen."""
        super().unfreeze(*args, **kwargs)
        self.freeze(recurse=False)

    def _qmm(self, x):
        return mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                   biases=self.get("biases"), transpose=True,
                                   group_size=self.group_size, bits=self.bits, mode=self.mode)

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        in_dims = in_dims * 32 // self.bits
        if self._shards_input:
            in_dims *= self.group.size()
        else:
            out_dims *= self.group.size()
        return (f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}, "
                f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}")

    @classmethod
    def from_quantized_linear(cls, quantized_linear_layer: Module, *,
                              segments: Union[int, list] = 1, group=None):
        group = group or mx.distributed.init()
        q = quantized_linear_layer
        output_dims, packed = q.weight.shape
        sl = cls(packed * 32 // q.bits, output_dims, "bias" in q, group_size=q.group_size,
                 bits=q.bits, mode=getattr(q, "mode", "affine"), group=group)
        predicate = _sharded_to_all if cls._shards_input else _all_to_sharded
        sl.update(_shard(q.parameters(), predicate(segments), group))
        return sl


class QuantizedAllToShardedLinear(_QuantizedSharded):
    """The quantized AllToShardedLinear (frozen parameters)."""

    _shards_input = False

    def __call__(self, x):
        y = self._qmm(sum_gradients(self.group)(x))
        return y + self["bias"] if "bias" in self else y


class QuantizedShardedToAllLinear(_QuantizedSharded):
    """The quantized ShardedToAllLinear (frozen parameters)."""

    _shards_input = True

    def __call__(self, x):
        y = mx.distributed.all_sum(self._qmm(x), group=self.group)
        return y + self["bias"] if "bias" in self else y
