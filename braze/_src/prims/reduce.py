"""Primitives: the reduce family (Reduce, ArgReduce, LogSumExp, Softmax).

Like MLX's, every reduction keeps the reduced axes as size-1 dimensions; the ops layer
reshapes them away when `keepdims=False`. float16/bfloat16 accumulate in float32 and round
once at the end; float32 sums use NumPy's pairwise summation along a contiguous axis.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..np_errors import ignoring
from .base import Primitive, bind, lazy_dataclass, ops
from .core import broadcast_like

REDUCE_TYPES = ("sum", "prod", "max", "min", "and", "or")

_F32 = np.dtype(np.float32)


def reduce_dtype(reduce_type: str, dt: D.Dtype) -> D.Dtype:
    """MLX's result dtype of a reduction: small ints widen for sum/prod, and/or give bool."""
    if reduce_type in ("and", "or"):
        return D.bool_
    if reduce_type in ("sum", "prod"):
        if dt in (D.bool_, D.int8, D.int16):
            return D.int32
        if dt in (D.uint8, D.uint16):
            return D.uint32
    return dt


def at_least_float(dt: D.Dtype) -> D.Dtype:
    """Integers and bool become float32; floats and complex stay."""
    return dt if dt.kind in "fc" else D.float32


def keep_shape(shape: tuple, axes: tuple) -> tuple:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


# -- helpers shared by the transform rules of the reduce, scan and sort families --------------
def batched_axis(axis: int, bax: int) -> int:
    """Where a per-example `axis` sits in an array whose batch dimension is at `bax`."""
    return axis + 1 if axis >= bax else axis


def batched_axes(axes: tuple, bax: int) -> tuple:
    return tuple(batched_axis(a, bax) for a in axes)


def _cast_like(g, x):
    return g if g.dtype == x.dtype else ops.astype(g, x.dtype)


def _others_product(x, axes):
    """For every element, the product of the other elements over `axes` (exact with zeros):
    an exclusive cumprod from each end, multiplied (MLX's formula)."""
    if len(axes) == 1:
        ax = axes[0]
        return ops.multiply(ops.cumprod(x, ax, inclusive=False),
                            ops.cumprod(x, ax, reverse=True, inclusive=False))
    rest = [i for i in range(x.ndim) if i not in axes]
    perm = tuple(rest) + tuple(axes)
    y = ops.transpose(x, perm)
    moved = y.shape
    y = ops.reshape(y, tuple(x.shape[i] for i in rest) + (-1,))
    e = ops.multiply(ops.cumprod(y, -1, inclusive=False),
                     ops.cumprod(y, -1, reverse=True, inclusive=False))
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return ops.transpose(ops.reshape(e, moved), tuple(inv))


def _extremum_weights(x, out, axes, dtype):
    """1/count at the positions equal to the max (min), 0 elsewhere: ties share evenly."""
    mask = ops.astype(ops.equal(x, out), dtype)
    return ops.divide(mask, ops.sum(mask, axis=axes, keepdims=True))


def acc_dtype(npd: np.dtype) -> np.dtype:
    """The dtype a kernel accumulates in: float32 for the half types, else the dtype itself."""
    return _F32 if D.is_half(npd) else npd


def _trailing(x: np.ndarray, axes: tuple) -> np.ndarray:
    """`x` with `axes` moved last and flattened into one contiguous axis (for pairwise sums)."""
    rest = [i for i in range(x.ndim) if i not in axes]
    y = np.ascontiguousarray(np.transpose(x, rest + list(axes)))
    return y.reshape([x.shape[i] for i in rest] + [-1])


def pairwise_sum(x: np.ndarray, axes: tuple, dtype=None) -> np.ndarray:
    """Sum over `axes` keeping dims, with pairwise summation over the reduced elements."""
    n = 1
    for a in axes:
        n *= x.shape[a]
    is_trailing = axes == tuple(range(x.ndim - len(axes), x.ndim))
    if x.dtype.kind in "fc" and len(axes) and n > 128 and not is_trailing and x.size:
        r = np.add.reduce(_trailing(x, axes), axis=-1, dtype=dtype)
        return r.reshape(keep_shape(x.shape, axes))
    # np.sum's wrapper adds ~0.9 us to the same add.reduce (a bias gradient, every step)
    return np.add.reduce(x, axis=axes, dtype=dtype, keepdims=True)


@lazy_dataclass
class Reduce(Primitive):
    """Reduce `axes` (sorted, non-negative) with `reduce_type`; the axes are kept with size 1."""

    reduce_type: str
    axes: tuple
    reduction = True

    def reduced_axes(self) -> tuple:
        return self.axes

    def __post_init__(self):
        if self.reduce_type not in REDUCE_TYPES:
            raise ValueError(f"[Reduce] Unknown reduce type {self.reduce_type!r}.")

    def abstract_eval(self, x):
        return [(keep_shape(x.shape, self.axes), reduce_dtype(self.reduce_type, x.dtype))]

    def eval_cpu(self, x):
        rt, axes = self.reduce_type, self.axes
        out_np = reduce_dtype(rt, D.from_numpy(x.dtype)).np_dtype
        with ignoring():
            if rt in ("and", "or"):
                b = x.astype(np.bool_)
                r = (np.all if rt == "and" else np.any)(b, axis=axes, keepdims=True)
            elif rt == "sum":
                if x.dtype.kind in "biu":
                    r = pairwise_sum(x, axes, dtype=out_np)
                else:
                    r = pairwise_sum(x.astype(acc_dtype(x.dtype), copy=False), axes)
            elif rt == "prod":
                if x.dtype.kind in "biu":
                    r = np.prod(x, axis=axes, dtype=out_np, keepdims=True)
                else:
                    r = np.prod(x.astype(acc_dtype(x.dtype), copy=False), axis=axes,
                                keepdims=True)
            else:
                for a in axes:  # reached by a shapeless replay: eager's error
                    if x.shape[a] == 0:
                        raise ValueError(f"[{rt}] Cannot {rt} reduce over axis {a} with "
                                         "size 0.")
                xf = x.astype(acc_dtype(x.dtype), copy=False)
                r = (np.max if rt == "max" else np.min)(xf, axis=axes, keepdims=True)
            return [np.asarray(r).astype(out_np, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        x, g = primals[0], cotangents[0]
        rt = self.reduce_type
        if rt in ("and", "or"):
            return [ops.zeros_like(x)]
        g = _cast_like(g, x)
        if rt == "sum":
            return [broadcast_like(g, x)]  # shape-following in shapeless traces
        if rt == "prod":
            others = _others_product(x, self.axes)
            if x.dtype.kind == "c":  # MLX's complex convention: conj(d/dx) times the cotangent
                others = ops.conj(others)
            return [ops.multiply(others, g)]
        w = _extremum_weights(x, _cast_like(outputs[0], x), self.axes, x.dtype)
        return [ops.multiply(g, w)]

    def jvp(self, primals, tangents, argnums):
        x, t = primals[0], tangents[0]
        rt = self.reduce_type
        out_dt = reduce_dtype(rt, x.dtype)
        if rt in ("and", "or"):
            return [ops.zeros(keep_shape(x.shape, self.axes), out_dt)]
        if rt == "prod":
            t = ops.multiply(t, _others_product(x, self.axes))
        elif rt in ("max", "min"):
            out = bind(self, (x,))
            t = ops.multiply(t, _extremum_weights(x, out, self.axes, t.dtype))
        r = bind(Reduce("sum", self.axes), (t,))
        return [r if r.dtype == out_dt else ops.astype(r, out_dt)]

    def vmap(self, inputs, axes):
        x, bax = inputs[0], axes[0]
        if bax is None:
            return [bind(self, (x,))], [None]
        prim = Reduce(self.reduce_type, batched_axes(self.axes, bax))
        return [bind(prim, (x,))], [bax]


@lazy_dataclass
class ArgReduce(Primitive):
    """Index (uint32) of the max or min along `axis`, kept with size 1; first one on ties/NaN."""

    reduce_type: str  # "argmax" | "argmin"
    axis: int

    differentiable = False
    reduction = True

    def reduced_axes(self) -> tuple:
        return (self.axis,)

    def __post_init__(self):
        if self.reduce_type not in ("argmax", "argmin"):
            raise ValueError(f"[ArgReduce] Unknown reduce type {self.reduce_type!r}.")

    def abstract_eval(self, x):
        return [(keep_shape(x.shape, (self.axis,)), D.uint32)]

    def eval_cpu(self, x):
        xf = x.astype(acc_dtype(x.dtype), copy=False)
        fn = np.argmax if self.reduce_type == "argmax" else np.argmin
        return [fn(xf, axis=self.axis, keepdims=True).astype(np.uint32)]

    def vmap(self, inputs, axes):
        x, bax = inputs[0], axes[0]
        if bax is None:
            return [bind(self, (x,))], [None]
        return [bind(ArgReduce(self.reduce_type, batched_axis(self.axis, bax)), (x,))], [bax]


def _logsumexp(xf: np.ndarray, axes: tuple) -> np.ndarray:
    m = np.max(xf, axis=axes, keepdims=True)
    m = np.where(np.isinf(m), np.zeros((), xf.dtype), m)  # all -inf -> -inf; any +inf -> +inf
    return np.log(np.sum(np.exp(xf - m), axis=axes, keepdims=True)) + m


@lazy_dataclass
class LogSumExp(Primitive):
    """log(sum(exp(x))) over `axes`, kept with size 1; stable (max-shifted). Float input."""

    axes: tuple

    def abstract_eval(self, x):
        return [(keep_shape(x.shape, self.axes), x.dtype)]

    def eval_cpu(self, x):
        with ignoring():
            r = _logsumexp(x.astype(acc_dtype(x.dtype), copy=False), self.axes)
        return [r.astype(x.dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        x, g = primals[0], cotangents[0]
        return [ops.multiply(g, ops.exp(ops.subtract(x, outputs[0])))]

    def jvp(self, primals, tangents, argnums):
        x, t = primals[0], tangents[0]
        w = ops.exp(ops.subtract(x, bind(self, (x,))))
        return [bind(Reduce("sum", self.axes), (ops.multiply(t, w),))]

    def vmap(self, inputs, axes):
        x, bax = inputs[0], axes[0]
        if bax is None:
            return [bind(self, (x,))], [None]
        return [bind(LogSumExp(batched_axes(self.axes, bax)), (x,))], [bax]


@lazy_dataclass
class Softmax(Primitive):
    """exp(x - max) / sum(exp(x - max)) over `axes`. Float input; halves compute in float32
    whether or not `precise` (MLX's flag is kept as a parameter)."""

    axes: tuple
    precise: bool = False

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        if x.size == 0:
            return [np.empty(x.shape, x.dtype)]
        with ignoring():
            xf = x.astype(acc_dtype(x.dtype), copy=False)
            e = np.exp(xf - np.max(xf, axis=self.axes, keepdims=True))
            r = e / np.sum(e, axis=self.axes, keepdims=True)
        return [r.astype(x.dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        y, g = outputs[0], cotangents[0]
        s = ops.sum(ops.multiply(g, y), axis=self.axes, keepdims=True)
        return [ops.multiply(y, ops.subtract(g, s))]

    def jvp(self, primals, tangents, argnums):
        y, t = bind(self, (primals[0],)), tangents[0]
        s = ops.sum(ops.multiply(t, y), axis=self.axes, keepdims=True)
        return [ops.multiply(y, ops.subtract(t, s))]

    def vmap(self, inputs, axes):
        x, bax = inputs[0], axes[0]
        if bax is None:
            return [bind(self, (x,))], [None]
        return [bind(Softmax(batched_axes(self.axes, bax), self.precise), (x,))], [bax]
