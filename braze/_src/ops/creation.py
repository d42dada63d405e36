"""Public ops: creation (arange, linspace, zeros/ones/full and their *_like, eye, tri, meshgrid...).

Every op is lazy like MLX: `zeros`, `ones` and `full` are a `Broadcast` (a zero-copy view) of a
0-d constant; `arange`, `linspace`, `eye` and `tri` are primitives with no inputs.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Optional, Tuple, Union

import numpy as np

from .. import dtypes as D
from ..array import array
from ..casts import cast
from ..memory import check_allocation
from ..prims.base import bind
from ..prims.compile_support import DynamicBroadcast
from ..prims.core import AsType, Broadcast
from ..prims.creation import Arange, Eye, Linspace, Tri, arange_length
from ..prims.unary import STOP_GRADIENT
from ..scheduler import CompileTraces
from ._helpers import as_array, broadcast_shapes, check_dtype, check_shape
from ._typing import ArrayLike, Dtype, Scalar, Shape, StreamOrDevice

__all__ = ["arange", "linspace", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like",
           "empty", "empty_like", "eye", "identity", "tri", "tril", "triu", "meshgrid",
           "asarray", "bartlett", "hanning", "hamming", "blackman", "from_dlpack"]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


# -- helpers ----------------------------------------------------------------------------------
def _real_scalar(v, what: str, op: str):
    """A Python/NumPy real number (not bool) -> a Python int or float."""
    if isinstance(v, array) and v.ndim == 0 and v.dtype.kind in "uif":
        v = v.item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.integer,
                                                             np.floating)):
        raise TypeError(f"[{op}] Expected a real number for {what}, got "
                        f"{type(v).__name__}: {v!r}.")
    if isinstance(v, (np.integer, np.floating)):
        v = v.item()
    return v


def _int_arg(v, what: str, op: str, allow_negative=True) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"[{op}] Expected an int for {what}, got {type(v).__name__}: {v!r}.")
    v = int(v)
    if not allow_negative and v < 0:
        raise ValueError(f"[{op}] {what} must be non-negative, got {v}.")
    return v


def _as_input_array(a, op: str) -> array:
    return a if type(a) is array else as_array(a, op)


def _constant(v, dtype: D.Dtype | None, op: str) -> array:
    """A 0-d (or n-d) evaluated constant for a scalar `v`, converted like MLX's astype."""
    if (dtype is not None and dtype.kind in "ui" and isinstance(v, (int, np.integer))
            and not isinstance(v, (bool, np.bool_))):
        lo, hi = D.finfo_min_max(dtype)
        if not lo <= int(v) <= hi:
            raise ValueError(f"[{op}] Converting {v} to {dtype.name} would result in overflow.")
    if dtype is D.float64 and isinstance(v, float):  # MLX: exact, not through float32
        return array(v, dtype)
    c = as_array(v, op)
    if dtype is not None and c.dtype is not dtype:
        data = cast(c._numpy(), dtype.np_dtype)
        c = array._from_data(np.array(data, order="C"))
    return c


# -- ranges -----------------------------------------------------------------------------------
_NO = object()  # an argument not passed at all (None is a value: arange(-3, None, -1))


def _arange_form(start, stop, step, dtype):
    """MLX's two overloads: arange(start, stop[, step][, dtype]) and arange(stop[, step]
    [, dtype]); a start given without any stop matches neither (TypeError, as MLX)."""
    if isinstance(step, D.Dtype) and dtype is None:  # the arange(stop, step, dtype) form
        start, stop, step, dtype = start, _NO, stop, step
    if start is _NO:
        if stop is _NO or stop is None:
            raise TypeError("[arange] Expected a stop value.")
        start = 0
    elif stop is _NO or stop is None:
        start, stop = 0, start
    return start, stop, 1 if step is None or step is _NO else step, dtype


def arange(*args: Union[Scalar, Dtype], stream: StreamOrDevice = None,
           **kwargs: Union[Scalar, Dtype]) -> array:
    """Values in [start, stop) by step (MLX's forms: arange(stop), arange(start, stop[, step]))."""
    names = ("start", "stop", "step", "dtype")
    if len(args) > 4:
        raise TypeError(f"[arange] Expected at most 4 positional arguments, got {len(args)}.")
    bad = set(kwargs) - set(names)
    if bad:
        raise TypeError(f"[arange] Unexpected keyword argument {sorted(bad)[0]!r}.")
    vals = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in vals:
            raise TypeError(f"[arange] Got multiple values for argument {k!r}.")
        vals[k] = v
    if "start" in kwargs and "stop" not in vals:
        raise TypeError("[arange] A keyword start needs a stop value.")
    start, stop, step, dtype = _arange_form(*(vals.get(k, _NO) for k in names[:3]),
                                            vals.get("dtype"))
    start = _real_scalar(start, "start", "arange")
    stop = _real_scalar(stop, "stop", "arange")
    step = _real_scalar(step, "step", "arange")
    if dtype is None:
        vals = (start, stop, step)
        if any(isinstance(v, float) for v in vals):
            dtype = D.float32
        elif all(_INT32_MIN <= v <= _INT32_MAX for v in vals):
            dtype = D.int32
        else:
            dtype = D.int64
    else:
        dtype = D.to_dtype(dtype, "arange")
    if dtype is D.bool_:
        raise ValueError("[arange] bool is not supported for arange.")
    if step == 0:
        raise ValueError("[arange] step must be nonzero.")
    if math.isinf(step) and math.isfinite(start) and math.isfinite(stop) and (
            (step > 0 and start < stop) or (step < 0 and start > stop)):
        return _constant(start, dtype, "arange").reshape((1,))  # MLX: just [start]
    n = arange_length(start, stop, step)
    if n > _INT32_MAX:
        raise ValueError(f"[arange] Maximum size exceeded: {n} elements.")
    return bind(Arange(start, stop, step, dtype), ())


def linspace(start: Scalar, stop: Scalar, num: int = 50, endpoint: bool = True,
             dtype: Optional[Dtype] = D.float32, *, stream: StreamOrDevice = None) -> array:
    """`num` evenly spaced values over [start, stop] (or [start, stop) without the endpoint)."""
    start = _real_scalar(start, "start", "linspace")
    stop = _real_scalar(stop, "stop", "linspace")
    if num is None:
        num = 50
    num = _int_arg(num, "num", "linspace")
    if num < 0:
        raise ValueError(f"[linspace] number of samples, {num}, must be non-negative.")
    dtype = D.float32 if dtype is None else D.to_dtype(dtype, "linspace")
    check_allocation("linspace", (num,), dtype)
    return bind(Linspace(start, stop, num, bool(endpoint), dtype), ())


# -- windows (MLX's float32 formulas, evaluated as float32 ops like MLX) -----------------------
def _window(M, op):
    """M as an int and the sample positions 0..M-1 (float32); None when M < 2 (no ramp)."""
    M = _int_arg(M, "M", op)
    if M < 2:
        return M, None
    return M, arange(0, M, 1, D.float32)


def _short_window(M):
    return full((1,), 1.0, D.float32) if M == 1 else zeros((0,), D.float32)


def _f32(v):
    return _constant(float(v), D.float32, "window")


def bartlett(M: int, *, stream: StreamOrDevice = None) -> array:
    """The Bartlett (triangular) window of M points: 1 - |2n/(M-1) - 1|."""
    from .elementwise import abs, multiply, subtract
    M, n = _window(M, "bartlett")
    if n is None:
        return _short_window(M)
    return subtract(_f32(1), abs(subtract(multiply(_f32(2 / (M - 1)), n), _f32(1))))


def hanning(M: int, *, stream: StreamOrDevice = None) -> array:
    """The Hann window of M points: sin(pi n / (M-1))^2."""
    from .elementwise import multiply, sin, square
    M, n = _window(M, "hanning")
    if n is None:
        return _short_window(M)
    return square(sin(multiply(_f32(math.pi / (M - 1)), n)))


def _cosine_window(M, op, coefs):
    """sum_k c_k cos(2 pi k n / (M-1)) for MLX's (hamming, blackman) coefficients, written
    with cos(x) and cos(x)^2 as MLX does (so the float32 rounding matches)."""
    from .elementwise import add, cos, multiply, square, subtract
    M, n = _window(M, op)
    if n is None:
        return _short_window(M)
    c = cos(multiply(_f32(2 * math.pi / (M - 1)), n))
    out = subtract(_f32(coefs[0]), multiply(_f32(coefs[1]), c))
    return add(out, multiply(_f32(coefs[2]), square(c))) if len(coefs) > 2 else out


def hamming(M: int, *, stream: StreamOrDevice = None) -> array:
    """The Hamming window of M points: 0.54 - 0.46 cos(2 pi n / (M-1))."""
    return _cosine_window(M, "hamming", (0.54, 0.46))


def blackman(M: int, *, stream: StreamOrDevice = None) -> array:
    """The Blackman window of M points, MLX's form 0.34 - 0.5 cos x + 0.16 cos^2 x (the same
    as 0.42 - 0.5 cos x + 0.08 cos 2x)."""
    return _cosine_window(M, "blackman", (0.34, 0.5, 0.16))


# -- filled arrays ----------------------------------------------------------------------------
def _full(shape, vals, dtype, op: str) -> array:
    shape = check_shape(shape, op)
    dtype = check_dtype(dtype, op)
    if type(vals) is array:
        v = vals if dtype is None or vals.dtype is dtype else bind(AsType(dtype), (vals,))
    else:
        v = _constant(vals, dtype, op)
    if broadcast_shapes(v.shape, shape, op=op) != shape:
        raise ValueError(f"[{op}] Cannot broadcast vals with shape {v.shape} to shape {shape}.")
    check_allocation(op, shape, v.dtype)  # evaluated, the dense broadcast owns a buffer
    return bind(Broadcast(shape, dense=True), (v,))


def full(shape: Shape, vals: ArrayLike, dtype: Optional[Dtype] = None, *,
         stream: StreamOrDevice = None) -> array:
    """An array of `shape` filled with `vals` (a scalar or an array broadcast to `shape`)."""
    return _full(shape, vals, dtype, "full")


def zeros(shape: Shape, dtype: Optional[Dtype] = D.float32, *,
          stream: StreamOrDevice = None) -> array:
    """An array of `shape` filled with zeros (float32 by default)."""
    return _full(shape, 0, D.float32 if dtype is None else dtype, "zeros")


def ones(shape: Shape, dtype: Optional[Dtype] = D.float32, *,
         stream: StreamOrDevice = None) -> array:
    """An array of `shape` filled with ones (float32 by default)."""
    return _full(shape, 1, D.float32 if dtype is None else dtype, "ones")


def empty(shape: Shape, dtype: Optional[Dtype] = D.float32, *,
          stream: StreamOrDevice = None) -> array:
    """An array of `shape` (float32 by default); braze fills it with zeros, as MLX does."""
    return _full(shape, 0, D.float32 if dtype is None else dtype, "empty")


def _full_like(a, vals, dtype, op: str) -> array:
    a = _as_input_array(a, op)
    if not CompileTraces.dynamic:
        return _full(a.shape, vals, a.dtype if dtype is None else dtype, op)
    dtype = a.dtype if dtype is None else check_dtype(dtype, op)
    # shapeless compile trace: broadcast against `a` itself (through stop_gradient) so the
    # shape follows a's at replay, as MLX's full_like does through broadcast_arrays
    if type(vals) is array:
        v = vals if vals.dtype is dtype else bind(AsType(dtype), (vals,))
    else:
        v = _constant(vals, dtype, op)
    if broadcast_shapes(v.shape, a.shape, op=op) != a.shape:
        raise ValueError(f"[{op}] Cannot broadcast vals with shape {v.shape} to shape "
                         f"{a.shape}.")
    check_allocation(op, a.shape, dtype)
    return bind(DynamicBroadcast(a.shape), (v, bind(STOP_GRADIENT, (a,))))


def full_like(a: ArrayLike, vals: ArrayLike, dtype: Optional[Dtype] = None, *,
              stream: StreamOrDevice = None) -> array:
    """An array like `a` (its shape, and its dtype unless `dtype` is given) filled with `vals`."""
    return _full_like(a, vals, dtype, "full_like")


def zeros_like(a: ArrayLike, dtype: Optional[Dtype] = None, *,
               stream: StreamOrDevice = None) -> array:
    """An array of zeros with the shape of `a` and its dtype (or `dtype`)."""
    return _full_like(a, 0, dtype, "zeros_like")


def ones_like(a: ArrayLike, dtype: Optional[Dtype] = None, *,
              stream: StreamOrDevice = None) -> array:
    """An array of ones with the shape of `a` and its dtype (or `dtype`)."""
    return _full_like(a, 1, dtype, "ones_like")


def empty_like(a: ArrayLike, dtype: Optional[Dtype] = None, *,
               stream: StreamOrDevice = None) -> array:
    """An array with the shape of `a` and its dtype (or `dtype`); braze fills it with
    zeros, as MLX does.
    """
    return _full_like(a, 0, dtype, "empty_like")


# -- matrices ---------------------------------------------------------------------------------
def _n_m_k(n, m, k, op):
    n = _int_arg(n, "n", op)
    m = n if m is None else _int_arg(m, "m", op)
    k = _int_arg(k, "k", op)
    if n < 0 or m < 0:
        raise ValueError(f"[{op}] N and M must be non-negative integers, got n={n}, m={m}.")
    return n, m, k


def eye(n: int, m: Optional[int] = None, k: int = 0, dtype: Optional[Dtype] = D.float32, *,
        stream: StreamOrDevice = None) -> array:
    """An n x m matrix with ones on the k-th diagonal."""
    n, m, k = _n_m_k(n, m, k, "eye")
    dtype = D.float32 if dtype is None else D.to_dtype(dtype, "eye")
    check_allocation("eye", (n, m), dtype)
    return bind(Eye(n, m, k, dtype), ())


def identity(n: int, dtype: Optional[Dtype] = D.float32, *, stream: StreamOrDevice = None) -> array:
    """The n x n identity matrix."""
    n, _, _ = _n_m_k(n, None, 0, "identity")
    dtype = D.float32 if dtype is None else D.to_dtype(dtype, "identity")
    check_allocation("identity", (n, n), dtype)
    return bind(Eye(n, n, 0, dtype), ())


def tri(n: int, m: Optional[int] = None, k: int = 0, dtype: Optional[Dtype] = None, *,
        stream: StreamOrDevice = None) -> array:
    """An n x m matrix with ones at and below the k-th diagonal (float32 by default)."""
    n, m, k = _n_m_k(n, m, k, "tri")
    dtype = D.float32 if dtype is None else D.to_dtype(dtype, "tri")
    check_allocation("tri", (n, m), dtype)
    return bind(Tri(n, m, k, dtype), ())


def _tri_select(x, k, op, upper):
    from .elementwise import where

    x = _as_input_array(x, op)
    if x.ndim < 2:
        raise ValueError(f"[{op}] array must be at least 2-D, got shape {x.shape}.")
    k = _int_arg(k, "k", op)
    n, m = x.shape[-2:]
    check_allocation(op, x.shape, x.dtype)
    zero = _constant(0, x.dtype, op)
    if upper:
        return where(bind(Tri(n, m, k - 1, D.bool_), ()), zero, x)
    return where(bind(Tri(n, m, k, D.bool_), ()), x, zero)


def tril(x: ArrayLike, k: int = 0, *, stream: StreamOrDevice = None) -> array:
    """Zero the elements above the k-th diagonal of the last two axes."""
    return _tri_select(x, k, "tril", upper=False)


def triu(x: ArrayLike, k: int = 0, *, stream: StreamOrDevice = None) -> array:
    """Zero the elements below the k-th diagonal of the last two axes."""
    return _tri_select(x, k, "triu", upper=True)


def meshgrid(*arrays: ArrayLike, sparse: bool = False, indexing: str = "xy",
             stream: StreamOrDevice = None) -> Tuple[array, ...]:
    """Coordinate grids from 1-D coordinate arrays (inputs are flattened, like NumPy)."""
    from .shape import reshape

    if indexing is None:
        indexing = "xy"
    if indexing not in ("xy", "ij"):
        raise ValueError(f"[meshgrid] Invalid indexing value {indexing!r}. "
                         "Valid values are 'xy' and 'ij'.")
    arrays = [_as_input_array(a, "meshgrid") for a in arrays]
    n = len(arrays)
    sizes = [a.size for a in arrays]
    pos = list(range(n))
    if indexing == "xy" and n >= 2:
        pos[0], pos[1] = 1, 0
    full_shape = [0] * n
    for i in range(n):
        full_shape[pos[i]] = sizes[i]
    full_shape = tuple(full_shape)
    outs = []
    for i, a in enumerate(arrays):
        shape = [1] * n
        shape[pos[i]] = sizes[i]
        r = reshape(a, tuple(shape))
        if not sparse:
            r = bind(Broadcast(full_shape), (r,))
        outs.append(r)
    return tuple(outs)


# -- conversion -------------------------------------------------------------------------------
def asarray(a: Any, dtype: Optional[Dtype] = None, *, copy: Optional[bool] = None) -> array:
    """Convert `a` to an array; copy=None shares a NumPy buffer of a matching dtype.

    copy=False always raises, as in MLX's CPU build: MLX adopts a host buffer only on unified
    memory (Metal), which braze does not report (`mx.metal.is_available()` is False), and it
    never returns an existing array object either. copy=None sharing is what MLX does where it
    can adopt.
    """
    from ..prims.core import Copy

    dtype = check_dtype(dtype, "asarray")
    if copy is False:
        raise ValueError(f"[asarray] {_no_copy_reason(a, dtype)}")
    if type(a) is array:
        if dtype is None or dtype is a.dtype:
            return bind(Copy(), (a,))  # a new array object; buffers are immutable, so share
        return bind(AsType(dtype), (a,))
    if isinstance(a, np.ndarray) and copy is not True:
        kind_ok = a.dtype.kind not in "OSUV" and a.dtype in D._BY_NP
        target = dtype or (D.float32 if a.dtype == np.float64 else
                           (D.from_numpy(a.dtype) if kind_ok else None))
        if kind_ok and target is not None and target.np_dtype == a.dtype:
            return array._from_data(a.view())  # a view: the memory is not ours to count
    try:
        return array(a, dtype)
    except (ValueError, TypeError) as e:
        msg = str(e)
        raise type(e)(msg if msg.startswith("[") else f"[asarray] {msg}") from None


def _no_copy_reason(a, dtype) -> str:
    if isinstance(a, np.ndarray) or (type(a) is not array and hasattr(a, "__dlpack__")):
        if dtype is not None and np.dtype(dtype.np_dtype) != np.asarray(a).dtype:
            return "Cannot convert array to the requested dtype without a copy."
        return "Cannot import a CPU array without a copy."
    return "Unable to avoid copy while creating an array as requested."


def from_dlpack(x: Any, /, *, copy: Optional[bool] = None) -> array:
    """An array from an object with `__dlpack__` (NumPy, PyTorch CPU tensors, braze arrays).

    copy=None shares the memory and keeps its strides; float64/complex128 become float32/
    complex64 as elsewhere in MLX (a copy); copy=False raises as in asarray.
    """
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"[from_dlpack] Expected an object with __dlpack__, got "
                        f"{type(x).__name__}.")
    if copy is False:
        raise ValueError("[from_dlpack] Cannot import a CPU array without a copy.")
    try:
        nd = np.from_dlpack(x)
    except (BufferError, TypeError, ValueError, RuntimeError) as e:
        raise ValueError(f"[from_dlpack] Cannot convert the DLPack tensor: {e}") from None
    if any(st < 0 for st in nd.strides):
        raise ValueError("[from_dlpack] Negative strides are not supported.")
    return asarray(nd, copy=copy)
