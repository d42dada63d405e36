"""Dtypes: MLX's promotion table, sizes, categories, issubdtype, can_cast, isdtype, result_type,
finfo/iinfo. Expected values were recorded from MLX 0.32 once and pasted here, so these tests
run without MLX; `test_*_live_mlx` compare against an installed MLX when there is one."""
import numpy as np
import pytest

import braze.core as mx
from braze._src import dtypes as D

NAMES = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
         "float16", "float32", "float64", "bfloat16", "complex64"]
ABBREV = {"b": "bool", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
          "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "f16": "float16",
          "f32": "float32", "f64": "float64", "bf16": "bfloat16", "c64": "complex64"}
DTYPES = [getattr(mx, "bool_" if n == "bool" else n) for n in NAMES]

# mx.result_type(row, column), recorded from MLX.
PROMOTION = [
    #    b   u8  u16  u32  u64   i8  i16  i32  i64  f16  f32  f64 bf16  c64
    "   b   u8  u16  u32  u64   i8  i16  i32  i64  f16  f32  f64 bf16  c64",  # bool
    "  u8   u8  u16  u32  u64  i16  i16  i32  i64  f16  f32  f64 bf16  c64",  # uint8
    " u16  u16  u16  u32  u64  i32  i32  i32  i64  f16  f32  f64 bf16  c64",  # uint16
    " u32  u32  u32  u32  u64  i64  i64  i64  i64  f16  f32  f64 bf16  c64",  # uint32
    " u64  u64  u64  u64  u64  f32  f32  f32  f32  f16  f32  f64 bf16  c64",  # uint64
    "  i8  i16  i32  i64  f32   i8  i16  i32  i64  f16  f32  f64 bf16  c64",  # int8
    " i16  i16  i32  i64  f32  i16  i16  i32  i64  f16  f32  f64 bf16  c64",  # int16
    " i32  i32  i32  i64  f32  i32  i32  i32  i64  f16  f32  f64 bf16  c64",  # int32
    " i64  i64  i64  i64  f32  i64  i64  i64  i64  f16  f32  f64 bf16  c64",  # int64
    " f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f32  f64  f32  c64",  # float16
    " f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64  f32  c64",  # float32
    " f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  c64",  # float64
    "bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16  f32  f32  f64 bf16  c64",  # bfloat16
    " c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c64",  # complex64
]
EXPECTED = [[ABBREV[t] for t in row.split()] for row in PROMOTION]

# mx.can_cast(row, column), recorded from MLX (1 = True).
CAN_CAST = [
    "11111111111111",
    "01111011111111",
    "00111001111111",
    "00011000111111",
    "00001000011111",
    "00000111111111",
    "00000011111111",
    "00000001111111",
    "00000000111111",
    "00000000011101",
    "00000000001101",
    "00000000000101",
    "00000000001111",
    "00000000000001",
]

SIZES = {"bool": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "int8": 1, "int16": 2,
         "int32": 4, "int64": 8, "float16": 2, "float32": 4, "float64": 8, "bfloat16": 2,
         "complex64": 8}

# The categories each dtype is a subtype of (mx.issubdtype(dtype, category)), from MLX.
CATEGORIES = {
    "bool": {"generic"},
    **{n: {"unsignedinteger", "integer", "number", "generic"}
       for n in ["uint8", "uint16", "uint32", "uint64"]},
    **{n: {"signedinteger", "integer", "number", "generic"}
       for n in ["int8", "int16", "int32", "int64"]},
    **{n: {"floating", "inexact", "number", "generic"}
       for n in ["float16", "float32", "float64", "bfloat16"]},
    "complex64": {"complexfloating", "inexact", "number", "generic"},
}
CATEGORY_ANCESTORS = {
    "complexfloating": {"complexfloating", "inexact", "number", "generic"},
    "floating": {"floating", "inexact", "number", "generic"},
    "inexact": {"inexact", "number", "generic"},
    "signedinteger": {"signedinteger", "integer", "number", "generic"},
    "unsignedinteger": {"unsignedinteger", "integer", "number", "generic"},
    "integer": {"integer", "number", "generic"},
    "number": {"number", "generic"},
    "generic": {"generic"},
}
ISDTYPE_KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
                 "complex floating", "numeric"]
ISDTYPE = {
    "bool": {"bool"},
    **{n: {"unsigned integer", "integral", "numeric"}
       for n in ["uint8", "uint16", "uint32", "uint64"]},
    **{n: {"signed integer", "integral", "numeric"} for n in ["int8", "int16", "int32", "int64"]},
    **{n: {"real floating", "numeric"} for n in ["float16", "float32", "float64", "bfloat16"]},
    "complex64": {"complex floating", "numeric"},
}


def test_promotion_table_matches_mlx_recording():
    for i, a in enumerate(DTYPES):
        for j, b in enumerate(DTYPES):
            assert mx.result_type(a, b).name == EXPECTED[i][j], (a, b)
            assert D.promote(a, b).name == EXPECTED[i][j], (a, b)


def test_promotion_is_symmetric_and_idempotent():
    for a in DTYPES:
        assert D.promote(a, a) is a
        for b in DTYPES:
            assert D.promote(a, b) is D.promote(b, a)


def test_promotion_through_arrays():
    # result_type of arrays uses the array dtypes
    for i, a in enumerate(DTYPES):
        x = mx.array(np.zeros(2, dtype=a.np_dtype), dtype=a)
        for j, b in enumerate(DTYPES):
            assert mx.result_type(x, b).name == EXPECTED[i][j]


def test_promotion_table_live_mlx():
    mlx = pytest.importorskip("mlx.core")
    mdt = [getattr(mlx, "bool_" if n == "bool" else n) for n in NAMES]
    for i, a in enumerate(DTYPES):
        for j, b in enumerate(DTYPES):
            expect = str(mlx.result_type(mdt[i], mdt[j])).split(".")[-1]
            assert mx.result_type(a, b).name == expect


def test_dtype_size_and_repr():
    for n, d in zip(NAMES, DTYPES):
        assert d.size == SIZES[n]
        assert d.itemsize == SIZES[n]
        assert d.name == n
        assert repr(d) == f"braze.core.{n}"
        assert str(d) == f"braze.core.{n}"
        assert hash(d) == hash(d)
    assert mx.bool_ is D.from_name("bool")
    assert len(set(DTYPES)) == 14


def test_dtype_pickle_roundtrip_keeps_identity():
    import pickle
    for d in DTYPES:
        assert pickle.loads(pickle.dumps(d)) is d


def test_dtype_category_names_and_repr():
    cats = [mx.complexfloating, mx.floating, mx.inexact, mx.signedinteger, mx.unsignedinteger,
            mx.integer, mx.number, mx.generic]
    assert [c.name for c in cats] == list(CATEGORY_ANCESTORS)
    assert repr(mx.floating) == "DtypeCategory.floating"
    assert list(mx.DtypeCategory.__members__) == list(CATEGORY_ANCESTORS)


def test_issubdtype_dtype_category_pairs():
    for n, d in zip(NAMES, DTYPES):
        for cname in CATEGORY_ANCESTORS:
            cat = getattr(mx, cname)
            assert mx.issubdtype(d, cat) == (cname in CATEGORIES[n]), (n, cname)


def test_issubdtype_dtype_pairs_and_categories():
    for a in DTYPES:
        for b in DTYPES:
            assert mx.issubdtype(a, b) == (a is b)
    for ca, anc in CATEGORY_ANCESTORS.items():
        for cb in CATEGORY_ANCESTORS:
            assert mx.issubdtype(getattr(mx, ca), getattr(mx, cb)) == (cb in anc), (ca, cb)
        for d in DTYPES:  # a category is never a subtype of a dtype
            assert not mx.issubdtype(getattr(mx, ca), d)
    # the docstring examples
    assert mx.issubdtype(mx.array([1, 2, 3]).dtype, mx.integer)
    assert not mx.issubdtype(mx.float64, mx.float32)
    assert not mx.issubdtype(mx.signedinteger, mx.floating)


@pytest.mark.parametrize("a,b", [(1, mx.float32), (mx.float32, "floating"),
                                 (mx.float32, float), ("float32", mx.floating)])
def test_issubdtype_bad_input_raises_value_error(a, b):
    with pytest.raises(ValueError, match=r"\[issubdtype\]"):
        mx.issubdtype(a, b)


def test_can_cast_table_matches_mlx_recording():
    for i, a in enumerate(DTYPES):
        for j, b in enumerate(DTYPES):
            assert mx.can_cast(a, b) == (CAN_CAST[i][j] == "1"), (a, b)
            # MLX's definition: promoting the two gives back `to`
            assert mx.can_cast(a, b) == (D.promote(a, b) is b)


def test_can_cast_accepts_arrays_and_rejects_scalars():
    assert mx.can_cast(mx.array([1, 2]), mx.float32)
    assert not mx.can_cast(mx.array([1.5]), mx.int32)
    with pytest.raises(ValueError, match=r"\[can_cast\]"):
        mx.can_cast(1, mx.float32)
    with pytest.raises(TypeError):
        mx.can_cast(mx.int32, "float32")


def test_isdtype_kinds():
    for n, d in zip(NAMES, DTYPES):
        for k in ISDTYPE_KINDS:
            assert mx.isdtype(d, k) == (k in ISDTYPE[n]), (n, k)
        assert mx.isdtype(d, d)
    assert mx.isdtype(mx.float32, (mx.int32, "real floating"))
    assert not mx.isdtype(mx.float32, (mx.int32, "integral"))
    with pytest.raises(ValueError, match="Unknown data type kind"):
        mx.isdtype(mx.float32, "foo")
    with pytest.raises(ValueError):
        mx.isdtype(mx.float32, mx.floating)
    with pytest.raises(ValueError):
        mx.isdtype(mx.float32, ["numeric"])
    with pytest.raises(TypeError):
        mx.isdtype(mx.array(1.0), "numeric")


def test_result_type():
    assert mx.result_type(mx.int8) is mx.int8
    assert mx.result_type(mx.int8, mx.uint8) is mx.int16
    assert mx.result_type(mx.int8, mx.uint8, mx.float16) is mx.float16
    assert mx.result_type(mx.array([1]), mx.float16) is mx.float16
    assert mx.result_type(mx.array(1, mx.int8), mx.array(1, mx.uint8)) is mx.int16
    assert mx.result_type(mx.array([1.0], mx.bfloat16), mx.float16) is mx.float32


@pytest.mark.parametrize("args", [(1,), (1.0, mx.float16), ("float32",), (mx.floating,),
                                  (mx.array([1]), 2.0)])
def test_result_type_rejects_python_scalars_and_others(args):
    with pytest.raises(ValueError, match=r"\[result_type\] Inputs must be arrays or dtypes"):
        mx.result_type(*args)


def test_result_type_needs_an_argument():
    with pytest.raises(ValueError, match="At least one"):
        mx.result_type()


FINFO = {  # recorded from MLX: repr, eps, smallest_normal, bits
    "float16": ("finfo(min=-65504, max=65504, dtype=float16)", 0.0009765625,
                6.103515625e-05, 16),
    "float32": ("finfo(min=-3.40282e+38, max=3.40282e+38, dtype=float32)",
                1.1920928955078125e-07, 1.1754943508222875e-38, 32),
    "float64": ("finfo(min=-1.79769e+308, max=1.79769e+308, dtype=float64)",
                2.220446049250313e-16, 2.2250738585072014e-308, 64),
    "bfloat16": ("finfo(min=-3.38953e+38, max=3.38953e+38, dtype=bfloat16)", 0.0078125,
                 1.1754943508222875e-38, 16),
    "complex64": ("finfo(min=-3.40282e+38, max=3.40282e+38, dtype=float32)",
                  1.1920928955078125e-07, 1.1754943508222875e-38, 32),
}


def test_finfo():
    for n, (r, eps, tiny, bits) in FINFO.items():
        f = mx.finfo(getattr(mx, n))
        assert repr(f) == r and str(f) == r
        assert f.eps == eps and f.smallest_normal == tiny and f.bits == bits
        assert f.min == -f.max and isinstance(f.max, float)
    assert mx.finfo(mx.complex64).dtype is mx.float32
    assert mx.finfo(mx.float32).max == 3.4028234663852886e+38
    assert mx.finfo(mx.float16).max == 65504.0
    with pytest.raises(ValueError, match=r"\[finfo\] dtype int32 is not inexact"):
        mx.finfo(mx.int32)


def test_iinfo():
    assert repr(mx.iinfo(mx.uint8)) == "iinfo(min=0, max=255, dtype=uint8)"
    assert repr(mx.iinfo(mx.int32)) == "iinfo(min=-2147483648, max=2147483647, dtype=int32)"
    assert mx.iinfo(mx.int64).min == -2**63 and mx.iinfo(mx.uint64).max == 2**64 - 1
    assert mx.iinfo(mx.int8).dtype is mx.int8
    for n in ["uint16", "uint32", "int16"]:
        ii = np.iinfo(n)
        assert (mx.iinfo(getattr(mx, n)).min, mx.iinfo(getattr(mx, n)).max) == (ii.min, ii.max)
    with pytest.raises(ValueError, match="Only integer types supported but bool"):
        mx.iinfo(mx.bool_)
    with pytest.raises(ValueError, match="float32"):
        mx.iinfo(mx.float32)


def test_finfo_iinfo_live_mlx():
    mlx = pytest.importorskip("mlx.core")
    for n in FINFO:
        a, b = mx.finfo(getattr(mx, n)), mlx.finfo(getattr(mlx, n))
        assert repr(a) == repr(b)
        assert (a.min, a.max, a.eps, a.smallest_normal, a.bits) == \
            (b.min, b.max, b.eps, b.smallest_normal, b.bits)
    for n in ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]:
        assert repr(mx.iinfo(getattr(mx, n))) == repr(mlx.iinfo(getattr(mlx, n)))


def test_can_cast_and_issubdtype_live_mlx():
    mlx = pytest.importorskip("mlx.core")
    mdt = [getattr(mlx, "bool_" if n == "bool" else n) for n in NAMES]
    for i, a in enumerate(DTYPES):
        for j, b in enumerate(DTYPES):
            assert mx.can_cast(a, b) == mlx.can_cast(mdt[i], mdt[j])
        for c in CATEGORY_ANCESTORS:
            assert mx.issubdtype(a, getattr(mx, c)) == mlx.issubdtype(mdt[i], getattr(mlx, c))
        for k in ISDTYPE_KINDS:
            assert mx.isdtype(a, k) == mlx.isdtype(mdt[i], k)


def test_to_dtype_and_numpy_mapping():
    for d in DTYPES:
        assert D.to_dtype(d) is d
        assert D.to_dtype(d.name) is d
        assert D.from_numpy(d.np_dtype) is d
    assert D.to_dtype(np.float32) is mx.float32
    assert D.to_dtype(bool) is mx.bool_
    with pytest.raises(TypeError):
        D.to_dtype("float128")
    with pytest.raises(TypeError):
        D.from_numpy(np.dtype("U3"))
