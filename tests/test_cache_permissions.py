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

from test_kernel_cache import SCRIPT  # noqa: E402

from braze._src import config  # noqa: E402
from braze._src.backends import kernel_cache as KC  # noqa: E402


def _run(root, umask=0o022):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(root), BRAZE_BACKEND="cpu")
    env.pop("BRAZE_DEBUG", None)
    env.pop("NUMBA_CACHE_DIR", None)
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300, preexec_fn=lambda: os.umask(umask))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])["stats"], p.stderr


def _modes(root):
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*")}


def test_umask_000_writes_only_private_entries(tmp_path):
    root = tmp_path / "cache"
    _run(root, umask=0)
    modes = _modes(root)
    assert any(name.endswith(".nbi") for name in modes), modes
    for p in root.rglob("*"):
        want = 0o700 if p.is_dir() else 0o600
        assert stat.S_IMODE(p.stat().st_mode) == want, (p, oct(p.stat().st_mode))
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


@pytest.mark.parametrize("target", ["__pycache__", "*.nbi"])
def test_entries_others_can_write_are_not_loaded(tmp_path, target):
    root = tmp_path / "cache"
    _run(root)
    for p in root.rglob(target):
        os.chmod(p, 0o777 if p.is_dir() else 0o666)
    again, err = _run(root)  # (test_kernel_cache shows that untouched entries are loaded)
    assert again["disk_loads"] == 0 and again["builds"] == 2
    if target == "__pycache__":
        assert "Refusing" in err


def test_refused_root_is_left_untouched(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o777)
    with config.override(cache_dir=str(root)), pytest.warns(RuntimeWarning, match="Refusing"):
        assert KC.backend_dir("cpu") is None
    assert os.listdir(root) == []
