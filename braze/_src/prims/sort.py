"""Primitives: the sort family (Sort, ArgSort, Partition, ArgPartition).

Sorting is stable, NaN sorts last, -0.0 and 0.0 compare equal (they keep their order).
bfloat16 is sorted through float32 (exact), because NumPy's sort of ml_dtypes' bfloat16
mishandles NaN. Indices are uint32, as in MLX.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .. import dtypes as D
from .base import Primitive

_BF16 = np.dtype(ml_dtypes.bfloat16)


def _keys(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype == _BF16 else x


def _argsort(x, axis):
    return np.argsort(_keys(x), axis=axis, kind="stable")


def _argpartition(x, kth, axis):
    return np.argpartition(_keys(x), kth, axis=axis)


@dataclass(frozen=True)
class Sort(Primitive):
    """Sort along `axis` (non-negative)."""

    axis: int

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        if x.dtype == _BF16:
            return [np.take_along_axis(x, _argsort(x, self.axis), axis=self.axis)]
        return [np.sort(x, axis=self.axis, kind="stable")]


@dataclass(frozen=True)
class ArgSort(Primitive):
    """Indices (uint32) that sort along `axis`; stable."""

    axis: int

    differentiable = False

    def abstract_eval(self, x):
        return [(x.shape, D.uint32)]

    def eval_cpu(self, x):
        return [_argsort(x, self.axis).astype(np.uint32)]


@dataclass(frozen=True)
class Partition(Primitive):
    """Partition along `axis` around position `kth` (non-negative): smaller elements first."""

    kth: int
    axis: int

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        if x.dtype == _BF16:
            idx = _argpartition(x, self.kth, self.axis)
            return [np.take_along_axis(x, idx, axis=self.axis)]
        return [np.partition(x, self.kth, axis=self.axis)]


@dataclass(frozen=True)
class ArgPartition(Primitive):
    """Indices (uint32) that partition along `axis` around position `kth`."""

    kth: int
    axis: int

    differentiable = False

    def abstract_eval(self, x):
        return [(x.shape, D.uint32)]

    def eval_cpu(self, x):
        return [_argpartition(x, self.kth, self.axis).astype(np.uint32)]
