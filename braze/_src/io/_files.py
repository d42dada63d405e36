"""What every format shares: file arguments (a path or an open binary file, as MLX accepts),
array <-> NumPy conversion, lazy reads through the `Load` primitive, and atomic writes."""
from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np

from .. import dtypes as D
from ..array import array
from ..prims.base import bind
from ..prims.io import Load


def is_reader(file) -> bool:
    return hasattr(file, "read") and hasattr(file, "seek")


def is_writer(file) -> bool:
    return hasattr(file, "write") and not isinstance(file, (str, bytes, os.PathLike))


def path_of(file, op: str) -> str:
    """A file argument as a path string; TypeError naming the op otherwise."""
    try:
        return os.fspath(file)
    except TypeError:
        raise TypeError(f"[{op}] Expected a file path (str or os.PathLike) or an open binary "
                        f"file, got {type(file).__name__}.") from None


def name_of(file, op: str) -> str:
    """The name a format is inferred from: the path, or an open file's `name`."""
    if is_reader(file):
        name = getattr(file, "name", None)
        if not isinstance(name, (str, os.PathLike)):
            raise ValueError(f"[{op}] Cannot infer the file format of an open file without a "
                             "name; pass format=.")
        return os.fspath(name)
    return path_of(file, op)


def with_suffix(path: str, suffix: str) -> str:
    return path if path.endswith(suffix) else path + suffix


@contextlib.contextmanager
def open_for_write(file, op: str, suffix: str):
    """Yield a binary file to write: the caller's open file, or a temporary file next to the
    path that replaces it only once complete (Ctrl-C or a full disk never leaves half a file
    under the real name; several processes saving the same name never mix their bytes)."""
    if is_writer(file):
        yield file
        return
    path = with_suffix(path_of(file, op), suffix)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def to_numpy(a, name, op) -> np.ndarray:
    """An array argument as a C-ordered NumPy array (0-d stays 0-d)."""
    if isinstance(a, array):
        out = np.asarray(a)
    elif isinstance(a, np.ndarray):
        out = a
    else:
        raise TypeError(f"[{op}] Expected an array for {name!r}, got {type(a).__name__}.")
    return np.asarray(out, order="C")


def from_numpy(x: np.ndarray) -> array:
    # mx.array reads float64 NumPy data as float32 (MLX's rule); a file's dtype is kept
    return array(x, dtype=D.float64) if x.dtype == np.float64 else array(x)


def file_dtype(npd: np.dtype, op: str, what: str) -> D.Dtype:
    """The braze dtype of data stored as `npd` (either byte order); ValueError if none."""
    native = npd.newbyteorder("=") if npd.byteorder in "<>" else npd
    if native == np.dtype("V2"):
        return D.bfloat16  # how MLX stores bfloat16 in .npy/.npz
    try:
        return D.from_numpy(native)
    except TypeError:
        raise ValueError(f"[{op}] {what}: unsupported dtype {npd.str!r}.") from None


def lazy_read(path: str, offset: int, shape: tuple, dtype: D.Dtype, swap=False) -> array:
    """An array whose data is read from `path` when it is evaluated (MLX's lazy load)."""
    return bind(Load(os.path.abspath(path), int(offset), tuple(int(s) for s in shape), dtype,
                     bool(swap)), ())
