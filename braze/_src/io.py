"""Weight files: `.safetensors` (our own reader/writer) and `.npz`, as MLX's `mx.load`,
`mx.savez` and `mx.save_safetensors` read and write them.

safetensors (https://github.com/huggingface/safetensors, "Format"): an 8-byte little-endian
unsigned header length N, N bytes of UTF-8 JSON mapping each tensor name to
`{"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}` (offsets relative to the
byte buffer that follows the header) plus an optional `"__metadata__"` string-to-string map,
then the raw little-endian, C-order tensor bytes. The writer pads the header with spaces to a
multiple of 8 bytes; the reader checks every offset and size and rejects overlapping or
out-of-bounds data with a clear error.

`.npz` files are NumPy archives of `.npy` entries; bfloat16 (which NumPy has no descriptor
for) is stored as the 2-byte void type `<V2`, as MLX does, and read back as bfloat16.
"""
from __future__ import annotations

import json
import os
import struct
import zipfile

import ml_dtypes
import numpy as np

from . import dtypes as D
from .array import array

__all__ = ["load", "save_safetensors", "load_safetensors", "savez", "savez_compressed"]

# safetensors dtype strings <-> NumPy dtypes
_ST_TO_NP = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
    "U16": np.dtype(np.uint16), "I16": np.dtype(np.int16), "U32": np.dtype(np.uint32),
    "I32": np.dtype(np.int32), "U64": np.dtype(np.uint64), "I64": np.dtype(np.int64),
    "F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16),
    "F32": np.dtype(np.float32), "F64": np.dtype(np.float64), "C64": np.dtype(np.complex64),
}
_NP_TO_ST = {v: k for k, v in _ST_TO_NP.items()}
_BF16 = np.dtype(ml_dtypes.bfloat16)


def _to_numpy(a, name, op):
    if isinstance(a, array):
        out = np.asarray(a)
    elif isinstance(a, np.ndarray):
        out = a
    else:
        raise TypeError(f"[{op}] Expected an array for {name!r}, got {type(a).__name__}.")
    return np.asarray(out, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)


def _from_numpy(x):
    # mx.array reads float64 NumPy data as float32 (MLX's rule); a file's dtype is kept
    return array(x, dtype=D.float64) if x.dtype == np.float64 else array(x)


# -- safetensors ------------------------------------------------------------------------------
def _path(file, op: str) -> str:
    """A file argument as a path string; TypeError naming the op otherwise."""
    try:
        return os.fspath(file)
    except TypeError:
        raise TypeError(f"[{op}] Expected a file path (str or os.PathLike), got "
                        f"{type(file).__name__}.") from None


def save_safetensors(file, arrays: dict, metadata: dict | None = None) -> None:
    """Write `arrays` (name -> array) to `file` in the safetensors format."""
    op = "save_safetensors"
    file = _path(file, op)
    if not file.endswith(".safetensors"):
        file += ".safetensors"
    if not isinstance(arrays, dict):
        raise TypeError(f"[{op}] Expected a dict of name -> array, got {type(arrays).__name__}.")
    header, blobs, offset = {}, [], 0
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError(f"[{op}] Metadata must map strings to strings.")
        header["__metadata__"] = dict(metadata)
    for name in sorted(arrays):
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"[{op}] Invalid tensor name {name!r}.")
        x = _to_numpy(arrays[name], name, op)
        if x.dtype not in _NP_TO_ST:
            raise ValueError(f"[{op}] Unsupported dtype {x.dtype} for {name!r}.")
        if x.dtype.byteorder == ">":
            x = x.astype(x.dtype.newbyteorder("<"))
        data = x.tobytes(order="C")
        header[name] = {"dtype": _NP_TO_ST[x.dtype], "shape": list(x.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    tmp = file + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, file)


def load_safetensors(file, return_metadata: bool = False):
    """Read a safetensors file: {name: array} (and the metadata dict if asked)."""
    op = "load_safetensors"
    file = _path(file, op)
    with open(file, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"[{op}] {file!r} is too short to be a safetensors file.")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"[{op}] {file!r}: header length {n} exceeds the file size.")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"[{op}] {file!r}: invalid JSON header ({e}).") from None
    if not isinstance(header, dict):
        raise ValueError(f"[{op}] {file!r}: the header must be a JSON object.")
    data = memoryview(raw)[8 + n:]
    metadata = header.pop("__metadata__", None) or {}
    out, spans = {}, []
    for name, info in header.items():
        try:
            st, shape, (begin, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"[{op}] {file!r}: malformed entry for {name!r}: {info!r}.") \
                from None
        if st not in _ST_TO_NP:
            raise ValueError(f"[{op}] {file!r}: unsupported dtype {st!r} for {name!r}.")
        dt = _ST_TO_NP[st]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= begin <= end <= len(data)) or end - begin != count * dt.itemsize:
            raise ValueError(f"[{op}] {file!r}: data offsets {[begin, end]} of {name!r} do not "
                             f"match its shape {list(shape)} and dtype {st} (buffer of "
                             f"{len(data)} bytes).")
        spans.append((begin, end, name))
        x = np.frombuffer(data[begin:end], dtype=dt.newbyteorder("<") if dt.itemsize > 1
                          else dt).reshape(shape)
        out[name] = _from_numpy(x.astype(dt, copy=True))
    spans.sort()
    for (b0, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise ValueError(f"[{op}] {file!r}: the data of {n0!r} and {n1!r} overlap.")
    return (out, metadata) if return_metadata else out


# -- npz --------------------------------------------------------------------------------------
def _write_npz(file, arrays, compress):
    file = _path(file, "savez_compressed" if compress else "savez")
    if not file.endswith(".npz"):
        file += ".npz"
    mode = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    tmp = file + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=mode) as z:
        for name, a in arrays.items():
            x = _to_numpy(a, name, "savez")
            if x.dtype == _BF16:
                x = x.view(np.dtype("V2"))
            with z.open(name + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, x, allow_pickle=False)
    os.replace(tmp, file)


def savez(file, *args, **kwargs) -> None:
    """Save arrays to an uncompressed `.npz` (positional ones as arr_0, arr_1, ...)."""
    arrays = {f"arr_{i}": a for i, a in enumerate(args)}
    for k, v in kwargs.items():
        if k in arrays:
            raise ValueError(f"[savez] Cannot use un-named variables and keyword {k}.")
        arrays[k] = v
    _write_npz(file, arrays, False)


def savez_compressed(file, *args, **kwargs) -> None:
    """Save arrays to a compressed `.npz`."""
    arrays = {f"arr_{i}": a for i, a in enumerate(args)}
    arrays.update(kwargs)
    _write_npz(file, arrays, True)


def _load_npz(file):
    out = {}
    with np.load(os.fspath(file), allow_pickle=False) as z:
        for name in z.files:
            x = z[name]
            if x.dtype == np.dtype("V2"):
                x = x.view(_BF16)
            out[name] = _from_numpy(x)
    return out


def load(file, format: str | None = None, return_metadata: bool = False):
    """Load a `.npz`, `.safetensors` or `.npy` file (format from the extension by default)."""
    path = _path(file, "load")
    if format is None:
        ext = os.path.splitext(path)[1]
        if not ext:
            raise ValueError(f"[load] Could not infer the file format from {path!r}; pass "
                             "format=.")
        format = ext[1:]
    if not os.path.exists(path):
        raise FileNotFoundError(f"[load] Failed to open {path!r}.")
    if format == "safetensors":
        return load_safetensors(path, return_metadata)
    if return_metadata:
        raise ValueError(f"[load] Metadata is only supported for safetensors, not {format}.")
    if format == "npz":
        return _load_npz(path)
    if format == "npy":
        x = np.load(path, allow_pickle=False)
        return _from_numpy(x.view(_BF16) if x.dtype == np.dtype("V2") else x)
    raise ValueError(f"[load] Unsupported file format {format!r}.")
