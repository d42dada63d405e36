"""The kernel cache shared by native backends: in memory by key, on disk under
`${BRAZE_CACHE_DIR:-~/.cache/braze}/<braze version>/<backend>/`.

Disk rules (the cache loads and runs code, so it trusts only what this user wrote):

* every directory level braze creates is made with mode 0700 (Numba's cache directory for the
  kernels too), whatever the umask; a directory that is not owned by this user or that
  group/others can write to is refused before anything is created inside it (the disk cache
  is then off, with one warning): code loaded from there runs in this process. Directories are
  checked again before each kernel build, so one made writable later is refused from then on;
* files are written atomically (a temporary file in the same directory, then `os.replace`)
  with mode 0600; Numba's files are made 0600 after it writes them, and an entry with a file
  that is not `private_file` is rebuilt, never loaded;
* entries are keyed by a hash of the kernel source and the backend identity (braze, Numba and
  LLVM versions, the CPU), and checked before use: a backend stores a manifest with the SHA-256
  of every file of an entry and never loads an entry whose files do not match it (a corrupt or
  foreign entry is deleted and rebuilt).

`stats()` counts what happened in this process: kernels built (compiled), loaded from disk,
and corrupt entries rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import threading
import warnings

from .. import config

_LOCK = threading.RLock()
_WARNED: set = set()


class Stats:
    """Per-process counters (tests read them; `reset()` zeroes them)."""

    builds = 0
    disk_loads = 0
    corrupt = 0
    build_seconds = 0.0

    @classmethod
    def as_dict(cls) -> dict:
        return {"builds": cls.builds, "disk_loads": cls.disk_loads, "corrupt": cls.corrupt,
                "build_seconds": cls.build_seconds}

    @classmethod
    def reset(cls) -> None:
        cls.builds = cls.disk_loads = cls.corrupt = 0
        cls.build_seconds = 0.0


def stats() -> dict:
    return Stats.as_dict()


def _version() -> str:
    from braze import __version__
    return __version__


def sha256(data) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()


def _warn_once(msg: str) -> None:
    if msg not in _WARNED:
        _WARNED.add(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _private(path: str, stat_fn, is_kind) -> bool:
    """`path` (as `stat_fn` sees it) is of kind `is_kind`, ours, and not writable by group or
    others."""
    try:
        st = stat_fn(path)
    except OSError:
        return False
    if not is_kind(st.st_mode):
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    return not (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _safe(path: str) -> bool:
    """A directory we may load code from: ours (a symlink is followed to what it names) and
    not writable by group or others."""
    return _private(path, os.stat, stat.S_ISDIR)


def private_file(path: str) -> bool:
    """A file we may load: a regular file of this user that group and others cannot write."""
    return _private(path, os.lstat, stat.S_ISREG)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _checked(path: str, root: str) -> bool:
    """Whether `path` and each level above it up to `root` are `_safe` (a warning once
    names the first that is not)."""
    p = path
    while True:
        if not _safe(p):
            _warn_once(f"[kernel cache] Refusing {p!r}: it must be a directory owned by this "
                       "user and not writable by group or others (chmod 700 it); the disk "
                       "cache is off.")
            return False
        if p == root or not _inside(os.path.dirname(p), root):
            return True
        p = os.path.dirname(p)


def _make_private(path: str, existing: str) -> None:
    """Create the levels of `path` below `existing`, each with mode 0700."""
    missing = []
    p = path
    while p != existing:
        missing.append(p)
        p = os.path.dirname(p)
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            continue
        os.chmod(p, 0o700)  # a umask stricter than 077 would leave it unusable


def secure_dir(path: str) -> str | None:
    """Create `path` (and missing parents) with mode 0700 and check it and its parents up to
    the cache root; None (and a warning once) if it cannot be used safely."""
    path = os.path.abspath(path)
    root = os.path.abspath(config.get().cache_dir)
    existing = path
    while not os.path.isdir(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    # what exists is checked first, so that nothing is created inside a refused directory
    if _inside(existing, root) and not _checked(existing, root):
        return None
    try:
        _make_private(path, existing)
    except OSError as e:
        _warn_once(f"[kernel cache] Cannot create {path!r} ({e}); the disk cache is off.")
        return None
    return path if _checked(path, root) else None


def backend_dir(backend: str) -> str | None:
    """`<cache_dir>/<braze version>/<backend>`, created and checked; None if unusable."""
    return secure_dir(os.path.join(config.get().cache_dir, _version(), backend))


def atomic_write(path: str, data) -> None:
    """Write `data` (str or bytes) to `path` atomically (temp file + os.replace), mode 0600."""
    if isinstance(data, str):
        data = data.encode()
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=os.path.basename(path)[-16:])
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def write_manifest(path: str, source_hash: str, files) -> None:
    """Record the SHA-256 of each file in `files` (paths) next to an entry."""
    entry = {"source": source_hash, "files": {}}
    for fp in files:
        data = read_bytes(fp)
        if data is not None:
            entry["files"][os.path.basename(fp)] = sha256(data)
    atomic_write(path, json.dumps(entry, sort_keys=True))


def manifest_files(path: str) -> list:
    """The file names a manifest lists ([] if it is missing or malformed)."""
    raw = read_bytes(path)
    try:
        files = json.loads(raw)["files"] if raw is not None else {}
        return [os.path.basename(n) for n in files] if isinstance(files, dict) else []
    except (ValueError, KeyError, TypeError):
        return []


def check_manifest(path: str, source_hash: str, directory: str, present) -> bool:
    """True iff the manifest at `path` exists, names `source_hash`, lists at least one file,
    and every listed file in `directory` exists with its recorded hash, and no file in
    `present` (basenames) is missing from it."""
    raw = read_bytes(path)
    if raw is None:
        return False
    try:
        entry = json.loads(raw)
        files = entry["files"]
        if entry["source"] != source_hash or not files or not isinstance(files, dict):
            return False
    except (ValueError, KeyError, TypeError):
        return False
    for name in present:
        if name not in files:
            return False
    for name, h in files.items():
        data = read_bytes(os.path.join(directory, os.path.basename(name)))
        if data is None or sha256(data) != h:
            return False
    return True

