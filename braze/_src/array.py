"""The lazy `array`: a shape, a dtype, and either a buffer or the node that computes it.

A node is (primitive, inputs); a multi-output node's arrays share one `_siblings` tuple.
Operators and most methods are attached later by the `ops` layer (see ops/_methods.py).
"""
from __future__ import annotations

import numbers

import numpy as np

from . import dtypes as D
from . import memory

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class TraceState:
    """How many transformation traces (grad, vjp, jvp, vmap, compile) are active.

    While any is active, arrays computed from tracers are tracers too, and evaluating a tracer
    keeps its graph so the transform can still walk it.
    """

    depth = 0


class array:
    """An N-dimensional lazy array (MLX's `mlx.core.array`)."""

    __slots__ = ("_shape", "_dtype", "_data", "_prim", "_inputs", "_siblings", "_idx",
                 "_mem", "_tracer", "__weakref__")
    __array_priority__ = 100  # NumPy defers `ndarray op array` to our reflected operators

    def __init__(self, val, dtype=None):
        dt = None if dtype is None else D.to_dtype(dtype, "array")
        data = to_numpy(val, dt)
        self._shape = data.shape
        self._dtype = D.from_numpy(data.dtype)
        self._prim = None
        self._inputs = ()
        self._siblings = None
        self._idx = 0
        self._mem = 0
        self._tracer = False
        self._data = None
        _set_data(self, data)

    # -- construction used by the rest of the library -------------------------------------
    @staticmethod
    def _from_data(data: np.ndarray) -> "array":
        """Wrap an existing NumPy buffer without copying (caller guarantees the dtype is ours)."""
        a = object.__new__(array)
        a._shape = data.shape
        a._dtype = D.from_numpy(data.dtype)
        a._prim = None
        a._inputs = ()
        a._siblings = None
        a._idx = 0
        a._mem = 0
        a._tracer = False
        a._data = None
        _set_data(a, data)
        return a

    @staticmethod
    def _node(shape, dtype, prim, inputs) -> "array":
        """A new unevaluated array computed by `prim` from `inputs`."""
        a = object.__new__(array)
        a._shape = shape
        a._dtype = dtype
        a._data = None
        a._prim = prim
        a._inputs = inputs
        a._siblings = None
        a._idx = 0
        a._mem = 0
        a._tracer = False
        return a

    def __del__(self):
        # getattr: __init__ may have raised before the slot was set
        mem = getattr(self, "_mem", 0)
        if mem:
            memory.sub(mem)

    # -- metadata --------------------------------------------------------------------------
    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def size(self):
        n = 1
        for s in self._shape:
            n *= s
        return n

    @property
    def itemsize(self):
        return self._dtype.size

    @property
    def nbytes(self):
        return self.size * self._dtype.size

    # -- evaluation and conversion ---------------------------------------------------------
    def _numpy(self) -> np.ndarray:
        """The evaluated buffer (evaluates if needed)."""
        if self._data is None:
            from .scheduler import eval_arrays
            eval_arrays([self])
        return self._data

    def item(self):
        if self.size != 1:
            raise ValueError("[convert] Only length-1 arrays can be converted to Python scalars.")
        v = self._numpy().reshape(-1)[0]
        if self._dtype in (D.bfloat16, D.float16):
            return float(v)
        return v.item()

    def tolist(self):
        data = self._numpy()
        if self._dtype in (D.bfloat16, D.float16):
            data = data.astype(np.float32)
        return data.tolist()

    def __array__(self, dtype=None, copy=None):
        data = self._numpy()
        if dtype is not None and np.dtype(dtype) != data.dtype:
            if copy is False:
                raise ValueError("[array] Cannot convert dtype without a copy.")
            return data.astype(dtype)
        return data.copy() if copy else data

    # No `__array_interface__` on purpose: NumPy would make the *braze array* the base of the
    # ndarray it builds, and once the array is overwritten in place (`a += 1`) its old buffer
    # is freed under the ndarray. Through `__array__` the ndarray's base is the buffer itself.

    def __bool__(self):
        if self.size != 1:
            raise ValueError("[convert] Only length-1 arrays can be converted to Python scalars.")
        return bool(self.item())

    def __int__(self):
        return int(self.item())

    def __float__(self):
        return float(self.item())

    def __complex__(self):
        return complex(self.item())

    def __index__(self):
        if self._shape or self._dtype.kind not in "ui":
            raise TypeError("Only 0-dimensional integer arrays can be converted to an index.")
        return int(self.item())

    def __format__(self, spec):
        if not self._shape:
            return format(self.item(), spec)
        if spec:
            raise TypeError("unsupported format string passed to array.__format__")
        return repr(self)

    def __len__(self):
        if not self._shape:
            raise TypeError("len() 0-dimensional array.")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iter() 0-dimensional array.")
        return (self[i] for i in range(self._shape[0]))

    __hash__ = object.__hash__

    def __repr__(self):
        return format_array(self._numpy(), self._dtype)

    __str__ = __repr__

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return array._from_data(self._numpy().copy())

    def __getstate__(self):
        return {"data": self._numpy()}

    def __setstate__(self, st):
        src = array._from_data(np.array(st["data"]))
        for k in array.__slots__:
            if k != "__weakref__":
                object.__setattr__(self, k, getattr(src, k))
        src._mem = 0


def _set_data(a: array, data: np.ndarray) -> None:
    """Give `a` its buffer and count the bytes if the buffer is its own."""
    a._data = data
    if data.base is None and data.nbytes:
        a._mem = data.nbytes
        memory.add(data.nbytes)


# -- conversion from Python and NumPy values ------------------------------------------------
def _scalar_dtype(v) -> D.Dtype:
    if isinstance(v, (bool, np.bool_)):
        return D.bool_
    if isinstance(v, numbers.Integral):
        return D.int32 if _INT32_MIN <= int(v) <= _INT32_MAX else D.int64
    if isinstance(v, numbers.Real):
        return D.float32
    if isinstance(v, numbers.Complex):
        return D.complex64
    raise ValueError(f"Invalid type {type(v).__name__} received in array initialization.")


def _list_dtype(val) -> D.Dtype:
    """MLX's rule for nested lists: the widest Python kind present decides."""
    out = None
    todo = [val]
    while todo:
        v = todo.pop()
        if isinstance(v, (list, tuple)):
            todo.extend(v)
            continue
        if isinstance(v, array):
            d = v._dtype
        elif isinstance(v, np.ndarray):
            d = D.from_numpy(v.dtype)
        else:
            d = _scalar_dtype(v)
        out = d if out is None else D.promote(out, d)
    return D.float32 if out is None else out


def _nested_to_numpy(val):
    """Nested lists that may contain braze arrays -> a plain nested structure for np.array."""
    if isinstance(val, array):
        return val._numpy()
    if isinstance(val, (list, tuple)):
        return [_nested_to_numpy(v) for v in val]
    return val


def to_numpy(val, dtype: D.Dtype | None) -> np.ndarray:
    """Copy `val` into a fresh C-contiguous NumPy buffer with MLX's dtype rules."""
    if isinstance(val, array):
        src = val._numpy()
        target = dtype or val._dtype
    elif isinstance(val, np.ndarray) or hasattr(val, "__array_interface__"):
        src = np.asarray(val)
        if src.dtype == np.float64 and dtype is None:
            target = D.float32  # MLX reads float64 NumPy data as float32 by default
        elif src.dtype.kind in "OSUV":
            raise ValueError(f"[array] Unsupported NumPy dtype {src.dtype}.")
        else:
            target = dtype or D.from_numpy(src.dtype)
    elif isinstance(val, (list, tuple)):
        target = dtype or _list_dtype(val)
        src = np.array(_nested_to_numpy(val))
        if src.dtype == object:
            raise ValueError("[array] Initialization encountered non-uniform length or types.")
    elif isinstance(val, np.generic):
        target = dtype or D.from_numpy(val.dtype)
        src = np.asarray(val)
    elif isinstance(val, (numbers.Number, np.bool_)):
        target = dtype or _scalar_dtype(val)
        src = val
    else:
        try:
            src = np.asarray(memoryview(val))
        except TypeError:
            raise ValueError(
                f"Invalid type {type(val).__name__} received in array initialization.") from None
        target = dtype or D.from_numpy(src.dtype)
    return np.array(src, dtype=target.np_dtype, order="C", copy=True)


# -- printing in MLX's format ---------------------------------------------------------------
def _fmt_float(v):
    return f"{float(v):g}"


def _fmt_complex(v):
    v = complex(v)
    return f"{v.real:g}{'+' if v.imag >= 0 or v.imag != v.imag else '-'}{abs(v.imag):g}j"


def format_array(data: np.ndarray, dt: D.Dtype) -> str:
    if dt in (D.bfloat16, D.float16):
        data = data.astype(np.float32)
    fmt = {"float_kind": _fmt_float, "complex_kind": _fmt_complex, "int": str,
           "bool": lambda b: "True" if b else "False"}
    body = np.array2string(data, separator=", ", formatter=fmt, threshold=1000,
                           edgeitems=3, prefix="array(", max_line_width=80)
    return f"array({body}, dtype={dt.name})"


def overwrite_descriptor(dst: array, src: array) -> None:
    """Make `dst` become `src` in place (MLX's semantics for `a += b` and `a[i] = v`).

    Every Python reference to `dst` sees the new value; `src` is left empty-handed so the
    buffer's byte count is not counted twice.
    """
    if dst._mem:
        memory.sub(dst._mem)
    dst._shape, dst._dtype, dst._data = src._shape, src._dtype, src._data
    dst._prim, dst._inputs, dst._idx, dst._mem = src._prim, src._inputs, src._idx, src._mem
    dst._siblings = None
    dst._tracer = src._tracer
    if src._siblings is not None:  # keep the sibling group pointing at the object users hold
        sibs = list(src._siblings)
        sibs[src._idx] = dst
        sibs = tuple(sibs)
        for s in sibs:
            s._siblings = sibs
    src._mem = 0
    src._data = dst._data


def detached_copy(a: array) -> array:
    """A new array object holding `a`'s current value (node or buffer), for `a` to be overwritten.

    The byte count moves to the copy, which now owns the old buffer.
    """
    b = object.__new__(array)
    b._shape, b._dtype, b._data = a._shape, a._dtype, a._data
    b._prim, b._inputs, b._idx, b._mem = a._prim, a._inputs, a._idx, a._mem
    b._tracer = a._tracer
    a._mem = 0
    b._siblings = None
    if a._siblings is not None:
        sibs = list(a._siblings)
        sibs[a._idx] = b
        sibs = tuple(sibs)
        for s in sibs:
            s._siblings = sibs
    return b
