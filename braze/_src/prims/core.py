"""Primitives every op family needs: dtype conversion and broadcasting."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as D
from ..array import LAZY_COPY
from .base import Primitive, bind, ops


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
            if self.dtype.kind == "b":  # MLX: nonzero real or imaginary part is True
                return [x != 0]
            return [np.real(x).astype(self.dtype.np_dtype)]
        return [x.astype(self.dtype.np_dtype)]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [ops.astype(cotangents[0], primals[0].dtype)]

    def jvp(self, primals, tangents, argnums):
        return [ops.astype(tangents[0], self.dtype)]

    def vmap(self, inputs, axes):
        return [ops.astype(inputs[0], self.dtype)], [axes[0]]


@dataclass(frozen=True)
class Broadcast(Primitive):
    """Broadcast to `shape` (a zero-copy view in the NumPy backend)."""

    shape: tuple

    def abstract_eval(self, x):
        return [(self.shape, x.dtype)]

    def eval_cpu(self, x):
        if x.flags.c_contiguous:  # a strided view built directly: ~8x cheaper than broadcast_to
            shape = self.shape
            lead = len(shape) - x.ndim
            strides = [0] * lead + [0 if d == 1 else st for d, st in zip(x.shape, x.strides)]
            return [np.ndarray(shape, x.dtype, x, 0, strides)]
        return [np.broadcast_to(x, self.shape)]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [sum_to_shape(cotangents[0], primals[0].shape)]

    def jvp(self, primals, tangents, argnums):
        return [ops.broadcast_to(tangents[0], self.shape)]

    def vmap(self, inputs, axes):
        x, ax = inputs[0], axes[0]
        # per-example rank may be lower than the target's: insert size-1 axes after the batch
        x = ops.moveaxis(x, ax, 0)
        missing = len(self.shape) - (x.ndim - 1)
        if missing:
            x = ops.reshape(x, (x.shape[0],) + (1,) * missing + x.shape[1:])
        return [ops.broadcast_to(x, (x.shape[0],) + self.shape)], [0]


def sum_to_shape(x, shape):
    """Sum `x` over the axes that broadcasting `shape` to `x.shape` added or stretched."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    out = ops.sum(x, axis=axes, keepdims=True) if axes else x
    return ops.reshape(out, shape)


@dataclass(frozen=True)
class Copy(Primitive):
    """Identity with a new array identity: how transforms make tracers of their inputs."""

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        return [x.view()]  # buffers are never written in place, so sharing is safe

    def vjp(self, primals, cotangents, argnums, outputs):
        return [cotangents[0]]

    def jvp(self, primals, tangents, argnums):
        return [tangents[0]]

    def vmap(self, inputs, axes):
        return [bind(self, (inputs[0],))], [axes[0]]


def _lazy_copy(x, dtype):
    return COPY if dtype is None or dtype is x._dtype else AsType(dtype)


COPY = Copy()
LAZY_COPY.make = _lazy_copy
