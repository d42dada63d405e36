"""`.npy` files (NumPy's format, versions 1 and 2), as MLX's `mx.save` / `mx.load` handle them.

bfloat16, which NumPy has no descriptor for, is stored as the 2-byte void type `<V2` (as MLX
does) and read back as bfloat16. Loading a path is lazy (`_files.lazy_read`).
"""
from __future__ import annotations

import os
from typing import BinaryIO, Union

import numpy as np

from .. import dtypes as D
from ..ops._typing import ArrayLike
from ..ops.shape import transpose
from ._files import file_dtype, from_numpy, lazy_read, open_for_write, to_numpy


def save(file: Union[str, os.PathLike, BinaryIO], a: ArrayLike) -> None:
    """Write one array to a `.npy` file (".npy" is appended to a path without it)."""
    x = to_numpy(a, "a", "save")
    if D.is_bf16(x.dtype):
        x = x.view(np.dtype("V2"))
    with open_for_write(file, "save", ".npy") as f:
        np.lib.format.write_array(f, x, allow_pickle=False)


def _read_header(f, where):
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(f)
        if version in ((2, 0), (3, 0)):
            return np.lib.format.read_array_header_2_0(f)
        raise ValueError(f"version {version}")
    except ValueError as e:
        raise ValueError(f"[load] Invalid .npy header in {where} ({e}).") from None


def load_path(path: str):
    with open(path, "rb") as f:
        shape, fortran, npd = _read_header(f, repr(path))
        offset = f.tell()
    dtype = file_dtype(npd, "load", repr(path))
    swap = npd.byteorder == (">" if np.little_endian else "<")
    if not fortran:
        return lazy_read(path, offset, shape, dtype, swap)
    # column-major data is the transpose of a row-major array of the reversed shape
    return transpose(lazy_read(path, offset, shape[::-1], dtype, swap))


def load_file(f):
    """From an open binary file: read at once (the caller may close it right after)."""
    try:
        x = np.load(f, allow_pickle=False)
    except ValueError as e:
        raise ValueError(f"[load] Invalid .npy data ({e}).") from None
    dtype = file_dtype(x.dtype, "load", "open file")
    if x.dtype == np.dtype("V2"):
        x = x.view(D.bfloat16.np_dtype)
    return from_numpy(np.ascontiguousarray(x).astype(dtype.np_dtype, copy=False))
