"""Devices and streams: MLX's names, reprs, equality and errors (recorded from MLX 0.32 on a
machine without a GPU backend)."""
import pytest

import braze.core as mx
from braze._src import device as dev


@pytest.fixture(autouse=True)
def _restore_defaults():
    d = mx.default_device()
    s = mx.default_stream(mx.cpu)
    yield
    mx.set_default_device(d)
    mx.set_default_stream(s)


def test_device_types_and_reprs():
    assert mx.cpu is mx.DeviceType.cpu and mx.gpu is mx.DeviceType.gpu
    assert repr(mx.cpu) == "DeviceType.cpu" and str(mx.gpu) == "DeviceType.gpu"
    assert list(mx.DeviceType.__members__) == ["cpu", "gpu"]
    assert mx.DeviceType.cpu.value == 0
    d = mx.default_device()
    assert repr(d) == "Device(cpu, 0)" and str(d) == "Device(cpu, 0)"
    assert d.type is mx.cpu
    assert repr(mx.Device(mx.gpu)) == "Device(gpu, 0)"
    assert repr(mx.Device(mx.cpu, 1)) == "Device(cpu, 1)"


def test_device_equality_and_hash():
    assert mx.Device(mx.cpu) == mx.cpu
    assert mx.cpu == mx.Device(mx.cpu)
    assert mx.Device(mx.gpu) == mx.gpu
    assert mx.Device(mx.cpu) != mx.Device(mx.gpu)
    assert mx.Device(mx.cpu) != mx.Device(mx.cpu, 1)
    assert mx.Device(mx.cpu) != "cpu"
    assert hash(mx.Device(mx.cpu)) == hash(mx.cpu)
    assert len({mx.Device(mx.cpu), mx.cpu, mx.Device(mx.cpu, 1)}) == 2


def test_device_constructor_checks_types():
    with pytest.raises(TypeError):
        mx.Device("cpu")
    with pytest.raises(TypeError):
        mx.Device(mx.cpu, "0")


def test_availability_and_counts():
    assert mx.is_available(mx.cpu) and mx.is_available(mx.Device(mx.cpu))
    assert not mx.is_available(mx.gpu)
    assert mx.device_count(mx.cpu) == 1 and mx.device_count(mx.gpu) == 0
    with pytest.raises(TypeError):
        mx.is_available("cpu")


def test_default_device():
    assert mx.default_device() == mx.cpu
    mx.set_default_device(mx.cpu)
    mx.set_default_device(mx.Device(mx.cpu))
    assert mx.default_device() == mx.Device(mx.cpu)
    with pytest.raises(ValueError, match=r"\[set_default_device\] Cannot set gpu device "
                                         r"without gpu backend\."):
        mx.set_default_device(mx.gpu)
    assert mx.default_device() == mx.cpu


def test_streams():
    s0 = mx.default_stream(mx.cpu)
    assert repr(s0) == "Stream(Device(cpu, 0), 0)" and s0.device == mx.cpu
    assert mx.default_stream(mx.Device(mx.cpu)) == s0
    s1 = mx.new_stream(mx.cpu)
    s2 = mx.new_stream(mx.cpu)
    assert s1 != s0 and s1 != s2 and s1 == s1
    assert repr(s2).startswith("Stream(Device(cpu, 0), ")
    assert hash(s1) == hash(s1)
    with pytest.raises(ValueError, match=r"\[default_stream\] Cannot get gpu stream"):
        mx.default_stream(mx.gpu)
    with pytest.raises(ValueError, match=r"\[new_stream\] Cannot make gpu stream"):
        mx.new_stream(mx.gpu)


def test_set_default_stream_keeps_the_device():
    s0 = mx.default_stream(mx.cpu)
    s = mx.new_stream(mx.cpu)
    mx.set_default_stream(s)
    assert mx.default_stream(mx.cpu) == s
    assert mx.default_device() == mx.cpu
    mx.set_default_stream(s0)
    assert mx.default_stream(mx.cpu) == s0
    with pytest.raises(TypeError):
        mx.set_default_stream(mx.cpu)


def test_stream_context_manager():
    s0 = mx.default_stream(mx.cpu)
    s = mx.new_stream(mx.cpu)
    with mx.stream(s) as r:
        assert r is None
        assert mx.default_stream(mx.cpu) == s
        assert mx.default_device() == mx.cpu
    assert mx.default_stream(mx.cpu) == s0
    with mx.stream(mx.cpu):  # a device: its current default stream
        assert mx.default_stream(mx.cpu) == s0
    with mx.stream(mx.Device(mx.cpu)):
        assert mx.default_device() == mx.cpu
    assert isinstance(mx.stream(mx.cpu), mx.StreamContext)


def test_stream_context_restores_after_error():
    s0 = mx.default_stream(mx.cpu)
    with pytest.raises(RuntimeError):
        with mx.stream(mx.new_stream(mx.cpu)):
            raise RuntimeError("boom")
    assert mx.default_stream(mx.cpu) == s0


def test_stream_to_gpu_fails_on_enter():
    ctx = mx.stream(mx.gpu)  # naming the GPU is fine
    with pytest.raises(ValueError, match="Cannot get gpu stream without gpu backend"):
        with ctx:
            pass
    assert mx.default_device() == mx.cpu
    with pytest.raises(TypeError):
        mx.stream("cpu")


def test_synchronize_and_clear_streams():
    mx.synchronize()
    mx.synchronize(mx.default_stream(mx.cpu))
    mx.synchronize(mx.cpu)
    with pytest.raises(ValueError):
        mx.synchronize(mx.gpu)
    with pytest.raises(TypeError):
        mx.synchronize(3)
    s = mx.new_stream(mx.cpu)
    mx.set_default_stream(s)
    mx.clear_streams()
    assert mx.default_stream(mx.cpu) == mx.default_stream(mx.cpu)
    assert repr(mx.default_stream(mx.cpu)) == "Stream(Device(cpu, 0), 0)"
    assert mx.new_stream(mx.cpu) != s  # indices keep counting up


def test_device_info():
    info = mx.device_info()
    assert isinstance(info["architecture"], str) and isinstance(info["device_name"], str)
    assert mx.device_info(mx.cpu) == info
    assert mx.device_info(mx.gpu) == {}


def test_to_stream_for_ops():
    s0 = mx.default_stream(mx.cpu)
    assert dev.to_stream(None) == s0
    assert dev.to_stream(mx.cpu) == s0
    s = mx.new_stream(mx.cpu)
    assert dev.to_stream(s) is s
    with pytest.raises(ValueError, match=r"\[zeros\]"):
        dev.to_stream(mx.Stream(mx.Device(mx.gpu), 0), "zeros")
    with pytest.raises(TypeError, match=r"\[zeros\]"):
        dev.to_stream("cpu", "zeros")


def test_devices_live_mlx():
    mlx = pytest.importorskip("mlx.core")
    if mlx.is_available(mlx.gpu):
        pytest.skip("the recorded behaviour is MLX's without a GPU backend")
    assert repr(mx.default_device()) == repr(mlx.default_device())
    assert repr(mx.default_stream(mx.cpu)) == repr(mlx.default_stream(mlx.cpu))
    assert repr(mx.cpu) == repr(mlx.cpu) and repr(mx.Device(mx.gpu)) == repr(mlx.Device(mlx.gpu))
    assert mx.device_count(mx.gpu) == mlx.device_count(mlx.gpu)
    assert set(mx.device_info()) >= set(mlx.device_info())


# -- streams and threads ------------------------------------------------------------------------
def _in_thread(fn):
    import threading
    out = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as e:  # noqa: BLE001 - handed back to the test
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out


def test_new_stream_belongs_to_its_thread():
    s = mx.new_stream(mx.cpu)
    with mx.stream(s):
        assert (2 * mx.arange(3)).tolist() == [0, 2, 4]
    for use in (lambda: mx.stream(s).__enter__(), lambda: mx.synchronize(s),
                lambda: mx.set_default_stream(s)):
        err = _in_thread(use)["error"]
        assert isinstance(err, RuntimeError) and str(err).startswith("[")
    u = mx.new_thread_unsafe_stream(mx.cpu)
    assert "error" not in _in_thread(lambda: mx.synchronize(u))


def test_thread_local_stream():
    tls = mx.new_thread_local_stream(mx.cpu)
    assert repr(tls).startswith("ThreadLocalStream(Device(cpu, 0), ") and tls.device == mx.cpu
    assert tls == tls and tls != mx.new_thread_local_stream(mx.cpu)
    assert isinstance(tls, mx.ThreadLocalStream)

    def use():
        with mx.stream(tls):
            s = mx.default_stream(mx.cpu)
            assert (mx.arange(3) * 2).tolist() == [0, 2, 4]
        return s
    mine, theirs = use(), _in_thread(use)["value"]
    assert mine != theirs and mine == use()  # one stream per thread, the same on reuse
    assert dev.to_stream(tls) == mine
    mx.clear_streams()
    assert use() != mine  # clear_streams forgets this thread's streams
    with pytest.raises(ValueError, match=r"^\[new_thread_local_stream\]"):
        mx.new_thread_local_stream(mx.gpu)


def test_default_streams_are_per_thread():
    s = mx.new_stream(mx.cpu)
    mx.set_default_stream(s)
    assert _in_thread(lambda: mx.default_stream(mx.cpu))["value"] == mx.Stream(mx.cpu, 0)
    assert mx.default_stream(mx.cpu) == s


def test_async_eval_failure_surfaces_at_synchronize():
    a = mx.linalg.inv(mx.array([[1.0, 2.0], [2.0, 4.0]]), stream=mx.cpu)
    mx.async_eval(a)  # no error yet
    with pytest.raises(RuntimeError, match=r"^\[Inverse"):
        mx.synchronize(mx.cpu)
    mx.synchronize()  # reported once
    b = mx.array(1) + 1
    mx.async_eval(b)
    mx.synchronize()
    assert b.item() == 2
