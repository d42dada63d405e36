"""Convolution layers (channels last): Conv1d, Conv2d, Conv3d and their transposes.

Weights have shape (out_channels, *kernel_size, in_channels / groups) and are initialised
from U(-s, s) with s = 1 / sqrt(in_channels / groups * prod(kernel_size)); biases start at
zero (MLX's choices).
"""
from __future__ import annotations

import math
from typing import Tuple, Union

import braze.core as mx

from .. import _random
from .base import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d"]


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n


def _check_input(layer, x, nd, cin):
    if x.ndim != nd + 2 or x.shape[-1] != cin:
        raise ValueError(
            f"[{layer}] Expected input of shape (N, {', '.join('spatial' for _ in range(nd))}, "
            f"{cin}) with {cin} input channels (channels last), got shape {x.shape}.")


class _ConvNd(Module):
    _nd = 1
    _op = None
    _transpose = False

    def __init__(self, in_channels: int, out_channels: int,
                 kernel_size: Union[int, Tuple[int, ...]], stride: Union[int, Tuple[int, ...]] = 1,
                 padding: Union[int, Tuple[int, ...]] = 0,
                 dilation: Union[int, Tuple[int, ...]] = 1, groups=1, bias=True,
                 output_padding: Union[int, Tuple[int, ...]] = 0):
        super().__init__()
        name = type(self).__name__
        if in_channels % groups != 0:
            raise ValueError(f"[{name}] The number of input channels ({in_channels}) must be "
                             f"divisible by the number of groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"[{name}] The number of output channels ({out_channels}) must "
                             f"be divisible by the number of groups ({groups})")
        nd = self._nd
        ks = _ntuple(kernel_size, nd)
        if self._transpose:
            scale = math.sqrt(1 / (in_channels * math.prod(ks)))
        else:
            scale = math.sqrt(1 / (in_channels // groups * math.prod(ks)))
        self.weight = _random.uniform(-scale, scale, (out_channels, *ks, in_channels // groups))
        if bias:
            self.bias = mx.zeros((out_channels,))
        if nd == 1:
            self.padding, self.dilation, self.stride = padding, dilation, stride
        else:
            self.padding = _ntuple(padding, nd)
            self.stride = _ntuple(stride, nd)
            self.dilation = dilation
        if self._transpose:
            self.output_padding = output_padding if nd == 1 else _ntuple(output_padding, nd)
        self.groups = groups

    def _extra_repr(self):
        ks = self.weight.shape[1:-1]
        ks = ks[0] if self._nd == 1 else ks
        out = (f"{self.weight.shape[-1] * self.groups}, {self.weight.shape[0]}, "
               f"kernel_size={ks}, stride={self.stride}, padding={self.padding}, "
               f"dilation={self.dilation}, ")
        if self._transpose:
            out += f"output_padding={self.output_padding}, "
        return out + f"groups={self.groups}, bias={'bias' in self}"

    def __call__(self, x):
        _check_input(type(self).__name__, x, self._nd, self.weight.shape[-1] * self.groups)
        op = getattr(mx, self._op)
        if self._transpose:
            y = op(x, self.weight, self.stride, self.padding, self.dilation,
                   self.output_padding, self.groups)
        else:
            y = op(x, self.weight, self.stride, self.padding, self.dilation, self.groups)
        if "bias" in self:
            y = y + self.bias
        return y


class Conv1d(_ConvNd):
    """1D convolution over (N, L, C_in) inputs."""

    _nd, _op = 1, "conv1d"

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias)


class Conv2d(_ConvNd):
    """2D convolution over (N, H, W, C_in) inputs."""

    _nd, _op = 2, "conv2d"

    def __init__(self, in_channels: int, out_channels: int,
                 kernel_size: Union[int, Tuple[int, ...]], stride: Union[int, Tuple[int, ...]] = 1,
                 padding: Union[int, Tuple[int, ...]] = 0,
                 dilation: Union[int, Tuple[int, ...]] = 1, groups: int = 1, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias)


class Conv3d(_ConvNd):
    """3D convolution over (N, D, H, W, C_in) inputs."""

    _nd, _op = 3, "conv3d"

    def __init__(self, in_channels: int, out_channels: int,
                 kernel_size: Union[int, Tuple[int, ...]], stride: Union[int, Tuple[int, ...]] = 1,
                 padding: Union[int, Tuple[int, ...]] = 0,
                 dilation: Union[int, Tuple[int, ...]] = 1, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         1, bias)


class ConvTranspose1d(_ConvNd):
    """1D transposed convolution over (N, L, C_in) inputs."""

    _nd, _op, _transpose = 1, "conv_transpose1d", True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, output_padding: int = 0,
                 bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         1, bias, output_padding)


class ConvTranspose2d(_ConvNd):
    """2D transposed convolution over (N, H, W, C_in) inputs."""

    _nd, _op, _transpose = 2, "conv_transpose2d", True

    def __init__(self, in_channels: int, out_channels: int,
                 kernel_size: Union[int, Tuple[int, ...]], stride: Union[int, Tuple[int, ...]] = 1,
                 padding: Union[int, Tuple[int, ...]] = 0,
                 dilation: Union[int, Tuple[int, ...]] = 1,
                 output_padding: Union[int, Tuple[int, ...]] = 0, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         1, bias, output_padding)


class ConvTranspose3d(_ConvNd):
    """3D transposed convolution over (N, D, H, W, C_in) inputs."""

    _nd, _op, _transpose = 3, "conv_transpose3d", True

    def __init__(self, in_channels: int, out_channels: int,
                 kernel_size: Union[int, Tuple[int, ...]], stride: Union[int, Tuple[int, ...]] = 1,
                 padding: Union[int, Tuple[int, ...]] = 0,
                 dilation: Union[int, Tuple[int, ...]] = 1,
                 output_padding: Union[int, Tuple[int, ...]] = 0, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         1, bias, output_padding)
