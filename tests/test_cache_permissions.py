"""Issue 16, fault 3: the kernel cache writes only private files and directories (whatever the
umask, Numba's own `__pycache__` included), loads nothing others can write, and leaves a cache
root it refuses untouched."""
import json
import os
import stat
import subprocess
import sys

import pytest

pytest.importorskip("numba")

from braze._src import config  # noqa: E402
from braze._src.backends import kernel_cache as KC  # noqa: E402

# one kernel: built on a first run, loaded from the disk cache on a later one
SCRIPT = """
import json
import braze.core as mx
from braze._src.backends import kernel_cache as KC
mx.eval(mx.compile(lambda x: x * 2.0 + 1.0)(mx.ones((8,))))
print(json.dumps({"stats": KC.stats()}))
"""


def _run(root, umask=0o022):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(root), BRAZE_BACKEND="cpu")
    env.pop("BRAZE_DEBUG", None)
    env.pop("NUMBA_CACHE_DIR", None)
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300, preexec_fn=lambda: os.umask(umask))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])["stats"], p.stderr


def _assert_private(root):
    entries = list(root.rglob("*"))
    assert any(p.name.endswith(".nbi") for p in entries), entries
    for p in [root, *entries]:
        want = 0o700 if p.is_dir() else 0o600
        assert stat.S_IMODE(p.stat().st_mode) == want, (p, oct(p.stat().st_mode))


def test_private_under_umask_000_and_nothing_others_can_write_is_loaded(tmp_path):
    root = tmp_path / "cache"
    first, _ = _run(root, umask=0)
    assert first["builds"] == 1  # (test_kernel_cache: a later run loads an intact entry)
    _assert_private(root)
    for p in root.rglob("*.nbi"):  # Numba's index, made writable by others: rebuilt
        os.chmod(p, 0o666)
    again, _ = _run(root, umask=0)
    assert again["disk_loads"] == 0 and again["builds"] == 1
    _assert_private(root)
    for p in root.rglob("__pycache__"):  # Numba's directory: refused, compiled in memory
        os.chmod(p, 0o777)
    third, err = _run(root)
    assert third["disk_loads"] == 0 and third["builds"] == 1 and "Refusing" in err


def test_refused_root_is_left_untouched(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o777)
    with config.override(cache_dir=str(root)), pytest.warns(RuntimeWarning, match="Refusing"):
        assert KC.backend_dir("cpu") is None
    assert os.listdir(root) == []
