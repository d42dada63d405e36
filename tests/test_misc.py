"""eval / async_eval of trees, export_to_dot, get_array_buffer_size, and the config knobs."""
import io
import re
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import braze.core as mx
from braze._src import config
from braze._src.prims.base import Primitive, bind
from braze._src.prims.core import AsType


def lazy(x, dtype=None):
    return bind(AsType(dtype or x.dtype), (x,))


@dataclass(frozen=True)
class _TwoOut(Primitive):  # leading underscore: not registered, so op-table tests ignore it
    def abstract_eval(self, x):
        return [(x.shape, x.dtype), (x.shape, x.dtype)]

    def eval_cpu(self, x):
        return [x.copy(), -x]


# -- eval -----------------------------------------------------------------------------------
def test_eval_arrays_and_trees():
    x = mx.array([1, 2])
    a, b, c, d = (lazy(x, mx.float32) for _ in range(4))
    e = lazy(x, mx.int64)
    mx.eval(a, [b, {"k": (c, 3)}], None, "s", {"d": d})
    assert all(t._data is not None for t in (a, b, c, d))
    assert e._data is None
    mx.eval({"e": [e]})
    assert e.tolist() == [1, 2]


def test_eval_ignores_non_array_leaves_and_empty():
    mx.eval()
    mx.eval(1, "x", None, object(), [2.0, {"a": None}])
    mx.async_eval()
    mx.async_eval(3)


def test_eval_rejects_keyword_arguments():
    with pytest.raises(TypeError):
        mx.eval(mx.array(1), key=3)


def test_async_eval_evaluates():
    y = lazy(mx.array([1.5]), mx.float16)
    mx.async_eval([y])
    assert y._data is not None and y.item() == 1.5


def test_eval_namedtuple_and_multi_output():
    from collections import namedtuple
    P = namedtuple("P", "u v")
    x = mx.array([1.0, 2.0])
    u, v = bind(_TwoOut(), (x,))
    mx.eval(P(u, 1))
    assert u.tolist() == [1.0, 2.0] and v._data is not None and v.tolist() == [-1.0, -2.0]


def test_eval_deep_chain():
    x = mx.array([1.0])
    y = x
    for i in range(5000):
        y = lazy(y, mx.float32 if i % 2 else mx.float64)
    mx.eval(y)
    assert y.item() == 1.0


# -- export_to_dot --------------------------------------------------------------------------
def _labels(text):
    return re.findall(r'label ="([^"]*)"', text)


def test_export_to_dot_one_label_per_primitive(tmp_path):
    x = mx.array([1, 2])
    y = lazy(x, mx.float32)
    z = lazy(y, mx.float16)
    u, v = bind(_TwoOut(), (z,))
    path = tmp_path / "g.dot"
    mx.export_to_dot(str(path), u, v)
    text = path.read_text()
    assert text.startswith("digraph {") and text.rstrip().endswith("}")
    prim_labels = [lab for lab in _labels(text) if lab in ("AsType", "_TwoOut")]
    assert sorted(prim_labels) == ["AsType", "AsType", "_TwoOut"]
    assert u._data is None  # exporting does not evaluate


def test_export_to_dot_file_object_trees_and_names(tmp_path):
    x = mx.array([1.0])
    y = lazy(x, mx.float16)
    out = {"a": [y], "b": (lazy(y, mx.float32),)}
    f = io.StringIO()
    mx.export_to_dot(f, out, x=x)
    text = f.getvalue()
    assert _labels(text).count("AsType") == 2
    assert '"x"' in text  # MLX's format: named arrays are quoted node names
    mx.export_to_dot(tmp_path / "p.dot", y)  # a PathLike works too
    assert "AsType" in (tmp_path / "p.dot").read_text()


def test_export_to_dot_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"\[export_to_dot\]"):
        mx.export_to_dot(str(tmp_path / "g.dot"), mx.array(1), 3)
    with pytest.raises(ValueError, match=r"\[export_to_dot\]"):
        mx.export_to_dot(str(tmp_path / "g.dot"), mx.array(1), x=3)
    with pytest.raises(TypeError, match=r"\[export_to_dot\]"):
        mx.export_to_dot(42, mx.array(1))


# -- get_array_buffer_size ------------------------------------------------------------------
def test_get_array_buffer_size():
    a = mx.array(np.ones(1000, np.float32))
    b = lazy(a, mx.float64)
    with pytest.raises(ValueError, match="must be evaluated"):
        mx.get_array_buffer_size(b)
    mx.eval(b)
    assert mx.get_array_buffer_size(a, [b, 3], {"x": a}) == 4000 + 8000
    assert mx.get_array_buffer_size() == 0
    assert mx.get_array_buffer_size(mx.array(1.0)) == 4


# -- config ---------------------------------------------------------------------------------
def test_config_defaults_from_empty_environment():
    c = config.from_env({})
    assert c.debug == 0 and c.dump_dir is None and c.disable_compile is False
    assert c.compile_mode == "" and c.backend == "cpu" and c.checks is False
    assert c.num_threads == 0 and c.cache_dir.endswith("braze")


def test_config_reads_every_variable():
    env = {"BRAZE_DEBUG": "3", "BRAZE_DUMP_DIR": "/tmp/d", "BRAZE_DISABLE_COMPILE": "1",
           "BRAZE_COMPILE_MODE": "no_fuse", "BRAZE_BACKEND": "NumPy",
           "BRAZE_CACHE_DIR": "/tmp/c", "BRAZE_CHECKS": "true", "BRAZE_NUM_THREADS": "4"}
    c = config.from_env(env)
    assert (c.debug, c.dump_dir, c.disable_compile, c.compile_mode, c.backend, c.cache_dir,
            c.checks, c.num_threads) == (3, "/tmp/d", True, "no_fuse", "numpy", "/tmp/c", True, 4)


def test_config_mlx_disable_compile_presence():
    assert config.from_env({"MLX_DISABLE_COMPILE": ""}).disable_compile is True
    assert config.from_env({"MLX_DISABLE_COMPILE": "0"}).disable_compile is True
    assert config.from_env({"BRAZE_DISABLE_COMPILE": "0"}).disable_compile is False


def test_config_bad_environment_warns_and_keeps_default():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        c = config.from_env({"BRAZE_DEBUG": "lots", "BRAZE_BACKEND": "tpu",
                             "BRAZE_CHECKS": "maybe", "BRAZE_COMPILE_MODE": "fast"})
    assert (c.debug, c.backend, c.checks, c.compile_mode) == (0, "cpu", False, "")
    assert len(w) == 4 and all("BRAZE_" in str(x.message) for x in w)


def test_config_override_and_set():
    before = (config.get().debug, config.get().backend)
    with config.override(debug=2, backend="numpy") as c:
        assert c.debug == 2 and config.debug() == 2 and config.get().backend == "numpy"
    assert (config.debug(), config.get().backend) == before
    with pytest.raises(RuntimeError):
        with config.override(disable_compile=True):
            assert config.compile_disabled()
            raise RuntimeError
    assert config.get().disable_compile is config.from_env().disable_compile
    saved = config.get().num_threads
    try:
        config.set(num_threads=3)
        assert config.get().num_threads == 3
    finally:
        config.set(num_threads=saved)


@pytest.mark.parametrize("knobs,exc", [({"debug": -1}, ValueError), ({"debug": "2"}, ValueError),
                                        ({"backend": "tpu"}, ValueError),
                                        ({"compile_mode": "fast"}, ValueError),
                                        ({"checks": 1}, TypeError), ({"nope": 1}, TypeError)])
def test_config_set_validates(knobs, exc):
    snapshot = repr(config.get())
    with pytest.raises(exc):
        config.set(**knobs)
    assert repr(config.get()) == snapshot


def test_config_reload(monkeypatch):
    snapshot = repr(config.get())
    try:
        monkeypatch.setenv("BRAZE_DEBUG", "4")
        assert config.reload().debug == 4
    finally:
        monkeypatch.undo()
        config.reload()
    assert repr(config.get()) == snapshot


# -- issue 13 ----------------------------------------------------------------------------------
def test_depends_forms_and_errors():
    a, b = mx.array([1.0, 2.0]), mx.array([3.0])
    assert mx.depends(a, b).tolist() == [1.0, 2.0]
    out = mx.depends([a, b], [mx.exp(b)])
    assert isinstance(out, list) and [o.tolist() for o in out] == [[1.0, 2.0], [3.0]]
    with pytest.raises(TypeError, match=r"^\[depends\]"):
        mx.depends([1.0], [b])
