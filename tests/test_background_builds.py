"""Background kernel builds (BRAZE_BACKGROUND_BUILDS, backends/cpu/background.py): a launch
whose kernel is not built runs on the numpy reference while a builder process builds it into
the disk cache (a builder thread, without a usable disk cache); later launches load it and run
the native kernel; a kernel in the disk cache loads in the call; a failed background build is
redone in the call."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import braze.core as mx
from braze._src import config
from braze._src.backends.cpu import background, prebuild
from braze._src.compile.compiled import backend, programs

_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import braze.core as mx
    from braze._src.backends.cpu import background
    from braze._src.compile.compiled import programs
    f = mx.compile(lambda a, b: mx.exp(a * b) - a / 3)
    x, y = mx.arange(64, dtype=mx.float32) / 64, mx.ones((64,))
    first = np.array(f(x, y))
    deferred = not background.idle()
    assert background.wait(120)
    later = np.array(f(x, y))
    ir = f.lower(x, y).tape.nodes[0]._prim.ir
    print(json.dumps(dict(deferred=deferred, how=[p.how for p in programs(ir)],
                          close=bool(np.allclose(first, later, rtol=1e-6)))))
""")


def _run(cache_dir):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(cache_dir), BRAZE_BACKGROUND_BUILDS="1")
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    import json
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_kernel_builds_in_the_background_then_loads_from_disk(tmp_path):
    cold = _run(tmp_path)  # built by the builder process, then loaded here
    assert cold["deferred"] and cold["how"] == ["disk"] and cold["close"]
    warm = _run(tmp_path)  # the disk cache has it: loaded in the call, nothing deferred
    assert not warm["deferred"] and warm["how"] == ["disk"] and warm["close"]


_OPS = {1.2345: mx.sin, 1.75: mx.sinh, 2.5: mx.cos, 3.75: mx.arctan, 4.5: mx.exp}


_EXITS_AT_ONCE = textwrap.dedent("""
    import braze.core as mx
    f = mx.compile(lambda a, b: mx.exp(a * b) - a / 3)
    x, y = mx.arange(64, dtype=mx.float32) / 64, mx.ones((64,))  # held: nothing donated
    print(float(f(x, y).sum()))  # then exits while the kernel builds
""")


def test_a_program_that_exits_while_building_leaves_its_kernels_on_disk(tmp_path):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(tmp_path), BRAZE_BACKGROUND_BUILDS="1")
    out = subprocess.run([sys.executable, "-c", _EXITS_AT_ONCE], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    warm = _run(tmp_path)  # the kernel the first process queued was built before it exited
    assert not warm["deferred"] and warm["how"] == ["disk"]


_FORKS = textwrap.dedent("""
    import os, sys
    import braze.core as mx
    from braze._src.backends.cpu import background
    from braze._src.compile.compiled import programs
    f = mx.compile(lambda a: mx.tanh(a) * 2 - a)
    x = mx.arange(64, dtype=mx.float32)
    mx.eval(f(x))  # queued in the parent
    pid = os.fork()
    if pid == 0:  # the child builds its own, and its later calls run it
        mx.eval(f(x))
        ok = background.wait(120)
        mx.eval(f(x))
        ok = ok and programs(f.lower(x).tape.nodes[0]._prim.ir)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
""")


def test_a_forked_child_builds_its_own_kernels(tmp_path):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(tmp_path), BRAZE_BACKGROUND_BUILDS="1")
    out = subprocess.run([sys.executable, "-c", _FORKS], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def _fresh(c):
    """A compiled function whose region no other test builds (one op of its own each)."""
    op = _OPS[c]
    return mx.compile(lambda a: op(a) * c + a)


def _no_disk_cache(monkeypatch):
    """The disk cache refused (as for a read-only home): builds stay in this process."""
    monkeypatch.setattr(type(backend().compiler), "directory", lambda self: None)


@pytest.mark.parametrize("where", ["process", "thread"])
def test_the_first_launch_runs_on_the_reference_and_later_ones_natively(tmp_path, monkeypatch,
                                                                        where):
    x = mx.arange(100, dtype=mx.float32) / 7
    c = {"process": 1.2345, "thread": 1.75}[where]
    f = _fresh(c)
    if where == "thread":
        _no_disk_cache(monkeypatch)
    with config.override(background_builds=True, cache_dir=str(tmp_path)):
        with config.override(backend="numpy"):
            want = np.array(mx.compile(lambda a: _OPS[c](a) * c + a)(x))
        first = np.array(f(x))
        np.testing.assert_array_equal(first, want)  # the reference's bits exactly
        assert not background.idle()
        assert background.wait(120)
        got = np.array(f(x))
        ir = f.lower(x).tape.nodes[0]._prim.ir
        # the builder process's kernel is loaded from the disk cache; the thread's is in memory
        assert [p.how for p in programs(ir)] == [{"process": "disk", "thread": "built"}[where]]
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_builder_process_that_cannot_start_leaves_the_build_to_the_call(tmp_path,
                                                                          monkeypatch):
    x = mx.arange(40, dtype=mx.float32)
    f = _fresh(4.5)
    monkeypatch.setattr(prebuild, "WORKER", [sys.executable, "-c", "import sys; sys.exit(3)"])
    monkeypatch.setattr(background, "_workers", None)  # a new builder, from that command
    with config.override(background_builds=True, cache_dir=str(tmp_path)):
        first = np.array(f(x))  # on the reference while the builder fails to start
        assert background.wait(120)
        got = np.array(f(x))  # built in this call
        ir = f.lower(x).tape.nodes[0]._prim.ir
        assert [p.how for p in programs(ir)] == ["built"]
    want = np.exp(np.arange(40)) * 4.5 + np.arange(40)
    np.testing.assert_allclose(first, want, rtol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_failed_background_build_is_redone_in_the_call(tmp_path, monkeypatch):
    x = mx.arange(50, dtype=mx.float32)
    f = _fresh(2.5)
    _no_disk_cache(monkeypatch)  # the builder thread's build fails here
    be = backend()
    real = type(be)._build
    calls = []

    def flaky(self, ir, variant):
        calls.append(variant)
        if len(calls) == 1:
            raise OSError("disk full")
        return real(self, ir, variant)

    monkeypatch.setattr(type(be), "_build", flaky)
    with config.override(background_builds=True, cache_dir=str(tmp_path)):
        mx.eval(f(x))
        assert background.wait(120)
        got = np.array(f(x))  # built in this call after the background failure
    assert len(calls) == 2
    np.testing.assert_allclose(got, np.cos(np.arange(50)) * 2.5 + np.arange(50), rtol=1e-5,
                               atol=1e-5)


def test_compile_check_builds_in_the_call(tmp_path):
    x = mx.arange(30, dtype=mx.float32)
    f = _fresh(3.75)
    with config.override(background_builds=True, compile_check=True, cache_dir=str(tmp_path)):
        mx.eval(f(x))
        assert background.idle()
        ir = f.lower(x).tape.nodes[0]._prim.ir
        assert [p.how for p in programs(ir)] == ["built"]
