"""Bad input to every public op gives a ValueError/TypeError naming the op and the value —
never a bare NumPy error, an AttributeError, a crash or a hang."""
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze.core as mx

# Public functions that are not array ops (no array argument to get wrong).
NOT_OPS = {
    "arange", "linspace", "zeros", "ones", "full", "eye", "identity", "tri", "empty",
    "meshgrid", "broadcast_shapes", "can_cast", "issubdtype", "isdtype", "result_type",
    "clear_cache", "clear_streams", "default_device", "default_stream", "device_count",
    "device_info", "eval", "async_eval", "export_to_dot", "get_active_memory",
    "get_array_buffer_size", "get_cache_memory", "get_memory_limit", "get_peak_memory",
    "get_printoptions", "grad", "is_available", "jvp", "new_stream", "reset_peak_memory",
    "set_cache_limit", "set_default_device", "set_default_stream", "set_memory_limit",
    "set_printoptions", "set_wired_limit", "stream", "synchronize", "value_and_grad", "vjp",
    "vmap", "compile", "disable_compile", "enable_compile", "custom_function", "checkpoint",
    "asarray", "stack", "concatenate", "concat", "atleast_1d", "atleast_2d", "atleast_3d",
    "broadcast_arrays", "einsum", "divmod",
}
ALIASES = {"acos": "arccos", "asin": "arcsin", "atan": "arctan", "acosh": "arccosh",
           "asinh": "arcsinh", "atanh": "arctanh", "atan2": "arctan2", "pow": "power",
           "conj": "conjugate", "bitwise_left_shift": "left_shift",
           "bitwise_right_shift": "right_shift", "concat": "concatenate",
           "permute_dims": "transpose", "empty_like": "zeros_like"}


def _array_ops():
    for name in sorted(dir(mx)):
        fn = getattr(mx, name)
        if name.startswith("_") or name in NOT_OPS or not inspect.isfunction(fn):
            continue
        yield name


class Opaque:
    """An object no op can interpret."""

    def __repr__(self):
        return "<Opaque>"


def _names_op(msg, name):
    return name in msg or ALIASES.get(name, name) in msg or "array" in msg


@pytest.mark.parametrize("name", list(_array_ops()))
def test_opaque_first_argument(name):
    fn = getattr(mx, name)
    nargs = sum(1 for p in inspect.signature(fn).parameters.values()
                if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    args = [Opaque()] + [mx.ones((2, 2))] * max(0, nargs - 1)
    with pytest.raises((TypeError, ValueError)) as info:
        fn(*args)
    assert _names_op(str(info.value), name), f"{name}: {info.value}"


REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "all", "any", "logsumexp",
              "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "softmax", "sort",
              "argsort", "squeeze", "expand_dims", "flip", "median"]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(REDUCTIONS), ndim=st.integers(1, 3),
       axis=st.one_of(st.integers(5, 50), st.integers(-50, -5)))
def test_axis_out_of_range(name, ndim, axis):
    x = mx.ones((2,) * ndim)
    with pytest.raises((ValueError, IndexError)) as info:
        getattr(mx, name)(x, axis=axis)
    msg = str(info.value)
    assert str(axis) in msg, msg
    assert isinstance(info.value, ValueError) or name in msg


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       new=st.lists(st.integers(1, 7), min_size=1, max_size=3))
def test_reshape_size_mismatch(shape, new):
    if np.prod(shape) == np.prod(new):
        return
    with pytest.raises(ValueError) as info:
        mx.reshape(mx.zeros(tuple(shape)), tuple(new))
    assert "[reshape]" in str(info.value)


BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal",
          "less", "greater_equal", "logaddexp", "arctan2", "remainder", "floor_divide",
          "logical_and", "where"]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(BINARY), a=st.integers(2, 6), b=st.integers(2, 6))
def test_binary_shapes_that_do_not_broadcast(name, a, b):
    if a == b:
        return
    x, y = mx.ones((a,)), mx.ones((b,))
    with pytest.raises(ValueError) as info:
        if name == "where":
            mx.where(x > 0, x, y)
        else:
            getattr(mx, name)(x, y)
    msg = str(info.value)
    assert str(a) in msg and str(b) in msg, msg


@pytest.mark.parametrize("make", [
    lambda: mx.zeros((2,), dtype="no_such_dtype"),
    lambda: mx.ones((-1, 2)),
    lambda: mx.full((2,), Opaque()),
    lambda: mx.arange(0, 10, 0),
    lambda: mx.zeros("abc"),
    lambda: mx.array([1, 2]).astype(Opaque()),
    lambda: mx.take(mx.ones((3,)), mx.array([0.5])),
    lambda: mx.matmul(mx.ones((2, 3)), mx.ones((4, 5))),
    lambda: mx.concatenate([mx.ones((2, 3)), mx.ones((2, 4))], axis=0),
    lambda: mx.split(mx.ones((5,)), 2),
    lambda: mx.transpose(mx.ones((2, 3)), (0, 0)),
    lambda: mx.broadcast_to(mx.ones((3,)), (2, 4)),
    lambda: mx.pad(mx.ones((2,)), -1),
    lambda: mx.ones((2, 2))[5],
    lambda: mx.ones((2, 2))["a"],
    lambda: mx.topk(mx.ones((3,)), 5),
    lambda: mx.einsum("ij,jk->ik", mx.ones((2, 3)), mx.ones((4, 5))),
])
def test_assorted_bad_calls_raise_clear_errors(make):
    with pytest.raises((ValueError, TypeError, IndexError)) as info:
        make()
    assert str(info.value), "empty error message"


def test_inputs_are_not_modified_by_failed_ops():
    x = np.arange(6, dtype=np.float32)
    a = mx.array(x)
    with pytest.raises(ValueError):
        mx.reshape(a, (4, 2))
    np.testing.assert_array_equal(np.asarray(a), x)


# -- issue 16, fault 6 ------------------------------------------------------------------------
@pytest.mark.parametrize("op,call", [("astype", lambda x: mx.astype(x, None)),
                                     ("astype", lambda x: x.astype(None)),
                                     ("view", lambda x: mx.view(x, None)),
                                     ("view", lambda x: x.view(None))])
def test_dtype_none_is_a_type_error(op, call):
    with pytest.raises(TypeError, match=rf"^\[{op}\].*None"):  # MLX: a TypeError too
        call(mx.ones((2,)))


@pytest.mark.parametrize("axes", [(0, 0), [0, 0], (0, [0])])
def test_tensordot_axes_pair_of_ints_is_a_type_error(axes):
    x = mx.ones((2, 3))
    with pytest.raises(TypeError, match=r"^\[tensordot\] axes"):  # MLX: a TypeError too
        mx.tensordot(x, x, axes=axes)
    assert mx.tensordot(x, x, axes=([0], [0])).shape == (3, 3)  # sequences stay accepted


@pytest.mark.parametrize("shape,axis", [((0,), -1), ((2, 0), -1), ((0, 3), 0), ((0, 3), -1)])
def test_compiled_softmax_of_empty_array_is_empty(shape, axis):
    x = mx.zeros(shape)
    f = mx.compile(lambda x: mx.softmax(x, axis=axis))
    assert f(x).shape == mx.softmax(x, axis=axis).shape == shape
    mx.eval(f(x))


@pytest.mark.parametrize("data", [b"not a zip archive at all", b"", b"PK\x03\x04" + bytes(20)])
def test_corrupt_npz_is_not_a_valid_npz(tmp_path, data):
    path = tmp_path / "broken.npz"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=r"^\[load\] .*broken\.npz.* not a valid \.npz") as e:
        mx.load(str(path))
    assert "pickle" not in str(e.value)
    with open(path, "rb") as f, pytest.raises(ValueError, match=r"not a valid \.npz"):
        mx.load(f, format="npz")


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_with_damaged_entry_is_not_a_valid_npz(tmp_path, compressed):
    path = tmp_path / "damaged.npz"
    (np.savez_compressed if compressed else np.savez)(path, a=np.arange(1000))
    data = bytearray(path.read_bytes())
    data[100:110] = b"\xff" * 10  # inside the entry's data
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"^\[load\] .*damaged\.npz.* not a valid \.npz"):
        mx.load(str(path))


def test_npy_content_under_npz_name_is_not_a_valid_npz(tmp_path):
    path = tmp_path / "array.npz"
    with open(path, "wb") as f:
        np.save(f, np.arange(3))
    with pytest.raises(ValueError, match=r"not a valid \.npz"):
        mx.load(str(path))


def test_unavailable_backend_falls_back_to_cpu_with_a_warning(monkeypatch):
    pytest.importorskip("numba")
    from braze._src import config
    from braze._src.backends import base as B
    monkeypatch.setattr(B, "_WARNED", set())
    with config.override(backend="cuda"), pytest.warns(
            RuntimeWarning, match=r"^\[backend\] Backend 'cuda' is not available; using 'cpu'"):
        assert B.get().name == "cpu"
        f = mx.compile(lambda x: x * 2 + 1)
        assert f(mx.ones((3,))).tolist() == [3.0, 3.0, 3.0]
