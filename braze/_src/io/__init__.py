"""Array files, as MLX's `mx.load`, `mx.save`, `mx.savez(_compressed)`, `mx.save_safetensors`
and `mx.save_gguf`: one module per format, this one picks the format.

Every function takes a path (str or os.PathLike) or an open binary file. Loading a path is lazy
as in MLX (the header is checked at the call, the data is read when the array is evaluated);
an open file is read at once, so it may be closed right after. Saving to a path writes a
temporary file beside it and renames it into place when complete.
"""
from __future__ import annotations

import os
from typing import BinaryIO, Dict, Tuple, Union

from ..array import array
from ..ops._typing import StreamOrDevice
from . import npy, npz
from ._files import is_reader, name_of
from .gguf import load_gguf, save_gguf
from .npy import save
from .npz import savez, savez_compressed
from .safetensors import load_safetensors, save_safetensors

__all__ = ["load", "save", "savez", "savez_compressed", "save_safetensors", "save_gguf",
           "load_safetensors", "load_gguf"]

_FORMATS = ("npy", "npz", "safetensors", "gguf")


def _format_of(file, format):
    if format is not None:
        if format not in _FORMATS:
            raise ValueError(f"[load] Unknown file format {format!r}; expected one of "
                             f"{', '.join(_FORMATS)}.")
        return format
    name = name_of(file, "load")
    ext = os.path.splitext(name)[1]
    if not ext:
        raise ValueError(f"[load] Could not infer the file format from {name!r}; pass "
                         "format=.")
    if ext[1:] not in _FORMATS:
        raise ValueError(f"[load] Unknown file format {ext[1:]!r} ({name!r}); expected one of "
                         f"{', '.join(_FORMATS)}.")
    return ext[1:]


def load(file: Union[str, os.PathLike, BinaryIO], /, format: str | None = None,
         return_metadata: bool = False, *, stream: StreamOrDevice = None
         ) -> Union[array, Dict[str, array], Tuple[Dict[str, array], dict]]:
    """Load a `.npy` (one array), `.npz`, `.safetensors` or `.gguf` file (dict of arrays; with
    `return_metadata`, also the metadata of safetensors/GGUF files)."""
    format = _format_of(file, format)
    if not is_reader(file):
        path = name_of(file, "load")
        if not os.path.exists(path):
            raise FileNotFoundError(f"[load] Failed to open {path!r}.")
    if return_metadata and format in ("npy", "npz"):
        raise ValueError(f"[load] Metadata is not supported for the {format} format.")
    if format == "safetensors":
        return load_safetensors(file, return_metadata)
    if format == "gguf":
        return load_gguf(file, return_metadata)
    if format == "npz":
        return npz.load_npz(file)
    return npy.load_file(file) if is_reader(file) else npy.load_path(name_of(file, "load"))

