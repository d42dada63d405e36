"""Primitives: linear algebra (Matmul, AddMM, Einsum).

Matmul and AddMM take operands of rank >= 2 whose batch axes the op layer has already broadcast
(as MLX does), so their rules never need to sum over broadcast batch axes. float16 and bfloat16
products are computed in float32 and rounded once at the end.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import config
from .. import dtypes as D
from .base import Primitive, ops

_HALF = ("float16", "bfloat16")


class _Blas:
    """BRAZE_BLAS_THREADS: the BLAS thread limit last applied (0: none yet)."""

    applied = 0
    controller = None
    original = None  # the limiter whose restore_original_limits() undoes the first limit


def _blas_threads() -> None:
    """Apply the BRAZE_BLAS_THREADS knob when it changed (one int comparison per call)."""
    n = config._current.blas_threads
    if n == _Blas.applied:
        return
    _Blas.applied = n
    try:
        if n <= 0:  # back to BLAS's own setting
            if _Blas.original is not None:
                _Blas.original.restore_original_limits()
                _Blas.original = None
            return
        if _Blas.controller is None:
            from threadpoolctl import ThreadpoolController
            _Blas.controller = ThreadpoolController()
        lim = _Blas.controller.limit(limits=n, user_api="blas")
        if _Blas.original is None:
            _Blas.original = lim
    except Exception:  # threadpoolctl missing or unable: BLAS keeps its own setting
        pass


def _compute(x):
    """Half floats are multiplied in float32."""
    return x.astype(np.float32) if x.dtype.name in _HALF else x


def _swap(x):
    """Swap the last two axes of a braze array (transform rules only)."""
    return ops.swapaxes(x, -1, -2)


def matmul_shape(a_shape, b_shape, op="matmul"):
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise ValueError(f"[{op}] Operands must have at least 2 dimensions, got shapes "
                         f"{tuple(a_shape)} and {tuple(b_shape)}.")
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(
            f"[{op}] Last dimension of first input with shape {tuple(a_shape)} must match "
            f"second to last dimension of second input with shape {tuple(b_shape)}.")
    if tuple(a_shape[:-2]) != tuple(b_shape[:-2]):
        raise ValueError(f"[{op}] Batch dimensions of {tuple(a_shape)} and {tuple(b_shape)} "
                         "must be equal (broadcast them first).")
    return tuple(a_shape[:-1]) + (b_shape[-1],)


@dataclass(frozen=True)
class Matmul(Primitive):
    """a @ b over the last two axes; batch axes equal."""

    def abstract_eval(self, a, b):
        return [(matmul_shape(a.shape, b.shape), a.dtype)]

    def eval_cpu(self, a, b):
        _blas_threads()
        out = np.matmul(_compute(a), _compute(b))
        return [out.astype(a.dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        a, b = primals
        g = cotangents[0]
        out = []
        for i in argnums:
            out.append(ops.matmul(g, _swap(b)) if i == 0 else ops.matmul(_swap(a), g))
        return out

    def jvp(self, primals, tangents, argnums):
        a, b = primals
        out = None
        for i, t in zip(argnums, tangents):
            term = ops.matmul(t, b) if i == 0 else ops.matmul(a, t)
            out = term if out is None else out + term
        return [out]

    def vmap(self, inputs, axes):
        a, b = inputs
        ax_a, ax_b = axes
        if ax_a is None:
            a = ops.expand_dims(a, 0)  # a batch of one, broadcast by matmul
        else:
            a = ops.moveaxis(a, ax_a, 0)
        if ax_b is None:
            b = ops.expand_dims(b, 0)
        else:
            b = ops.moveaxis(b, ax_b, 0)
        return [ops.matmul(a, b)], [0]


@dataclass(frozen=True)
class AddMM(Primitive):
    """alpha * (a @ b) + beta * c, with c already broadcast to the output shape."""

    alpha: float = 1.0
    beta: float = 1.0

    def abstract_eval(self, c, a, b):
        shape = matmul_shape(a.shape, b.shape, "addmm")
        if tuple(c.shape) != shape:
            raise ValueError(f"[addmm] c must have the output shape {shape}, got {c.shape}.")
        return [(shape, a.dtype)]

    def eval_cpu(self, c, a, b):
        _blas_threads()
        out = np.matmul(_compute(a), _compute(b))
        if self.alpha != 1.0:
            out = out * out.dtype.type(self.alpha)
        if self.beta != 0.0:  # like BLAS: beta == 0 ignores c (even its NaNs)
            cc = _compute(c)
            out = out + (cc if self.beta == 1.0 else cc * cc.dtype.type(self.beta))
        return [out.astype(a.dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        c, a, b = primals
        g = cotangents[0]
        out = []
        for i in argnums:
            if i == 0:
                out.append(g * self.beta)
            elif i == 1:
                out.append(ops.matmul(g, _swap(b)) * self.alpha)
            else:
                out.append(ops.matmul(_swap(a), g) * self.alpha)
        return out

    def jvp(self, primals, tangents, argnums):
        c, a, b = primals
        out = None
        for i, t in zip(argnums, tangents):
            if i == 0:
                term = t * self.beta
            elif i == 1:
                term = ops.matmul(t, b) * self.alpha
            else:
                term = ops.matmul(a, t) * self.alpha
            out = term if out is None else out + term
        return [out]

    def vmap(self, inputs, axes):
        moved = []
        for x, ax in zip(inputs, axes):
            moved.append(ops.expand_dims(x, 0) if ax is None else ops.moveaxis(x, ax, 0))
        c, a, b = moved
        return [ops.addmm(c, a, b, alpha=self.alpha, beta=self.beta)], [0]


def einsum_sum_dtype(dtype: D.Dtype) -> D.Dtype:
    """The dtype of a summing einsum: MLX's `sum` widens small integers and bool."""
    if dtype is D.bool_ or dtype in (D.int8, D.int16):
        return D.int32
    if dtype in (D.uint8, D.uint16):
        return D.uint32
    return dtype


@dataclass(frozen=True)
class Einsum(Primitive):
    """np.einsum with explicit subscripts (no ellipsis); operands share one dtype and have the
    exact sizes of their subscripts (size-1 broadcasting is done by the op layer)."""

    subscripts: str

    def _parts(self):
        lhs, out = self.subscripts.split("->")
        return lhs.split(","), out

    def abstract_eval(self, *xs):
        ins, out = self._parts()
        sizes = {}
        for s, x in zip(ins, xs):
            for c, d in zip(s, x.shape):
                sizes[c] = d
        dtype = xs[0].dtype if xs else D.float32
        summed = any(c not in out for s in ins for c in s)
        return [(tuple(sizes[c] for c in out), einsum_sum_dtype(dtype) if summed else dtype)]

    def eval_cpu(self, *xs):
        ins, out = self._parts()
        summed = any(c not in out for s in ins for c in s)
        dt = xs[0].dtype
        bdt = D.from_numpy(dt)
        target = einsum_sum_dtype(bdt) if summed else bdt
        if bdt.name in _HALF:
            xs = [x.astype(np.float32) for x in xs]
        elif target is not bdt:
            xs = [x.astype(target.np_dtype) for x in xs]
        _blas_threads()
        r = np.einsum(self.subscripts, *xs, optimize=len(xs) > 1)
        return [np.asarray(r).astype(target.np_dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        ins, out = self._parts()
        g = cotangents[0]
        res = []
        for i in argnums:
            si = ins[i]
            if len(set(si)) != len(si):
                raise NotImplementedError(
                    "[Einsum] vjp with a repeated index in one operand is not implemented.")
            others = [(s, x) for j, (s, x) in enumerate(zip(ins, primals)) if j != i]
            present = set(out).union(*[set(s) for s, _ in others]) if others else set(out)
            keep = "".join(c for c in si if c in present)
            subs = ",".join([out] + [s for s, _ in others]) + "->" + keep
            r = ops.einsum(subs, g, *[x for _, x in others])
            if keep != si:  # indices only this operand carries: the cotangent is constant there
                shape = [1] * len(si)
                for ax, c in enumerate(si):
                    if c in present:
                        shape[ax] = primals[i].shape[ax]
                r = ops.broadcast_to(ops.reshape(r, tuple(shape)), primals[i].shape)
            res.append(r)
        return res

    def jvp(self, primals, tangents, argnums):
        out = None
        for i, t in zip(argnums, tangents):
            args = list(primals)
            args[i] = t
            term = ops.einsum(self.subscripts, *args)
            out = term if out is None else out + term
        return [out]

    def vmap(self, inputs, axes):
        ins, out = self._parts()
        used = set(self.subscripts)
        letter = next(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba"
                      if c not in used)
        new_ins, args = [], []
        for s, x, ax in zip(ins, inputs, axes):
            if ax is None:
                new_ins.append(s)
                args.append(x)
            else:
                new_ins.append(letter + s)
                args.append(ops.moveaxis(x, ax, 0))
        return [ops.einsum(",".join(new_ins) + "->" + letter + out, *args)], [0]
