"""Shared argument handling for the public ops: conversion, promotion, broadcasting, axes.

Every error raised here names the op, so users see `[op] what is wrong` and never a bare
NumPy traceback.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes as D
from ..array import TraceState, array
from ..memory import check_allocation
from ..prims.base import bind, bind_avals, broadcast_shapes
from ..prims.compile_support import DynamicBroadcast
from ..prims.core import AsType, Broadcast
from ..prims.unary import STOP_GRADIENT
from ..scheduler import CompileTraces

_INT_KINDS = "ui"


class AxisError(ValueError, IndexError):
    """Bad axis: a ValueError as braze promises, and an IndexError as MLX raises."""


def as_array(x, op: str, dtype: D.Dtype | None = None) -> array:
    """Convert an op argument to an array (scalars, lists, NumPy arrays); TypeError otherwise."""
    if type(x) is array:
        return x if dtype is None or x._dtype is dtype else astype(x, dtype)
    if isinstance(x, (numbers.Number, np.generic, np.ndarray, list, tuple)):
        try:
            return array(x, dtype)
        except (ValueError, TypeError) as e:
            raise TypeError(f"[{op}] Cannot convert {_short(x)} to an array: {e}") from None
    raise TypeError(f"[{op}] Expected an array or a scalar, got {type(x).__name__}: {_short(x)}.")


def _short(x) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def is_scalar(x) -> bool:
    """A Python (or NumPy) scalar: weakly typed in promotion."""
    return isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, np.ndarray)


def _weak_dtype(v, other: D.Dtype, op: str) -> D.Dtype:
    """The dtype a Python scalar takes next to an array of dtype `other` (MLX's rules)."""
    if isinstance(v, (bool, np.bool_)):
        return other
    if isinstance(v, numbers.Integral):
        if other is D.bool_:
            return D.int32
        if other.kind in _INT_KINDS:
            lo, hi = D.finfo_min_max(other)
            if not lo <= int(v) <= hi:
                raise ValueError(f"[{op}] Converting {v} to {other.name} would result in overflow.")
        return other
    if isinstance(v, numbers.Real):
        return other if other.kind in "fc" else D.float32
    if isinstance(v, numbers.Complex):
        return D.complex64
    raise TypeError(f"[{op}] Unsupported scalar type {type(v).__name__}.")


def to_arrays(a, b, op: str):
    """Two operands -> two arrays, applying MLX's weak-scalar rule; dtypes may still differ."""
    if type(a) is array:
        if type(b) is array:
            return a, b
        if is_scalar(b):
            return a, array(b, _weak_dtype(b, a._dtype, op))
        return a, as_array(b, op)
    if type(b) is array:
        if is_scalar(a):
            return array(a, _weak_dtype(a, b._dtype, op)), b
        return as_array(a, op), b
    return as_array(a, op), as_array(b, op)


def astype(x: array, dtype: D.Dtype) -> array:
    if x._dtype is dtype:
        return x
    return bind(AsType(dtype), (x,))


def broadcast_to_shape(x: array, shape: tuple) -> array:
    if x._shape == shape:
        return x
    return bind(Broadcast(shape), (x,))


def broadcast_arrays_(arrays, op: str):
    shape = broadcast_shapes(*[a._shape for a in arrays], op=op)
    if CompileTraces.dynamic:
        return dynamic_broadcast(arrays, shape)
    return [broadcast_to_shape(a, shape) for a in arrays]


def dynamic_broadcast(arrays, shape):
    """Shapeless compile traces (MLX's dynamic tracing): every operand gets a broadcast node
    that also reads the other operands (through stop_gradient), so replay can re-infer the
    broadcast shape from the new inputs. Applied even when shapes already agree."""
    out = []
    for i, x in enumerate(arrays):
        others = tuple(bind(STOP_GRADIENT, (y,)) for j, y in enumerate(arrays) if j != i)
        out.append(bind(DynamicBroadcast(shape), (x,) + others))
    return out


def _dynamic_binary(a, b, op: str):
    a, b = to_arrays(a, b, op)
    dt = D.promote(a._dtype, b._dtype)
    a, b = astype(a, dt), astype(b, dt)
    shape = broadcast_shapes(a._shape, b._shape, op=op)
    return tuple(dynamic_broadcast([a, b], shape))


_SCALARS: dict = {}


def _scalar_operand(v, like: array, op: str) -> array:
    """A Python scalar next to array `like`: its weakly typed constant, broadcast to like's shape.

    Cached, since `x * 0.5` in a loop would otherwise convert and broadcast 0.5 every time;
    the cached arrays are internal (never returned to users), so sharing them is safe.
    """
    t = type(v)
    if TraceState.depth:  # traces keep their own constants (a cached node may get evaluated)
        c = array(v, _weak_dtype(v, like._dtype, op))
        return broadcast_to_shape(c, like._shape) if c._dtype is like._dtype else c
    if v:
        key = (t, v, like._dtype, like._shape)
    else:  # 0.0 == -0.0 (and False == 0): the sign tells them apart
        key = (t, v, math.copysign(1.0, v) if t is float else 0, like._dtype, like._shape)
    c = _SCALARS.get(key)
    if c is None:
        c = array(v, _weak_dtype(v, like._dtype, op))
        if c._dtype is like._dtype:
            c = broadcast_to_shape(c, like._shape)
        if len(_SCALARS) >= 1024:
            _SCALARS.clear()
        _SCALARS[key] = c
    return c


def binary_operands(a, b, op: str):
    """Convert, promote to a common dtype and broadcast to a common shape."""
    if CompileTraces.dynamic:  # shapeless compile trace: no caches, no fast paths
        return _dynamic_binary(a, b, op)
    ta, tb = type(a), type(b)
    if ta is array:
        if tb is array:
            if a._dtype is b._dtype and a._shape == b._shape:
                return a, b  # fast path: the common case in arithmetic chains
        elif tb is float or tb is int or tb is bool:
            b = _scalar_operand(b, a, op)
            if b._dtype is a._dtype and b._shape == a._shape:
                return a, b
    elif tb is array and (ta is float or ta is int or ta is bool):
        a = _scalar_operand(a, b, op)
        if b._dtype is a._dtype and b._shape == a._shape:
            return a, b
    a, b = to_arrays(a, b, op)
    dt = D.promote(a._dtype, b._dtype)
    a, b = astype(a, dt), astype(b, dt)
    if a._shape != b._shape:
        shape = broadcast_shapes(a._shape, b._shape, op=op)
        check_allocation(op, shape, dt)  # the result of a broadcast may dwarf its operands
        a, b = broadcast_to_shape(a, shape), broadcast_to_shape(b, shape)
    return a, b


def normalize_axis(axis, ndim: int, op: str) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"[{op}] Expected an int axis, got {type(axis).__name__}: {axis!r}.")
    if not -ndim <= axis < ndim:
        raise AxisError(f"[{op}] Invalid axis {axis} for array with {ndim} dimensions.")
    return int(axis) % ndim if ndim else 0


def normalize_axes(axis, ndim: int, op: str) -> tuple:
    """None -> all axes; int or sequence -> sorted unique non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        axes = [normalize_axis(a, ndim, op) for a in axis]
        if len(set(axes)) != len(axes):
            raise ValueError(f"[{op}] Received duplicate axes {tuple(axis)}.")
        return tuple(sorted(axes))
    return (normalize_axis(axis, ndim, op),)


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def check_dims(shape, op: str) -> tuple:
    """MLX keeps shape dimensions in int32: one outside that range, given or computed, is an
    OverflowError naming it (rather than a wrapped, bogus dimension)."""
    for d in shape:
        if not INT32_MIN <= d <= INT32_MAX:
            raise OverflowError(f"[{op}] Shape dimension {d} is outside the supported range "
                                f"[{INT32_MIN}, {INT32_MAX}].")
    return shape


def check_shape(shape, op: str) -> tuple:
    """An int or a sequence of non-negative ints -> a tuple of ints."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in shape):
        raise TypeError(f"[{op}] Expected a shape (int or sequence of ints), got {shape!r}.")
    shape = check_dims(tuple(int(s) for s in shape), op)
    if any(s < 0 for s in shape):
        raise ValueError(f"[{op}] Negative dimensions are not allowed: {shape}.")
    return shape


def bind_allocating(prim, inputs, op: str):
    """bind(prim, inputs) for a primitive whose outputs own new buffers, after checking that
    each can be allocated (a ValueError naming `op` otherwise)."""
    avals = prim.abstract_eval(*inputs)
    for shape, dtype in avals:
        check_allocation(op, shape, dtype)
    return bind_avals(prim, inputs, avals)


def check_dtype(dtype, op: str):
    return None if dtype is None else D.to_dtype(dtype, op)


def attach_methods(methods: dict) -> None:
    """Bind public ops as array methods/operators (a late binding: `array` sits below the ops)."""
    for name, fn in methods.items():
        setattr(array, name, fn)
