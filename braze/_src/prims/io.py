"""Primitives: reading array data from a file when it is evaluated.

`mx.load` of a path is lazy, as in MLX: it parses the header at once (so a bad header fails at
the call) and makes a `Load` node that reads the bytes when the array is evaluated (so a file
that ends too early fails at `mx.eval`, with a RuntimeError).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .base import Primitive, bind, lazy_dataclass


class LoadError(RuntimeError):
    """The file no longer holds the bytes its header promised."""


@lazy_dataclass
class Load(Primitive):
    """`shape`/`dtype` elements in C order at byte `offset` of `path`; `swap`: the file's byte
    order is the other one (a big-endian .npy)."""
    reinfers_shape = False  # the file's shape

    path: str
    offset: int
    shape: tuple
    dtype: D.Dtype
    swap: bool = False

    differentiable = False

    def abstract_eval(self):
        return [(self.shape, self.dtype)]

    def eval_cpu(self):
        npd = self.dtype.np_dtype
        # the buffer in its final shape: it owns its memory, so it counts in the active memory
        # (a reshaped view would not) and a consumer may take it over (donation)
        out = np.empty(self.shape, dtype=npd)
        want = out.nbytes
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                got = f.readinto(memoryview(out.reshape(-1).view(np.uint8))) if want else 0
        except OSError as e:
            raise LoadError(f"[load] Failed to read {self.path!r}: {e}.") from None
        if got != want:
            raise LoadError(f"[load] {self.path!r} ends after {got} of the {want} bytes of data "
                            f"at offset {self.offset}; the file is truncated or was changed.")
        if self.swap:
            out.byteswap(inplace=True)
        return [out]

    def vmap(self, inputs, axes):
        return [bind(self, ())], [None]  # no inputs: never batched
