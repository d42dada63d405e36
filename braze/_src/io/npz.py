"""`.npz` files: NumPy archives of `.npy` entries (bfloat16 as `<V2`, as in `npy.py`)."""
from __future__ import annotations

import os
import zipfile
import zlib
from typing import BinaryIO, Union

import numpy as np

from .. import dtypes as D
from ..ops._typing import ArrayLike
from ._files import from_numpy, is_reader, open_for_write, path_of, to_numpy


def _write_npz(file, arrays, compress):
    op = "savez_compressed" if compress else "savez"
    mode = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    pending = [(name, to_numpy(a, name, op)) for name, a in arrays.items()]
    with open_for_write(file, op, ".npz") as f, zipfile.ZipFile(f, "w", compression=mode) as z:
        for name, x in pending:
            if D.is_bf16(x.dtype):
                x = x.view(np.dtype("V2"))
            with z.open(name + ".npy", "w", force_zip64=True) as entry:
                np.lib.format.write_array(entry, x, allow_pickle=False)


def _named(args, kwargs, op) -> dict:
    """Positional arrays as arr_0, arr_1, ... then the keyword ones; a clash is an error."""
    arrays = {f"arr_{i}": a for i, a in enumerate(args)}
    for k, v in kwargs.items():
        if k in arrays:
            raise ValueError(f"[{op}] Cannot use un-named variables and keyword {k}.")
        arrays[k] = v
    return arrays


def savez(file: Union[str, os.PathLike, BinaryIO], *args: ArrayLike, **kwargs: ArrayLike) -> None:
    """Save arrays to an uncompressed `.npz` (positional ones as arr_0, arr_1, ...)."""
    _write_npz(file, _named(args, kwargs, "savez"), False)


def savez_compressed(file: Union[str, os.PathLike, BinaryIO], *args: ArrayLike,
                     **kwargs: ArrayLike) -> None:
    """Save arrays to a compressed `.npz`."""
    _write_npz(file, _named(args, kwargs, "savez_compressed"), True)


def _is_zip(source) -> bool:
    """Whether `source` (a path or an open binary file, left where it was) is a zip archive."""
    if not is_reader(source):
        return zipfile.is_zipfile(source)
    pos = source.tell()
    try:
        return zipfile.is_zipfile(source)
    finally:
        source.seek(pos)


def load_npz(file) -> dict:
    out = {}
    source = file if is_reader(file) else path_of(file, "load")
    what = "The input" if is_reader(file) else repr(source)
    # np.load reads anything that is not a zip archive as a .npy file or as a pickle, whose
    # errors (allow_pickle) would be about a format the user never asked for
    if not _is_zip(source):
        raise ValueError(f"[load] {what} is not a valid .npz file (not a zip archive).")
    try:
        with np.load(source, allow_pickle=False) as z:
            for name in z.files:
                x = z[name]
                if x.dtype == np.dtype("V2"):
                    x = x.view(D.bfloat16.np_dtype)
                out[name] = from_numpy(x)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"[load] {what} is not a valid .npz file ({e}).") from None
    return out
