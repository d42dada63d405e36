"""Primitives that shapeless ("dynamic") compile traces use so shapes can be re-inferred.

* `DynamicBroadcast(shape)` with inputs `(x, *others)`: `x` broadcast to the broadcast shape of
  *all* its inputs. `shape` is the shape seen at trace time (for dumps and equality); replay
  calls `abstract_eval` on the new inputs, so the shape follows them. It prints as `Broadcast`,
  like MLX's multi-input Broadcast. The other inputs only contribute their shapes (the ops
  layer wraps them in `stop_gradient`).
* `NumberOfElements(axes, inverted, dtype)` with input `x`: a 0-d array holding the number of
  elements of `x` over `axes` (or its reciprocal), computed from the run-time shape (MLX's
  primitive of the same name; `mean`/`var` use it in dynamic traces).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .base import Primitive, bind, broadcast_shapes, lazy_dataclass, ops
from .core import Broadcast, sum_like


@lazy_dataclass
class DynamicBroadcast(Broadcast):
    """`x` broadcast against all inputs (the shape is re-inferred at shapeless replay)."""

    shape_only_from = 1  # the other inputs lend their shapes

    @property
    def name(self) -> str:
        return "Broadcast"

    def abstract_eval(self, x, *others):
        if not others:
            return [(self.shape, x.dtype)]
        shape = broadcast_shapes(x.shape, *[o.shape for o in others], op="Broadcast")
        return [(shape, x.dtype)]

    def eval_cpu(self, x, *others):
        shape = broadcast_shapes(x.shape, *[o.shape for o in others], op="Broadcast") \
            if others else self.shape
        if x.shape == shape:
            return [x.view()]
        return [np.broadcast_to(x, shape)]

    def vjp(self, primals, cotangents, argnums, outputs):
        ct = cotangents[0]
        out = []
        for i in argnums:
            if i == 0:
                out.append(sum_like(ct, primals[0]))
            else:  # shape-only operands get no gradient
                out.append(ops.zeros_like(primals[i]))
        return out

    def jvp(self, primals, tangents, argnums):
        if 0 in argnums:
            t = tangents[argnums.index(0)]
            return [bind(self, (t,) + tuple(primals[1:]))]
        out = bind(self, tuple(primals))
        return [ops.zeros_like(out)]

    def vmap(self, inputs, axes):
        rank = max(x.ndim - (ax is not None) for x, ax in zip(inputs, axes))
        moved = []  # batch axis first (size 1 when unbatched), per-example ranks aligned
        for x, ax in zip(inputs, axes):
            if ax is None:
                k = rank - x.ndim + 1
                x = ops.expand_dims(x, tuple(range(k))) if k else x
            else:
                x = ops.moveaxis(x, ax, 0)
                k = rank - (x.ndim - 1)
                x = ops.expand_dims(x, tuple(range(1, 1 + k))) if k else x
            moved.append(x)
        shape = broadcast_shapes(*[m.shape for m in moved], op="Broadcast")
        first = moved[0]
        return [bind(DynamicBroadcast(shape), (first,) + tuple(moved[1:]))], [0]


@lazy_dataclass
class NumberOfElements(Primitive):
    """A 0-d array: the product of x's sizes over `axes` (1 / product if `inverted`)."""

    axes: tuple
    inverted: bool
    dtype: D.Dtype
    differentiable = False
    shape_only_from = 0

    def _value(self, shape):
        n = 1
        for a in self.axes:
            n *= shape[a]
        if self.inverted:
            return 1.0 / n if n else float("inf")
        return n

    def abstract_eval(self, x):
        return [((), self.dtype)]

    def eval_cpu(self, x):
        with np.errstate(all="ignore"):
            return [np.asarray(self._value(x.shape), dtype=self.dtype.np_dtype)]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [ops.zeros_like(primals[i]) for i in argnums]

    def jvp(self, primals, tangents, argnums):
        return [ops.zeros((), self.dtype)]

    def vmap(self, inputs, axes):
        x, ax = inputs[0], axes[0]
        if ax is None:
            return [bind(self, (x,))], [None]
        # the batch axis sits at `ax` in x; shift the counted axes past it
        per = [a if a < ax else a + 1 for a in self.axes]
        return [bind(NumberOfElements(tuple(per), self.inverted, self.dtype), (x,))], [None]
