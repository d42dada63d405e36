"""`.safetensors` files: our own reader/writer, as MLX's `mx.load` and `mx.save_safetensors`.

Format (https://github.com/huggingface/safetensors, "Format"): an 8-byte little-endian unsigned
header length N, N bytes of UTF-8 JSON mapping each tensor name to
`{"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}` (offsets relative to the byte
buffer that follows the header) plus an optional `"__metadata__"` string-to-string map, then the
raw little-endian, C-order tensor bytes. The writer pads the header with spaces to a multiple of
8 bytes; the reader checks every offset and size and rejects overlapping or out-of-bounds data
with a clear error. fp8 tensors (F8_E4M3, F8_E8M0) load as uint8, as in MLX (`mx.from_fp8`
converts them).
"""
from __future__ import annotations

import json
import os
import struct
from typing import BinaryIO, Dict, Union

import numpy as np

from .. import dtypes as D
from ..array import array
from ._files import (
    from_numpy,
    is_reader,
    lazy_read,
    open_for_write,
    path_of,
    to_numpy,
)

# safetensors dtype strings <-> NumPy dtypes
_ST_TO_NP = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
    "U16": np.dtype(np.uint16), "I16": np.dtype(np.int16), "U32": np.dtype(np.uint32),
    "I32": np.dtype(np.int32), "U64": np.dtype(np.uint64), "I64": np.dtype(np.int64),
    "F16": np.dtype(np.float16),
    "F32": np.dtype(np.float32), "F64": np.dtype(np.float64), "C64": np.dtype(np.complex64),
}
_NP_TO_ST = {v: k for k, v in _ST_TO_NP.items()}
# "BF16" <-> ml_dtypes' bfloat16, resolved when met (`_st_dtype`, `_np_st`): ml_dtypes is
# imported only for a file that holds bfloat16


def _st_dtype(st: str):
    if st == "BF16":
        return D.bfloat16.np_dtype
    return _ST_TO_NP.get(st, _READ_ONLY.get(st))


def _np_st(npd: np.dtype):
    return "BF16" if D.is_bf16(npd) else _NP_TO_ST.get(npd)
_READ_ONLY = {"F8_E4M3": np.dtype(np.uint8), "F8_E8M0": np.dtype(np.uint8)}


def save_safetensors(file: Union[str, os.PathLike, BinaryIO], arrays: Dict[str, array],
                     metadata: Dict[str, str] | None = None) -> None:
    """Write `arrays` (name -> array) to `file` (a path or an open binary file)."""
    op = "save_safetensors"
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
        x = to_numpy(arrays[name], name, op)
        st = _np_st(x.dtype)
        if st is None:
            raise ValueError(f"[{op}] Unsupported dtype {x.dtype} for {name!r}.")
        data = x.astype(x.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
        header[name] = {"dtype": st, "shape": list(x.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    with open_for_write(file, op, ".safetensors") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def _parse_header(head: bytes, size: int, where: str, op: str):
    """(tensors {name: (np dtype, shape, begin, end)}, metadata) with every entry checked
    against the `size` bytes of data that follow the header."""
    try:
        header = json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"[{op}] {where}: invalid JSON header ({e}).") from None
    if not isinstance(header, dict):
        raise ValueError(f"[{op}] {where}: the header must be a JSON object.")
    metadata = header.pop("__metadata__", None) or {}
    tensors, spans = {}, []
    for name, info in header.items():
        try:
            st, shape, (begin, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"[{op}] {where}: malformed entry for {name!r}: {info!r}.") \
                from None
        dt = _st_dtype(st)
        if dt is None:
            raise ValueError(f"[{op}] {where}: unsupported dtype {st!r} for {name!r}.")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= begin <= end <= size) or end - begin != count * dt.itemsize:
            raise ValueError(f"[{op}] {where}: data offsets {[begin, end]} of {name!r} do not "
                             f"match its shape {list(shape)} and dtype {st} (buffer of "
                             f"{size} bytes).")
        spans.append((begin, end, name))
        tensors[name] = (dt, shape, begin, end)
    spans.sort()
    for (b0, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise ValueError(f"[{op}] {where}: the data of {n0!r} and {n1!r} overlap.")
    return tensors, metadata


def _header_length(raw8: bytes, total: int, where: str, op: str) -> int:
    if len(raw8) < 8:
        raise ValueError(f"[{op}] {where} is too short to be a safetensors file.")
    (n,) = struct.unpack("<Q", raw8)
    if n > total - 8:
        raise ValueError(f"[{op}] {where}: header length {n} exceeds the file size.")
    return n


def load_safetensors(file, return_metadata: bool = False):
    """Read a safetensors file (path: lazily; open file: at once): {name: array}, and the
    metadata dict if asked."""
    op = "load_safetensors"
    if is_reader(file):
        raw = file.read()
        n = _header_length(raw[:8], len(raw), "the file", op)
        tensors, metadata = _parse_header(raw[8:8 + n], len(raw) - 8 - n, "the file", op)
        data = memoryview(raw)[8 + n:]
        out = {name: from_numpy(np.frombuffer(data[b:e], dtype=dt.newbyteorder("<"))
                                .astype(dt).reshape(shape))
               for name, (dt, shape, b, e) in tensors.items()}
    else:
        path = path_of(file, op)
        where = repr(path)
        with open(path, "rb") as f:
            total = os.fstat(f.fileno()).st_size
            n = _header_length(f.read(8), total, where, op)
            tensors, metadata = _parse_header(f.read(n), total - 8 - n, where, op)
        # little-endian data: a byte swap only on a big-endian machine
        swap = not np.little_endian
        out = {name: lazy_read(path, 8 + n + b, shape, D.from_numpy(dt), swap and
                               dt.itemsize > 1)
               for name, (dt, shape, b, e) in tensors.items()}
    return (out, metadata) if return_metadata else out
