"""Creation ops: MLX's dtype inference, argument forms, laziness and errors.

Expected dtypes and values were checked against MLX 0.32 and are written as plain expectations.
"""
import math

import numpy as np
import pytest

import braze.core as mx


def _np(a):
    return np.asarray(a)


# -- arange -----------------------------------------------------------------------------------
@pytest.mark.parametrize("args,kw,dtype,values", [
    ((5,), {}, mx.int32, [0, 1, 2, 3, 4]),
    ((1, 5), {}, mx.int32, [1, 2, 3, 4]),
    ((0, 5, 2), {}, mx.int32, [0, 2, 4]),
    ((0.0, 5), {}, mx.float32, [0, 1, 2, 3, 4]),
    ((1, 5, 0.5), {}, mx.float32, [1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5]),
    ((5.0,), {}, mx.float32, [0, 1, 2, 3, 4]),
    ((5,), {"step": 2}, mx.int32, [0, 2, 4]),
    ((), {"stop": 3}, mx.int32, [0, 1, 2]),
    ((), {"start": 2, "stop": 5}, mx.int32, [2, 3, 4]),
    ((5, 2, mx.float32), {}, mx.float32, [0, 2, 4]),  # arange(stop, step, dtype)
    ((5,), {"dtype": mx.int64}, mx.int64, [0, 1, 2, 3, 4]),
    ((0, 5), {"dtype": mx.float16}, mx.float16, [0, 1, 2, 3, 4]),
    ((5, 0), {}, mx.int32, []),
    ((5, 0, -1), {}, mx.int32, [5, 4, 3, 2, 1]),
    ((2**31, 2**31 + 3), {}, mx.int64, [2**31, 2**31 + 1, 2**31 + 2]),
    ((-3, 3, 1, mx.uint8), {}, mx.uint8, [253, 254, 255, 0, 1, 2]),
    ((0.5, 5, 1), {"dtype": mx.int32}, mx.int32, [0, 1, 2, 3, 4]),
    ((0, 5, 1), {"dtype": mx.complex64}, mx.complex64, [0, 1, 2, 3, 4]),
    ((np.int64(3),), {}, mx.int32, [0, 1, 2]),
])
def test_arange_forms_and_dtypes(args, kw, dtype, values):
    a = mx.arange(*args, **kw)
    assert a.dtype == dtype
    np.testing.assert_array_equal(_np(a), np.array(values, dtype=dtype.np_dtype))


def test_arange_accumulates_like_mlx():
    # MLX accumulates float ranges one step at a time in the output dtype
    a = _np(mx.arange(0, 1, 0.1))
    assert a[9] == np.float32(0.9000000953674316)
    want = np.cumsum(np.array([0] + [0.1] * 9999, np.float32), dtype=np.float32)
    np.testing.assert_array_equal(_np(mx.arange(0, 1000, 0.1)), want)
    h = _np(mx.arange(0, 100, 0.1, dtype=mx.float16))
    np.testing.assert_array_equal(h[-2:], np.array([104.94, 105.06], np.float16))


def test_arange_matches_mlx_when_available():
    mlx = pytest.importorskip("mlx.core")
    for args in [(0, 1, 0.1), (-2.5, 7, 0.3), (3, 40, 7), (0, 10, 0.5)]:
        for dt in ("float32", "float16", "bfloat16", "int32"):
            got = _np(mx.arange(*args, dtype=getattr(mx, dt))).astype(np.float64)
            want = np.array(mlx.arange(*args, dtype=getattr(mlx, dt)).astype(mlx.float32))
            np.testing.assert_array_equal(got, want.astype(np.float64), err_msg=f"{args} {dt}")


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: mx.arange(0, 5, 0), ValueError, "step must be nonzero"),
    (lambda: mx.arange(0, 5, 0.0), ValueError, "step must be nonzero"),
    (lambda: mx.arange(5, dtype=mx.bool_), ValueError, "bool"),
    (lambda: mx.arange(float("inf")), ValueError, "Cannot compute length"),
    (lambda: mx.arange(0, float("nan")), ValueError, "Cannot compute length"),
    (lambda: mx.arange("a"), TypeError, "'a'"),
    (lambda: mx.arange(True), TypeError, "True"),
    (lambda: mx.arange(), TypeError, "stop"),
    (lambda: mx.arange(5, dtype="foo"), TypeError, "foo"),
])
def test_arange_errors(call, exc, msg):
    with pytest.raises(exc, match=r"^\[arange\].*" + msg):
        call()


# -- linspace ---------------------------------------------------------------------------------
def test_linspace():
    a = mx.linspace(0, 1, 5)
    assert a.dtype == mx.float32 and a.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert mx.linspace(0, 1).shape == (50,)
    assert mx.linspace(0, 10, 5, dtype=mx.int32).tolist() == [0, 2, 5, 7, 10]
    assert mx.linspace(0, 10, 4, dtype=mx.int32).tolist() == [0, 3, 6, 10]
    assert mx.linspace(0, 1, 3, dtype=mx.float16).dtype == mx.float16
    assert mx.linspace(0, 1, 1).tolist() == [0.0]
    assert mx.linspace(0, 1, 0).shape == (0,)
    assert mx.linspace(0, 1, 5, endpoint=False).tolist() == pytest.approx([0, .2, .4, .6, .8])
    assert mx.linspace(0, 10, 4, dtype=mx.bool_).tolist() == [False, True, True, True]
    # computed as (1 - t) * start + t * stop in float32, like MLX: the ends are exact
    b = _np(mx.linspace(-3.3, 7.1, 11))
    assert b[0] == np.float32(-3.3) and b[-1] == np.float32(7.1)


def test_linspace_matches_mlx_when_available():
    mlx = pytest.importorskip("mlx.core")
    rng = np.random.default_rng(0)
    for _ in range(10):
        a, b, n = float(rng.normal() * 10), float(rng.normal() * 10), int(rng.integers(2, 40))
        np.testing.assert_array_equal(_np(mx.linspace(a, b, n)), np.array(mlx.linspace(a, b, n)))


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: mx.linspace(0, 1, -1), ValueError, "-1, must be non-negative"),
    (lambda: mx.linspace(0, 1, 2.5), TypeError, "2.5"),
    (lambda: mx.linspace("a", 1), TypeError, "'a'"),
])
def test_linspace_errors(call, exc, msg):
    with pytest.raises(exc, match=r"^\[linspace\].*" + msg):
        call()


# -- full / zeros / ones ----------------------------------------------------------------------
@pytest.mark.parametrize("vals,dtype", [
    (3, mx.int32), (3.0, mx.float32), (True, mx.bool_), (2**40, mx.int64),
    (1 + 2j, mx.complex64), (np.float64(2.0), mx.float32), (np.int8(2), mx.int8),
])
def test_full_infers_dtype_from_scalar(vals, dtype):
    a = mx.full((2, 2), vals)
    assert a.dtype == dtype and a.shape == (2, 2)
    assert (_np(a) == vals).all()


def test_full_variants():
    a = mx.full((2, 3), mx.array([1, 2, 3]))
    assert a.dtype == mx.int32 and a.tolist() == [[1, 2, 3], [1, 2, 3]]
    assert mx.full((2, 3), np.array([1.0, 2.0, 3.0])).dtype == mx.float32
    assert mx.full(3, 3.5, mx.int32).tolist() == [3, 3, 3]
    assert mx.full((), 5).shape == ()
    assert mx.zeros(()).shape == () and mx.zeros([]).dtype == mx.float32
    assert mx.zeros((2,), mx.int8).dtype == mx.int8
    assert mx.zeros((2,), "int8").dtype == mx.int8
    assert mx.zeros((2,), dtype=None).dtype == mx.float32
    assert mx.ones((2,), mx.bool_).tolist() == [True, True]
    assert mx.empty((2, 2)).tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_like_ops():
    x = mx.array([[1, 2]], mx.int8)
    assert mx.zeros_like(x).dtype == mx.int8 and mx.zeros_like(x).shape == (1, 2)
    assert mx.zeros_like(x, dtype=mx.float16).dtype == mx.float16
    assert mx.ones_like(x).tolist() == [[1, 1]]
    assert mx.full_like(x, 2.7).tolist() == [[2, 2]]
    assert mx.full_like(x, 2.7, mx.float32).dtype == mx.float32
    assert mx.full_like(x, mx.array([5.0, 6.0])).tolist() == [[5, 6]]
    assert mx.empty_like(mx.array([1, 2])).dtype == mx.int32


def test_full_is_lazy_and_dense():
    a = mx.zeros((1000, 1000))
    assert a._data is None and a._prim is not None and a._prim.name == "Broadcast"
    before = mx.get_active_memory()
    buf = _np(a)
    # a buffer of its own, as MLX's Full: counted, and views of it have dense strides
    assert buf.strides == (4000, 4) and mx.get_active_memory() - before >= 4_000_000 - 4
    assert np.asarray(mx.broadcast_to(mx.ones((2, 2)), (5, 2, 2))).strides == (0, 8, 4)
    b = mx.arange(10)
    assert b._data is None and b._prim.name == "Arange"


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: mx.full((-1, 3), 3), ValueError, r"^\[full\] Negative dimensions.*-1"),
    (lambda: mx.zeros(-1), ValueError, r"^\[zeros\] Negative"),
    (lambda: mx.ones((2.0, 3)), TypeError, r"^\[ones\].*2\.0"),
    (lambda: mx.full("ab", 3), TypeError, r"^\[full\].*'ab'"),
    (lambda: mx.full((2, 3), mx.array([1, 2])), ValueError, r"^\[full\].*\(2,\).*\(2, 3\)"),
    (lambda: mx.full((2, 3), 1, dtype="foo"), TypeError, r"^\[full\].*foo"),
    (lambda: mx.full((2, 3), "x"), TypeError, r"^\[full\].*'x'"),
    (lambda: mx.full((2,), 300, mx.int8), ValueError, r"^\[full\] Converting 300 to int8"),
    (lambda: mx.zeros_like(mx.zeros(2), dtype="bad"), TypeError, r"^\[zeros_like\].*bad"),
    (lambda: mx.full_like(mx.zeros((1, 2)), mx.zeros(3)), ValueError, r"^\[full_like\]"),
])
def test_full_errors(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# -- eye / identity / tri / tril / triu -------------------------------------------------------
def test_eye_identity_tri():
    np.testing.assert_array_equal(_np(mx.eye(2, 3, 1)), np.eye(2, 3, 1))
    assert mx.eye(2, 3, -1, mx.int32).tolist() == [[0, 0, 0], [1, 0, 0]]
    assert mx.eye(3).dtype == mx.float32 and mx.eye(2, dtype=None).dtype == mx.float32
    assert mx.eye(0).shape == (0, 0)
    assert mx.identity(2, mx.bool_).tolist() == [[True, False], [False, True]]
    assert mx.tri(3).dtype == mx.float32
    np.testing.assert_array_equal(_np(mx.tri(2, 3, 1)), np.tri(2, 3, 1))


@pytest.mark.parametrize("call,op,exc", [
    (lambda: mx.eye(-1), "eye", ValueError),
    (lambda: mx.eye(2, -1), "eye", ValueError),
    (lambda: mx.eye(2.0), "eye", TypeError),
    (lambda: mx.eye(2, k=0.5), "eye", TypeError),
    (lambda: mx.identity(-2), "identity", ValueError),
    (lambda: mx.tri(-2), "tri", ValueError),
    (lambda: mx.tril(mx.arange(3)), "tril", ValueError),
    (lambda: mx.triu(mx.array(3.0)), "triu", ValueError),
    (lambda: mx.triu(mx.zeros((2, 2)), 1.5), "triu", TypeError),
])
def test_matrix_errors(call, op, exc):
    with pytest.raises(exc, match=rf"^\[{op}\]"):
        call()


def test_tril_triu_batched_and_inputs_unchanged():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    xa = mx.array(x)
    np.testing.assert_array_equal(_np(mx.triu(xa, 1)), np.triu(x, 1))
    np.testing.assert_array_equal(_np(mx.tril(xa, -1)), np.tril(x, -1))
    np.testing.assert_array_equal(_np(xa), x)
    nan = mx.array([[np.nan, np.nan], [np.nan, np.nan]])
    assert np.isnan(_np(mx.tril(nan))).tolist() == [[True, False], [True, True]]


# -- meshgrid ---------------------------------------------------------------------------------
def test_meshgrid_xy_vs_ij():
    x, y = mx.array([1, 2, 3]), mx.array([4.0, 5.0])
    X, Y = mx.meshgrid(x, y)
    assert X.shape == Y.shape == (2, 3)
    assert X.tolist() == [[1, 2, 3], [1, 2, 3]] and Y.tolist() == [[4, 4, 4], [5, 5, 5]]
    assert X.dtype == mx.int32 and Y.dtype == mx.float32
    I, J = mx.meshgrid(x, y, indexing="ij")
    assert I.shape == J.shape == (3, 2)
    assert I.tolist() == [[1, 1], [2, 2], [3, 3]] and J.tolist() == [[4, 5], [4, 5], [4, 5]]
    s = mx.meshgrid(x, y, mx.zeros(4), sparse=True)
    assert [a.shape for a in s] == [(1, 3, 1), (2, 1, 1), (1, 1, 4)]
    assert isinstance(mx.meshgrid(x, y), tuple) and mx.meshgrid() == ()
    assert [a.shape for a in mx.meshgrid(mx.array(3), mx.array([1, 2]))] == [(2, 1), (2, 1)]
    with pytest.raises(ValueError, match=r"^\[meshgrid\].*'foo'"):
        mx.meshgrid(x, indexing="foo")


# -- asarray ----------------------------------------------------------------------------------
def test_asarray():
    x = mx.array([1, 2, 3])
    y = mx.asarray(x)
    assert y is not x and y.tolist() == [1, 2, 3]
    assert mx.asarray(x, mx.float32).dtype == mx.float32
    assert mx.asarray([1, 2]).dtype == mx.int32
    assert mx.asarray(np.ones(2)).dtype == mx.float32  # MLX reads float64 data as float32
    n = np.arange(4, dtype=np.int32)
    z = mx.asarray(n)  # copy=None shares a NumPy buffer of a matching dtype
    assert np.shares_memory(_np(z), n)
    assert not np.shares_memory(_np(mx.asarray(n, copy=True)), n)
    # copy=False raises, as in MLX's CPU build (no unified memory to adopt the buffer into)
    with pytest.raises(ValueError, match=r"^\[asarray\] Cannot import a CPU array"):
        mx.asarray(n, copy=False)
    with pytest.raises(ValueError, match=r"^\[asarray\].*requested dtype"):
        mx.asarray(n, mx.float32, copy=False)
    with pytest.raises(ValueError, match=r"^\[asarray\] Unable to avoid copy"):
        mx.asarray(x, copy=False)
    with pytest.raises(ValueError, match=r"^\[asarray\]"):
        mx.asarray(x, mx.float32, copy=False)
    with pytest.raises(ValueError, match=r"^\[asarray\]"):
        mx.asarray([1, 2], copy=False)


# -- issue 13: MLX's arange corner cases and int32 shape dimensions ---------------------------
@pytest.mark.parametrize("args, values", [
    ((0, 10, math.inf), [0.0]), ((0, -10, -math.inf), [0.0]), ((10, 0, math.inf), []),
])
def test_arange_infinite_step_gives_start(args, values):
    assert mx.arange(*args).tolist() == values


def test_arange_keyword_start_without_stop_is_a_type_error():
    with pytest.raises(TypeError, match=r"^\[arange\]"):
        mx.arange(start=1, step=2)
    assert mx.arange(stop=3).tolist() == [0, 1, 2]
    assert mx.arange(-3, None, -1).tolist() == [0, -1, -2]


@pytest.mark.parametrize("op,call", [("zeros", lambda: mx.zeros(2**31)),
                                     ("ones", lambda: mx.ones([2**31])),
                                     ("full", lambda: mx.full([-(2**31) - 1], 0.0))])
def test_shape_outside_int32_is_an_overflow_error(op, call):
    with pytest.raises(OverflowError, match=rf"^\[{op}\] Shape dimension -?2147483\d+ is outside"):
        call()


@pytest.mark.parametrize("name", ["bartlett", "hanning", "hamming", "blackman"])
def test_windows_short_and_bad_lengths(name):
    fn = getattr(mx, name)
    assert fn(1).tolist() == [1.0]
    assert fn(0).shape == (0,) and fn(0).dtype == mx.float32
    assert fn(-3).shape == (0,)
    with pytest.raises(TypeError, match=rf"^\[{name}\]"):
        fn(2.5)
