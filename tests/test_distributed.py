"""mx.distributed in one process: the single-process group (MLX's singleton semantics), the
backend interface (exercised with a fake two-rank backend) and average_gradients. The real
multi-process cases are tests/test_distributed_mpi.py."""
import numpy as np
import pytest

import braze.core as mx
import braze.nn as nn
from braze._src import distributed as D
from braze.utils import tree_flatten


@pytest.fixture
def clean_distributed(monkeypatch):
    """Isolate the global group and the backend registry."""
    monkeypatch.setattr(D, "_GLOBAL", None)
    monkeypatch.setattr(D, "_FACTORIES", {})
    yield


def test_namespace_has_mlx_names():
    for name in ["Group", "init", "is_available", "all_sum", "all_max", "all_min",
                 "all_gather", "sum_scatter", "send", "recv", "recv_like"]:
        assert hasattr(mx.distributed, name), name


def test_init_singleton(clean_distributed):
    g = mx.distributed.init()
    assert isinstance(g, mx.distributed.Group)
    assert g.rank() == 0 and g.size() == 1
    assert mx.distributed.init() is g
    assert mx.distributed.init(strict=False, backend="ring").size() == 1
    assert "size=1" in repr(g)
    assert mx.distributed.is_available() is False
    assert mx.distributed.is_available("mpi") is False


def test_init_strict_and_bad_backend(clean_distributed):
    with pytest.raises(RuntimeError, match="Couldn't initialize any backend"):
        mx.distributed.init(strict=True)
    with pytest.raises(ValueError, match="valid values for backend"):
        mx.distributed.init(backend="carrier-pigeon")
    with pytest.raises(ValueError, match="valid values for backend"):
        mx.distributed.is_available("carrier-pigeon")


def test_group_has_no_constructor_and_cannot_split():
    with pytest.raises(TypeError, match="no constructor"):
        mx.distributed.Group()
    g = mx.distributed.init()
    with pytest.raises(RuntimeError, match="Cannot split"):
        g.split(0)
    with pytest.raises(TypeError, match="color"):
        g.split("red")


@pytest.mark.parametrize("op", ["all_sum", "all_max", "all_min", "all_gather", "sum_scatter"])
def test_collectives_are_identity(op):
    fn = getattr(mx.distributed, op)
    x = mx.arange(6, dtype=mx.float32).reshape(2, 3)
    for kwargs in ({}, {"group": mx.distributed.init()}, {"stream": mx.cpu}):
        y = fn(x, **kwargs)
        assert y.shape == (2, 3) and y.dtype == mx.float32
        np.testing.assert_array_equal(np.array(y), np.array(x))
    s = fn(mx.array(3, mx.int32))
    assert s.shape == () and s.dtype == mx.int32 and s.item() == 3
    assert fn(2.5).item() == 2.5  # scalars are converted, as MLX
    with pytest.raises(TypeError, match="group"):
        fn(x, group="world")


def test_collectives_inside_grad_and_compile():
    def f(x):
        return mx.sum(mx.distributed.all_sum(x * x))

    x = mx.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(np.array(mx.grad(f)(x)), [2.0, -4.0, 6.0])
    np.testing.assert_allclose(mx.compile(f)(x).item(), 14.0)


def test_send_recv_on_singleton_are_errors():
    x = mx.ones((2,))
    with pytest.raises(ValueError, match="Cannot send to a singleton group"):
        mx.distributed.send(x, 0)
    with pytest.raises(ValueError, match="Cannot recv from a singleton group"):
        mx.distributed.recv((2,), mx.float32, 0)
    with pytest.raises(ValueError, match="Cannot recv from a singleton group"):
        mx.distributed.recv_like(x, 0)
    with pytest.raises(TypeError, match="dst"):
        mx.distributed.send(x, "0")
    with pytest.raises(TypeError, match="dtype"):
        mx.distributed.recv((2,), "float32", 0)


def test_average_gradients_singleton_returns_input():
    grads = {"w": mx.ones((2, 2)), "b": [mx.zeros((3,))]}
    assert nn.average_gradients(grads) is grads


# -- the backend interface, with a fake two-rank backend --------------------------------------
class TwoRankEcho(D.Backend):
    """Pretends to be rank 0 of 2 whose peer holds the same arrays: all_sum doubles, all_gather
    stacks two copies. Records the calls so bucketing can be checked."""

    name = "echo"

    def __init__(self):
        self.calls = []

    def rank(self):
        return 0

    def size(self):
        return 2

    def split(self, color, key):
        return D.SingletonBackend()

    def all_reduce(self, x, out, reduce_type):
        self.calls.append(("all_" + reduce_type, x.shape, x.dtype))
        out[...] = x * 2 if reduce_type == "sum" else x

    def all_gather(self, x):
        return np.stack([x, x])

    def sum_scatter(self, x):
        return (x * 2)[:x.shape[0] // 2]

    def send(self, x, dst):
        self.calls.append(("send", dst))

    def recv(self, shape, dtype, src):
        self.calls.append(("recv", src))
        return np.ones(shape, dtype)


def test_registered_backend_is_used(clean_distributed):
    be = TwoRankEcho()
    D.register_backend("echo", lambda: be)
    assert mx.distributed.is_available() and mx.distributed.is_available("echo")
    g = mx.distributed.init(strict=True)
    assert g.size() == 2 and mx.distributed.init() is g
    np.testing.assert_array_equal(np.array(mx.distributed.all_sum(mx.ones((2,)))), [2, 2])
    assert mx.distributed.all_gather(mx.ones((2, 3))).shape == (4, 3)
    assert mx.distributed.all_gather(mx.array(1.0)).shape == (2,)
    np.testing.assert_array_equal(np.array(mx.distributed.sum_scatter(mx.ones((4,)))), [2, 2])
    mx.eval(mx.distributed.send(mx.ones((1,)), 1))
    assert be.calls[-1] == ("send", 1)
    with pytest.raises(ValueError, match=r"\[send\] Invalid dst=2"):
        mx.distributed.send(mx.ones((1,)), 2)
    assert mx.distributed.recv_like(mx.ones((2, 2), mx.int32), 1).dtype == mx.int32
    with pytest.raises(ValueError, match=r"\[sum_scatter\] Invalid shape"):
        mx.distributed.sum_scatter(mx.ones((3,)))
    assert g.split(1).size() == 1


def test_collectives_are_lazy_and_opaque_when_compiled(clean_distributed):
    be = TwoRankEcho()
    D.register_backend("echo", lambda: be)
    mx.distributed.init(strict=True)
    y = mx.distributed.all_sum(mx.ones((3,)))
    assert not be.calls  # nothing runs before mx.eval
    mx.eval(y)
    assert len(be.calls) == 1
    f = mx.compile(lambda x: mx.exp(mx.distributed.all_sum(mx.exp(x) + 1)) * 2)
    np.testing.assert_allclose(np.array(f(mx.zeros((3,)))), 2 * np.exp([4.0] * 3), rtol=1e-6)
    assert len(be.calls) == 2
    f = mx.compile(lambda: mx.distributed.recv((2,), mx.float32, 1)
                   + mx.distributed.recv((2,), mx.float32, 1))
    np.testing.assert_array_equal(np.array(f()), [2, 2])
    assert be.calls[-2:] == [("recv", 1)] * 2  # two messages: CSE never merges them


def test_failing_backend_falls_back_or_raises(clean_distributed):
    def broken():
        raise RuntimeError("no peers")

    D.register_backend("broken", broken)
    assert mx.distributed.init().size() == 1
    with pytest.raises(RuntimeError, match="no peers"):
        mx.distributed.init(strict=True)
    with pytest.raises(ValueError, match="reserved"):
        D.register_backend("any", broken)


def test_mpi_needs_a_launcher(monkeypatch):
    for var in D._LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(D, "_GLOBAL", None)
    with pytest.raises(RuntimeError, match="not started by mpirun"):
        mx.distributed.init(strict=True, backend="mpi")
    assert mx.distributed.init(backend="mpi").size() == 1


def test_warns_when_launched_but_no_backend_starts(clean_distributed, monkeypatch):
    monkeypatch.setenv("PMI_SIZE", "2")
    D.register_backend("broken", lambda: (_ for _ in ()).throw(RuntimeError("no mpi4py")))
    with pytest.warns(RuntimeWarning, match="one of 2 started by mpirun.*no mpi4py"):
        assert mx.distributed.init().size() == 1


def test_all_gather_factory_is_jaccl_only():
    with pytest.raises(ValueError, match="jaccl"):
        mx.distributed.init(backend="ring", all_gather_factory=lambda r, n: None)
    with pytest.raises(TypeError, match="callable"):
        mx.distributed.init(backend="jaccl", all_gather_factory="not callable")


@pytest.mark.parametrize("all_reduce_size", [0, 8, 1 << 20])
def test_average_gradients_two_ranks(clean_distributed, all_reduce_size):
    be = TwoRankEcho()
    D.register_backend("echo", lambda: be)
    rng = np.random.default_rng(0)
    grads = {"w": mx.array(rng.standard_normal((3, 4)).astype(np.float32)),
             "layers": [{"b": mx.array(rng.standard_normal(5).astype(np.float32))},
                        {"b": mx.array(rng.standard_normal(2).astype(np.float32))}]}
    avg = nn.average_gradients(grads, all_reduce_size=all_reduce_size)
    got, want = tree_flatten(avg), tree_flatten(grads)
    assert [k for k, _ in got] == [k for k, _ in want]
    for (k, a), (_, b) in zip(got, want):
        assert a.shape == b.shape, k
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-6, err_msg=k)
    n_calls = len([c for c in be.calls if c[0] == "all_sum"])
    assert n_calls == {0: 3, 8: 3, 1 << 20: 1}[all_reduce_size]


def test_average_gradients_mixed_dtypes(clean_distributed):
    be = TwoRankEcho()
    D.register_backend("echo", lambda: be)
    grads = {"a": mx.ones((2,), mx.float16), "b": mx.ones((3,), mx.float32)}
    avg = nn.average_gradients(grads)
    assert avg["a"].dtype == mx.float16 and avg["b"].dtype == mx.float32
    mx.eval(avg)
    assert len(be.calls) == 2  # no concatenation across dtypes
