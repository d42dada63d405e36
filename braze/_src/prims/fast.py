"""The `mx.fast` primitives: RMSNorm, LayerNorm, Rope, ScaledDotProductAttention and the
backward primitives of the normalisations (RMSNormVJP, LayerNormVJP).

Each evaluates as one native kernel (`fast_kernels.py`, Numba, imported on first use) and keeps
a NumPy path for when Numba is missing, for dtypes the kernels do not take and for the numpy
reference backend (`BRAZE_BACKEND=numpy`). Both compute what the composite graphs below
compute (MLX's CPU fallback graphs, which `ops/fast.py` used to build directly): half inputs
in float32, rounded to the half type at the steps where the graph rounds, so the results
match the composites (and MLX) bit for bit in float16/bfloat16.

The graphs (`*_graph`, written with the ops namespace) are also each primitive's definition for
the transforms it does not do natively: jvp, vmap of batched parameters, and every rule of the
backward primitives (so grad of grad differentiates the composite). The transforms layer
installs its `expanded_vjp/jvp/vmap` here (`set_expanders`); the top layer installs the cpu
backend's thread pool (`set_runner`), which splits a kernel's index range across threads when
that gains (without it the kernels run on the calling thread).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import config
from .. import dtypes as D
from ..array import array
from .base import Primitive, bind, ops

_RUN = [None]  # fn(kernel, n, args, unit): the thread pool's `run`
_EXPAND: dict = {}  # "vjp" / "jvp" / "vmap" -> transforms' expanded rules
_KERNELS = []  # [module or None] once tried


def set_runner(fn) -> None:
    """Install `fn(kernel, n, args, unit)`, which runs `kernel(start, stop, *args)` over
    [0, n) (the cpu backend's `threads.POOL.run`)."""
    _RUN[0] = fn


def set_expanders(vjp, jvp, vmap) -> None:
    """Install the transforms' rules for a primitive defined by a graph of other ops."""
    _EXPAND.update(vjp=vjp, jvp=jvp, vmap=vmap)


def _kernels():
    """The Numba kernels, or None (no Numba, or the numpy reference backend)."""
    if config.get().backend == "numpy":
        return None
    if not _KERNELS:
        try:
            from . import fast_kernels
        except Exception:  # pragma: no cover - Numba missing or broken
            fast_kernels = None
        _KERNELS.append(fast_kernels)
    return _KERNELS[0]


def _run(kernel, n, args, unit):
    if n <= 0:
        return
    if _RUN[0] is None:
        kernel(0, n, *args)
    else:
        _RUN[0](kernel, n, args, unit)


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _mode(npd) -> int:
    """How a kernel rounds to `npd`: 0 not at all, 1 float16, 2 bfloat16."""
    if npd == np.float16:
        return 1
    return 2 if D.is_bf16(npd) else 0


def _ct(npd):
    """The compute dtype of a float input: float64 for float64, else float32."""
    return _F64 if npd == _F64 else _F32


def _native_types(x_dt, out_dt) -> bool:
    """Whether a kernel takes input `x_dt` and output `out_dt` (both float32-computed halves
    and float32, or both float64)."""
    small = (_F32, np.dtype(np.float16))
    ok = lambda t: t in small or D.is_bf16(t)  # noqa: E731
    return (ok(x_dt) and ok(out_dt)) or (x_dt == _F64 and out_dt == _F64)


def _rows(x, ct):
    return np.ascontiguousarray(x.reshape(-1, x.shape[-1]) if x.ndim else x, dtype=ct)


def _vec(p, ct, d):
    return np.ascontiguousarray(p, dtype=ct) if p is not None else np.zeros(d, ct)


def _np_dt(a) -> D.Dtype:
    return D.from_numpy(a.dtype)


def _expand(kind, fn, *args):
    return _EXPAND[kind](fn, *args)


def _zeros_for(cts, primals):
    return [c if c is not None else ops.zeros_like(p) for c, p in zip(cts, primals)]


# ============================================================================================
# rms_norm / layer_norm
# ============================================================================================
def rms_norm_graph(x, weight, eps):
    """MLX's rms_norm graph: x / sqrt(mean(x^2) + eps) in float32 (float64 for float64),
    rounded to the output dtype, then * weight."""
    out_type = x.dtype if weight is None else D.promote(x.dtype, weight.dtype)
    ct = D.float64 if x.dtype is D.float64 else D.float32
    y = ops.astype(x, ct)
    y = y * ops.rsqrt(ops.mean(ops.square(y), axis=-1, keepdims=True) + array(eps, ct))
    y = ops.astype(y, out_type)
    return y * weight if weight is not None else y


def layer_norm_graph(x, weight, bias, eps):
    """MLX's layer_norm graph: (x - mean) / sqrt(var + eps), rounded, * weight, + bias."""
    out_type = D.promote_types(*[a.dtype for a in (x, weight, bias) if a is not None])
    ct = D.float64 if x.dtype is D.float64 else D.float32
    y = ops.astype(x, ct)
    mu = ops.mean(y, axis=-1, keepdims=True)
    yc = y - mu
    v = ops.mean(ops.square(yc), axis=-1, keepdims=True)
    y = ops.astype(yc * ops.rsqrt(v + array(eps, ct)), out_type)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _norm_np(x, w, b, eps, out_dt, rms):
    """The NumPy path of both forward normalisations (the graph's roundings, in NumPy)."""
    ct = _ct(x.dtype)
    y = x.astype(ct)
    with np.errstate(all="ignore"):
        if rms:
            y = y * (1 / np.sqrt(np.mean(y * y, axis=-1, keepdims=True) + ct.type(eps)))
        else:
            y = y - np.mean(y, axis=-1, keepdims=True)
            y = y * (1 / np.sqrt(np.mean(y * y, axis=-1, keepdims=True) + ct.type(eps)))
        y = y.astype(out_dt)
        if w is not None:
            y = y * w.astype(out_dt)
        if b is not None:
            y = y + b.astype(out_dt)
    return np.ascontiguousarray(y, dtype=out_dt)


def _norm_eval(x, w, b, eps, out_dt, rms):
    K = _kernels()
    if K is None or x.size == 0 or not _native_types(x.dtype, out_dt):
        return _norm_np(x, w, b, eps, out_dt, rms)
    ct = _ct(x.dtype)
    xr = _rows(x, ct)
    n, d = xr.shape
    out = np.empty((n, d), ct)
    wv, bv = _vec(w, ct, d), _vec(b, ct, d)
    e = ct.type(eps)
    if rms:
        _run(K.rms_fwd, n, (xr, wv, out, e, w is not None, _mode(out_dt)), d)
    else:
        _run(K.ln_fwd, n, (xr, wv, bv, out, e, w is not None, b is not None, _mode(out_dt)), d)
    return out.reshape(x.shape).astype(out_dt, copy=False)


_BLOCK = 64  # rows per block of a backward kernel (one partial weight gradient per block)


def _norm_bwd_np(x, w, g, eps, rms):
    ct = _ct(x.dtype)
    xf, gf = x.astype(ct), g.astype(ct)
    gw = gf * w.astype(ct) if w is not None else gf
    axes = tuple(range(x.ndim - 1))
    with np.errstate(all="ignore"):
        if rms:
            r = 1 / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + ct.type(eps))
            dx = r * gw - xf * (r ** 3 * np.mean(gw * xf, axis=-1, keepdims=True))
            xh = xf * r
            return dx, np.sum(gf * xh, axis=axes), None
        xc = xf - np.mean(xf, axis=-1, keepdims=True)
        r = 1 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + ct.type(eps))
        xh = xc * r
        dx = r * (gw - np.mean(gw, axis=-1, keepdims=True)
                  - xh * np.mean(gw * xh, axis=-1, keepdims=True))
        return dx, np.sum(gf * xh, axis=axes), np.sum(gf, axis=axes)


def _norm_bwd_eval(x, w, g, eps, rms):
    """(dx, dweight, dbias) in the compute dtype; dbias None for rms."""
    K = _kernels()
    if K is None or x.size == 0 or not _native_types(x.dtype, _ct(x.dtype)):
        return _norm_bwd_np(x, w, g, eps, rms)
    ct = _ct(x.dtype)
    xr, gr = _rows(x, ct), _rows(g, ct)
    n, d = xr.shape
    wv = _vec(w, ct, d)
    nb = -(-n // _BLOCK)
    dx = np.empty((n, d), ct)
    dwp = np.empty((nb, d), ct)
    e = ct.type(eps)
    if rms:
        _run(K.rms_bwd, nb, (xr, wv, gr, dx, dwp, e, w is not None, _BLOCK), _BLOCK * d)
        return dx.reshape(x.shape), dwp.sum(axis=0), None
    dbp = np.empty((nb, d), ct)
    _run(K.ln_bwd, nb, (xr, wv, gr, dx, dwp, dbp, e, w is not None, _BLOCK), _BLOCK * d)
    return dx.reshape(x.shape), dwp.sum(axis=0), dbp.sum(axis=0)


def _norm_vmap(prim, graph, inputs, axes):
    """Only x batched: the normalisation is over the last axis of each example, so x is
    normalised as it stands (its batch axis moved off the end first). Otherwise the graph."""
    if all(a is None for a in axes[1:]):
        x, ax = inputs[0], axes[0]
        if ax == x.ndim - 1:
            x, ax = ops.moveaxis(x, ax, 0), 0
        return [bind(prim, (x,) + tuple(inputs[1:]))], [ax]
    return _expand("vmap", lambda ins: [graph(ins)], inputs, axes)


@dataclass(frozen=True)
class RMSNorm(Primitive):
    """mx.fast.rms_norm: inputs (x,) or (x, weight)."""

    eps: float

    def abstract_eval(self, x, w=None):
        return [(x.shape, x.dtype if w is None else D.promote(x.dtype, w.dtype))]

    def _graph(self, ins):
        return rms_norm_graph(ins[0], ins[1] if len(ins) > 1 else None, self.eps)

    def eval_cpu(self, x, w=None):
        out_dt = x.dtype if w is None else D.promote(_np_dt(x), _np_dt(w)).np_dtype
        return [_norm_eval(x, w, None, self.eps, out_dt, True)]

    def vjp(self, primals, cotangents, argnums, outputs):
        grads = bind(RMSNormVJP(self.eps), tuple(primals) + (cotangents[0],))
        grads = grads if isinstance(grads, list) else [grads]
        return [grads[i] for i in argnums]

    def jvp(self, primals, tangents, argnums):
        return _expand("jvp", lambda ins: [self._graph(ins)], primals, tangents, argnums)

    def vmap(self, inputs, axes):
        return _norm_vmap(self, self._graph, inputs, axes)


@dataclass(frozen=True)
class RMSNormVJP(Primitive):
    """The rms_norm backward: inputs (x, [weight,] cotangent), outputs (dx, [dweight])."""

    eps: float

    def abstract_eval(self, *ins):
        return [(a.shape, a.dtype) for a in ins[:-1]]

    def eval_cpu(self, *ins):
        x, g = ins[0], ins[-1]
        w = ins[1] if len(ins) == 3 else None
        dx, dw, _ = _norm_bwd_eval(x, w, g, self.eps, True)
        out = [dx.astype(x.dtype, copy=False)]
        if w is not None:
            out.append(dw.astype(w.dtype))
        return out

    def _graph(self, ins):
        fwd = RMSNorm(self.eps)
        n = len(ins) - 1
        cts = _expand("vjp", lambda p: [fwd._graph(p)], list(ins[:n]), [ins[n]],
                      list(range(n)))
        return _zeros_for(cts, ins[:n])

    def vjp(self, primals, cotangents, argnums, outputs):
        return _expand("vjp", self._graph, primals, cotangents, argnums)

    def jvp(self, primals, tangents, argnums):
        return _expand("jvp", self._graph, primals, tangents, argnums)

    def vmap(self, inputs, axes):
        return _expand("vmap", self._graph, inputs, axes)


@dataclass(frozen=True)
class LayerNorm(Primitive):
    """mx.fast.layer_norm: inputs (x, [weight], [bias]) as the flags say."""

    eps: float
    has_weight: bool
    has_bias: bool

    def _split(self, ins):
        it = iter(ins[1:])
        w = next(it) if self.has_weight else None
        b = next(it) if self.has_bias else None
        return ins[0], w, b

    def abstract_eval(self, *ins):
        return [(ins[0].shape, D.promote_types(*[a.dtype for a in ins]))]

    def _graph(self, ins):
        return layer_norm_graph(*self._split(ins), self.eps)

    def eval_cpu(self, *ins):
        x, w, b = self._split(ins)
        out_dt = D.promote_types(*[_np_dt(a) for a in ins]).np_dtype
        return [_norm_eval(x, w, b, self.eps, out_dt, False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        grads = bind(LayerNormVJP(self.eps, self.has_weight, self.has_bias),
                     tuple(primals) + (cotangents[0],))
        grads = grads if isinstance(grads, list) else [grads]
        return [grads[i] for i in argnums]

    def jvp(self, primals, tangents, argnums):
        return _expand("jvp", lambda ins: [self._graph(ins)], primals, tangents, argnums)

    def vmap(self, inputs, axes):
        return _norm_vmap(self, self._graph, inputs, axes)


@dataclass(frozen=True)
class LayerNormVJP(Primitive):
    """The layer_norm backward: inputs (x, [weight], [bias], cotangent), outputs the
    gradients of (x, [weight], [bias])."""

    eps: float
    has_weight: bool
    has_bias: bool

    def abstract_eval(self, *ins):
        return [(a.shape, a.dtype) for a in ins[:-1]]

    def eval_cpu(self, *ins):
        fwd = LayerNorm(self.eps, self.has_weight, self.has_bias)
        x, w, b = fwd._split(ins[:-1])
        dx, dw, db = _norm_bwd_eval(x, w, ins[-1], self.eps, False)
        out = [dx.astype(x.dtype, copy=False)]
        if w is not None:
            out.append(dw.astype(w.dtype))
        if b is not None:
            out.append(db.astype(b.dtype))
        return out

    def _graph(self, ins):
        fwd = LayerNorm(self.eps, self.has_weight, self.has_bias)
        n = len(ins) - 1
        cts = _expand("vjp", lambda p: [fwd._graph(p)], list(ins[:n]), [ins[n]],
                      list(range(n)))
        return _zeros_for(cts, ins[:n])

    def vjp(self, primals, cotangents, argnums, outputs):
        return _expand("vjp", self._graph, primals, cotangents, argnums)

    def jvp(self, primals, tangents, argnums):
        return _expand("jvp", self._graph, primals, tangents, argnums)

    def vmap(self, inputs, axes):
        return _expand("vmap", self._graph, inputs, axes)
