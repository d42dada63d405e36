"""Dtype objects, categories, MLX's promotion table and the NumPy mapping.

Everything that decides a result dtype lives here, so ops never guess.
"""
from __future__ import annotations

import enum

import ml_dtypes
import numpy as np


class DtypeCategory(enum.Enum):
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


def issubdtype(a, b) -> bool:
    """MLX's issubdtype: Dtype or DtypeCategory on either side."""
    if isinstance(a, Dtype):
        if isinstance(b, Dtype):
            return a is b
        return b in a._cats
    if isinstance(a, DtypeCategory):
        if isinstance(b, Dtype):
            return False
        return b in _ancestors(a)
    raise TypeError(f"[issubdtype] Expected a Dtype or DtypeCategory, got {a!r}.")


def is_floating(d: Dtype) -> bool:
    return d.kind == "f"


def is_inexact(d: Dtype) -> bool:
    return d.kind in "fc"


def is_integer(d: Dtype) -> bool:
    return d.kind in "ui"


def can_cast(from_, to) -> bool:
    """NumPy-style safe casting between braze dtypes (bfloat16 handled by ml_dtypes)."""
    from_, to = to_dtype(from_, "can_cast"), to_dtype(to, "can_cast")
    if from_ is to:
        return True
    return bool(np.can_cast(from_.np_dtype, to.np_dtype, casting="safe"))


def finfo_min_max(d: Dtype):
    if d.kind in "fc":
        fi = ml_dtypes.finfo(d.np_dtype) if d is bfloat16 else np.finfo(d.np_dtype)
        return float(fi.min), float(fi.max)
    if d.kind == "b":
        return 0, 1
    ii = np.iinfo(d.np_dtype)
    return int(ii.min), int(ii.max)
