"""Identity, Linear and Bilinear layers (MLX's parameter shapes and initialisation)."""
from __future__ import annotations

import math
from typing import Any

from braze._src.ops.linalg import linear

from .. import _random
from .base import Module
from .quantized import QQLinear, QuantizedLinear

__all__ = ["Identity", "Linear", "Bilinear"]


def check_features(layer, x, expected, what="input_dims", argname="input"):
    """ValueError naming the layer when the last axis of `x` is not `expected`."""
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"[{layer}] Expected an array {argname}, got {type(x).__name__}.")
    if len(shape) == 0 or shape[-1] != expected:
        raise ValueError(f"[{layer}] Expected {argname} with last dimension {expected} "
                         f"({what}), got an array of shape {tuple(shape)}.")


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def __call__(self, x):
        return x


class Linear(Module):
    """y = x W^T + b, W of shape (output_dims, input_dims); W and b are initialised from
    U(-1/sqrt(input_dims), 1/sqrt(input_dims))."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True) -> None:
        super().__init__()
        scale = math.sqrt(1.0 / input_dims)
        self.weight = _random.uniform(-scale, scale, (output_dims, input_dims))
        if bias:
            self.bias = _random.uniform(-scale, scale, (output_dims,))

    def _extra_repr(self) -> str:
        return (f"input_dims={self.weight.shape[1]}, output_dims={self.weight.shape[0]}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        w = self["weight"]
        check_features("Linear", x, w.shape[1])
        return linear(x, w, self.get("bias"))  # x @ w.T (+ bias), w read where it lies

    def to_quantized(self, group_size: int = None, bits: int = None, mode: str = "affine",
                     quantize_input: bool = False) -> Module:
        """A QuantizedLinear approximating this layer, or with `quantize_input` (modes
        "nvfp4" and "mxfp8" only) a QQLinear, which rounds its input too."""
        if not quantize_input:
            return QuantizedLinear.from_linear(self, group_size, bits, mode)
        if mode not in ("nvfp4", "mxfp8"):
            raise ValueError("Quantized activations are only supported for 'nvfp4' and "
                             f"'mxfp8' modes, got {mode}.")
        return QQLinear.from_linear(self, group_size, bits, mode)


class Bilinear(Module):
    """y = x1^T W x2 + b per output feature; W of shape (output_dims, input2_dims,
    input1_dims), initialised from U(-1/sqrt(input1_dims), 1/sqrt(input1_dims))."""

    def __init__(self, input1_dims: int, input2_dims: int, output_dims: int,
                 bias: bool = True) -> None:
        super().__init__()
        scale = math.sqrt(1.0 / input1_dims)
        self.weight = _random.uniform(-scale, scale, (output_dims, input2_dims, input1_dims))
        if bias:
            self.bias = _random.uniform(-scale, scale, (output_dims,))

    def _extra_repr(self) -> str:
        out, in2, in1 = self.weight.shape
        return (f"input1_dims={in1}, input2_dims={in2}, output_dims={out}, "
                f"bias={'bias' in self}")

    def __call__(self, x1, x2):
        out, in2, in1 = self.weight.shape
        check_features("Bilinear", x1, in1, "input1_dims", "x1")
        check_features("Bilinear", x2, in2, "input2_dims", "x2")
        xshape = x1.shape[:-1]
        x1 = x1.reshape(-1, in1)
        x2 = x2.reshape(-1, 1, in2)
        w = self.weight.reshape(out * in2, in1)
        y = x1 @ w.T
        y = y.reshape(-1, out, in2).swapaxes(-2, -1)
        y = (x2 @ y).squeeze(1)
        y = y.reshape(*xshape, out)
        if "bias" in self:
            y = y + self.bias
        return y
