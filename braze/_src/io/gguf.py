"""GGUF files (the llama.cpp / GGML container, version 3), as MLX's `mx.save_gguf` and
`mx.load` read and write them.

Layout (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): "GGUF", u32 version,
u64 tensor count, u64 metadata count; each metadata entry is a string key (u64 length + UTF-8),
a u32 value type and the value; each tensor info is a string name, u32 ndim, ndim u64 dims
(GGML order: fastest-varying first, i.e. the reverse of ours), u32 GGML type and a u64 offset
into the data section, which starts at the next multiple of `general.alignment` (32 by
default). All little-endian.

What MLX supports is what braze supports: tensors of F32, F16, I8, I16, I32 (read lazily) and
the block-quantized Q4_0, Q4_1 and Q8_0, which load as MLX's affine quantization (`.weight` as
uint32, `.scales` and `.biases` as float16, group size 32) so `mx.dequantize` reads them.
Metadata values: strings, lists of strings, 0-d and 1-d arrays.
"""
from __future__ import annotations

import os
import struct
from typing import BinaryIO, Dict, Union

import numpy as np

from .. import dtypes as D
from ..array import array
from ._files import from_numpy, is_reader, lazy_read, open_for_write, path_of, to_numpy

_MAGIC = b"GGUF"
_ALIGNMENT = 32

# GGML tensor types
_F32, _F16, _Q4_0, _Q4_1, _Q8_0, _I8, _I16, _I32 = 0, 1, 2, 3, 8, 24, 25, 26
_TENSOR_NP = {_F32: np.dtype("<f4"), _F16: np.dtype("<f2"), _I8: np.dtype("i1"),
              _I16: np.dtype("<i2"), _I32: np.dtype("<i4")}
_TENSOR_OF = {D.float32: _F32, D.float16: _F16, D.int8: _I8, D.int16: _I16, D.int32: _I32}
_BLOCK_BYTES = {_Q4_0: 18, _Q4_1: 20, _Q8_0: 34}  # per block of 32 weights

# metadata value types
_STRING, _ARRAY = 8, 9
_VALUE_NP = {0: np.dtype("u1"), 1: np.dtype("i1"), 2: np.dtype("<u2"), 3: np.dtype("<i2"),
             4: np.dtype("<u4"), 5: np.dtype("<i4"), 6: np.dtype("<f4"), 7: np.dtype("?"),
             10: np.dtype("<u8"), 11: np.dtype("<i8"), 12: np.dtype("<f8")}
_VALUE_OF = {D.uint8: 0, D.int8: 1, D.uint16: 2, D.int16: 3, D.uint32: 4, D.int32: 5,
             D.float32: 6, D.bool_: 7, D.uint64: 10, D.int64: 11}


# -- writing ----------------------------------------------------------------------------------
def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _metadata_value(key, value) -> bytes:
    op = "save_gguf"
    if isinstance(value, str):
        return struct.pack("<I", _STRING) + _string(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return struct.pack("<IIQ", _ARRAY, _STRING, len(value)) + b"".join(map(_string, value))
    if not isinstance(value, array):
        raise TypeError(f"[{op}] Metadata {key!r} must be a string, a list of strings or an "
                        f"array, got {type(value).__name__}.")
    if value.ndim > 1:
        raise ValueError(f"[{op}] Cannot save arrays with more than one dimension as metadata "
                         f"({key!r} has shape {value.shape}).")
    if value.size == 0:
        raise ValueError(f"[{op}] Cannot save empty arrays as metadata ({key!r}).")
    if value.dtype not in _VALUE_OF:
        raise ValueError(f"[{op}] Metadata array {key!r} of type {value.dtype.name} is not "
                         "supported.")
    vt = _VALUE_OF[value.dtype]
    data = np.asarray(value).astype(_VALUE_NP[vt], copy=False).tobytes()
    if value.ndim == 0:
        return struct.pack("<I", vt) + data
    return struct.pack("<IIQ", _ARRAY, vt, value.size) + data


def save_gguf(file: Union[str, os.PathLike, BinaryIO], arrays: Dict[str, array],
              metadata: dict | None = None) -> None:
    """Write `arrays` (name -> array) and `metadata` to a GGUF file (".gguf" is appended)."""
    op = "save_gguf"
    if not isinstance(arrays, dict):
        raise TypeError(f"[{op}] Expected a dict of name -> array, got {type(arrays).__name__}.")
    metadata = metadata or {}
    kvs = [_string(str(k)) + _metadata_value(k, v) for k, v in metadata.items()]
    infos, blobs, offset = [], [], 0
    for name, a in arrays.items():
        if not isinstance(a, array) or a.dtype not in _TENSOR_OF:
            what = a.dtype.name if isinstance(a, array) else type(a).__name__
            raise ValueError(f"[{op}] Cannot save {name!r}: dtype {what} is not supported "
                             "(float32, float16, int8, int16, int32).")
        x = to_numpy(a, name, op).astype(_TENSOR_NP[_TENSOR_OF[a.dtype]], copy=False)
        offset += -offset % _ALIGNMENT
        dims = struct.pack(f"<{x.ndim}Q", *x.shape[::-1])
        infos.append(_string(name) + struct.pack("<I", x.ndim) + dims
                     + struct.pack("<IQ", _TENSOR_OF[a.dtype], offset))
        blobs.append((offset, x.tobytes()))
        offset += x.nbytes
    head = _MAGIC + struct.pack("<IQQ", 3, len(infos), len(kvs)) + b"".join(kvs) + b"".join(infos)
    with open_for_write(file, op, ".gguf") as f:
        f.write(head + b"\0" * (-len(head) % _ALIGNMENT))
        pos = 0
        for off, data in blobs:
            f.write(b"\0" * (off - pos) + data)
            pos = off + len(data)


# -- reading ----------------------------------------------------------------------------------
class _Reader:
    """Little-endian fields read from a binary file whose data starts at `base` (only the
    header is read, never the whole file); a short read is a clear ValueError."""

    def __init__(self, f, base: int, where: str):
        self.f, self.base, self.where = f, base, where

    @property
    def pos(self) -> int:
        return self.f.tell() - self.base

    def take(self, n: int) -> bytes:
        out = self.f.read(n) if n >= 0 else b""
        if n < 0 or len(out) != n:
            raise ValueError(f"[load_gguf] {self.where} ends inside its header; perhaps an "
                             "incomplete download or a corrupt file.")
        return out

    def at(self, begin: int, n: int) -> bytes:
        self.f.seek(self.base + begin)
        return self.take(n)

    def unpack(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def string(self) -> str:
        (n,) = self.unpack("Q")
        return self.take(n).decode("utf-8", errors="replace")

    def values(self, vt: int, count: int):
        npd = _VALUE_NP[vt]
        return np.frombuffer(self.take(count * npd.itemsize), dtype=npd)


def _metadata(r: _Reader):
    vt = r.unpack("I")[0]
    if vt == _STRING:
        return r.string()
    if vt in _VALUE_NP:
        return _meta_array(r.values(vt, 1).reshape(()))
    if vt != _ARRAY:
        raise ValueError(f"[load_gguf] {r.where}: unknown metadata type {vt}.")
    et, count = r.unpack("IQ")
    if et == _STRING:
        return [r.string() for _ in range(count)]
    if et not in _VALUE_NP:
        raise ValueError(f"[load_gguf] {r.where}: only one level of metadata arrays is "
                         f"supported (element type {et}).")
    return _meta_array(r.values(et, count))


def _meta_array(x: np.ndarray) -> array:
    # MLX reads float64 metadata as float32
    native = np.float32 if x.dtype == np.float64 else x.dtype.newbyteorder("=")
    return from_numpy(x.astype(native))


def _read_header(r: _Reader):
    where = r.where
    if r.take(4) != _MAGIC:
        raise ValueError(f"[load_gguf] {where} is not a GGUF file (bad magic).")
    version, n_tensors, n_kv = r.unpack("IQQ")
    if version not in (2, 3):
        raise ValueError(f"[load_gguf] {where}: unsupported GGUF version {version}.")
    metadata = {}
    for _ in range(n_kv):
        key = r.string()
        metadata[key] = _metadata(r)
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        (ndim,) = r.unpack("I")
        dims = r.unpack(f"{ndim}Q")
        gtype, offset = r.unpack("IQ")
        tensors.append((name, tuple(int(d) for d in dims[::-1]), gtype, offset))
    align = metadata.get("general.alignment")
    align = int(align.item()) if isinstance(align, array) and align.ndim == 0 else _ALIGNMENT
    data_start = r.pos + (-r.pos % align)
    return metadata, tensors, data_start


def _nbytes(name, shape, gtype, where):
    count = int(np.prod(shape, dtype=np.int64))
    if gtype in _TENSOR_NP:
        return count * _TENSOR_NP[gtype].itemsize
    if gtype in _BLOCK_BYTES:
        if not shape or shape[-1] % 32:
            raise ValueError(f"[load_gguf] {where}: tensor {name!r} has a last dimension "
                             f"({shape[-1] if shape else 0}) that is not a multiple of 32.")
        return count // 32 * _BLOCK_BYTES[gtype]
    raise ValueError(f"[load_gguf] {where}: tensor {name!r} has GGML type {gtype}, which braze "
                     "(like MLX) does not load; supported: F32, F16, I8, I16, I32, Q4_0, Q4_1, "
                     "Q8_0.")


def _affine(blocks: np.ndarray, gtype: int, shape: tuple):
    """(weight uint32, scales, biases float16) in MLX's affine layout from GGML blocks."""
    scale = blocks[:, 0:2].copy().view("<f2")[:, 0].astype(np.float16)
    if gtype == _Q8_0:
        q = blocks[:, 2:34] ^ np.uint8(0x80)  # int8 -> unsigned with a -128 offset
        bias = (np.float16(-128) * scale).astype(np.float16)
        words = q.reshape(-1).view("<u4")
    else:
        start = 2 if gtype == _Q4_0 else 4
        packed = blocks[:, start:start + 16]
        lo, hi = packed & np.uint8(0xF), packed >> np.uint8(4)
        # GGML keeps weights j and j + 16 in byte j; MLX wants weight i in nibble i
        nib = np.concatenate([lo, hi], axis=1)
        bytes_ = nib[:, 0::2] | (nib[:, 1::2] << np.uint8(4))
        words = bytes_.reshape(-1).view("<u4")
        if gtype == _Q4_0:
            bias = (np.float16(-8) * scale).astype(np.float16)
        else:
            bias = blocks[:, 2:4].copy().view("<f2")[:, 0].astype(np.float16)
    per_word = 4 if gtype == _Q8_0 else 8
    wshape = shape[:-1] + (shape[-1] // per_word,)
    sshape = shape[:-1] + (shape[-1] // 32,)
    return (from_numpy(words.astype(np.uint32).reshape(wshape)),
            from_numpy(scale.reshape(sshape)), from_numpy(bias.reshape(sshape)))


def _tensors(tensors, data_start, total, read, lazy_path, where):
    out = {}
    for name, shape, gtype, offset in tensors:
        n = _nbytes(name, shape, gtype, where)
        begin = data_start + offset
        if begin + n > total:
            raise ValueError(f"[load_gguf] {where}: tensor {name!r} extends past the end of the "
                             "file; perhaps an incomplete download or a corrupt file.")
        if gtype in _TENSOR_NP:
            npd = _TENSOR_NP[gtype]
            dtype = D.from_numpy(npd.newbyteorder("="))
            out[name] = (lazy_read(lazy_path, begin, shape, dtype, not np.little_endian and
                                   npd.itemsize > 1) if lazy_path else
                         from_numpy(np.frombuffer(read(begin, n), npd).reshape(shape)
                                    .astype(dtype.np_dtype)))
            continue
        blocks = np.frombuffer(read(begin, n), np.uint8).reshape(-1, _BLOCK_BYTES[gtype])
        prefix = name[:-len(".weight")] if name.endswith(".weight") else name
        for key, value in zip((name, prefix + ".scales", prefix + ".biases"),
                              _affine(blocks, gtype, shape)):
            if key in out:
                raise ValueError(f"[load_gguf] {where}: duplicate tensor name {key!r}.")
            out[key] = value
    return out


def _load(f, base, total, path, where):
    r = _Reader(f, base, where)
    metadata, tensors, data_start = _read_header(r)
    return _tensors(tensors, data_start, total, r.at, path, where), metadata


def load_gguf(file, return_metadata: bool = False):
    """Read a GGUF file (plain tensors of a path lazily): {name: array}, and the metadata
    dict if asked."""
    if is_reader(file):
        base = file.tell()
        total = file.seek(0, os.SEEK_END) - base
        file.seek(base)
        out, metadata = _load(file, base, total, None, "the file")
    else:
        path = os.path.abspath(path_of(file, "load_gguf"))
        with open(path, "rb") as f:
            out, metadata = _load(f, 0, os.fstat(f.fileno()).st_size, path, repr(path))
    return (out, metadata) if return_metadata else out

