"""Primitives every op family needs: dtype conversion and broadcasting.

`sum_like(x, like)` sums a cotangent back to the shape of `like` (the vjp of every broadcast).
Outside shapeless compile traces it reduces over the axes broadcasting added or stretched,
worked out from the shapes at hand. Inside one (`CompileTraces.dynamic`) it binds `SumLike`,
which picks those axes from the *run-time* shapes of its two inputs, so a traced gradient
follows new input sizes, even when operands swap which axes are broadcast.
"""
from __future__ import annotations

from dataclasses import field

import numpy as np

from .. import dtypes as D
from ..array import LAZY_COPY
from ..casts import cast
from ..scheduler import CompileTraces
from .base import Primitive, bind, lazy_dataclass, ops
from .unary import STOP_GRADIENT


@lazy_dataclass
class AsType(Primitive):
    """Convert to `dtype` with braze's cast semantics (`casts.cast`; docs/architecture.md,
    "Casts"): MLX's x86-64 CPU results, defined for every input. float -> int truncates toward
    zero; out of range or NaN, int32/int64 give their minimum, 8/16-bit targets the low bits of
    the int32 result, uint32 the low bits of the int64 result, uint64 2**63 (below its range,
    NaN) or 0 (above); -> bool is `!= 0`; -> float16/bfloat16 rounds through float32. Every
    backend's kernels compute the same values."""

    dtype: D.Dtype
    kernel_op = "cast"
    exact = True  # the cast rounds to the target itself

    def abstract_eval(self, x):
        return [(x.shape, self.dtype)]

    def eval_cpu(self, x):
        y = cast(x, self.dtype.np_dtype)
        return [x.view() if y is x else y]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [ops.astype(cotangents[0], primals[0].dtype)]

    def jvp(self, primals, tangents, argnums):
        return [ops.astype(tangents[0], self.dtype)]

    def vmap(self, inputs, axes):
        return [ops.astype(inputs[0], self.dtype)], [axes[0]]


@lazy_dataclass
class Broadcast(Primitive):
    """Broadcast to `shape` (a zero-copy view in the NumPy backend).

    `dense` (set by full/zeros/ones) gives the result a buffer of its own, as MLX's `Full`
    does: its memory counts, and NumPy views of it have the strides of a dense array. It
    changes nothing else (transforms and compile treat it as any broadcast), hence no repr.
    """

    shape: tuple
    dense: bool = field(default=False, repr=False)
    kernel_op = "broadcast"  # kernels read the input with stride 0 along broadcast axes
    exact = True

    def abstract_eval(self, x):
        return [(self.shape, x.dtype)]

    def eval_cpu(self, x):
        if self.dense:
            out = np.empty(self.shape, x.dtype)
            out[...] = x
            return [out]
        if x.flags.c_contiguous:  # a strided view built directly: ~8x cheaper than broadcast_to
            shape = self.shape
            lead = len(shape) - x.ndim
            strides = [0] * lead + [0 if d == 1 else st for d, st in zip(x.shape, x.strides)]
            return [np.ndarray(shape, x.dtype, x, 0, strides)]
        return [np.broadcast_to(x, self.shape)]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [sum_like(cotangents[0], primals[0])]

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


def _sum_axes(x_shape, shape):
    """(leading axes, stretched axes) of `x_shape` that broadcasting `shape` added."""
    lead = len(x_shape) - len(shape)
    stretched = tuple(lead + i for i, d in enumerate(shape)
                      if d == 1 and x_shape[lead + i] != 1)
    return tuple(range(lead)), stretched


def sum_to_shape(x, shape):
    """Sum `x` over the axes that broadcasting `shape` to `x.shape` added or stretched.

    Built from a keepdims Reduce and a Squeeze of the leading axes (no Reshape to the baked
    `shape`), so the result's shape follows x's at shapeless replay.
    """
    shape = tuple(shape)
    if x.shape == shape:
        return x
    lead, stretched = _sum_axes(x.shape, shape)
    axes = lead + stretched
    out = ops.sum(x, axis=axes, keepdims=True) if axes else x
    return ops.squeeze(out, lead) if lead else out


def sum_like(x, like):
    """`x` summed to the shape of the array `like` (see the module docstring)."""
    if CompileTraces.dynamic:
        return bind(SUM_LIKE, (x, bind(STOP_GRADIENT, (like,))))
    return sum_to_shape(x, like.shape)


def broadcast_like(x, like):
    """`x` broadcast to the shape of the array `like`; in a shapeless compile trace a
    shape-following broadcast that reads `like`'s run-time shape (the vjp of a reduction)."""
    if CompileTraces.dynamic:
        from .compile_support import DynamicBroadcast
        return bind(DynamicBroadcast(tuple(like.shape)), (x, bind(STOP_GRADIENT, (like,))))
    return ops.broadcast_to(x, like.shape)


@lazy_dataclass
class SumLike(Primitive):
    """Inputs (x, like): x summed over its leading axes and the axes where `like` has size 1
    and x does not, giving like's shape (the shape-following vjp of a broadcast)."""

    shape_only_from = 1

    def abstract_eval(self, x, like):
        if len(x.shape) < len(like.shape) or any(
                d != 1 and d != s for d, s in zip(reversed(like.shape), reversed(x.shape))):
            raise ValueError(f"[SumLike] Cannot sum an array of shape {tuple(x.shape)} to "
                             f"shape {tuple(like.shape)}.")
        return [(tuple(like.shape), x.dtype)]

    def eval_cpu(self, x, like):
        lead, stretched = _sum_axes(x.shape, like.shape)
        axes = lead + stretched
        if not axes:
            return [x.view()]
        from .reduce import Reduce  # the same kernel as the eager sum, so results match
        out = Reduce("sum", axes).eval_cpu(x)[0]
        return [out.astype(x.dtype, copy=False).reshape(like.shape)]

    def vjp(self, primals, cotangents, argnums, outputs):
        x, like = primals
        out = []
        for i in argnums:
            out.append(broadcast_like(cotangents[0], x) if i == 0 else ops.zeros_like(like))
        return out

    def jvp(self, primals, tangents, argnums):
        if 0 not in argnums:
            return [ops.zeros_like(bind(self, tuple(primals)))]
        return [bind(self, (tangents[argnums.index(0)], primals[1]))]

    def vmap(self, inputs, axes):
        (x, like), (ax, al) = inputs, axes
        n = x.shape[ax] if ax is not None else like.shape[al]
        x = ops.moveaxis(x, ax, 0) if ax is not None else \
            ops.broadcast_to(ops.expand_dims(x, 0), (n,) + tuple(x.shape))
        like = ops.moveaxis(like, al, 0) if al is not None else \
            ops.broadcast_to(ops.expand_dims(like, 0), (n,) + tuple(like.shape))
        # the summed leading axes sit in front of the batch axis in x
        extra = x.ndim - like.ndim
        if extra:
            x = ops.moveaxis(x, 0, extra)
        return [bind(self, (x, like))], [0]


SUM_LIKE = SumLike()


@lazy_dataclass
class Copy(Primitive):
    """Identity with a new array identity: how transforms make tracers of their inputs."""

    noop = True

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        return [x.view()]  # a view keeps its buffer seen: no in-place update writes it

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


@lazy_dataclass
class Depends(Primitive):
    """The first `n` inputs passed through, evaluated only after all the inputs (the rest are
    the dependencies): mx.depends orders computations without changing values."""
    reinfers_shape = False  # as in MLX

    n: int

    def abstract_eval(self, *xs):
        return [(x.shape, x.dtype) for x in xs[:self.n]]

    def eval_cpu(self, *xs):
        return [x.view() for x in xs[:self.n]]

    def vjp(self, primals, cotangents, argnums, outputs):
        # the dependencies get no cotangent (None: zero), as MLX gives them zeros
        return [cotangents[i] if i < self.n else None for i in argnums]

    def jvp(self, primals, tangents, argnums):
        return [tangents[argnums.index(i)] if i in argnums else None for i in range(self.n)]

    def vmap(self, inputs, axes):
        out = bind(self, tuple(inputs))
        return (out if self.n > 1 else [out]), list(axes[:self.n])
