"""Primitives: creation family (no array inputs; the output is computed from parameters).

`zeros`, `ones` and `full` need no primitive of their own: they are a dense `Broadcast` of a 0-d
constant (its own buffer, as MLX's Full). The primitives here make the other creation ops lazy.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..casts import cast
from .base import Primitive, bind, lazy_dataclass


def arange_length(start, stop, step) -> int:
    """MLX's rule: ceil((stop - start) / step), at least 0; ValueError when not finite."""
    try:
        real = math.ceil((stop - start) / step)
    except (OverflowError, ValueError):
        raise ValueError("[arange] Cannot compute length.") from None
    return max(int(real), 0)


@lazy_dataclass
class _NoInputs(Primitive):
    """Base of the creation primitives: no inputs, so no derivative and nothing batched (vmap
    never reaches them; the rule is there for completeness and leaves the output unbatched)."""

    differentiable = False
    foldable = True

    def vmap(self, inputs, axes):
        return [bind(self, ())], [None]


@lazy_dataclass
class Arange(_NoInputs):
    """[start, stop) by step, MLX's semantics: the increment is dtype(start + step) - dtype(start)
    and floating values are accumulated one step at a time in the output dtype."""

    start: float
    stop: float
    step: float
    dtype: D.Dtype

    def abstract_eval(self):
        return [((arange_length(self.start, self.stop, self.step),), self.dtype)]

    def eval_cpu(self):
        n = arange_length(self.start, self.stop, self.step)
        npd = self.dtype.np_dtype
        if self.dtype.kind in "ui":
            # start and start + step converted to the dtype (floats by braze's cast, as MLX's
            # static_cast), then wrap-around arithmetic like MLX
            s0, s1 = self.start, self.start + self.step
            if not (isinstance(s0, int) and isinstance(s1, int)):
                s0, s1 = (int(v) for v in cast(np.array([float(s0), float(s1)]), npd))
            return [(s0 + np.arange(n, dtype=np.int64) * (s1 - s0)).astype(npd)]
        with np.errstate(over="ignore", invalid="ignore"):
            s0 = np.array(self.start, dtype=npd)
            inc = np.array(self.start + self.step, dtype=npd) - s0
            buf = np.full(n, inc, dtype=npd)
            if n:
                buf[0] = s0
            return [np.cumsum(buf, dtype=npd)]


@lazy_dataclass
class Linspace(_NoInputs):
    """`num` evenly spaced values, computed like MLX: (1 - t) * start + t * stop in float32 with
    t = i / (num - 1) (or i / num without the endpoint), then converted to `dtype`; float64
    is computed in float64 (MLX's inner type)."""

    start: float
    stop: float
    num: int
    endpoint: bool
    dtype: D.Dtype

    def abstract_eval(self):
        return [((self.num,), self.dtype)]

    def eval_cpu(self):
        f32 = np.float64 if self.dtype == D.float64 else np.float32
        n = self.num
        if n == 1:
            out = np.array([self.start], dtype=f32)
        else:
            div = f32(n - 1 if self.endpoint else n)
            t = np.arange(n, dtype=f32) / div
            with np.errstate(over="ignore", invalid="ignore"):
                out = (f32(1) - t) * f32(self.start) + t * f32(self.stop)
        return [cast(out, self.dtype.np_dtype)]


@lazy_dataclass
class Eye(_NoInputs):
    """An n x m matrix with ones on diagonal k."""

    n: int
    m: int
    k: int
    dtype: D.Dtype

    def abstract_eval(self):
        return [((self.n, self.m), self.dtype)]

    def eval_cpu(self):
        return [np.eye(self.n, self.m, self.k, dtype=self.dtype.np_dtype)]


@lazy_dataclass
class Tri(_NoInputs):
    """An n x m matrix with ones at and below diagonal k (NumPy's `tri`)."""

    n: int
    m: int
    k: int
    dtype: D.Dtype

    def abstract_eval(self):
        return [((self.n, self.m), self.dtype)]

    def eval_cpu(self):
        return [np.tri(self.n, self.m, self.k, dtype=self.dtype.np_dtype)]
