"""Primitives: the scan family (Scan: cumulative sum, prod, max, min, logaddexp).

The output has the input's dtype (the ops layer casts first). `reverse` scans from the end;
`inclusive=False` shifts the result by one along the axis and fills the first slot (the last
one when reversed) with the identity of the operation, as MLX does.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Primitive
from .reduce import acc_dtype

SCAN_TYPES = ("sum", "prod", "max", "min", "logaddexp")


def scan_identity(reduce_type: str, npd: np.dtype):
    """The value an exclusive scan starts from."""
    if reduce_type == "sum":
        return 0
    if reduce_type == "prod":
        return 1
    if reduce_type == "logaddexp":
        return -np.inf
    big = reduce_type == "min"
    if npd.kind == "b":
        return big
    if npd.kind in "iu":
        info = np.iinfo(npd)
        return info.max if big else info.min
    return np.inf if big else -np.inf


@dataclass(frozen=True)
class Scan(Primitive):
    """Cumulative `reduce_type` along `axis` (non-negative)."""

    reduce_type: str
    axis: int
    reverse: bool = False
    inclusive: bool = True

    def __post_init__(self):
        if self.reduce_type not in SCAN_TYPES:
            raise ValueError(f"[Scan] Unknown scan type {self.reduce_type!r}.")

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        rt, ax = self.reduce_type, self.axis
        out_np = x.dtype
        xa = x.astype(acc_dtype(x.dtype), copy=False)
        if self.reverse:
            xa = np.flip(xa, ax)
        with np.errstate(all="ignore"):
            if rt == "sum":
                r = np.cumsum(xa, axis=ax, dtype=xa.dtype)
            elif rt == "prod":
                r = (np.logical_and.accumulate(xa, axis=ax) if xa.dtype.kind == "b"
                     else np.cumprod(xa, axis=ax, dtype=xa.dtype))
            elif rt == "max":
                r = np.maximum.accumulate(xa, axis=ax) if xa.size else xa.copy()
            elif rt == "min":
                r = np.minimum.accumulate(xa, axis=ax) if xa.size else xa.copy()
            else:
                r = np.logaddexp.accumulate(xa, axis=ax) if xa.size else xa.copy()
        if not self.inclusive and r.shape[ax]:
            shifted = np.empty_like(r)
            head = [slice(None)] * r.ndim
            head[ax] = slice(0, 1)
            rest = [slice(None)] * r.ndim
            rest[ax] = slice(1, None)
            src = [slice(None)] * r.ndim
            src[ax] = slice(0, -1)
            shifted[tuple(head)] = scan_identity(rt, r.dtype)
            shifted[tuple(rest)] = r[tuple(src)]
            r = shifted
        if self.reverse:
            r = np.flip(r, ax)
        return [np.ascontiguousarray(r).astype(out_np, copy=False)]
