"""The lazy `array`: a shape, a dtype, and either a buffer or the node that computes it.

A node is (primitive, inputs); a multi-output node's arrays share one `_siblings` tuple.
Operators and most methods are attached later by the `ops` layer (see ops/_methods.py).
"""
from __future__ import annotations

import gc
import math
import numbers

import numpy as np

from . import casts, memory
from . import dtypes as D

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class LAZY_COPY:
    """The primitive behind `mx.array(an_array)`: supplied by prims.core (a lower layer cannot
    import it), `make(x, dtype)` returns a Copy or AsType primitive."""

    make = None


class LIST_STACK:
    """`mx.array([x, y])` with arrays among the elements stacks them (MLX does, so the arrays
    stay in the graph: gradients flow through the list). `make(arrays)` is ops.stack, supplied
    by the ops layer, which this one cannot import."""

    make = None


class ARRAY_API:
    """The public namespace `a.__array_namespace__()` returns (braze.core, which registers
    itself here when imported; this layer cannot import it)."""

    namespace = None


class TraceState:
    """How many transformation traces (grad, vjp, jvp, vmap, compile) are active.

    While any is active, arrays computed from tracers are tracers too, and evaluating a tracer
    keeps its graph so the transform can still walk it.
    """

    depth = 0
    #: id(tracer) -> the object holding its value before the first in-place overwrite, so a
    #: transform can still differentiate with respect to the value it passed in
    overwritten: dict = {}
    #: called with each tracer updated in place while set (compile names the user's line of
    #: an update to captured state that would be lost)
    overwrite_hook = None


class array:
    """An N-dimensional lazy array (MLX's `mlx.core.array`)."""

    __slots__ = ("_shape", "_dtype", "_data", "_prim", "_inputs", "_siblings", "_idx",
                 "_mem", "_tracer", "_nc", "__weakref__")
    __array_priority__ = 100  # NumPy defers `ndarray op array` to our reflected operators

    def __init__(self, val, dtype=None):
        dt = None if dtype is None else D.to_dtype(dtype, "array")
        if type(val) is array:
            self._init_from_array(val, dt)
            return
        if isinstance(val, (list, tuple)) and _holds_array(val):
            self._init_from_array(_stack_list(val, dt), None)
            return
        self._init_buffer(to_numpy(val, dt))

    def _init_buffer(self, data: np.ndarray) -> None:
        """Fields of an evaluated array holding `data` (whose dtype is one of ours)."""
        self._shape = data.shape
        self._dtype = D.from_numpy(data.dtype)
        self._prim = None
        self._inputs = ()
        self._siblings = None
        self._idx = 0
        self._mem = 0
        self._tracer = False
        self._nc = 0
        self._data = None
        _set_data(self, data)

    def _init_from_array(self, val, dt):
        """`mx.array(x)` of an array is a lazy copy (a graph node), as in MLX: gradients flow
        through it and it works on transformation tracers."""
        prim = LAZY_COPY.make(val, dt)
        self._shape = val._shape
        self._dtype = dt or val._dtype
        self._data = None
        self._prim = prim
        self._inputs = (val,)
        self._siblings = None
        self._idx = 0
        self._mem = 0
        self._tracer = val._tracer and TraceState.depth > 0
        self._nc = 0
        val._nc += 1

    # -- construction used by the rest of the library -------------------------------------
    @staticmethod
    def _from_data(data: np.ndarray) -> "array":
        """Wrap an existing NumPy buffer without copying (caller guarantees the dtype is ours)."""
        a = object.__new__(array)
        a._init_buffer(data)
        return a

    def __del__(self):
        try:
            if self._mem:
                memory.Counters.active -= self._mem
            for x in self._inputs:
                x._nc -= 1
        except AttributeError:  # __init__ raised before the slots were set
            pass

    # -- metadata --------------------------------------------------------------------------
    @property
    def shape(self):
        """The array's shape, a tuple of ints."""
        return self._shape

    @property
    def dtype(self):
        """The array's element type (an `mx.Dtype`)."""
        return self._dtype

    @property
    def ndim(self):
        """The number of dimensions."""
        return len(self._shape)

    @property
    def size(self):
        """The number of elements (the product of the shape)."""
        n = 1
        for s in self._shape:
            n *= s
        return n

    @property
    def itemsize(self):
        """The size of one element in bytes."""
        return self._dtype.size

    @property
    def nbytes(self):
        """The size of the elements in bytes (`size * itemsize`)."""
        return self.size * self._dtype.size

    # -- evaluation and conversion ---------------------------------------------------------
    def _numpy(self) -> np.ndarray:
        """The evaluated buffer (evaluates if needed)."""
        if self._data is None:
            from .scheduler import eval_arrays
            eval_arrays([self])
        return self._data

    def item(self):
        """The value of a one-element array as a Python scalar (evaluates the array).

        Raises ValueError for an array of more than one element.
        """
        if self.size != 1:
            raise ValueError("[convert] Only length-1 arrays can be converted to Python scalars.")
        v = self._numpy().reshape(-1)[0]
        if self._dtype in (D.bfloat16, D.float16):
            return float(v)
        return v.item()

    def tolist(self):
        """The values as nested Python lists of scalars (evaluates the array); a 0-d
        array gives a scalar.
        """
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
        return data.copy() if copy else _export(self, data)

    # No `__array_interface__` on the array itself: NumPy would make the *braze array* the
    # base of the ndarray it builds, and once the array is overwritten in place (`a += 1`) its
    # old buffer would be freed under the ndarray. `_export` hands out a view whose base holds
    # both the buffer and the array (MLX's views keep the array alive).

    def __buffer__(self, flags):
        """The buffer protocol (PEP 688, Python 3.12+; a pure-Python class cannot export a
        buffer on older versions, where `memoryview(a)` raises TypeError: use `np.asarray(a)`,
        which shares the memory, or `bytes(a)`)."""
        data = _export(self, self._numpy())
        wide = _STRUCT_64.get(data.dtype.char)
        if wide:  # NumPy says 'l'/'L' for 64-bit integers; MLX (and struct's sizes) 'q'/'Q'
            data = data.view(wide)
        elif self._dtype is D.bfloat16:
            # no struct format exists (MLX writes "bfloat16", which Python code cannot); NumPy
            # tries the buffer first and, on this error, reads `__array__` (a bfloat16 array)
            raise ValueError("[memoryview] bfloat16 has no buffer format; use np.asarray(a) "
                             "or a.view(mx.uint16).")
        return memoryview(data)

    def __bytes__(self):
        # what bytes() reads through MLX's buffer protocol: the elements in C order
        return self._numpy().tobytes()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _dlpack_capsule(self._numpy(), max_version, dl_device, copy)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0: braze's buffers live in host memory

    def __array_namespace__(self, api_version=None):
        if api_version is not None:
            raise ValueError("[array_namespace] Explicitly specifying api_version is not yet "
                             "implemented.")
        return ARRAY_API.namespace

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
        # a new object with the same value (as MLX): updating the copy in place (`y -= 1`)
        # leaves the original alone
        return array(self)

    def __deepcopy__(self, memo):
        return array(self)  # buffers are never written in place, so the value can be shared

    def __getstate__(self):
        return {"data": self._numpy()}

    def __setstate__(self, st):
        src = array._from_data(np.array(st["data"]))
        for k in array.__slots__:
            if k != "__weakref__":
                object.__setattr__(self, k, getattr(src, k))
        src._mem = 0


_new = object.__new__


def node(shape, dtype, prim, inputs, tracer=False) -> array:
    """A new unevaluated array computed by `prim` from the tuple `inputs`: the one constructor
    of graph nodes, written flat since it runs once per op of every program."""
    out = _new(array)
    out._shape = shape
    out._dtype = dtype
    out._data = None
    out._prim = prim
    out._inputs = inputs
    out._siblings = None
    out._idx = 0
    out._mem = 0
    out._tracer = tracer
    out._nc = 0
    for x in inputs:
        x._nc += 1
    return out


def view_of(data, dtype) -> array:
    """An evaluated array of braze dtype `dtype` holding `data`, a NumPy view of another
    array's buffer (whose bytes that array counts): written flat like `node`, for the eager
    views made on every call (a Linear's `weight.T`)."""
    out = _new(array)
    out._shape = data.shape
    out._dtype = dtype
    out._data = data
    out._prim = None
    out._inputs = ()
    out._siblings = None
    out._idx = 0
    out._mem = 0
    out._tracer = False
    out._nc = 0
    return out


def evaluated(data, dtype, shape) -> array:
    """An evaluated array of braze dtype `dtype` and shape `shape` holding a kernel's result
    `data` (counted as an eval counts it): a one-element compiled call's outputs."""
    if type(data) is not np.ndarray or data.dtype is not dtype.np_dtype:
        data = np.asarray(data).astype(dtype.np_dtype, copy=False)
    if data.shape != shape:
        data = data.reshape(shape)
    out = view_of(data, dtype)
    _set_data(out, data)  # unlike a view's, the buffer is the array's own
    return out


def node_group(avals, prim, inputs, tracer=False) -> tuple:
    """The outputs of a multi-output node, one per (shape, dtype) of `avals`, sharing one
    `_siblings` tuple in output order."""
    outs = tuple([node(s, d, prim, (), tracer) for s, d in avals])
    k = len(outs)
    for x in inputs:  # each output consumes every input: once per input, not per pair
        x._nc += k
    for i, o in enumerate(outs):
        o._inputs = inputs
        o._siblings = outs
        o._idx = i
    return outs



class _Exported:
    """The base of an ndarray handed out by `__array__`/`__buffer__`: it holds the braze array
    (so the array lives as long as the view, as in MLX) and the buffer itself (which an
    in-place update of the array may replace)."""

    __slots__ = ("__array_interface__", "_owner", "_buf")

    def __init__(self, owner: array, buf: np.ndarray):
        self._owner, self._buf = owner, buf
        self.__array_interface__ = {
            "shape": buf.shape, "typestr": buf.dtype.str, "version": 3,
            "strides": buf.strides, "data": (buf.ctypes.data, not buf.flags.writeable)}


_STRUCT_64 = ({"l": np.longlong, "L": np.ulonglong} if np.dtype("long").itemsize == 8
              else {})


def _export(a: array, data: np.ndarray) -> np.ndarray:
    out = np.asarray(_Exported(a, data))
    return out if out.dtype == data.dtype else out.view(data.dtype)  # bfloat16: a void typestr


def _dlpack_capsule(data: np.ndarray, max_version, dl_device, copy):
    """NumPy does the DLPack work on the evaluated buffer (zero-copy unless `copy`)."""
    if dl_device is not None and tuple(dl_device) != (1, 0):
        raise BufferError(f"[__dlpack__] Only the CPU device (1, 0) is supported, got "
                          f"{tuple(dl_device)}.")
    if copy:
        data = np.array(data, copy=True)
    kw = {} if max_version is None else {"max_version": max_version}
    try:
        return data.__dlpack__(stream=None, **kw)
    except BufferError:
        if data.dtype.kind == "V":
            raise BufferError("[__dlpack__] bfloat16 arrays cannot be exported through DLPack "
                              "by the CPU backend.") from None
        if copy is False:
            raise
        # a read-only (broadcast) buffer to a consumer without read-only support: a copy
        return np.array(data, copy=True).__dlpack__(stream=None, **kw)


def _set_data(a: array, data: np.ndarray) -> None:
    """Give `a` its buffer and count the bytes if the buffer is its own."""
    a._data = data
    if data.base is None:
        n = data.nbytes
        if n:
            a._mem = n
            c = memory.Counters
            c.active += n
            if c.active > c.peak:
                c.peak = c.active


# -- conversion from Python and NumPy values ------------------------------------------------
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_F32_MAX = float(np.finfo(np.float32).max)  # a float beyond it may round to inf (a warning)
_NP_INT32, _NP_FLOAT32 = np.dtype(np.int32), np.dtype(np.float32)


def _scalar_dtype(v) -> D.Dtype:
    if isinstance(v, (bool, np.bool_)):
        return D.bool_
    if isinstance(v, numbers.Integral):
        v = int(v)
        if _INT32_MIN <= v <= _INT32_MAX:
            return D.int32
        if _INT64_MIN <= v <= _INT64_MAX:
            return D.int64
        raise ValueError(f"[array] Integer {v} does not fit in int64; pass dtype=uint64 or "
                         "a float dtype.")
    if isinstance(v, numbers.Real):
        return D.float32
    if isinstance(v, numbers.Complex):
        return D.complex64
    raise ValueError(f"Invalid type {type(v).__name__} received in array initialization.")


def _default_from_numpy(npd) -> D.Dtype:
    """The dtype MLX gives NumPy (or buffer) data when none is asked for: float64 -> float32,
    complex128 -> complex64 (MLX has no complex128); other supported dtypes are kept."""
    npd = np.dtype(npd)
    if npd == np.float64:
        return D.float32
    if npd == np.complex128:
        return D.complex64
    return D.from_numpy(npd)


def _list_dtype(val) -> D.Dtype:
    """MLX's rule for nested lists: the widest kind present decides (Python scalars are typed
    as in `array(scalar)`, arrays keep their dtype)."""
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
            d = _default_from_numpy(v.dtype)
        else:
            d = _scalar_dtype(v)
        out = d if out is None else D.promote(out, d)
    return D.float32 if out is None else out


def _holds_array(val) -> bool:
    return any(isinstance(v, array) for v in _leaves(val))


_NON_UNIFORM = "Initialization encountered non-uniform length."


def _list_shape(val) -> tuple:
    """The shape the first elements imply (an array element contributes its own shape)."""
    shape = []
    while True:
        shape.append(len(val))
        if not val:
            return tuple(shape)
        val = val[0]
        if isinstance(val, array):
            return tuple(shape) + val._shape
        if not isinstance(val, (list, tuple)):
            return tuple(shape)


def _check_uniform(val, shape, depth: int) -> None:
    if len(val) != shape[depth]:
        raise ValueError(_NON_UNIFORM)
    rest = shape[depth + 1:]
    for v in val:
        if isinstance(v, (list, tuple)):
            if not rest:
                raise ValueError(_NON_UNIFORM)
            _check_uniform(v, shape, depth + 1)
        elif isinstance(v, array):
            if v._shape != rest:
                raise ValueError(_NON_UNIFORM)
        elif rest:
            raise ValueError(_NON_UNIFORM)


def _stack_list(val, dt):
    """MLX's construction from a list holding arrays: each element becomes an array (lists
    recursively; `dt` applied to each), and the elements are stacked, promoting as stack
    does. The arrays stay in the graph, so `grad` sees through the list."""
    _check_uniform(val, _list_shape(val), 0)
    parts = []
    for v in val:
        if isinstance(v, array):
            parts.append(v if dt is None or v._dtype is dt else array(v, dt))
        elif isinstance(v, (list, tuple)) and _holds_array(v):
            parts.append(_stack_list(v, dt))
        else:
            parts.append(array(v, dt))
    return LIST_STACK.make(parts)


_SHAPE_DIM_MAX = 2**31 - 1


def check_shape_dims(shape) -> None:
    """MLX keeps shape dimensions in 32-bit integers and raises OverflowError beyond."""
    for n in shape:
        if not -_SHAPE_DIM_MAX - 1 <= n <= _SHAPE_DIM_MAX:
            raise OverflowError(f"Shape dimension {n} is outside the supported range "
                                f"[{-_SHAPE_DIM_MAX - 1}, {_SHAPE_DIM_MAX}]. MLX currently "
                                "uses 32-bit integers for shape dimensions.")


# Arrays nested in lists are widened to a carrier dtype that NumPy mixes with Python scalars
# without losing values; the final cast to the target dtype happens once, at the end.
_CARRIER = {"b": np.dtype(np.bool_), "u": np.dtype(np.int64), "i": np.dtype(np.int64),
            "f": np.dtype(np.float64), "c": np.dtype(np.complex128)}


def _nested_to_numpy(val):
    """Nested lists that may contain braze arrays -> a plain nested structure for np.array."""
    if isinstance(val, array):
        d = val._numpy()
        carrier = np.dtype(np.uint64) if val._dtype is D.uint64 else _CARRIER[val._dtype.kind]
        return d.astype(carrier)
    if isinstance(val, np.ndarray) and val.dtype.kind == "V":  # bfloat16
        return val.astype(np.float64)
    if isinstance(val, (list, tuple)):
        return [_nested_to_numpy(v) for v in val]
    return val


def _cast(src: np.ndarray, target: D.Dtype) -> np.ndarray:
    """A fresh C-contiguous copy of `src` in `target`, with braze's cast semantics
    (`casts.cast`: float -> int as MLX, integers wrap, complex -> real drops the imaginary
    part) and no warnings."""
    npt = target.np_dtype
    if src.dtype != npt and not casts.plain(src.dtype, npt):
        out = casts.cast(src, npt)
        if np.may_share_memory(out, src) or not out.flags.c_contiguous:
            out = np.array(out, order="C", copy=True)
        return out
    with np.errstate(invalid="ignore", over="ignore"):
        if src.nbytes < memory.LARGE:
            return np.array(src, dtype=npt, order="C", copy=True)
        out = memory.empty(src.shape, npt)  # aligned, from the buffer cache
        np.copyto(out, src, casting="unsafe")
        return out


def _check_numpy_kind(src: np.ndarray) -> None:
    if src.dtype.kind not in "buifc" and D.lookup_np(src.dtype) is None:
        raise ValueError(f"[array] Unsupported NumPy dtype {src.dtype}.")


def _scalar_to_numpy(val, target: D.Dtype) -> np.ndarray:
    if isinstance(val, bool) or not isinstance(val, numbers.Integral):
        return np.asarray(val)
    v = int(val)
    if _INT64_MIN <= v <= _INT64_MAX:
        return np.asarray(v, dtype=np.int64)
    if target is D.uint64 and 0 <= v < 2**64:
        return np.asarray(v, dtype=np.uint64)
    if target.kind in "fc":
        return np.asarray(float(v))
    raise ValueError(f"[array] Integer {v} does not fit in {target.name}.")


def to_numpy(val, dtype: D.Dtype | None) -> np.ndarray:
    """Copy `val` into a fresh C-contiguous NumPy buffer with MLX's dtype rules."""
    t = type(val)  # the commonest scalars first: an int32 or a finite float32
    if t is int and (dtype is None or dtype is D.int32) and _INT32_MIN <= val <= _INT32_MAX:
        return np.array(val, _NP_INT32)
    if t is float and (dtype is None or dtype is D.float32) and -_F32_MAX <= val <= _F32_MAX:
        return np.array(val, _NP_FLOAT32)
    if isinstance(val, array):
        src = val._numpy()
        target = dtype or val._dtype
    elif isinstance(val, (bool, int, float, complex)):  # Python scalars (np.float64 included)
        if isinstance(val, np.generic):
            src = np.asarray(val)
            _check_numpy_kind(src)
            target = dtype or _default_from_numpy(src.dtype)
        else:
            target = dtype or _scalar_dtype(val)
            src = _scalar_to_numpy(val, target)
    elif isinstance(val, (np.ndarray, np.generic)) or hasattr(val, "__array_interface__") \
            or hasattr(val, "__array__") or hasattr(val, "__dlpack__"):
        src = np.asarray(val) if not _dlpack_only(val) else np.from_dlpack(val)
        check_shape_dims(src.shape)
        _check_numpy_kind(src)
        target = dtype or _default_from_numpy(src.dtype)  # float64 NumPy data -> float32
    elif isinstance(val, (list, tuple)):
        target = dtype or _list_dtype(val)
        try:
            src = np.array(_nested_to_numpy(val))
        except ValueError:
            raise ValueError("Initialization encountered non-uniform length.") from None
        except OverflowError:
            raise ValueError(f"[array] An integer does not fit in {target.name}.") from None
        if src.dtype == object:
            raise ValueError("Initialization encountered non-uniform length.")
        if src.dtype.kind in "SUV":
            bad = next(v for v in _leaves(val) if isinstance(v, (str, bytes)))
            raise ValueError(
                f"Invalid type {type(bad).__name__} received in array initialization.")
    elif isinstance(val, numbers.Number):  # other numbers.Number implementations
        target = dtype or _scalar_dtype(val)
        src = np.asarray(complex(val) if target.kind == "c" else
                         float(val) if target.kind == "f" else int(val))
    else:
        try:
            src = np.asarray(memoryview(val))  # the buffer protocol: bytearray, array.array
        except TypeError:
            raise ValueError(
                f"Invalid type {type(val).__name__} received in array initialization.") from None
        target = dtype or _default_from_numpy(src.dtype)
    return _cast(src, target)


def _dlpack_only(val) -> bool:
    return not (isinstance(val, (np.ndarray, np.generic)) or hasattr(val, "__array__")
                or hasattr(val, "__array_interface__"))


def _leaves(val):
    todo = [val]
    while todo:
        v = todo.pop()
        if isinstance(v, (list, tuple)):
            todo.extend(v)
        else:
            yield v


# -- printing in MLX's format ---------------------------------------------------------------
class PrintOptions:
    """MLX's print options: `precision` -1 prints floats like C++ `ostream` (6 significant
    digits); n >= 0 prints n digits after the point (`std::fixed`)."""

    __slots__ = ("precision",)

    def __init__(self, precision: int = -1):
        self.precision = precision

    def __repr__(self):
        return f"PrintOptions(precision={self.precision})"


_print_options = PrintOptions()


def get_printoptions() -> PrintOptions:
    """The current print options (a copy; see `set_printoptions`)."""
    return PrintOptions(_print_options.precision)


def set_printoptions(precision: int = -1) -> None:
    """Set how arrays print: `precision` digits after the point, or -1 (the default) for
    6 significant digits, as MLX prints.
    """
    if not isinstance(precision, int) or isinstance(precision, bool):
        raise TypeError(f"[set_printoptions] Expected an int precision, got {precision!r}.")
    _print_options.precision = precision


class printoptions:
    """Context manager: `with mx.printoptions(precision=3): print(x)`."""

    def __init__(self, precision: int = -1):
        if not isinstance(precision, int) or isinstance(precision, bool):
            raise TypeError(f"[printoptions] Expected an int precision, got {precision!r}.")
        self._precision = precision
        self._saved = None

    def __enter__(self):
        self._saved = _print_options.precision
        _print_options.precision = self._precision
        return self

    def __exit__(self, *exc):
        _print_options.precision = self._saved
        return False


def _float_formatter(precision: int):
    if precision == -1:
        spec = "g"
    else:  # C++ treats a negative precision under std::fixed as the default, 6
        spec = f".{precision if precision >= 0 else 6}f"

    def fmt(v):
        v = float(v)
        if v != v:  # C++ prints the sign of a NaN
            return "-nan" if math.copysign(1.0, v) < 0 else "nan"
        return format(v, spec)

    return fmt


def _element_formatter(dt: D.Dtype):
    if dt.kind == "b":
        return lambda v: "True" if v else "False"
    if dt.kind in "ui":
        return lambda v: str(int(v))
    ffmt = _float_formatter(_print_options.precision)
    if dt.kind == "f":
        return ffmt

    def cfmt(v):  # MLX: real, then '-' and |imag| if imag < 0, else '+' and imag; then 'j'
        v = complex(v)
        im = v.imag
        return f"{ffmt(v.real)}{'-' + ffmt(-im) if im < 0 else '+' + ffmt(im)}j"

    return cfmt


_EDGE = 3  # a dimension longer than 2 * _EDGE prints its first and last _EDGE entries


def _format_sub(data, dim, ndim, fmt, out):
    n = data.shape[0]
    last = dim == ndim - 1
    prefix = "" if last else " " * (7 + dim)
    postfix = ", " if last else ",\n"
    out.append("[")
    i = 0
    while i < n:
        if i:
            out.append(prefix)
        if i == _EDGE and n > 2 * _EDGE:
            out.append("...")
            i = n - _EDGE - 1
        elif last:
            out.append(fmt(data[i]))
        else:
            _format_sub(data[i], dim + 1, ndim, fmt, out)
        if i != n - 1:
            out.append(postfix)
        i += 1
    out.append("]")


def format_array(data: np.ndarray, dt: D.Dtype) -> str:
    """MLX's array printing (mlx/utils.cpp): no line wrapping; every dimension longer than six
    shows its first three and last three entries around `...`."""
    fmt = _element_formatter(dt)
    if data.ndim == 0:
        body = fmt(data[()])
    else:
        out = []
        _format_sub(data, 0, data.ndim, fmt, out)
        body = "".join(out)
    return f"array({body}, dtype={dt.name})"


# -- in-place updates -------------------------------------------------------------------------
# MLX's `a += b` and `a[i] = v` give the *object* `a` a new value, while graph nodes built from
# `a` earlier keep reading the old one. Nodes hold array objects, so an overwrite moves the old
# value into a fresh object and re-points the pending consumers of `a` at it. Each array counts
# the nodes holding it as an input (`_nc`); only when that count says consumers exist does the
# overwrite search for them (through the garbage collector's referrer lists), so the hot path of
# building ops pays one counter increment per input and nothing more.
def _repoint_consumers(dst: array, old: array) -> None:
    """Make every array that holds `dst` in its inputs hold `old` instead."""
    for tup in gc.get_referrers(dst):
        if type(tup) is not tuple or not any(x is dst for x in tup):
            continue
        holders = [o for o in gc.get_referrers(tup)
                   if type(o) is array and o._inputs is tup and o is not old]
        if not holders:
            continue
        new = tuple(old if x is dst else x for x in tup)
        k = sum(x is dst for x in tup)
        for o in holders:
            o._inputs = new
            dst._nc -= k
            old._nc += k
    dst._nc = max(dst._nc, 0)


def _repoint_within(src: array, dst: array, old: array, limit: int = 256) -> None:
    """Re-point consumers of `dst` found in `src`'s unevaluated graph (walked breadth-first,
    up to `limit` nodes), which is where an in-place update's own consumers are, a few nodes
    from src (`out[i] += v` reads out[i] two nodes up, however deep v's graph); cheap,
    unlike the search."""
    ins = src._inputs
    k = 0
    for x in ins:
        k += x is dst
    if k and k == dst._nc and src._siblings is None:  # `a[i] = v`: src reads dst directly
        src._inputs = tuple([old if x is dst else x for x in ins])
        dst._nc -= k
        old._nc += k
        return
    todo, seen, i = [src], set(), 0
    while i < len(todo) and len(seen) < limit and dst._nc > 0:
        n = todo[i]
        i += 1
        if id(n) in seen or n is dst or n is old:
            continue
        seen.add(id(n))
        ins = n._inputs
        if any(x is dst for x in ins):
            k = sum(x is dst for x in ins)
            new = tuple(old if x is dst else x for x in ins)
            for s in (n._siblings or (n,)):
                if s._inputs is ins:
                    s._inputs = new
                    dst._nc -= k
                    old._nc += k
            ins = new
        todo.extend(x for x in ins if x._prim is not None)


def detached_copy(a: array) -> array:
    """A new array object with `a`'s current value (node or buffer), for `a` to be overwritten.

    It takes over the byte count and `a`'s place in a sibling group; `a` stays valid.
    """
    b = node(a._shape, a._dtype, a._prim, a._inputs, a._tracer)
    b._data, b._idx, b._mem = a._data, a._idx, a._mem
    a._mem = 0
    if a._siblings is not None:
        sibs = list(a._siblings)
        sibs[a._idx] = b
        sibs = tuple(sibs)
        for s in sibs:
            s._siblings = sibs
    return b


def overwrite_descriptor(dst: array, src: array) -> None:
    """Make the object `dst` hold `src`'s value (MLX's semantics for `a += b` and `a[i] = v`).

    Every Python reference to `dst` sees the new value; nodes built from `dst` before keep its
    old value (including `src`'s own graph, as in `a[0] = a[1] + 1`).
    """
    if src is dst:
        return
    old = detached_copy(dst)
    if dst._tracer and TraceState.depth:
        TraceState.overwritten.setdefault(id(dst), old)
        if TraceState.overwrite_hook is not None:
            TraceState.overwrite_hook(dst)
    if dst._nc:
        _repoint_within(src, dst, old)  # the usual consumers: src's own graph (`a += 1`)
    if dst._nc:
        _repoint_consumers(dst, old)
    for x in dst._inputs:  # dst lets go of its former inputs; `old` holds them now
        x._nc -= 1
    dst._shape, dst._dtype, dst._data = src._shape, src._dtype, src._data
    dst._prim, dst._inputs, dst._idx = src._prim, src._inputs, src._idx
    dst._mem, src._mem = src._mem, 0  # one of the two objects counts the shared buffer
    dst._tracer = src._tracer
    for x in dst._inputs:  # dst and src now both hold these inputs
        x._nc += 1
    if src._siblings is None:  # dst left its own group (`old` took its place there)
        dst._siblings = None
    else:  # keep the sibling group pointing at the object users hold
        sibs = list(src._siblings)
        sibs[src._idx] = dst
        sibs = tuple(sibs)
        for s in sibs:
            s._siblings = sibs
