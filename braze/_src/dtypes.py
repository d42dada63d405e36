"""Dtype objects, categories, MLX's promotion table and the NumPy mapping.

Everything that decides a result dtype lives here, so ops never guess.

bfloat16's NumPy dtype comes from ml_dtypes, which takes longer to import than the rest of
braze: it is imported the first time `bfloat16.np_dtype` is read (`Dtype.__getattr__`), so a
program that never meets bfloat16 never imports it. No NumPy array can be bfloat16 before
ml_dtypes is imported, which is what lets `is_bf16` and `from_numpy` answer without it.
"""
from __future__ import annotations

import enum
import importlib
import sys
from typing import Any

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
        if isinstance(np_dtype, tuple):  # (ml_dtypes attribute, itemsize): resolved when read
            self.size = np_dtype[1]
        else:
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

    def __getattr__(self, attr):
        # reached only for an unset slot: the np_dtype of a dtype from ml_dtypes, first read
        if attr == "np_dtype" and self.name in _FROM_ML_DTYPES:
            npd = np.dtype(getattr(importlib.import_module("ml_dtypes"), self.name))
            self.np_dtype = npd
            _BY_NP[npd] = self
            return npd
        raise AttributeError(f"'Dtype' object has no attribute {attr!r}")

    # equality and hashing are the identity's (object's, in C): dtypes key many hot dicts

    def __reduce__(self):
        return (from_name, (self.name,))

    @property
    def itemsize(self):
        """The size of one element in bytes (the same as `size`)."""
        return self.size


_ORDER = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32",
          "int64", "float16", "float32", "float64", "bfloat16", "complex64"]
#: the dtypes whose NumPy dtype ml_dtypes defines (imported when first needed)
_FROM_ML_DTYPES = frozenset({"bfloat16"})
_NP = [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32,
       np.int64, np.float16, np.float32, np.float64, ("bfloat16", 2), np.complex64]
_CAT = [None] + [DtypeCategory.unsignedinteger] * 4 + [DtypeCategory.signedinteger] * 4 \
    + [DtypeCategory.floating] * 4 + [DtypeCategory.complexfloating]

ALL = [Dtype(n, d, c, i) for i, (n, d, c) in enumerate(zip(_ORDER, _NP, _CAT))]
(bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64,
 float16, float32, float64, bfloat16, complex64) = ALL
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME["bool_"] = bool_
_BY_NP = {d.np_dtype: d for d in ALL if d.name not in _FROM_ML_DTYPES}


def from_name(name):
    return _BY_NAME[name]


def ml_dtypes_loaded() -> bool:
    """Whether ml_dtypes has been imported (by braze or by the caller)."""
    return "ml_dtypes" in sys.modules


def is_bf16(npd: np.dtype) -> bool:
    """Whether NumPy dtype `npd` is ml_dtypes' bfloat16. Imports nothing for any other dtype:
    an ml_dtypes dtype has kind "V", and exists only once ml_dtypes is imported."""
    return npd.kind == "V" and ml_dtypes_loaded() and npd == bfloat16.np_dtype


def is_half(npd: np.dtype) -> bool:
    """Whether NumPy dtype `npd` is float16 or bfloat16 (imports nothing for other dtypes)."""
    return npd == _F16_NP or is_bf16(npd)


def lookup_np(npd: np.dtype):
    """The braze dtype of NumPy dtype `npd`, or None: `_BY_NP` learns ml_dtypes' dtypes only
    once they are read, so a miss of kind "V" resolves them (when ml_dtypes is imported: else
    no array of theirs exists) and looks again."""
    d = _BY_NP.get(npd)
    if d is None and npd.kind == "V" and ml_dtypes_loaded():
        for name in _FROM_ML_DTYPES:
            _BY_NAME[name].np_dtype  # noqa: B018  (reading it registers it in _BY_NP)
        d = _BY_NP.get(npd)
    return d


_F16_NP = np.dtype(np.float16)


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
        out = lookup_np(np.dtype(d))
        if out is None:
            raise KeyError(d)
        return out
    except (TypeError, KeyError):
        raise TypeError(f"[{op}] Unsupported dtype {d!r}.") from None


def from_numpy(npd) -> Dtype:
    """The braze dtype for a NumPy dtype; float64/int64 stay as they are (no downcast here)."""
    npd = np.dtype(npd)
    out = lookup_np(npd)
    if out is None:
        raise TypeError(f"[array] Unsupported NumPy dtype {npd}.")
    return out


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


def _finfo(d: Dtype):
    if d.name in _FROM_ML_DTYPES:
        return importlib.import_module("ml_dtypes").finfo(d.np_dtype)
    return np.finfo(d.np_dtype)


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
        fi = _finfo(real)
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
        fi = _finfo(d)
        return float(fi.min), float(fi.max)
    if d.kind == "b":
        return 0, 1
    ii = np.iinfo(d.np_dtype)
    return int(ii.min), int(ii.max)
