"""Interop with NumPy and other array libraries: NumPy views, the buffer protocol, DLPack, the
array API namespace, and asarray/from_dlpack's copy= semantics (issue 13).

Python below 3.12 has no way for a pure-Python class to export a buffer (PEP 688's
`__buffer__` is 3.12+), so `memoryview(a)` is tested only where it can work; `np.asarray(a)`
shares the memory on every version.
"""
import sys
import weakref

import numpy as np
import pytest

import braze.core as mx


# -- NumPy views ------------------------------------------------------------------------------
def test_numpy_view_keeps_the_array_alive():
    a = mx.arange(3)
    wr = weakref.ref(a)
    v = np.array(a, copy=False)
    del a
    assert wr() is not None  # as in MLX: the view holds the array
    del v
    assert wr() is None


def test_numpy_view_is_writeable_shared_and_survives_overwrite():
    a = mx.array([1.0, 2.0])
    v = np.asarray(a)
    assert v.flags.writeable and not v.flags.owndata and v.base is not None
    assert np.shares_memory(v, np.asarray(a))
    a += 1  # the array gets a new buffer; the view keeps the old one alive
    assert v.tolist() == [1.0, 2.0] and a.tolist() == [2.0, 3.0]


def test_numpy_view_strides_of_full_and_broadcast():
    b = mx.broadcast_to(mx.ones((2, 2)), (5, 2, 2))
    assert np.array(b, copy=False).strides == (0, 8, 4)
    assert np.asarray(mx.ones((2, 3), mx.bfloat16)).dtype.name == "bfloat16"


def test_bytes_are_the_elements_in_c_order():
    a = ord("a") * 257 + mx.arange(4).astype(mx.int16)
    assert bytes(a) == np.asarray(a).tobytes() and len(bytes(a)) == 8
    assert bytes(mx.array([[1, 2], [3, 4]], mx.uint8).T) == bytes([1, 3, 2, 4])


@pytest.mark.skipif(sys.version_info < (3, 12), reason="__buffer__ needs Python 3.12")
def test_memoryview():  # pragma: no cover - runs on 3.12+
    a = mx.array([[1, 2], [3, 4]], mx.int32)
    m = memoryview(a.T)
    assert m.shape == (2, 2) and m.strides == (4, 8) and not m.readonly
    wr = weakref.ref(a)
    m = memoryview(a)
    del a
    assert wr() is not None
    del m
    assert wr() is None
    # struct's fixed-size codes for 64-bit integers, as MLX
    assert memoryview(mx.array([1, 2], mx.int64).T).format == "q"
    assert memoryview(mx.array([1, 2], mx.uint64)).format == "Q"
    with pytest.raises(ValueError, match="bfloat16 has no buffer format"):
        memoryview(mx.ones((3, 4), mx.bfloat16))
    assert np.asarray(mx.ones(2, mx.bfloat16)).dtype.name == "bfloat16"  # via __array__


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.11 and older only")
def test_memoryview_is_impossible_before_312():
    with pytest.raises(TypeError):
        memoryview(mx.arange(3))


# -- DLPack -----------------------------------------------------------------------------------
class _Wrapped:
    """Only the DLPack protocol (as MLX's tests wrap arrays)."""

    def __init__(self, x):
        self.x = x

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *args, **kwargs):
        kwargs["dl_device"] = (1, 0)
        return self.x.__dlpack__(*args, **kwargs)


@pytest.mark.parametrize("dt", ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16",
                                "int32", "int64", "float16", "float32", "complex64"])
def test_dlpack_export_is_zero_copy(dt):
    a = mx.ones((3, 4), getattr(mx, dt))
    y = np.from_dlpack(_Wrapped(a))
    assert y.dtype == np.asarray(a).dtype
    assert np.shares_memory(y, np.asarray(a)) and mx.array_equal(y, a).item()
    assert a.__dlpack_device__() == (1, 0)


def test_dlpack_export_strided_copy_and_errors():
    x = mx.arange(16).reshape(4, 4)[::2, ::2]
    assert np.from_dlpack(x).tolist() == [[0, 2], [8, 10]]
    c = np.from_dlpack(_Wrapped(mx.array([1, 2])), copy=True)
    assert c.tolist() == [1, 2]
    with pytest.raises(BufferError, match=r"^\[__dlpack__\].*CPU"):
        mx.array([1]).__dlpack__(dl_device=(2, 0))


@pytest.mark.parametrize("src,dt", [(np.bool_, "bool"), (np.int8, "int8"), (np.uint64, "uint64"),
                                    (np.float16, "float16"), (np.float32, "float32"),
                                    (np.float64, "float32"), (np.complex128, "complex64")])
def test_from_dlpack_dtypes(src, dt):
    assert mx.from_dlpack(np.ones(3, src)).dtype == getattr(mx, dt if dt != "bool" else "bool_")


def test_from_dlpack_shares_and_keeps_strides():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = mx.from_dlpack(x.T)
    assert y.tolist() == x.T.tolist() and np.asarray(y).strides == x.T.strides
    assert np.shares_memory(np.asarray(y), x)
    z = mx.from_dlpack(x, copy=True)
    x += 10
    assert z.tolist()[0] == [0.0, 1.0, 2.0, 3.0] and y.tolist()[0][0] == 10.0
    assert mx.from_dlpack(mx.array([1, 2])).tolist() == [1, 2]
    assert mx.array(_Wrapped(mx.array([3, 4]))).tolist() == [3, 4]  # a DLPack-only object


def test_from_dlpack_errors():
    with pytest.raises(ValueError, match=r"^\[from_dlpack\] Negative strides"):
        mx.from_dlpack(np.arange(5, dtype=np.float32)[::-1])
    with pytest.raises(ValueError, match=r"^\[from_dlpack\].*without a copy"):
        mx.from_dlpack(np.arange(3), copy=False)
    with pytest.raises(TypeError, match=r"^\[from_dlpack\]"):
        mx.from_dlpack([1, 2])


# -- array API --------------------------------------------------------------------------------
def test_array_namespace():
    xp = mx.array(1.0).__array_namespace__()
    assert xp is mx
    for name in ("asarray", "add", "result_type", "can_cast", "isdtype", "vecdot"):
        assert hasattr(xp, name), name
    assert xp.asarray([1, 2, 3], dtype=mx.float32).dtype == mx.float32
    with pytest.raises(ValueError, match=r"^\[array_namespace\]"):
        mx.array(1.0).__array_namespace__(api_version="2023.12")


def test_asarray_copy_semantics():
    a = mx.array([1, 2, 3])
    b = mx.asarray(a)
    assert b is not a and b.tolist() == [1, 2, 3]
    assert mx.asarray(a, dtype=mx.float32, copy=True).dtype == mx.float32
    for call in (lambda: mx.asarray(a, copy=False), lambda: mx.asarray([1, 2], copy=False),
                 lambda: mx.asarray(np.arange(3, dtype=np.int32), copy=False),
                 lambda: mx.asarray(a, dtype=mx.float32, copy=False)):
        with pytest.raises(ValueError, match=r"^\[asarray\]"):
            call()


# -- differential: the same programs on MLX ----------------------------------------------------
_PROGRAMS = {
    "view_strides": lambda m: np.asarray(m.broadcast_to(m.ones((2, 2)), (3, 2, 2))).strides,
    "bytes": lambda m: bytes(m.arange(4).astype(m.uint8)),
    "from_dlpack_f64": lambda m: str(m.from_dlpack(np.ones(2)).dtype).split(".")[-1],
    "dlpack_device": lambda m: m.array(1).__dlpack_device__(),
    "asarray_no_copy": lambda m: m.asarray(m.array([1]), copy=False),
    "numpy_no_copy": lambda m: m.asarray(np.ones(2, np.float32), copy=False),
    "negative_strides": lambda m: m.from_dlpack(np.arange(3.0)[::-1]),
    "dlpack_roundtrip": lambda m: np.from_dlpack(m.arange(6).reshape(2, 3).T).tolist(),
}


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_same_as_mlx(name):
    mc = pytest.importorskip("mlx.core")

    def outcome(lib):
        try:
            return ("ok", _PROGRAMS[name](lib))
        except Exception as e:  # noqa: BLE001 - the exception class is the result
            return ("raise", ValueError if isinstance(e, ValueError) else type(e))

    assert outcome(mx) == outcome(mc)
