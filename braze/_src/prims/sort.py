"""Primitives: the sort family (Sort, ArgSort, Partition, ArgPartition).

Sorting is stable, NaN sorts last, -0.0 and 0.0 compare equal (they keep their order).
bfloat16 is sorted through float32 (exact), because NumPy's sort of ml_dtypes' bfloat16
mishandles NaN. Indices are uint32, as in MLX.

Partition is computed as the gather of ArgPartition's indices, so that the permutation its
derivative rules rebuild (a lazy ArgPartition) is the one the values were moved by: NumPy's
`partition` and `argpartition` may order the non-kth elements differently (they do for
float16, and SIMD builds use different algorithms).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .base import Primitive, bind, lazy_dataclass, ops
from .reduce import batched_axis


def _keys(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if D.is_bf16(x.dtype) else x


def _argsort(x, axis):
    return np.argsort(_keys(x), axis=axis, kind="stable")


def _argpartition(x, kth, axis):
    return np.argpartition(_keys(x), kth, axis=axis)


def _permutation_vjp(perm, g, axis):
    """The cotangent of x for out = take_along_axis(x, perm): g scattered back through perm."""
    return ops.put_along_axis(ops.zeros_like(g), perm, g, axis=axis)


def _perm(prim, x):
    """The permutation a sort applies: locally constant in x, so it carries no gradient (as in
    MLX; a gradient through gather/scatter indices is an error)."""
    return ops.stop_gradient(bind(prim, (x,)))


def _vmap(prim, inputs, axes, **params):
    x, bax = inputs[0], axes[0]
    if bax is None:
        return [bind(prim, (x,))], [None]
    new = type(prim)(**{**params, "axis": batched_axis(prim.axis, bax)})
    return [bind(new, (x,))], [bax]


@lazy_dataclass
class Sort(Primitive):
    """Sort along `axis` (non-negative)."""

    axis: int

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        if D.is_bf16(x.dtype):
            return [np.take_along_axis(x, _argsort(x, self.axis), axis=self.axis)]
        return [np.sort(x, axis=self.axis, kind="stable")]

    def vjp(self, primals, cotangents, argnums, outputs):
        perm = _perm(ArgSort(self.axis), primals[0])
        return [_permutation_vjp(perm, cotangents[0], self.axis)]

    def jvp(self, primals, tangents, argnums):
        perm = _perm(ArgSort(self.axis), primals[0])
        return [ops.take_along_axis(tangents[0], perm, axis=self.axis)]

    def vmap(self, inputs, axes):
        return _vmap(self, inputs, axes)


@lazy_dataclass
class ArgSort(Primitive):
    """Indices (uint32) that sort along `axis`; stable."""

    axis: int

    differentiable = False

    def abstract_eval(self, x):
        return [(x.shape, D.uint32)]

    def eval_cpu(self, x):
        return [_argsort(x, self.axis).astype(np.uint32)]

    def vmap(self, inputs, axes):
        return _vmap(self, inputs, axes)


@lazy_dataclass
class Partition(Primitive):
    """Partition along `axis` around position `kth` (non-negative): smaller elements first."""

    kth: int
    axis: int

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        idx = _argpartition(x, self.kth, self.axis)
        return [np.take_along_axis(x, idx, axis=self.axis)]

    def vjp(self, primals, cotangents, argnums, outputs):
        perm = _perm(ArgPartition(self.kth, self.axis), primals[0])
        return [_permutation_vjp(perm, cotangents[0], self.axis)]

    def jvp(self, primals, tangents, argnums):
        perm = _perm(ArgPartition(self.kth, self.axis), primals[0])
        return [ops.take_along_axis(tangents[0], perm, axis=self.axis)]

    def vmap(self, inputs, axes):
        return _vmap(self, inputs, axes, kth=self.kth)


@lazy_dataclass
class ArgPartition(Primitive):
    """Indices (uint32) that partition along `axis` around position `kth`."""

    kth: int
    axis: int

    differentiable = False

    def abstract_eval(self, x):
        return [(x.shape, D.uint32)]

    def eval_cpu(self, x):
        return [_argpartition(x, self.kth, self.axis).astype(np.uint32)]

    def vmap(self, inputs, axes):
        return _vmap(self, inputs, axes, kth=self.kth)


@lazy_dataclass
class SearchSorted(Primitive):
    """Insertion indices (uint32, the values' shape) of the values into a 1-D sorted sequence,
    in sort's order (NaN greatest); `right` gives the last suitable index."""

    right: bool = False

    differentiable = False

    def abstract_eval(self, seq, values):
        return [(values.shape, D.uint32)]

    def eval_cpu(self, seq, values):
        side = "right" if self.right else "left"
        out = np.searchsorted(_keys(seq), _keys(values), side=side)
        return [np.asarray(out, dtype=np.uint32)]

    def vmap(self, inputs, axes):
        if axes[0] is not None:
            raise ValueError("[searchsorted] Cannot vmap over the sorted sequence, only over "
                             "the values being searched for.")
        return [bind(self, tuple(inputs))], [axes[1]]
