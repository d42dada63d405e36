"""Public ops: reductions (sum ... count_nonzero), softmax/logsumexp and scans (cumsum ...).

Result dtypes follow MLX: sum/prod widen bool/int8/int16 to int32 and uint8/uint16 to uint32;
mean/var/std/median/logsumexp/softmax/logcumsumexp make integers float32; argmax/argmin give
uint32; all/any give bool; count_nonzero gives int32. Reductions over an empty axis follow MLX
too: sum -> 0, prod -> 1, all -> True, any -> False, mean/var -> NaN; max/min/argmax/argmin/
logsumexp/median raise ValueError.
"""
from __future__ import annotations

import builtins
import math
from typing import Optional, Tuple

import numpy as np

from .. import dtypes as D
from ..array import array
from ..prims.base import bind
from ..prims.compile_support import NumberOfElements
from ..prims.core import AsType, Copy
from ..prims.reduce import (
    ArgReduce,
    LogSumExp,
    Reduce,
    Softmax,
    at_least_float,
    keep_shape,
    reduce_dtype,
)
from ..prims.scan import Scan
from ..prims.shape import Reshape, Slice, Squeeze, Transpose
from ..prims.sort import Sort
from ..prims.unary import STOP_GRADIENT
from ..scheduler import CompileTraces
from ._helpers import _short, attach_methods, check_dtype, normalize_axes, normalize_axis
from ._typing import ArrayLike, Axes, Dtype, StreamOrDevice

__all__ = ["sum", "prod", "max", "min", "mean", "var", "std", "all", "any", "argmax", "argmin",
           "logsumexp", "softmax", "median", "count_nonzero",
           "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "minmax", "cumulative_sum",
           "cumulative_prod"]

#: Reductions whose reduced axes all have size 1 become a reshape (and a cast) at trace time.
#: Shapeless compile turns this off so the graph keeps the Reduce when shapes may change.
ELIDE_TRIVIAL_REDUCTIONS = True


# -- argument checks -------------------------------------------------------------------------
def check_array(a: ArrayLike, op: str) -> array:
    """MLX's reductions, scans and sorts take arrays only (no lists or scalars)."""
    if type(a) is not array and not isinstance(a, array):
        raise TypeError(f"[{op}] Expected an array, got {type(a).__name__}: {_short(a)}.")
    return a


def check_bool(v, name: str, op: str) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"[{op}] Expected a bool for {name}, got {type(v).__name__}: {v!r}.")
    return v


def check_int(v, name: str, op: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"[{op}] Expected an int for {name}, got {type(v).__name__}: {v!r}.")
    return int(v)


def _axes(a, axis, op):
    return normalize_axes(axis, a.ndim, op)


# -- small graph helpers ---------------------------------------------------------------------
def _reshape(x: array, shape: tuple) -> array:
    shape = tuple(shape)
    return x if x.shape == shape else bind(Reshape(shape), (x,))


def _cast(x: array, dt: D.Dtype) -> array:
    return x if x.dtype is dt else bind(AsType(dt), (x,))


def _fresh(out: array, a: array) -> array:
    """Never hand the caller its own input object back (in-place ops would alias it)."""
    return bind(Copy(), (a,)) if out is a else out


def _squeezed(shape, axes):
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _finish(r: array, a: array, axes: tuple, keepdims: bool) -> array:
    """`r` has the kept-dims shape; drop the reduced axes unless keepdims."""
    if keepdims:
        return r
    if CompileTraces.dynamic:  # a Squeeze follows the input's shape at shapeless replay
        return bind(Squeeze(tuple(axes)), (r,))
    return _reshape(r, _squeezed(a.shape, axes))


def _count(shape, axes) -> int:
    return math.prod(shape[i] for i in axes)


def _reduce(a, axis, keepdims, reduce_type, op):
    a = check_array(a, op)
    check_bool(keepdims, "keepdims", op)
    axes = _axes(a, axis, op)
    out_dt = reduce_dtype(reduce_type, a.dtype)
    if not axes:
        # MLX returns the input unchanged for axis=() (all/any still cast to bool)
        return _fresh(_cast(a, D.bool_) if reduce_type in ("and", "or") else a, a)
    if reduce_type in ("max", "min"):
        for i in axes:
            if a.shape[i] == 0:
                raise ValueError(f"[{op}] Cannot {op} reduce over axis {i} with size 0.")
    if ELIDE_TRIVIAL_REDUCTIONS and not CompileTraces.dynamic and builtins.all(
            a.shape[i] == 1 for i in axes):
        return _fresh(_finish(_cast(a, out_dt), a, axes, keepdims), a)
    return _finish(bind(Reduce(reduce_type, axes), (a,)), a, axes, keepdims)


# -- reductions ------------------------------------------------------------------------------
def sum(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
        stream: StreamOrDevice = None) -> array:
    """Sum over `axis` (None: all axes)."""
    return _reduce(a, axis, keepdims, "sum", "sum")


def prod(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
         stream: StreamOrDevice = None) -> array:
    """Product over `axis` (None: all axes)."""
    return _reduce(a, axis, keepdims, "prod", "prod")


def max(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
        stream: StreamOrDevice = None) -> array:
    """Maximum over `axis`; NaN propagates."""
    return _reduce(a, axis, keepdims, "max", "max")


def min(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
        stream: StreamOrDevice = None) -> array:
    """Minimum over `axis`; NaN propagates."""
    return _reduce(a, axis, keepdims, "min", "min")


def all(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
        stream: StreamOrDevice = None) -> array:
    """True where every element over `axis` is nonzero (NaN counts as nonzero)."""
    return _reduce(a, axis, keepdims, "and", "all")


def any(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
        stream: StreamOrDevice = None) -> array:
    """True where some element over `axis` is nonzero (NaN counts as nonzero)."""
    return _reduce(a, axis, keepdims, "or", "any")


def _scalar(v, dt: D.Dtype) -> array:
    return array(v, dt)


def mean(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
         stream: StreamOrDevice = None) -> array:
    """Arithmetic mean over `axis`; integers give float32; an empty reduction gives NaN."""
    from .elementwise import multiply
    a = check_array(a, "mean")
    check_bool(keepdims, "keepdims", "mean")
    axes = _axes(a, axis, "mean")
    dt = at_least_float(a.dtype)
    x = _cast(a, dt)
    if not axes:
        return _fresh(x, a)
    s = sum(x, axes, keepdims)
    return multiply(s, _inv_count(a, axes, 0, s.dtype))


def _inv_count(a, axes, ddof, dt):
    """1 / (number of elements of `a` over `axes` - ddof): a baked constant, or in a shapeless
    compile trace a NumberOfElements node computed from the run-time shape."""
    if CompileTraces.dynamic:
        from .elementwise import maximum, subtract
        if ddof == 0:
            return bind(NumberOfElements(tuple(axes), True, dt), (bind(STOP_GRADIENT, (a,)),))
        n = bind(NumberOfElements(tuple(axes), False, dt), (bind(STOP_GRADIENT, (a,)),))
        from .elementwise import divide
        return divide(_scalar(1.0, dt), maximum(subtract(n, _scalar(float(ddof), dt)),
                                               _scalar(0.0, dt)))
    n = _count(a.shape, axes) - ddof
    return _scalar(1.0 / n if n > 0 else math.inf, dt)


def _var(a, axis, keepdims, ddof, op):
    from .elementwise import abs as _abs
    from .elementwise import multiply, square, subtract
    a = check_array(a, op)
    check_bool(keepdims, "keepdims", op)
    ddof = check_int(ddof, "ddof", op)
    axes = _axes(a, axis, op)
    dt = at_least_float(a.dtype)
    x = _cast(a, dt)
    mu = mean(x, axes, keepdims=True)
    d = subtract(x, mu)
    if d.dtype.kind == "c":
        d = _abs(d)
    v = sum(square(d), axes, keepdims)
    return multiply(v, _inv_count(a, axes, ddof, v.dtype))


def var(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, ddof: int = 0, *,
        stream: StreamOrDevice = None) -> array:
    """Variance over `axis`: sum(|x - mean|^2) / max(n - ddof, 0) (two passes, like MLX)."""
    return _var(a, axis, keepdims, ddof, "var")


def std(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, ddof: int = 0, *,
        stream: StreamOrDevice = None) -> array:
    """Standard deviation over `axis`: sqrt(var(a, axis, keepdims, ddof))."""
    from .elementwise import sqrt
    return sqrt(_var(a, axis, keepdims, ddof, "std"))


def _argreduce(a, axis, keepdims, reduce_type):
    op = reduce_type
    a = check_array(a, op)
    check_bool(keepdims, "keepdims", op)
    if a.size == 0:
        raise ValueError(f"[{op}] Cannot {op} reduce zero size array.")
    if axis is None:
        r = bind(ArgReduce(reduce_type, 0), (_reshape(a, (a.size,)),))
        return _reshape(r, (1,) * a.ndim if keepdims else ())
    ax = normalize_axis(axis, a.ndim, op)
    return _finish(bind(ArgReduce(reduce_type, ax), (a,)), a, (ax,), keepdims)


def argmax(a: ArrayLike, /, axis: Optional[int] = None, keepdims: bool = False, *,
           stream: StreamOrDevice = None) -> array:
    """Index (uint32) of the first maximum along `axis` (None: of the flattened array)."""
    return _argreduce(a, axis, keepdims, "argmax")


def argmin(a: ArrayLike, /, axis: Optional[int] = None, keepdims: bool = False, *,
           stream: StreamOrDevice = None) -> array:
    """Index (uint32) of the first minimum along `axis` (None: of the flattened array)."""
    return _argreduce(a, axis, keepdims, "argmin")


def logsumexp(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
              stream: StreamOrDevice = None) -> array:
    """log(sum(exp(a))) over `axis`, computed stably; integers give float32."""
    a = check_array(a, "logsumexp")
    check_bool(keepdims, "keepdims", "logsumexp")
    axes = _axes(a, axis, "logsumexp")
    if a.size == 0:
        raise ValueError("[logsumexp] Received empty array.")
    x = _cast(a, at_least_float(a.dtype))
    if not axes:
        return _fresh(x, a)
    return _finish(bind(LogSumExp(axes), (x,)), a, axes, keepdims)


def softmax(a: ArrayLike, /, axis: Axes = None, *, precise: bool = False,
            stream: StreamOrDevice = None) -> array:
    """exp(a) / sum(exp(a)) over `axis` (None: all axes), shifted by the max for stability."""
    a = check_array(a, "softmax")
    check_bool(precise, "precise", "softmax")
    axes = _axes(a, axis, "softmax")
    x = _cast(a, at_least_float(a.dtype))
    return bind(Softmax(axes, precise), (x,))


def median(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
           stream: StreamOrDevice = None) -> array:
    """Median over `axis` (mean of the two middle values for an even count); NaN propagates."""
    from .elementwise import add, isnan, multiply, where
    a = check_array(a, "median")
    check_bool(keepdims, "keepdims", "median")
    axes = _axes(a, axis, "median")
    dt = at_least_float(a.dtype)
    if not axes:
        return _fresh(_cast(a, dt), a)
    for i in axes:
        if a.shape[i] == 0:
            raise ValueError("[median] Cannot take median along empty axis.")
    # move the reduced axes last, flatten them, sort, and read the middle
    rest = [i for i in range(a.ndim) if i not in axes]
    perm = tuple(rest) + axes
    x = a if perm == tuple(range(a.ndim)) else bind(Transpose(perm), (a,))
    n = _count(a.shape, axes)
    lead = tuple(a.shape[i] for i in rest)
    x = _reshape(x, lead + (n,))
    s = _cast(bind(Sort(len(lead)), (x,)), dt)

    def at(k):
        start = (0,) * len(lead) + (k,)
        stop = lead + (k + 1,)
        return bind(Slice(start, stop, (1,) * len(stop)), (s,))

    mid = at(n // 2)
    if n % 2 == 0:
        mid = multiply(add(at(n // 2 - 1), mid), _scalar(0.5, dt))
    # any NaN makes the median NaN, as in NumPy (complex NaNs need not sort last)
    if dt.kind in "fc":
        mid = where(any(isnan(x), axis=-1, keepdims=True), _scalar(math.nan, dt), mid)
    out_shape = keep_shape(a.shape, axes) if keepdims else _squeezed(a.shape, axes)
    return _reshape(mid, out_shape)


def count_nonzero(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
                  stream: StreamOrDevice = None) -> array:
    """Number of nonzero elements over `axis` (int32; NaN counts as nonzero)."""
    a = check_array(a, "count_nonzero")
    check_bool(keepdims, "keepdims", "count_nonzero")
    axes = _axes(a, axis, "count_nonzero")
    b = _cast(a, D.bool_)
    if not axes:
        return _fresh(_cast(b, D.int32), a)
    return sum(b, axes, keepdims)


# -- scans -----------------------------------------------------------------------------------
def _scan(a, axis, reverse, inclusive, reduce_type, op, dtype=None):
    a = check_array(a, op)
    check_bool(reverse, "reverse", op)
    check_bool(inclusive, "inclusive", op)
    dt = check_dtype(dtype, op)
    if axis is None:
        x = _reshape(a, (a.size,))
        ax = 0
    else:
        ax = normalize_axis(axis, a.ndim, op)
        x = a
    if dt is not None:
        x = _cast(x, dt)
    if reduce_type == "sum" and x.dtype is D.bool_:
        x = _cast(x, D.int32)
    elif reduce_type == "logaddexp":
        x = _cast(x, at_least_float(x.dtype))
    return bind(Scan(reduce_type, ax, reverse, inclusive), (x,))


def cumsum(a: ArrayLike, /, axis: Optional[int] = None, *, reverse: bool = False,
           inclusive: bool = True, dtype: Optional[Dtype] = None,
           stream: StreamOrDevice = None) -> array:
    """Cumulative sum along `axis` (None: the flattened array); bool gives int32."""
    return _scan(a, axis, reverse, inclusive, "sum", "cumsum", dtype)


def cumprod(a: ArrayLike, /, axis: Optional[int] = None, *, reverse: bool = False,
            inclusive: bool = True, dtype: Optional[Dtype] = None,
            stream: StreamOrDevice = None) -> array:
    """Cumulative product along `axis` (None: the flattened array)."""
    return _scan(a, axis, reverse, inclusive, "prod", "cumprod", dtype)


def cummax(a: ArrayLike, /, axis: Optional[int] = None, *, reverse: bool = False,
           inclusive: bool = True, stream: StreamOrDevice = None) -> array:
    """Cumulative maximum along `axis`; an exclusive scan starts from the dtype's lowest."""
    return _scan(a, axis, reverse, inclusive, "max", "cummax")


def cummin(a: ArrayLike, /, axis: Optional[int] = None, *, reverse: bool = False,
           inclusive: bool = True, stream: StreamOrDevice = None) -> array:
    """Cumulative minimum along `axis`; an exclusive scan starts from the dtype's highest."""
    return _scan(a, axis, reverse, inclusive, "min", "cummin")


def logcumsumexp(a: ArrayLike, /, axis: Optional[int] = None, *, reverse: bool = False,
                 inclusive: bool = True, stream: StreamOrDevice = None) -> array:
    """Cumulative log(sum(exp)) along `axis`; integers give float32; exclusive starts at -inf."""
    return _scan(a, axis, reverse, inclusive, "logaddexp", "logcumsumexp")


def minmax(a: ArrayLike, /, axis: Axes = None, keepdims: bool = False, *,
           stream: StreamOrDevice = None) -> Tuple[array, array]:
    """(min, max) over `axis`."""
    return (_reduce(a, axis, keepdims, "min", "minmax"),
            _reduce(a, axis, keepdims, "max", "minmax"))


cumulative_sum, cumulative_prod = cumsum, cumprod  # the Array API names MLX also has


# -- array methods (MLX's signatures: axis may be given positionally) -------------------------
# NumPy's functions call an array's method of the same name when given a non-NumPy array
# (np.sum(a) is a.sum(axis=None, dtype=None, out=None)), so the methods also take `dtype`
# (the input is cast first, NumPy's accumulator dtype) and `out`, which must stay None.
def _numpy_args(self, name, dtype, out):
    if out is not None:
        raise TypeError(f"[{name}] out= is not supported: braze arrays are immutable.")
    return self if dtype is None else _cast(self, check_dtype(dtype, name))


def _m_reduce(fn):
    def method(self, axis: Axes = None, keepdims: bool = False, *,
               stream: StreamOrDevice = None, dtype: Optional[Dtype] = None,
               out: None = None) -> array:
        return fn(_numpy_args(self, fn.__name__, dtype, out), axis, keepdims)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _m_var(fn):
    def method(self, axis: Axes = None, keepdims: bool = False, ddof: int = 0, *,
               stream: StreamOrDevice = None, dtype: Optional[Dtype] = None,
               out: None = None) -> array:
        return fn(_numpy_args(self, fn.__name__, dtype, out), axis, keepdims, ddof)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _m_scan(fn):
    def method(self, axis: Optional[int] = None, *, reverse: bool = False,
               inclusive: bool = True, stream: StreamOrDevice = None,
               dtype: Optional[Dtype] = None, out: None = None) -> array:
        x = _numpy_args(self, fn.__name__, dtype, out)
        return fn(x, axis, reverse=reverse, inclusive=inclusive)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


attach_methods({
    **{f.__name__: _m_reduce(f) for f in (sum, prod, max, min, mean, all, any, argmax, argmin,
                                          logsumexp)},
    **{f.__name__: _m_var(f) for f in (var, std)},
    **{f.__name__: _m_scan(f) for f in (cumsum, cumprod, cummax, cummin, logcumsumexp)},
})
