"""`mx.metal`, `mx.cuda` and `mx.__version__` as MLX has them on a machine without Metal or
CUDA (MLX on Linux; recorded from MLX 0.32.4 and compared with it where installed)."""
import os

import pytest

import braze.core as mx
from braze._src import metal as _metal

METAL_NAMES = ["clear_cache", "device_info", "get_active_memory", "get_cache_memory",
               "get_peak_memory", "is_available", "reset_peak_memory", "set_cache_limit",
               "set_memory_limit", "set_wired_limit", "start_capture", "stop_capture"]


def _public(ns):
    return sorted(n for n in dir(ns) if not n.startswith("_"))


def test_namespaces_and_availability():
    assert _public(mx.metal) == METAL_NAMES
    assert _public(mx.cuda) == ["is_available"]
    assert mx.metal.is_available() is False and mx.cuda.is_available() is False
    assert not mx.is_available(mx.gpu)
    import braze.core.cuda
    import braze.core.metal
    assert braze.core.metal is mx.metal and braze.core.cuda is mx.cuda


@pytest.fixture
def _fresh_warnings(monkeypatch):
    monkeypatch.setattr(_metal, "_warned", set())  # each test sees the first-call messages
    limit = mx.get_memory_limit()
    yield
    mx.set_memory_limit(limit)


def test_memory_functions_are_deprecated_aliases(capfd, _fresh_warnings):
    a = mx.ones((256,))
    mx.eval(a)
    assert mx.metal.get_active_memory() == mx.get_active_memory()
    assert mx.metal.get_peak_memory() == mx.get_peak_memory()
    assert mx.metal.get_cache_memory() == mx.get_cache_memory()
    assert mx.metal.reset_peak_memory() is None
    assert mx.metal.clear_cache() is None
    prev = mx.get_memory_limit()
    assert mx.metal.set_memory_limit(1 << 30) == prev
    assert mx.get_memory_limit() == 1 << 30
    assert mx.metal.set_memory_limit(prev) == 1 << 30
    before = mx.set_cache_limit(1 << 20)
    assert mx.metal.set_cache_limit(before) == 1 << 20
    assert mx.metal.set_wired_limit(0) == 0
    err = capfd.readouterr().err
    for name in ["get_active_memory", "get_peak_memory", "get_cache_memory",
                 "reset_peak_memory", "clear_cache", "set_memory_limit", "set_cache_limit",
                 "set_wired_limit"]:
        line = (f"mx.metal.{name} is deprecated and will be removed in a future version. "
                f"Use mx.{name} instead.")
        assert err.count(line) == 1, name  # once per function, however often it is called


def test_device_info_and_capture_without_metal(capfd, tmp_path, _fresh_warnings):
    assert mx.metal.device_info() == {}  # the Metal device's info; mx.device_info() is the CPU
    assert "mx.metal.device_info is deprecated" in capfd.readouterr().err
    path = str(tmp_path / "trace.gputrace")
    assert mx.metal.start_capture(path) is None
    assert mx.metal.stop_capture() is None
    assert not os.path.exists(path)
    with pytest.raises(TypeError):
        mx.metal.start_capture(3)
    with pytest.raises(TypeError):
        mx.metal.set_memory_limit()


def test_version():
    import braze
    v = mx.__version__
    assert v == braze.__version__
    parts = v.split(".")
    assert len(parts) >= 3 and all(p.isdigit() for p in parts[:3])


def test_matches_mlx():
    mlx = pytest.importorskip("mlx.core")
    if mlx.metal.is_available() or mlx.cuda.is_available():
        pytest.skip("MLX here has a GPU backend")
    assert _public(mlx.metal) == _public(mx.metal)
    assert _public(mlx.cuda) == _public(mx.cuda)
    for name in ("is_available", "device_info", "start_capture", "stop_capture"):
        args = ("x.gputrace",) if name == "start_capture" else ()
        assert getattr(mx.metal, name)(*args) == getattr(mlx.metal, name)(*args), name
    assert mx.cuda.is_available() == mlx.cuda.is_available()
    assert mx.metal.set_wired_limit(0) == mlx.metal.set_wired_limit(0) == 0
    assert type(mx.metal.get_active_memory()) is type(mlx.metal.get_active_memory()) is int
