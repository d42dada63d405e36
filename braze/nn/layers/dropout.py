"""Dropout layers: zero elements (or whole channels) with probability p in training mode and
scale the rest by 1 / (1 - p); identity in evaluation mode."""
from __future__ import annotations

from .. import _random
from .base import Module

__all__ = ["Dropout", "Dropout2d", "Dropout3d"]


class _DropoutBase(Module):
    def __init__(self, p: float = 0.5):
        super().__init__()
        if p < 0 or p >= 1:
            raise ValueError(f"The dropout probability {p} is not in [0, 1)")
        self._p_1 = 1 - p

    def _extra_repr(self) -> str:
        return f"p={1 - self._p_1}"

    def _drop(self, x, mask_shape):
        if self._p_1 == 1 or not self.training:
            return x
        mask = _random.bernoulli(self._p_1, mask_shape)
        return mask * x * (1 / self._p_1)


class Dropout(_DropoutBase):
    """Zero each element with probability p (training mode only)."""

    def __call__(self, x):
        return self._drop(x, x.shape)


class Dropout2d(_DropoutBase):
    """Zero whole channels of (N, H, W, C) or (H, W, C) inputs."""

    def __call__(self, x):
        if x.ndim not in (3, 4):
            raise ValueError(f"[Dropout2d] Received input with {x.ndim} dimensions. Expected "
                             "3 or 4 dimensions.")
        shape = list(x.shape)
        shape[-2] = shape[-3] = 1
        return self._drop(x, shape)


class Dropout3d(_DropoutBase):
    """Zero whole channels of (N, D, H, W, C) or (D, H, W, C) inputs."""

    def __call__(self, x):
        if x.ndim not in (4, 5):
            raise ValueError(f"[Dropout3d] Received input with {x.ndim} dimensions. Expected "
                             "4 or 5 dimensions.")
        shape = list(x.shape)
        shape[-2] = shape[-3] = shape[-4] = 1
        return self._drop(x, shape)
