"""Dtype objects, categories, MLX's promotion table and the NumPy mapping.

Everything that decides a result dtype lives here, so ops never guess.
"""
from __future__ import annotations

import enum
from typing import Any

import ml_dtypes
import numpy as np


class DtypeCategory(enum.Enum):
    """Abstract kinds of dtypes, for `mx.issubdtype` (`mx.floating`, `mx.integer`, ...)."""

    complexfloating = "complexfloating"
    floating = "floating"
    inexact = "inexact"
    signedinteger = "signedinteger"
    unsignedinteger = "unsignedinteger"
    integer = "integer"
    number = "number"
    generic = "generic"

    def __repr__(self):
        return f"DtypeCategory.{self.value}"

    __str__ = __repr__


# Which categories contain which (child -> parents, transitively closed below).
_CATEGORY_PARENTS = {
    DtypeCategory.complexfloating: {DtypeCategory.inexact},
    DtypeCategory.floating: {DtypeCategory.inexact},
    DtypeCategory.inexact: {DtypeCategory.number},
    DtypeCategory.signedinteger: {DtypeCategory.integer},
    DtypeCategory.unsignedinteger: {DtypeCategory.integer},
    DtypeCategory.integer: {DtypeCategory.number},
    DtypeCategory.number: {DtypeCategory.generic},
    DtypeCategory.generic: set(),
}


def _ancestors(cat):
    out, todo = {cat}, [cat]
    while todo:
        for p in _CATEGORY_PARENTS[todo.pop()]:
            if p not in out:
                out.add(p)
                todo.append(p)
    return frozenset(out)


class Dtype:
    """An MLX dtype. Instances are unique, so compare with `is` or `==`."""

    __slots__ = ("name", "size", "np_dtype", "category", "_index", "_cats", "kind")

    def __init__(self, name, np_dtype, category, index):
        self.name = name
        self.np_dtype = np.dtype(np_dtype)
        self.size = self.np_dtype.itemsize
        self.category = category  # the most specific category, or None for bool
        self._index = index
        self._cats = _ancestors(category) if category else frozenset({DtypeCategory.generic})
        # one-letter kind: b(ool) u(nsigned) i(nt) f(loat) c(omplex)
        self.kind = {None: "b", DtypeCategory.unsignedinteger: "u",
                     DtypeCategory.signedinteger: "i", DtypeCategory.floating: "f",
                     DtypeCategory.complexfloating: "c"}[category]

    def __repr__(self):
        return f"braze.core.{self.name}"

    __str__ = __repr__

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (from_name, (self.name,))

    @property
    def itemsize(self):
        """The size of one element in bytes (the same as `size`)."""
        return self.size


_ORDER = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32",
          "int64", "float16", "float32", "float64", "bfloat16", "complex64"]
_NP = [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32,
       np.int64, np.float16, np.float32, np.float64, ml_dtypes.bfloat16, np.complex64]
_CAT = [None] + [DtypeCategory.unsignedinteger] * 4 + [DtypeCategory.signedinteger] * 4 \
    + [DtypeCategory.floating] * 4 + [DtypeCategory.complexfloating]

ALL = [Dtype(n, d, c, i) for i, (n, d, c) in enumerate(zip(_ORDER, _NP, _CAT))]
(bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64,
 float16, float32, float64, bfloat16, complex64) = ALL
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME["bool_"] = bool_
_BY_NP = {d.np_dtype: d for d in ALL}


def from_name(name):
    return _BY_NAME[name]


# MLX's promotion table (mlx/dtype.cpp), rows and columns in _ORDER.
_b, _u8, _u16, _u32, _u64 = "bool", "uint8", "uint16", "uint32", "uint64"
_i8, _i16, _i32, _i64 = "int8", "int16", "int32", "int64"
_f16, _f32, _f64, _bf, _c = "float16", "float32", "float64", "bfloat16", "complex64"
_TABLE_NAMES = [
    [_b, _u8, _u16, _u32, _u64, _i8, _i16, _i32, _i64, _f16, _f32, _f64, _bf, _c],
    [_u8, _u8, _u16, _u32, _u64, _i16, _i16, _i32, _i64, _f16, _f32, _f64, _bf, _c],
    [_u16, _u16, _u16, _u32, _u64, _i32, _i32, _i32, _i64, _f16, _f32, _f64, _bf, _c],
    [_u32, _u32, _u32, _u32, _u64, _i64, _i64, _i64, _i64, _f16, _f32, _f64, _bf, _c],
    [_u64, _u64, _u64, _u64, _u64, _f32, _f32, _f32, _f32, _f16, _f32, _f64, _bf, _c],
    [_i8, _i16, _i32, _i64, _f32, _i8, _i16, _i32, _i64, _f16, _f32, _f64, _bf, _c],
    [_i16, _i16, _i32, _i64, _f32, _i16, _i16, _i32, _i64, _f16, _f32, _f64, _bf, _c],
    [_i32, _i32, _i32, _i64, _f32, _i32, _i32, _i32, _i64, _f16, _f32, _f64, _bf, _c],
    [_i64, _i64, _i64, _i64, _f32, _i64, _i64, _i64, _i64, _f16, _f32, _f64, _bf, _c],
    [_f16, _f16, _f16, _f16, _f16, _f16, _f16, _f16, _f16, _f16, _f32, _f64, _f32, _c],
    [_f32, _f32, _f32, _f32, _f32, _f32, _f32, _f32, _f32, _f32, _f32, _f64, _f32, _c],
    [_f64, _f64, _f64, _f64, _f64, _f64, _f64, _f64, _f64, _f64, _f64, _f64, _f64, _c],
    [_bf, _bf, _bf, _bf, _bf, _bf, _bf, _bf, _bf, _f32, _f32, _f64, _bf, _c],
    [_c, _c, _c, _c, _c, _c, _c, _c, _c, _c, _c, _c, _c, _c],
]
_TABLE = [[_BY_NAME[n] for n in row] for row in _TABLE_NAMES]


def promote(a: Dtype, b: Dtype) -> Dtype:
    """The result dtype of a binary op on arrays of dtypes a and b."""
    if a is b:
        return a
    return _TABLE[a._index][b._index]


def promote_types(*dtypes: Dtype) -> Dtype:
    out = dtypes[0]
    for d in dtypes[1:]:
        out = _TABLE[out._index][d._index]
    return out


def to_dtype(d, op="dtype") -> Dtype:
    """Accept a braze Dtype, a NumPy dtype/type or a dtype name; raise TypeError otherwise."""
    if isinstance(d, Dtype):
        return d
    try:
        if isinstance(d, str) and d in _BY_NAME:
            return _BY_NAME[d]
        if d is bool:
            return bool_
        return _BY_NP[np.dtype(d)]
    except (TypeError, KeyError):
        raise TypeError(f"[{op}] Unsupported dtype {d!r}.") from None


def from_numpy(npd) -> Dtype:
    """The braze dtype for a NumPy dtype; float64/int64 stay as they are (no downcast here)."""
    try:
        return _BY_NP[np.dtype(npd)]
    except KeyError:
        raise TypeError(f"[array] Unsupported NumPy dtype {np.dtype(npd)}.") from None


def issubdtype(a: Any, b: Any) -> bool:
    """MLX's issubdtype: Dtype or DtypeCategory on either side.

    A dtype is a subtype of itself and of its categories; a category is a subtype of itself
    and of its ancestors, never of a dtype. Anything else raises ValueError, as MLX does.
    """
    if not isinstance(a, (Dtype, DtypeCategory)):
        raise ValueError("[issubdtype] Received invalid type for first input.")
    if not isinstance(b, (Dtype, DtypeCategory)):
        raise ValueError("[issubdtype] Received invalid type for second input.")
    if isinstance(a, Dtype):
        if isinstance(b, Dtype):
            return a is b
        return b in a._cats
    if isinstance(b, Dtype):
        return False
    return b in _ancestors(a)


def is_integer(d: Dtype) -> bool:
    return d.kind in "ui"


def can_cast(from_, to) -> bool:
    """MLX's can_cast: `from_` can be cast to `to` when promoting the two gives back `to`."""
    from_, to = to_dtype(from_, "can_cast"), to_dtype(to, "can_cast")
    return promote(from_, to) is to


_ISDTYPE_KINDS = {
    "bool": "b",
    "signed integer": "i",
    "unsigned integer": "u",
    "integral": "ui",
    "real floating": "f",
    "complex floating": "c",
    "numeric": "uifc",
}


def isdtype(dtype: Any, kind: Any) -> bool:
    """The array API's isdtype: does `dtype` belong to `kind` (a Dtype, a kind name, or a
    tuple of those)?"""
    if not isinstance(dtype, Dtype):
        raise TypeError(f"[isdtype] Expected a Dtype, got {type(dtype).__name__}: {dtype!r}.")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, Dtype):
            if k is dtype:
                return True
        elif isinstance(k, str):
            if k not in _ISDTYPE_KINDS:
                raise ValueError(f"[isdtype] Unknown data type kind: {k!r}.")
            if dtype.kind in _ISDTYPE_KINDS[k]:
                return True
        else:
            raise ValueError(
                "[isdtype] `kind` must be a dtype, a string, or a tuple of dtypes and strings.")
    return False


def _fmt_g(v) -> str:
    return f"{v:g}"


class finfo:
    """Machine limits of an inexact dtype (MLX's `mx.finfo`); complex64 describes its float32
    parts."""

    __slots__ = ("dtype", "min", "max", "eps", "smallest_normal", "bits")

    def __init__(self, dtype):
        if not isinstance(dtype, Dtype):
            raise TypeError(f"[finfo] Expected a Dtype, got {type(dtype).__name__}: {dtype!r}.")
        if dtype.kind not in "fc":
            raise ValueError(f"[finfo] dtype {dtype.name} is not inexact.")
        real = float32 if dtype is complex64 else dtype
        fi = ml_dtypes.finfo(real.np_dtype) if real is bfloat16 else np.finfo(real.np_dtype)
        self.dtype = real
        self.min = float(fi.min)
        self.max = float(fi.max)
        self.eps = float(fi.eps)
        self.smallest_normal = float(fi.smallest_normal)
        self.bits = real.size * 8

    def __repr__(self):
        return f"finfo(min={_fmt_g(self.min)}, max={_fmt_g(self.max)}, dtype={self.dtype.name})"

    __str__ = __repr__


class iinfo:
    """Machine limits of an integer dtype (MLX's `mx.iinfo`)."""

    __slots__ = ("dtype", "min", "max")

    def __init__(self, dtype):
        if not isinstance(dtype, Dtype):
            raise TypeError(f"[iinfo] Expected a Dtype, got {type(dtype).__name__}: {dtype!r}.")
        if dtype.kind not in "ui":
            raise ValueError(
                f"[iinfo] Only integer types supported but {dtype.name} was provided")
        ii = np.iinfo(dtype.np_dtype)
        self.dtype = dtype
        self.min = int(ii.min)
        self.max = int(ii.max)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype.name})"

    __str__ = __repr__


def finfo_min_max(d: Dtype):
    if d.kind in "fc":
        fi = ml_dtypes.finfo(d.np_dtype) if d is bfloat16 else np.finfo(d.np_dtype)
        return float(fi.min), float(fi.max)
    if d.kind == "b":
        return 0, 1
    ii = np.iinfo(d.np_dtype)
    return int(ii.min), int(ii.max)
