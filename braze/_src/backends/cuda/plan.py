"""The host side of a cuda launch that needs no GPU: which variant a launch takes and what its
arguments are, from the buffers' shapes, element strides and device addresses (MLX's rules,
as the cpu backend's launch.py applies them). The launch layer that loads and runs kernels is
not written yet (docs/cuda.md); this is the part of it the tests can check here.

- An input of one element is a scalar (`S`).
- `contiguous` when every other input has the output's shape and row-major dense strides;
  its `vector` is `vector_width(ir)` when every such buffer's address (and each output's) is
  aligned to `vector` of its elements, else 1.
- `strided` otherwise: strides broadcast to the output shape (0 on broadcast axes), size-1
  output axes dropped, adjacent axes merged wherever every input allows; rank >= 1.
- 32-bit indices when every index the kernel forms fits in int32: the grid's last thread's
  index (size plus one block of vectors) and, strided, each input's largest offset.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .render import CudaVariant, vector_width

#: threads per block of the elementwise kernels
THREADS = 256


@dataclass(frozen=True)
class Buffer:
    """An input or output as a launch sees it: shape, element strides, device address of its
    first element, itemsize."""

    shape: tuple
    strides: tuple
    address: int
    itemsize: int

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def row_major(shape) -> tuple:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _dense(b: Buffer, shape) -> bool:
    return tuple(b.shape) == tuple(shape) and all(
        s == r for s, r, n in zip(b.strides, row_major(shape), shape) if n > 1)


def broadcast_strides(b: Buffer, shape) -> tuple:
    """`b`'s element strides over the output `shape` (0 on the axes it is broadcast along)."""
    pad = len(shape) - len(b.shape)
    return tuple(0 if d < pad or b.shape[d - pad] == 1 else b.strides[d - pad]
                 for d in range(len(shape)))


def collapse(shape, strides: list) -> tuple:
    """(shape, per-input strides) with size-1 axes dropped and adjacent axes merged where
    every input's strides allow (the outer stride is the inner one times the inner size)."""
    keep = [d for d, n in enumerate(shape) if n != 1] or [len(shape) - 1] if shape else []
    dims = [shape[d] for d in keep] if shape else [1]
    sts = [[st[d] for d in keep] if shape else [0] for st in strides]
    d = len(dims) - 1
    while d > 0:
        if all(st[d - 1] == st[d] * dims[d] for st in sts):
            dims[d - 1:d + 1] = [dims[d - 1] * dims[d]]
            for st in sts:
                st[d - 1:d + 1] = [st[d]]
        d -= 1
    return tuple(dims), [tuple(st) for st in sts]


@dataclass(frozen=True)
class Launch:
    """A planned launch: the variant, the grid, and the strided variant's shape and per-input
    strides (as the kernel's `__grid_constant__` arguments read them, `dims_bytes`)."""

    variant: CudaVariant
    blocks: int
    threads: int
    size: int
    shape: tuple = ()
    strides: tuple = ()

    def dims_bytes(self, values) -> bytes:
        """One `braze::Dims<I, ndim>` argument's bytes."""
        dt = np.int32 if self.variant.index == 32 else np.int64
        return np.asarray(values, dtype=dt).tobytes()


def plan(ir, inputs, outputs, out_shape, alias=()) -> Launch:
    """The launch of `ir` on `inputs` (a `Buffer` per run-time input, in IR order without the
    baked constants) writing row-major `outputs` (a `Buffer` each) of shape `out_shape`."""
    size = int(np.prod(out_shape, dtype=np.int64))
    scalars = "".join("S" if b.size == 1 else "V" for b in inputs)
    arrays = [b for b, c in zip(inputs, scalars) if c == "V"]
    if all(_dense(b, out_shape) for b in arrays):
        n = vector_width(ir)
        if any(b.address % (n * b.itemsize) for b in arrays + list(outputs)):
            n = 1
        per_block = THREADS * n
        index = 32 if size + per_block < 2**31 else 64
        v = CudaVariant("contiguous", 0, scalars, alias=tuple(alias), vector=n, index=index)
        return Launch(v, -(-size // per_block), THREADS, size)
    shape, strides = collapse(tuple(out_shape), [broadcast_strides(b, out_shape)
                                                 for b in arrays])
    reach = max((sum((n - 1) * abs(s) for n, s in zip(shape, st)) for st in strides), default=0)
    index = 32 if size + THREADS < 2**31 and reach < 2**31 else 64
    v = CudaVariant("strided", len(shape), scalars, alias=tuple(alias), index=index)
    return Launch(v, -(-size // THREADS), THREADS, size, shape, tuple(strides))
