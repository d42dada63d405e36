"""The lazy array: construction and dtype inference, metadata, conversion to Python and NumPy,
MLX's printing (strings recorded from MLX 0.32), errors, laziness and memory accounting."""
import array as pyarray
import copy
import gc
import pickle

import ml_dtypes
import numpy as np
import pytest

import braze.core as mx
from braze._src.array import array as _array_cls
from braze._src.array import overwrite_descriptor
from braze._src.prims.base import bind
from braze._src.prims.core import AsType

ALL = [mx.bool_, mx.uint8, mx.uint16, mx.uint32, mx.uint64, mx.int8, mx.int16, mx.int32,
       mx.int64, mx.float16, mx.float32, mx.float64, mx.bfloat16, mx.complex64]


def lazy(x, dtype=None):
    """A lazy node computing `x` converted to dtype (AsType needs no op family)."""
    return bind(AsType(dtype or x.dtype), (x,))


# -- construction ---------------------------------------------------------------------------
@pytest.mark.parametrize("val,dtype,shape", [
    (3, mx.int32, ()),
    (-2**31, mx.int32, ()),
    (2**31 - 1, mx.int32, ()),
    (2**31, mx.int64, ()),
    (-2**31 - 1, mx.int64, ()),
    (2**40, mx.int64, ()),
    (1.5, mx.float32, ()),
    (True, mx.bool_, ()),
    (1 + 2j, mx.complex64, ()),
    ([True, False], mx.bool_, (2,)),
    ([True, 2], mx.int32, (2,)),
    ([1, 2.5], mx.float32, (2,)),
    ([True, 2.5], mx.float32, (2,)),
    ([1, 2**40], mx.int64, (2,)),
    ([2**31], mx.int64, (1,)),
    ([1, 2j], mx.complex64, (2,)),
    ([[1, 2], [3, 4]], mx.int32, (2, 2)),
    ((1, 2), mx.int32, (2,)),
    ([], mx.float32, (0,)),
    ([[], []], mx.float32, (2, 0)),
    ([[[1.5]]], mx.float32, (1, 1, 1)),
])
def test_python_values_infer_mlx_dtypes(val, dtype, shape):
    a = mx.array(val)
    assert a.dtype is dtype and a.shape == shape
    assert a.tolist() == (list(val) if isinstance(val, tuple) else val)


def test_nested_lists_with_arrays_promote():
    assert mx.array([mx.array([1, 2]), mx.array([3, 4])]).dtype is mx.int32
    assert mx.array([mx.array([1, 2]), [3.5, 4]]).dtype is mx.float32
    assert mx.array([mx.array(1.0, mx.float16), 2]).dtype is mx.float16
    assert mx.array([mx.array(1.0, mx.float16), 2.5]).dtype is mx.float32
    assert mx.array([mx.array(1, mx.int8), 2]).dtype is mx.int32
    assert mx.array([mx.array(True), 2]).dtype is mx.int32
    b = mx.array([mx.array(1.5, mx.bfloat16), 2])
    assert b.dtype is mx.bfloat16 and b.tolist() == [1.5, 2.0]
    # lazy arrays inside lists are evaluated
    assert mx.array([lazy(mx.array([1, 2])), [3, 4]]).tolist() == [[1, 2], [3, 4]]


@pytest.mark.parametrize("np_dtype", [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64,
                                      np.int8, np.int16, np.int32, np.int64, np.float16,
                                      np.float32, ml_dtypes.bfloat16, np.complex64])
def test_numpy_arrays_keep_their_dtype(np_dtype):
    src = np.arange(6).reshape(2, 3).astype(np_dtype)
    a = mx.array(src)
    assert a.dtype.np_dtype == np.dtype(np_dtype)
    assert a.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(a), src)
    src[0, 0] = 5  # a copy: later changes to the source do not leak in
    assert np.asarray(a)[0, 0] == 0


def test_numpy_float64_and_complex128_default_to_32_bits():
    a = mx.array(np.array([1.5, 2.0]))
    assert a.dtype is mx.float32
    b = mx.array(np.array([1.5, 2.0]), dtype=mx.float64)
    assert b.dtype is mx.float64 and b.tolist() == [1.5, 2.0]
    assert mx.array(np.array([1 + 1j])).dtype is mx.complex64
    assert mx.array(np.float64(2.5)).dtype is mx.float32
    assert mx.array(np.float16(1.5)).dtype is mx.float16
    assert mx.array(np.int64(1)).dtype is mx.int64
    assert mx.array(np.bool_(True)).dtype is mx.bool_
    assert mx.array(np.array(3.0)).shape == ()


def test_numpy_noncontiguous_is_copied_contiguous():
    src = np.arange(6).reshape(2, 3).T
    a = mx.array(src)
    assert np.asarray(a).flags.c_contiguous
    assert a.tolist() == src.tolist()


def test_from_other_arrays_copies_or_converts():
    x = mx.array([1, 2])
    y = mx.array(x)
    assert y.dtype is mx.int32 and y.tolist() == [1, 2] and y is not x
    z = mx.array(x, dtype=mx.float32)
    assert z.dtype is mx.float32 and z.tolist() == [1.0, 2.0]
    assert mx.array(lazy(x, mx.float16)).dtype is mx.float16


def test_buffer_protocol_objects():
    a = mx.array(bytearray(b"\x01\x02"))
    assert a.dtype is mx.uint8 and a.tolist() == [1, 2]
    assert mx.array(memoryview(b"ab")).tolist() == [97, 98]
    b = mx.array(pyarray.array("i", [1, 2]))
    assert b.dtype is mx.int32 and b.tolist() == [1, 2]
    c = mx.array(pyarray.array("d", [1.5, 2.0]))  # float64 buffers -> float32, like NumPy's
    assert c.dtype is mx.float32 and c.tolist() == [1.5, 2.0]
    assert mx.array(pyarray.array("f", [1.5])).dtype is mx.float32


def test_dtype_argument_converts_with_c_semantics():
    assert mx.array([1.7, -1.7], dtype=mx.int32).tolist() == [1, -1]
    assert mx.array([0, 2], dtype=mx.bool_).tolist() == [False, True]
    assert mx.array([300], dtype=mx.uint8).tolist() == [44]
    assert mx.array(300, mx.uint8).item() == 44
    assert mx.array(-1, mx.uint32).item() == 2**32 - 1
    assert mx.array(2.5, mx.int32).item() == 2
    assert mx.array(2.5, mx.bool_).item() is True
    assert mx.array(1 + 2j, mx.float32).item() == 1.0
    assert mx.array([True, False], mx.float32).tolist() == [1.0, 0.0]
    assert mx.array(2**63, mx.uint64).item() == 2**63
    assert mx.array([2**63], mx.uint64).tolist() == [2**63]
    assert mx.array([1.1], dtype=mx.float16).item() == float(np.float16(1.1))


@pytest.mark.parametrize("val,exc,msg", [
    ("a", ValueError, "Invalid type str"),
    (None, ValueError, "Invalid type NoneType"),
    (object(), ValueError, "Invalid type object"),
    (["a"], ValueError, "Invalid type str"),
    ([[1, 2], [3]], ValueError, "non-uniform length"),
    ([[1, 2], 3], ValueError, "non-uniform length"),
    (2**64, ValueError, "does not fit"),
    ([2**63], ValueError, "does not fit"),
    (np.array(["a"]), ValueError, "Unsupported NumPy dtype"),
])
def test_bad_values_raise(val, exc, msg):
    with pytest.raises(exc, match=msg):
        mx.array(val)


def test_bad_dtype_raises_type_error():
    with pytest.raises(TypeError):
        mx.array([1], dtype="float128")


# -- metadata -------------------------------------------------------------------------------
def test_shape_ndim_size_itemsize_nbytes():
    a = mx.array(np.zeros((2, 3, 4), np.float16))
    assert a.shape == (2, 3, 4) and isinstance(a.shape, tuple)
    assert a.ndim == 3 and a.size == 24 and a.itemsize == 2 and a.nbytes == 48
    s = mx.array(1.0)
    assert s.shape == () and s.ndim == 0 and s.size == 1 and s.nbytes == 4
    e = mx.array(np.zeros((2, 0)))
    assert e.size == 0 and e.nbytes == 0
    for d in ALL:
        assert mx.array([1, 0], d).itemsize == d.size
    lz = lazy(a, mx.float32)  # metadata without evaluating
    assert lz.shape == (2, 3, 4) and lz.nbytes == 96 and lz._data is None


# -- conversion to Python -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL)
def test_item_and_tolist_give_python_scalars(dtype):
    val = [[1.1 + 1j, 2]] if dtype is mx.complex64 else [[1.1, 2]]
    a = mx.array(val, dtype)
    tl = a.tolist()
    it = mx.array(tl[0][0], dtype).item()
    py = {"b": bool, "u": int, "i": int, "f": float, "c": complex}[dtype.kind]
    assert type(tl[0][0]) is py and type(tl[0][1]) is py and type(it) is py
    assert it == tl[0][0]
    if dtype is mx.bfloat16:
        assert it == 1.1015625
    if dtype is mx.float16:
        assert it == 1.099609375
    if dtype is mx.float32:
        assert it == float(np.float32(1.1))


def test_scalar_conversions():
    assert mx.array(2.5).tolist() == 2.5
    assert int(mx.array(2.7)) == 2
    assert float(mx.array([2.5])) == 2.5
    assert complex(mx.array(1 + 2j)) == 1 + 2j
    assert bool(mx.array([[2]])) is True
    assert [10, 20, 30][mx.array(1)] == 20
    assert f"{mx.array(1.5)}" == "1.5"
    assert f"{mx.array(1.5):.2f}" == "1.50"
    assert f"{mx.array(2):>5}" == "    2"
    assert f"{mx.array([1, 2])}" == "array([1, 2], dtype=int32)"


@pytest.mark.parametrize("fn,exc,msg", [
    (lambda: len(mx.array(1)), TypeError, "len\\(\\) 0-dimensional array"),
    (lambda: iter(mx.array(1)), TypeError, "iter\\(\\) 0-dimensional array"),
    (lambda: bool(mx.array([1, 2])), ValueError, "Only length-1 arrays"),
    (lambda: bool(mx.array([])), ValueError, "Only length-1 arrays"),
    (lambda: mx.array([1, 2]).item(), ValueError, "Only length-1 arrays"),
    (lambda: int(mx.array([1, 2])), ValueError, "Only length-1 arrays"),
    (lambda: [1, 2][mx.array(1.0)], TypeError, "0-dimensional integer arrays"),
    (lambda: [1, 2][mx.array(True)], TypeError, "0-dimensional integer arrays"),
    (lambda: [1, 2][mx.array([1])], TypeError, "0-dimensional integer arrays"),
    (lambda: f"{mx.array([1, 2]):>5}", TypeError, "unsupported format string"),
])
def test_conversion_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn()


def test_len_and_iter():
    a = mx.array([[1, 2], [3, 4], [5, 6]])
    assert len(a) == 3
    rows = list(a)
    assert len(rows) == 3 and all(isinstance(r, _array_cls) for r in rows)
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4], [5, 6]]


# -- NumPy interop --------------------------------------------------------------------------
def test_np_asarray_is_zero_copy():
    a = mx.array(np.arange(10, dtype=np.float32))
    n1 = np.asarray(a)
    n2 = np.asarray(a, copy=False) if np.lib.NumpyVersion(np.__version__) >= "2.0.0" \
        else np.asarray(a)
    p1 = n1.__array_interface__["data"][0]
    assert p1 == n2.__array_interface__["data"][0]
    assert p1 == np.asarray(a).__array_interface__["data"][0]
    assert n1.dtype == np.float32 and n1.shape == (10,)


def test_np_asarray_of_lazy_array_evaluates():
    x = mx.array([1, 2, 3])
    y = lazy(x, mx.float32)
    n = np.asarray(y)
    assert n.dtype == np.float32 and n.tolist() == [1.0, 2.0, 3.0]
    assert y._data is not None


def test_np_array_copies():
    a = mx.array(np.arange(4, dtype=np.int32))
    c = np.array(a)
    assert c.__array_interface__["data"][0] != np.asarray(a).__array_interface__["data"][0]
    c[0] = 99
    assert a.tolist()[0] == 0
    f = np.array(a, dtype=np.float64)
    assert f.dtype == np.float64 and f.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_np_asarray_survives_in_place_overwrite():
    # the ndarray must own a reference to the buffer, not to the braze array: overwriting
    # the array in place (as `a += 1` does) must not free memory the ndarray still uses
    a = mx.array(np.arange(100_000, dtype=np.float32))
    n = np.asarray(a)
    overwrite_descriptor(a, mx.array(np.zeros(100_000, np.float32)))
    gc.collect()
    _ = np.ones(100_000, np.float32) * 7  # reuse freed memory, if any
    assert n[:3].tolist() == [0.0, 1.0, 2.0]
    assert a.tolist()[:3] == [0.0, 0.0, 0.0]


def test_bfloat16_to_numpy():
    a = mx.array([1.5, 2.5], mx.bfloat16)
    n = np.asarray(a)
    assert n.dtype == ml_dtypes.bfloat16 and n.astype(np.float32).tolist() == [1.5, 2.5]


# -- printing ------------------------------------------------------------------------------
# (source, MLX's repr with mlx.core -> braze.core), recorded from MLX 0.32
REPRS = [
    ('m.array([1, 2, 3])',
     'array([1, 2, 3], dtype=int32)'),
    ('m.array([1.0, 2.5, 3.14159265])',
     'array([1, 2.5, 3.14159], dtype=float32)'),
    ('m.array(3.0)',
     'array(3, dtype=float32)'),
    ('m.array(False)',
     'array(False, dtype=bool)'),
    ('m.array([True, False])',
     'array([True, False], dtype=bool)'),
    ('m.array([[1, 2], [3, 4]])',
     'array([[1, 2],\n       [3, 4]], dtype=int32)'),
    ('m.array([[1.5], [2.5], [-3.0]])',
     'array([[1.5],\n       [2.5],\n       [-3]], dtype=float32)'),
    ('m.array(np.arange(24).reshape(2, 3, 4) / 7)',
     'array([[[0, 0.142857, 0.285714, 0.428571],\n        [0.571429, 0.714286, 0.857143, 1],\n'
     '        [1.14286, 1.28571, 1.42857, 1.57143]],\n       [[1.71429, 1.85714, 2, 2.14286],\n'
     '        [2.28571, 2.42857, 2.57143, 2.71429],\n        [2.85714, 3, 3.14286, 3.28571]]], '
     'dtype=float32)'),
    ('m.array(np.arange(100))',
     'array([0, 1, 2, ..., 97, 98, 99], dtype=int64)'),
    ('m.array(np.arange(7))',
     'array([0, 1, 2, ..., 4, 5, 6], dtype=int64)'),
    ('m.array(np.arange(6))',
     'array([0, 1, 2, 3, 4, 5], dtype=int64)'),
    ('m.array(np.arange(60).reshape(2, 30))',
     'array([[0, 1, 2, ..., 27, 28, 29],\n       [30, 31, 32, ..., 57, 58, 59]], dtype=int64)'),
    ("m.array([float('nan'), float('inf'), -float('inf'), 1.0])",
     'array([nan, inf, -inf, 1], dtype=float32)'),
    ('m.array([1 + 2j, -1.5 - 0.5j, 0j])',
     'array([1+2j, -1.5-0.5j, 0+0j], dtype=complex64)'),
    ('m.array(1 - 1j)',
     'array(1-1j, dtype=complex64)'),
    ('m.array([1.1, 2.2], dtype=m.float16)',
     'array([1.09961, 2.19922], dtype=float16)'),
    ('m.array([1.1, 2.2], dtype=m.bfloat16)',
     'array([1.10156, 2.20312], dtype=bfloat16)'),
    ('m.array([1.1, 2.2], dtype=m.float64)',
     'array([1.1, 2.2], dtype=float64)'),
    ('m.array([1e-5, 123456.7, 1234567.0, 0.0001, -0.0])',
     'array([1e-05, 123457, 1.23457e+06, 0.0001, -0], dtype=float32)'),
    ('m.array([1, 255], dtype=m.uint8)',
     'array([1, 255], dtype=uint8)'),
    ('m.array([-1, 127], dtype=m.int8)',
     'array([-1, 127], dtype=int8)'),
    ('m.array([-2**40])',
     'array([-1099511627776], dtype=int64)'),
    ('m.array([])',
     'array([], dtype=float32)'),
    ('m.array(np.zeros((2, 0)))',
     'array([[],\n       []], dtype=float32)'),
    ('m.array(np.ones((1, 2, 1, 2)))',
     'array([[[[1, 1]],\n        [[1, 1]]]], dtype=float32)'),
]


@pytest.mark.parametrize("src,expected", REPRS)
def test_repr_matches_mlx(src, expected):
    a = eval(src, {"m": mx, "np": np})
    assert repr(a) == expected
    assert str(a) == expected


def test_repr_large_3d_elides_every_long_dimension():
    a = mx.array(np.arange(1100).reshape(11, 10, 10))
    r = repr(a)
    lines = r.split("\n")
    assert lines[0] == "array([[[0, 1, 2, ..., 7, 8, 9],"
    assert lines[3] == "        ...,"
    assert "       ...," in lines
    assert lines[-1] == "        [1090, 1091, 1092, ..., 1097, 1098, 1099]]], dtype=int64)"
    assert len(lines) == 6 * 7 + 1


@pytest.mark.parametrize("src", [s for s, _ in REPRS] + [
    "m.array(np.arange(1100).reshape(11, 10, 10))", "m.array(np.zeros((1001, 0)))",
    "m.array(np.zeros((2, 0, 3)))", "m.array([complex(1, -0.0)])",
    "m.array(np.arange(2 * 20 * 30).reshape(2, 20, 30) * 0.25)"])
def test_repr_live_mlx(src):
    mlx = pytest.importorskip("mlx.core")
    expect = repr(eval(src, {"m": mlx, "np": np})).replace("mlx.core", "braze.core")
    assert repr(eval(src, {"m": mx, "np": np})) == expect


def test_printoptions_precision():
    a = mx.array([1.23456789, 1e-9])
    assert mx.get_printoptions().precision == -1
    with mx.printoptions(precision=3):
        assert repr(a) == "array([1.235, 0.000], dtype=float32)"
        assert repr(mx.array([1, 2])) == "array([1, 2], dtype=int32)"
        assert repr(mx.array([1 + 2j])) == "array([1.000+2.000j], dtype=complex64)"
        assert mx.get_printoptions().precision == 3
    assert repr(a) == "array([1.23457, 1e-09], dtype=float32)"
    mx.set_printoptions(precision=0)
    try:
        assert repr(mx.array([1.5, 2.5])) == "array([2, 2], dtype=float32)"
    finally:
        mx.set_printoptions()
    assert repr(mx.array([1.5, 2.5])) == "array([1.5, 2.5], dtype=float32)"


def test_repr_of_lazy_array_evaluates():
    y = lazy(mx.array([1, 2]), mx.float32)
    assert repr(y) == "array([1, 2], dtype=float32)"
    assert y._data is not None


# -- copy / pickle --------------------------------------------------------------------------
def test_copy_deepcopy_pickle():
    a = mx.array([1.5, 2.0])
    assert copy.copy(a).tolist() == [1.5, 2.0]
    d = copy.deepcopy(a)
    assert d.tolist() == [1.5, 2.0] and d is not a
    p = pickle.loads(pickle.dumps(a))
    assert p.tolist() == [1.5, 2.0] and p.dtype is mx.float32
    b = pickle.loads(pickle.dumps(mx.array([1, 2], mx.bfloat16)))
    assert b.dtype is mx.bfloat16 and b.tolist() == [1.0, 2.0]


# -- laziness -------------------------------------------------------------------------------
def test_ops_build_nodes_until_eval():
    x = mx.array([1, 2, 3])
    y = lazy(x, mx.float32)
    z = lazy(y, mx.float16)
    assert y._data is None and z._data is None
    assert z._inputs == (y,) and y._inputs == (x,)
    assert isinstance(z._prim, AsType)
    mx.eval(z)
    assert z._data is not None
    assert z._inputs == () and z._prim is None  # an evaluated array drops its inputs
    assert z.tolist() == [1.0, 2.0, 3.0]


def test_item_evaluates():
    y = lazy(mx.array([7]), mx.int64)
    assert y.item() == 7 and y._data is not None


# -- memory accounting ----------------------------------------------------------------------
def test_active_memory_follows_buffers():
    gc.collect()
    base = mx.get_active_memory()
    a = mx.array(np.zeros(1000, np.float32))
    assert mx.get_active_memory() == base + 4000
    b = lazy(a, mx.float64)
    assert mx.get_active_memory() == base + 4000  # unevaluated: no buffer yet
    mx.eval(b)
    assert mx.get_active_memory() == base + 4000 + 8000
    del b
    assert mx.get_active_memory() == base + 4000
    del a
    assert mx.get_active_memory() == base


def test_peak_memory_and_reset():
    gc.collect()
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    assert mx.get_peak_memory() == 0  # MLX: the peak starts over from 0
    a = mx.array(np.zeros(10_000, np.float32))
    del a
    assert mx.get_peak_memory() >= base + 40_000
    assert mx.get_active_memory() == base
    mx.reset_peak_memory()
    assert mx.get_peak_memory() == 0


def test_failed_construction_leaks_nothing(recwarn):
    gc.collect()
    base = mx.get_active_memory()
    with pytest.raises(ValueError):
        mx.array("nope")
    gc.collect()
    assert mx.get_active_memory() == base
    assert not [w for w in recwarn if "_mem" in str(w.message)]


def test_memory_limits():
    prev = mx.set_memory_limit(1 << 30)
    try:
        assert mx.get_memory_limit() == 1 << 30
        assert mx.set_memory_limit(1 << 31) == 1 << 30
    finally:
        mx.set_memory_limit(prev)
    old = mx.set_cache_limit(123)
    assert mx.set_cache_limit(old) == 123
    assert mx.set_wired_limit(0) == 0
    assert mx.get_cache_memory() >= 0
    mx.clear_cache()
    with pytest.raises(ValueError):
        mx.set_memory_limit(-1)


# -- MLX's array-object behaviours (issue 13) --------------------------------------------------
@pytest.mark.parametrize("fn", [copy.copy, copy.deepcopy])
def test_copies_are_new_objects(fn):
    x = mx.array([[1, 2], [3, 4]], mx.bfloat16)
    y = fn(x)
    assert y is not x
    y -= 1
    assert x.tolist() == [[1, 2], [3, 4]] and y.tolist() == [[0, 1], [2, 3]]


def test_list_of_arrays_is_stacked_in_the_graph():
    x = mx.array([1.0])
    g = mx.grad(lambda x: (2 * mx.array([x, mx.array([2.0])])).sum())(x)
    assert g.tolist() == [2.0]
    z = mx.array([[mx.array([1], mx.int8), [2.0]], [[3.0], mx.array([0], mx.uint8)]])
    assert z.dtype == mx.float32 and z.tolist() == [[[1.0], [2.0]], [[3.0], [0.0]]]
    assert mx.array([mx.array(1), mx.array(2)], mx.int16).dtype == mx.int16
    for bad in ([x, 1.0], [1.0, x], [x, mx.array([1.0, 2.0])], [[x], x]):
        with pytest.raises(ValueError, match="^Initialization encountered non-uniform length"):
            mx.array(bad)


def test_shape_dimension_overflow():
    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.bool_), (2**31,), (0,))
    with pytest.raises(OverflowError, match="Shape dimension 2147483648 is outside"):
        mx.array(big)


def test_operators_refuse_other_operands():
    a = mx.array([1, 2, 3])
    assert (a == "hello") is False and (a != "hello") is True and (a == [1, 2, 3]) is False
    for op in (lambda: a < "s", lambda: a * "s", lambda: a + [1, 2, 3], lambda: a ** (1, 2, 3),
               lambda: a & (1,), lambda: "s" - a, lambda: a.__imul__("s")):
        with pytest.raises(ValueError, match=r"^\[\w+\] Cannot perform") as e:
            op()
        assert isinstance(e.value, TypeError)  # Python's convention for bad operands, too
    assert (a + np.ones(3, np.int32)).tolist() == [2, 3, 4]  # NumPy arrays are operands


def test_inplace_true_division_needs_a_float_array():
    a = mx.array([1])
    with pytest.raises(ValueError, match=r"^\[divide\] In place division"):
        a /= 1
    b = mx.array([2.0])
    c = b
    c /= 2
    assert b.item() == 1.0


def test_astype_method_takes_the_stream_positionally():
    assert mx.array([1.5]).astype(mx.float64, mx.cpu).dtype == mx.float64


def test_python_floats_keep_double_precision():
    import math
    assert mx.full((2,), 0.37, dtype=mx.float64).tolist() == [0.37, 0.37]
    a = mx.array([1.0], mx.float64)
    assert mx.pad(a, 1, constant_values=0.1).tolist() == [0.1, 1.0, 0.1]
    assert mx.linspace(0, math.pi, 2, dtype=mx.float64).tolist()[1] == math.pi
    assert mx.pad(mx.array([1.0], mx.float16), 1, constant_values=0.5).dtype == mx.float16


def test_at_needs_indices_and_takes_none():
    a = mx.array(1)
    with pytest.raises(ValueError, match=r"^\[at\] Must give indices"):
        a.at.add(1)
    assert a.at[None].add(1).item() == 2 and a.at[None].multiply(3).item() == 3


def test_setitem_boolean_masks():
    for mask, v, want in (([True, False, True], mx.array([5.0, 6.0]), [5.0, 2.0, 6.0]),
                          (mx.array(True), 5.0, [5.0] * 3), (True, 5.0, [5.0] * 3)):
        a = mx.array([1.0, 2.0, 3.0])
        a[mask] = v
        assert a.tolist() == want
    for shape in ((1, 10, 10), (10, 10, 1)):
        with pytest.raises(ValueError, match=r"^\[setitem\] The boolean mask"):
            mx.arange(1000).reshape(10, 10, 10)[np.zeros(shape, bool)] = 0


def test_slice_bounds_must_fit_int32():
    x = mx.array([0, 1, 2])
    assert x[: 2**31 - 1].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"^\[getitem\] Slice indices must be 32-bit"):
        x[: 2**32]
    with pytest.raises(ValueError):
        x[2**32]


def test_async_eval_refuses_transformations():
    def fun(x):
        mx.async_eval(x + 1.0)
        return x
    for t in (mx.grad(lambda x: fun(x).sum()), mx.vmap(fun), mx.compile(fun)):
        with pytest.raises(ValueError, match=r"^\[async_eval\] Not allowed"):
            t(mx.ones((2,)))
    mx.async_eval(mx.array(1) + 1)  # outside a transformation: an eval


def test_synchronize_frees_dropped_multi_output_siblings():
    gc.collect()
    before = mx.get_active_memory()

    def fun():
        a = mx.zeros((1 << 18,))
        mx.eval(a)
        b, c = mx.divmod(a, a)  # siblings point at each other: a reference cycle
        del b, c
    fun()
    mx.synchronize()
    assert mx.get_active_memory() == before
