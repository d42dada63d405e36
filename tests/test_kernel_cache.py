"""The kernel cache: memory and disk, a second process builds nothing, safe directories,
corrupt entries rebuilt, atomic writes."""
import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

from braze._src import config  # noqa: E402
from braze._src.backends import kernel_cache as KC  # noqa: E402

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import braze.core as mx
    from braze._src import config
    from braze._src.backends import base as B
    from braze._src.backends import kernel_cache as KC
    if "cpu" not in B.registered():
        from braze._src.backends.cpu import CpuBackend
        B.register("cpu", CpuBackend)
    config.set(backend="cpu")
    f = mx.compile(lambda x, y: mx.exp(x) * y + 0.5)
    x = mx.array(np.linspace(-1, 1, 8, dtype=np.float32))
    r1 = f(x, x)                                        # contiguous
    r2 = f(x.reshape(2, 4), mx.array(np.ones(4, np.float32)))  # strided
    mx.eval(r1, r2)
    from braze._src.backends.cpu.lib import scalar
    scalar.prepare(["exp_f32"])  # (a process whose kernels all come from disk never needs it)
    st = scalar.MATH["exp_f32"].stats
    print(json.dumps({"stats": KC.stats(), "r": np.asarray(r1).tolist(),
                      "math": [sum(st.cache_hits.values()), sum(st.cache_misses.values())]}))
""")


def _run(tmp_path, env_extra=None):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(tmp_path / "cache"), BRAZE_BACKEND="cpu")
    env.pop("BRAZE_DEBUG", None)
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def test_second_process_builds_nothing(tmp_path):
    first, _ = _run(tmp_path)
    assert first["stats"]["builds"] == 2 and first["stats"]["disk_loads"] == 0
    second, _ = _run(tmp_path)
    assert second["stats"]["builds"] == 0 and second["stats"]["disk_loads"] == 2
    assert second["r"] == first["r"]
    # the math library's kernel copies come from Numba's own disk cache after the first process
    assert second["math"] == [1, 0]
    root = tmp_path / "cache"
    for d in [root] + [p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__"]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_corrupt_entry_is_rebuilt(tmp_path):
    first, _ = _run(tmp_path)
    files = [p for p in (tmp_path / "cache").rglob("*.nbc")]
    assert files
    for p in files:
        p.write_bytes(b"garbage" + p.read_bytes()[7:])
    again, _ = _run(tmp_path)
    assert again["stats"]["builds"] == 2 and again["stats"]["corrupt"] >= 1
    assert again["r"] == first["r"]
    third, _ = _run(tmp_path)
    assert third["stats"]["builds"] == 0


def test_loading_never_lists_the_cache_directory(tmp_path):
    """An entry loads from the files its manifest names: a directory listing per kernel cost
    milliseconds in a cache of thousands of kernels."""
    _run(tmp_path)
    deny = tmp_path / "sitecustomize.py"  # the second process fails on any glob
    deny.write_text("import glob\n"
                    "def _no(*a, **k):\n    raise AssertionError('glob while loading')\n"
                    "glob.glob = glob.iglob = _no\n")
    pp = os.pathsep.join([str(tmp_path)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    again, _ = _run(tmp_path, {"PYTHONPATH": pp})
    assert again["stats"]["builds"] == 0 and again["stats"]["disk_loads"] == 2


def test_an_entry_missing_a_listed_file_is_rebuilt(tmp_path):
    _run(tmp_path)
    for p in (tmp_path / "cache").rglob("*.nbc"):
        p.unlink()
    again, _ = _run(tmp_path)
    assert again["stats"]["builds"] == 2
    third, _ = _run(tmp_path)
    assert third["stats"]["builds"] == 0 and third["stats"]["disk_loads"] == 2


def test_tampered_source_is_rebuilt(tmp_path):
    _run(tmp_path)
    for p in (tmp_path / "cache").rglob("k_*.py"):
        p.write_text(p.read_text() + "\nraise SystemExit('tampered')\n")
    again, _ = _run(tmp_path)
    assert again["stats"]["builds"] == 2


def test_group_writable_directory_is_refused(tmp_path):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)
    res, err = _run(tmp_path)
    assert "Refusing" in err
    assert res["stats"]["builds"] == 2  # compiled in memory, still correct
    assert not list(root.rglob("k_*.py"))


def test_secure_dir_and_atomic_write(tmp_path):
    with config.override(cache_dir=str(tmp_path / "c")):
        d = KC.backend_dir("test")
        assert d is not None and stat.S_IMODE(os.stat(d).st_mode) == 0o700
        path = os.path.join(d, "x.txt")
        KC.atomic_write(path, "hello")
        assert open(path).read() == "hello"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert [n for n in os.listdir(d) if n.startswith(".tmp")] == []
        KC.write_manifest(path + ".json", "abc", [path])
        assert KC.check_manifest(path + ".json", "abc", d, ["x.txt"])
        assert not KC.check_manifest(path + ".json", "abd", d, ["x.txt"])
        KC.atomic_write(path, "hellO")
        assert not KC.check_manifest(path + ".json", "abc", d, ["x.txt"])


def test_in_process_memory_cache(tmp_path):
    import numpy as np

    import braze.core as mx
    from braze._src.backends import base as B
    from braze._src.backends.cpu import CpuBackend
    if "cpu" not in B.registered():
        B.register("cpu", CpuBackend)
    with config.override(backend="cpu", cache_dir=str(tmp_path / "c2")):
        f = mx.compile(lambda x: x * 3.0 - 0.25)
        before = KC.stats()["builds"]
        for n in (3, 5, 9):
            mx.eval(f(mx.array(np.ones(n, np.float32))))
        assert KC.stats()["builds"] - before <= 1
