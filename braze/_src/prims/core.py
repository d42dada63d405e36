"""Primitives every op family needs: dtype conversion and broadcasting."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as D
from .base import Primitive


@dataclass(frozen=True)
class AsType(Primitive):
    """Convert to `dtype` with C semantics (float -> int truncates toward zero)."""

    dtype: D.Dtype

    def abstract_eval(self, x):
        return [(x.shape, self.dtype)]

    def eval_cpu(self, x):
        if self.dtype.kind in "ui" and x.dtype.kind in "fc":
            # NumPy warns on NaN/Inf -> int; the value is unspecified in MLX as in C.
            with np.errstate(invalid="ignore"):
                return [np.real(x).astype(self.dtype.np_dtype) if x.dtype.kind == "c"
                        else x.astype(self.dtype.np_dtype)]
        if x.dtype.kind == "c" and self.dtype.kind != "c":
            return [np.real(x).astype(self.dtype.np_dtype)]
        return [x.astype(self.dtype.np_dtype)]


@dataclass(frozen=True)
class Broadcast(Primitive):
    """Broadcast to `shape` (a zero-copy view in the NumPy backend)."""

    shape: tuple

    def abstract_eval(self, x):
        return [(self.shape, x.dtype)]

    def eval_cpu(self, x):
        return [np.broadcast_to(x, self.shape)]
