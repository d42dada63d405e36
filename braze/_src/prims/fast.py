"""The `mx.fast` primitives: RMSNorm, LayerNorm, Rope, ScaledDotProductAttention and the
backward primitives (RMSNormVJP, LayerNormVJP, ScaledDotProductAttentionVJP).

Each evaluates as one native kernel (`fast_kernels.py`, Numba, imported on first use) and keeps
a NumPy path for when Numba is missing, for dtypes the kernels do not take and for the numpy
reference backend (`BRAZE_BACKEND=numpy`). Both compute what the composite graphs below
compute (MLX's CPU fallback graphs, which `ops/fast.py` used to build directly): half inputs
in float32, rounded to the half type at the steps where the graph rounds, so the results
match the composites (and MLX) bit for bit in float16/bfloat16 (the backward primitives
compute half inputs in float32 and round their results once).

The graphs (`*_graph`, written with the ops namespace) are also each primitive's definition for
the transforms it does not do natively: jvp, vmap of batched parameters, and the rules of the
backward primitives (so grad of grad differentiates the composite). The transforms layer
installs its `expanded_vjp/jvp/vmap` here (`set_expanders`). Kernels run through braze's
thread pool (`threads.POOL`), which splits a kernel's index range across threads when that
gains.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from .. import config
from .. import dtypes as D
from ..array import array
from ..np_errors import ignoring
from ..threads import POOL
from .base import Primitive, bind, ops

_EXPAND: dict = {}  # "vjp" / "jvp" / "vmap" -> transforms' expanded rules
_KERNELS = []  # [module or None] once tried


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
    if n > 0:
        POOL.run(kernel, n, args, unit)


_F32, _F64, _F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)


def _mode(npd) -> int:
    """How a kernel rounds to `npd`: 0 not at all, 1 float16, 2 bfloat16."""
    if npd is _F32 or npd is _F64:  # the common cases, by identity
        return 0
    if npd == np.float16:
        return 1
    return 2 if D.is_bf16(npd) else 0


def _ct(npd):
    """The compute dtype of a float input: float64 for float64, else float32."""
    return _F64 if npd == _F64 else _F32


def _native_types(x_dt, out_dt) -> bool:
    """Whether a kernel takes input `x_dt` and output `out_dt` (both float32-computed halves
    and float32, or both float64)."""
    if x_dt is _F32 and out_dt is _F32:  # the common case, by identity
        return True
    small = lambda t: t == _F32 or t == _F16 or D.is_bf16(t)  # noqa: E731
    return (small(x_dt) and small(out_dt)) or (x_dt == _F64 and out_dt == _F64)


def _c(a, ct):
    """`a` as an aligned, writable, C-contiguous array of `ct`: the one array type a kernel is
    built for (Numba builds a new specialisation for a read-only, unaligned or strided array)."""
    a = np.ascontiguousarray(a, dtype=ct)
    f = a.flags
    return a if f.writeable and f.aligned else a.copy()


def _rows(x, ct):
    return _c(x.reshape(-1, x.shape[-1]), ct)


def _vec(p, ct, d):
    return _c(p, ct) if p is not None else np.zeros(d, ct)


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
    with ignoring():
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
    wv = _vec(w, ct, d)
    e = ct.type(eps)
    if rms:
        _run(K.rms_fwd, n, (xr, wv, out, e, int(w is not None), _mode(out_dt)), d)
    else:
        wv = wv if w is not None else np.ones(d, ct)
        _run(K.ln_fwd, n, (xr, wv, _vec(b, ct, d), out, e, _mode(out_dt)), d)
    return out.reshape(x.shape).astype(out_dt, copy=False)


_ROPE_TABLES: dict = {}  # Rope._tables' last results (shared: nothing writes them)
_POSITIONS: dict = {}  # Rope._positions' tables per parameters (shared: nothing writes them)
_POSITIONS_BYTES = 1 << 24  # the largest table (cos and sin) kept: 32Ki positions at dims 128
_BLOCK = 64  # rows per block of a backward kernel (one partial weight gradient per block)


def _norm_bwd_np(x, w, g, eps, rms):
    ct = _ct(x.dtype)
    xf, gf = x.astype(ct), g.astype(ct)
    gw = gf * w.astype(ct) if w is not None else gf
    axes = tuple(range(x.ndim - 1))
    with ignoring():
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
        _run(K.rms_bwd, nb, (xr, wv, gr, dx, dwp, e, int(w is not None), _BLOCK),
             _BLOCK * d)
        return dx.reshape(x.shape), dwp.sum(axis=0), None
    dbp = np.empty((nb, d), ct)
    _run(K.ln_bwd, nb, (xr, wv, gr, dx, dwp, dbp, e, int(w is not None), _BLOCK),
         _BLOCK * d)
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


class _ByGraph:
    """Every transform of a backward primitive goes through its graph (`_graph`): the
    gradient of the forward composite, so grad of grad differentiates the composite."""

    def vjp(self, primals, cotangents, argnums, outputs):
        return _expand("vjp", self._graph, primals, cotangents, argnums)

    def jvp(self, primals, tangents, argnums):
        return _expand("jvp", self._graph, primals, tangents, argnums)

    def vmap(self, inputs, axes):
        return _expand("vmap", self._graph, inputs, axes)


def _backward_graph(fwd, ins, wrt=None):
    """The cotangents of a forward primitive's graph at inputs ins[:-1] (those numbered `wrt`,
    default all) for the output cotangent ins[-1] (zeros for inputs the graph does not
    reach)."""
    n = len(ins) - 1
    wrt = list(range(n)) if wrt is None else list(wrt)
    cts = _expand("vjp", lambda p: [fwd._graph(p)], list(ins[:n]), [ins[n]], wrt)
    return _zeros_for(cts, [ins[i] for i in wrt])


def _by_backward(bwd, primals, cotangents, argnums):
    """A forward primitive's vjp: its backward primitive, one kernel for every cotangent."""
    grads = bind(bwd, tuple(primals) + (cotangents[0],))
    grads = grads if isinstance(grads, list) else [grads]
    return [grads[i] for i in argnums]


@dataclass(frozen=True)
class RMSNorm(Primitive):
    """mx.fast.rms_norm: inputs (x,) or (x, weight)."""

    eps: float

    def abstract_eval(self, x, w=None):
        return [(x.shape, x.dtype if w is None else D.promote(x.dtype, w.dtype))]

    def _graph(self, ins):
        return rms_norm_graph(ins[0], ins[1] if len(ins) > 1 else None, self.eps)

    def eval_cpu(self, x, w=None):
        out_dt = x.dtype if w is None or w.dtype is x.dtype else (
            D.promote(_np_dt(x), _np_dt(w)).np_dtype)
        return [_norm_eval(x, w, None, self.eps, out_dt, True)]

    def vjp(self, primals, cotangents, argnums, outputs):
        return _by_backward(RMSNormVJP(self.eps), primals, cotangents, argnums)

    def jvp(self, primals, tangents, argnums):
        return _expand("jvp", lambda ins: [self._graph(ins)], primals, tangents, argnums)

    def vmap(self, inputs, axes):
        return _norm_vmap(self, self._graph, inputs, axes)


@dataclass(frozen=True)
class RMSNormVJP(_ByGraph, Primitive):
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
        return _backward_graph(RMSNorm(self.eps), ins)


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
        return _by_backward(LayerNormVJP(self.eps, self.has_weight, self.has_bias), primals,
                            cotangents, argnums)

    def jvp(self, primals, tangents, argnums):
        return _expand("jvp", lambda ins: [self._graph(ins)], primals, tangents, argnums)

    def vmap(self, inputs, axes):
        return _norm_vmap(self, self._graph, inputs, axes)


@dataclass(frozen=True)
class LayerNormVJP(_ByGraph, Primitive):
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
        return _backward_graph(LayerNorm(self.eps, self.has_weight, self.has_bias), ins)


# ============================================================================================
# rope
# ============================================================================================
def rope_graph(x, dims, traditional, base, scale, offset, freqs, inverse=False):
    """MLX's rope graph (positions (offset + arange(T)) * scale along axis -2; `offset` an
    integer array, a scalar or one per batch element); `inverse` rotates by minus the angle
    (the transpose: rope's vjp)."""
    shape = x.shape
    B = x.shape[0]
    if x.ndim == 3:
        x = ops.expand_dims(x, 1)
    elif x.ndim > 4:
        x = ops.flatten(x, 1, x.ndim - 3)
    # angles in float32 (float64 for float64 input); cos/sin rounded to x's dtype, and the
    # rotation computed in x's dtype (MLX's CPU numerics, bit for bit in float16/bfloat16)
    t = x.dtype
    ft = D.float64 if t is D.float64 else D.float32
    half = dims // 2
    T = x.shape[2]
    offset = ops.astype(offset, ft)
    if offset.size > 1:
        offset = ops.reshape(offset, (B, 1, 1, 1))  # per batch element: (B, 1, T, 1) positions
        positions = (ops.arange(T, dtype=ft)[:, None] + offset) * array(scale, ft)
    else:
        positions = (ops.arange(T, dtype=ft) + ops.reshape(offset, ())) * array(scale, ft)
        positions = positions[:, None]
    if freqs is None:
        inv = ops.exp(ops.arange(0, -half, -1, dtype=ft) * array(math.log(base) / half, ft))
    else:
        inv = ops.astype(ops.reciprocal(ops.astype(freqs, ft)), ft)
    theta = positions * inv
    cos, sin = ops.astype(ops.cos(theta), t), ops.astype(ops.sin(theta), t)
    if inverse:
        sin = ops.negative(sin)
    if traditional:
        x1 = x[..., 0:dims:2]
        x2 = x[..., 1:dims:2]
        r1 = x1 * cos - x2 * sin
        r2 = x1 * sin + x2 * cos
        out = ops.reshape(ops.stack([r1, r2], axis=-1), x.shape[:-1] + (dims,))
        if dims < x.shape[-1]:
            out = ops.concatenate([out, x[..., dims:]], axis=-1)
    else:
        x1, x2 = x[..., :half], x[..., half:dims]
        parts = [x1 * cos - x2 * sin, x1 * sin + x2 * cos]
        if dims < x.shape[-1]:
            parts.append(x[..., dims:])
        out = ops.concatenate(parts, axis=-1)
    return ops.reshape(out, shape)


@functools.lru_cache(maxsize=64)
def _inv_freqs(half, base, ft):
    """base ** (-i / half) for i < half, as the graph computes it (exp of a float32 product):
    the same for every call of a model's RoPE, so kept."""
    step = ft.type(math.log(base) / half)
    with ignoring():
        inv = np.exp(np.arange(0, -half, -1, dtype=ft) * step)
    inv.flags.writeable = False
    return inv


def _as4(x):
    if x.ndim == 3:
        return x[:, None]
    if x.ndim > 4:
        return x.reshape((x.shape[0], -1) + x.shape[-2:])
    return x


@dataclass(frozen=True)
class Rope(Primitive):
    """mx.fast.rope: inputs (x, offset) or (x, offset, freqs); `offset` an integer array (a
    scalar or one per batch element). `inverse` rotates by minus the angle (the vjp)."""

    dims: int
    traditional: bool
    base: float | None
    scale: float
    inverse: bool = False

    def abstract_eval(self, x, offset, freqs=None):
        return [(x.shape, x.dtype)]

    def _graph(self, ins):
        x, offset = ins[0], ins[1]
        freqs = ins[2] if len(ins) > 2 else None
        return rope_graph(x, self.dims, self.traditional, self.base, self.scale, offset, freqs,
                          self.inverse)

    def _tables(self, x, offset, freqs):
        """cos and sin of the angles, (1 or B, T, dims / 2), rounded to x's dtype. For one
        integer offset they are rows of a table of positions 0.. kept per parameters (a
        decoder's every token reads the next row); other offsets' are kept for the last few
        (parameters, positions)."""
        if freqs is not None:
            return self._angles(x, offset, freqs)
        off = np.asarray(offset)
        T = x.shape[-2]
        if off.ndim == 0 and off.dtype.kind in "iu" and 0 <= int(off):
            o = int(off)
            table = self._positions(x.dtype, o + T)
            if table is not None:
                return table[0][None, o:o + T], table[1][None, o:o + T]
        key = (self.dims, self.base, self.scale, self.inverse, x.dtype, T, off.dtype,
               off.tobytes())
        got = _ROPE_TABLES.get(key)
        if got is None:
            got = self._angles(x, offset, None)
            if len(_ROPE_TABLES) >= 16:
                _ROPE_TABLES.pop(next(iter(_ROPE_TABLES)))
            _ROPE_TABLES[key] = got
        return got

    def _positions(self, dtype, n):
        """(cos, sin) of positions 0.. (at least n of them), or None past _POSITIONS_BYTES.
        Row p equals the angles at offset p: an integer position is exact in float32 below
        2**24, and each element is computed on its own."""
        key = (self.dims, self.base, self.scale, self.inverse, dtype)
        table = _POSITIONS.get(key)
        if table is None or len(table[0]) < n:
            size = max(256, 1 << (n - 1).bit_length())
            if size * self.dims * dtype.itemsize > _POSITIONS_BYTES:
                return None
            table = _POSITIONS[key] = self._cos_sin(np.arange(size, dtype=_ct(dtype)), dtype,
                                                    None)
        return table

    def _angles(self, x, offset, freqs):
        ft = _ct(x.dtype)
        off = np.asarray(offset).astype(ft).reshape(-1)
        with ignoring():
            pos = np.arange(x.shape[-2], dtype=ft)[None, :] + off[:, None]
        return self._cos_sin(pos, x.dtype, freqs)

    def _cos_sin(self, pos, dtype, freqs):
        """cos and sin of the angles at the float positions `pos` (..., T), rounded to
        `dtype`: (..., T, dims / 2)."""
        ft = pos.dtype
        with ignoring():
            pos = pos * ft.type(self.scale)
            if freqs is None:
                inv = _inv_freqs(self.dims // 2, self.base, ft)
            else:
                inv = np.reciprocal(freqs.astype(ft)).astype(ft)
            theta = pos[..., None] * inv
            cos, sin = np.cos(theta).astype(dtype), np.sin(theta).astype(dtype)
        return cos, (-sin if self.inverse else sin)

    def eval_cpu(self, x, offset, freqs=None):
        if x.size == 0:
            return [np.empty(x.shape, x.dtype)]
        cos, sin = self._tables(x, offset, freqs)
        x4 = _as4(x)
        K = _kernels()
        if K is None or not _native_types(x.dtype, x.dtype):
            return [self._numpy(x4, cos, sin).reshape(x.shape)]
        ct = _ct(x.dtype)
        xc = _c(x4, ct)
        out = np.empty(xc.shape, ct)
        B, H, T, Dm = xc.shape
        _run(K.rope, B * H, (xc, _c(cos, ct), _c(sin, ct), out, int(self.dims),
                             int(self.traditional), _mode(x.dtype)), T * Dm)
        return [out.reshape(x.shape).astype(x.dtype, copy=False)]

    def _numpy(self, x, cos, sin):
        """The NumPy path, in x's dtype as the graph computes (cos, sin: (1 or B, T, half))."""
        d, half = self.dims, self.dims // 2
        cos, sin = cos[:, None], sin[:, None]
        if self.traditional:
            x1, x2 = x[..., 0:d:2], x[..., 1:d:2]
        else:
            x1, x2 = x[..., :half], x[..., half:d]
        r1, r2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
        out = np.array(x, copy=True)
        if self.traditional:
            out[..., 0:d:2], out[..., 1:d:2] = r1, r2
        else:
            out[..., :half], out[..., half:d] = r1, r2
        return out

    def vjp(self, primals, cotangents, argnums, outputs):
        out = {}
        if 0 in argnums:  # the rotation is orthogonal: its transpose is the inverse rotation
            out[0] = bind(replace(self, inverse=not self.inverse),
                          (cotangents[0],) + tuple(primals[1:]))
        rest = [i for i in argnums if i != 0 and i != 1]
        if rest:  # freqs: through the graph
            for i, c in zip(rest, _expand("vjp", lambda ins: [self._graph(ins)], primals,
                                          cotangents, rest)):
                out[i] = c
        return [out.get(i) for i in argnums]

    def jvp(self, primals, tangents, argnums):
        if list(argnums) == [0]:
            return [bind(self, (tangents[0],) + tuple(primals[1:]))]
        return _expand("jvp", lambda ins: [self._graph(ins)], primals, tangents, argnums)

    def vmap(self, inputs, axes):
        x, ax = inputs[0], axes[0]
        if ax is not None and all(a is None for a in axes[1:]):
            # the vmapped axis joins the heads: after the batch axis when offsets are per
            # batch element, in front of it otherwise
            to = 1 if inputs[1].size > 1 else 0
            x = ops.moveaxis(x, ax, to)
            return [bind(self, (x,) + tuple(inputs[1:]))], [to]
        return _expand("vmap", lambda ins: [self._graph(ins)], inputs, axes)


# ============================================================================================
# scaled_dot_product_attention
# ============================================================================================
def sdpa_graph(q, k, v, scale, causal, mask, sinks):
    """MLX's attention graph over (B, N, T, D) arrays of one dtype (k, v with N // rep heads;
    `mask` bool or of q's dtype, broadcastable to the scores; `sinks` (N,) of q's dtype)."""
    final = q.dtype
    n_q, n_kv = q.shape[1], k.shape[1]
    rep = n_q // n_kv
    q = array(scale, final) * q
    if rep > 1:
        q = ops.unflatten(q, 1, (n_kv, rep))
        k = ops.expand_dims(k, 2)
        v = ops.expand_dims(v, 2)
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2))
    if causal:
        kL, qL = k.shape[-2], q.shape[-2]
        q_off = kL - qL  # lower-right aligned (MLX: rows before the first key are fully masked)
        mask = ops.greater_equal(ops.arange(q_off, q_off + qL)[:, None], ops.arange(kL)[None, :])
    if mask is not None:
        if rep > 1 and mask.ndim >= 3:
            if mask.shape[-3] == 1:
                mask = ops.expand_dims(mask, -3)
            else:
                mask = ops.unflatten(mask, -3, (n_kv, rep))
        if mask.dtype is D.bool_:
            scores = ops.where(mask, scores, array(D.finfo(scores.dtype).min, scores.dtype))
        else:
            scores = scores + mask
    if sinks is not None:
        s = ops.reshape(sinks, (1, n_q, 1, 1))
        if scores.ndim == 5:
            s = ops.unflatten(s, 1, (n_kv, rep))
        s = ops.broadcast_to(s, scores.shape[:-1] + (1,))
        scores = ops.concatenate([s, scores], axis=-1)
    scores = ops.softmax(scores, axis=-1, precise=True)
    if sinks is not None:
        scores = scores[..., 1:]
    out = ops.matmul(scores, v)
    if rep > 1:
        out = ops.flatten(out, 1, 2)
    return out


_ROWS = 16  # query rows per attention task (each key/value row is loaded once per block)


@functools.lru_cache(maxsize=None)
def _unused(ct):
    """The one-element array of `ct` passed for an absent mask or sinks (never read)."""
    return np.zeros(1, ct)


_NO_STRIDES = np.zeros(3, np.int64)  # an absent mask's strides (never read)


def _sdpa_mask(mask, tk, ct):
    """A mask as the kernels take it: its distinct rows of `tk` values in `ct` (bool as 0 / 1),
    flat, the element strides of those rows along the scores' (B, Nq, Tq) (0 on broadcast
    axes), and its kind (0 none, 1 bool, 2 additive). One array type for every mask and dtype:
    one kernel build; rows contiguous: the kernels' loops over keys vectorize."""
    if mask is None:
        return _unused(ct), _NO_STRIDES, 0
    m = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    bc = [n == 1 or st == 0 for n, st in zip(m.shape[:3], m.strides[:3])]
    m = m[tuple(slice(0, 1) if b else slice(None) for b in bc)]
    m = _c(np.broadcast_to(m, m.shape[:3] + (tk,)), ct)
    strides = [0 if b else st // m.itemsize for b, st in zip(bc, m.strides[:3])]
    return m.reshape(-1), np.array(strides, np.int64), 1 if mask.dtype == np.bool_ else 2


def _as_rows(a):
    """A (B, N, T, D) array as its (B * N * T, D) rows (D may be 0)."""
    return a.reshape(math.prod(a.shape[:3]), a.shape[3])


_KV_VIEW_MIN = 1 << 17  # bytes: below, a copy costs no more than making the view (~2.5 us)


def _kv_rows(a, ct):
    """K or V (B, N, T, D) as the forward kernel reads it: (2-D rows, the row distance between
    its (batch, head) pairs). A view of the first T positions of a larger buffer (a KV cache)
    is read where it lies: copying it costs O(context) a token, as much again as attention."""
    B, N, T, D = a.shape
    fl = a.flags
    if (not fl.c_contiguous and a.nbytes >= _KV_VIEW_MIN and a.dtype == ct and fl.writeable
            and fl.aligned):
        s0, s1, s2, s3 = a.strides
        if s3 == a.itemsize and s2 == D * s3 and s1 >= T * s2 and s1 % s2 == 0 and (
                B == 1 or s0 == N * s1):
            R = s1 // s2
            return np.lib.stride_tricks.as_strided(a, ((B * N - 1) * R + T, D), (s2, s3)), R
    return _as_rows(_c(a, ct)), T


def _sdpa_operands(prim, qs, k, v, mask, sinks, dt, in_place=False):
    """The arguments the attention kernels start with (`dt` the inputs' dtype), arrays as 2-D
    row views in the compute dtype (q pre-scaled): (q, k, v, mask values, mask strides, sinks,
    Tq, Tk, Nkv, rep, causal, mask kind, has sinks, fmin, mode, rows per block). `in_place`
    (the forward kernel): k and v may be read where they lie (`_kv_rows`), and their row
    distances between (batch, head) pairs follow."""
    ct = qs.dtype
    N, Tq = qs.shape[1:3]
    nkv, Tk = k.shape[1:3]
    mv, ms, kind = _sdpa_mask(mask, Tk, ct)
    sk = _c(sinks, ct) if sinks is not None else _unused(ct)
    fmin = _lowest(dt, ct)
    if in_place:
        (kr, ks), (vr, vs) = _kv_rows(k, ct), _kv_rows(v, ct)
        tail = (ks, vs)
    else:
        kr, vr, tail = _as_rows(_c(k, ct)), _as_rows(_c(v, ct)), ()
    return (_as_rows(_c(qs, ct)), kr, vr, mv, ms, sk, Tq, Tk, nkv, N // nkv, int(prim.causal),
            kind, int(sinks is not None), fmin, _mode(dt), _ROWS) + tail


@functools.lru_cache(maxsize=None)
def _lowest(dt, ct):
    """The most negative finite value of `dt`, in the compute dtype `ct` (a masked score)."""
    return ct.type(D.finfo(D.from_numpy(dt)).min)


def _scaled_q(q, scale, ct):
    """scale * q rounded to q's dtype, as the graph computes it, in the compute dtype; and
    the scale rounded so."""
    sc = q.dtype.type(scale)
    qs = q * sc
    return (qs if qs.dtype is ct else qs.astype(ct)), ct.type(sc)


def _fold_vmap(prim, inputs, axes, folded, mask):
    """`prim` vmapped by folding the vmapped axis into the batch axis ((V, B, ...) -> (V * B,
    ...)) when exactly the inputs numbered `folded` are batched and `mask` (or None) is the
    same for every batch element; None otherwise."""
    if any((ax is None) == (i in folded) for i, ax in enumerate(axes)):
        return None
    if mask is not None and mask.ndim == 4 and mask.shape[0] != 1:
        return None
    ins = list(inputs)
    for i in folded:
        a = ops.moveaxis(inputs[i], axes[i], 0)
        V, B = a.shape[:2]
        ins[i] = ops.reshape(a, (V * B,) + a.shape[2:])
    ys = bind(prim, tuple(ins))
    ys = ys if isinstance(ys, list) else [ys]
    return [ops.reshape(y, (V, B) + y.shape[1:]) for y in ys], [0] * len(ys)


@dataclass(frozen=True)
class _Attention(Primitive):
    """The parameters and NumPy steps the attention primitives share: inputs (q, k, v,
    [mask], [sinks]) of one float dtype (a bool mask excepted); `mask` is "bool", "additive"
    or None."""

    scale: float
    causal: bool = False
    mask: str | None = None
    sinks: bool = False

    def _split(self, ins):
        if len(ins) == 3:  # neither mask nor sinks (a decode step's call)
            return ins[0], ins[1], ins[2], None, None
        q, k, v = ins[:3]
        it = iter(ins[3:])
        mask = next(it) if self.mask else None
        sinks = next(it) if self.sinks else None
        return q, k, v, mask, sinks

    @staticmethod
    def _grouped(a, b, nkv):
        """a @ b with a's heads (B, N, ...) in groups of N // nkv over b's kv heads."""
        B, N = a.shape[:2]
        g = np.matmul(a.reshape((B, nkv, -1) + a.shape[3:]), b)
        return g.reshape((B, N, -1) + g.shape[3:])

    def _probs_np(self, qs, k, mask, sinks, dt):
        """The NumPy path's probabilities, the graph's steps with the scores materialised:
        (B, N, Tq, Tk) in the compute dtype, the sink's (B, N, Tq, 1) or None, and where a
        bool or causal mask keeps the score (None without)."""
        ct = qs.dtype
        Tq, Tk = qs.shape[2], k.shape[2]
        s = self._grouped(qs, np.swapaxes(k.astype(ct), -1, -2), k.shape[1]).astype(dt)
        if self.causal:
            mask = np.arange(Tk - Tq, Tk)[:, None] >= np.arange(Tk)[None, :]
        keep = mask if mask is not None and mask.dtype == np.bool_ else None
        with ignoring():
            if keep is not None:
                s = np.where(keep, s, np.asarray(D.finfo(D.from_numpy(dt)).min, dt))
            elif mask is not None:
                s = (s + mask).astype(dt)
            s = s.astype(ct)
            if sinks is not None:
                sk = np.broadcast_to(sinks.astype(ct)[None, :, None, None], s.shape[:3] + (1,))
                s = np.concatenate([sk, s], axis=-1)
            e = np.exp(s - np.max(s, axis=-1, keepdims=True))
            p = (e / np.sum(e, axis=-1, keepdims=True)).astype(dt).astype(ct)
        if sinks is not None:
            return p[..., 1:], p[..., :1], keep
        return p, None, keep


@dataclass(frozen=True)
class ScaledDotProductAttention(_Attention):
    """mx.fast.scaled_dot_product_attention (the inputs and parameters: `_Attention`)."""

    def abstract_eval(self, q, k, v, *rest):
        return [(q.shape[:3] + v.shape[3:], q.dtype)]

    def _graph(self, ins):
        q, k, v, mask, sinks = self._split(ins)
        return sdpa_graph(q, k, v, self.scale, self.causal, mask, sinks)

    def eval_cpu(self, *ins):
        q, k, v, mask, sinks = self._split(ins)
        shape = q.shape[:3] + v.shape[3:]
        if 0 in shape:
            return [np.zeros(shape, q.dtype)]
        dt = q.dtype
        ct = _ct(dt)
        qs, _ = _scaled_q(q, self.scale, ct)
        K = _kernels()
        if K is None or not _native_types(dt, dt):
            p = self._probs_np(qs, k, mask, sinks, dt)[0]
            return [self._grouped(p, v.astype(ct), k.shape[1]).astype(dt)]
        B, N, Tq, Dk = q.shape
        nkv, Tk = k.shape[1], k.shape[2]
        rep = N // nkv
        out = np.empty((B * N * Tq, shape[3]), ct)  # the kernel's rows
        args = _sdpa_operands(self, qs, k, v, mask, sinks, dt, in_place=True)
        _run(K.sdpa, B * nkv * -(-rep * Tq // _ROWS), args + (out,),
             min(_ROWS, rep * Tq) * Tk * (Dk + shape[3]))
        out = out.reshape(shape)
        return [out if ct is dt else out.astype(dt)]

    def vjp(self, primals, cotangents, argnums, outputs):
        """q, k, v and sinks by the native backward (one kernel); a mask's gradient (MLX
        gives one) through the graph."""
        i_mask = 3 if self.mask else -1
        got = {}
        if any(i != i_mask for i in argnums):
            bwd = ScaledDotProductAttentionVJP(self.scale, self.causal, self.mask, self.sinks)
            grads = bind(bwd, tuple(primals) + (cotangents[0],))
            got = {i: grads[min(i, 3)] for i in argnums if i != i_mask}  # sinks' is the 4th
        if i_mask in argnums:
            got[i_mask] = _expand("vjp", lambda ins: [self._graph(ins)], primals, cotangents,
                                  [i_mask])[0]
        return [got[i] for i in argnums]

    def jvp(self, primals, tangents, argnums):
        return _expand("jvp", lambda ins: [self._graph(ins)], primals, tangents, argnums)

    def vmap(self, inputs, axes):
        mask = self._split(inputs)[3]
        folded = _fold_vmap(self, inputs, axes, (0, 1, 2), mask)
        return folded or _expand("vmap", lambda ins: [self._graph(ins)], inputs, axes)


@dataclass(frozen=True)
class ScaledDotProductAttentionVJP(_ByGraph, _Attention):
    """The attention backward: inputs those of the forward and the output's cotangent, outputs
    the gradients of (q, k, v, [sinks]). One kernel, per (batch, kv head), probabilities
    recomputed blockwise (no scores materialised), GQA without repeating K/V. Its transforms
    are the forward graph's gradient's (`_ByGraph`), its vmap folds into the batch as the
    forward's does."""

    def abstract_eval(self, *ins):
        q, k, v, _, sinks = self._split(ins[:-1])
        return [(a.shape, a.dtype) for a in (q, k, v, sinks) if a is not None]

    def _fwd(self):
        return ScaledDotProductAttention(self.scale, self.causal, self.mask, self.sinks)

    def _graph(self, ins):
        n = len(ins) - 1
        return _backward_graph(self._fwd(), ins, [0, 1, 2] + ([n - 1] if self.sinks else []))

    def eval_cpu(self, *ins):
        q, k, v, mask, sinks = self._split(ins[:-1])
        dt = q.dtype
        ct = _ct(dt)
        B, N, Tq, Dk = q.shape
        nkv, Tk, Dv = k.shape[1], k.shape[2], v.shape[3]
        if 0 in (B, N, Tq, Tk):
            return [np.zeros(a.shape, dt) for a in (q, k, v, sinks) if a is not None]
        qs, scale = _scaled_q(q, self.scale, ct)
        g = ins[-1]
        K = _kernels()
        if K is None or not _native_types(dt, dt):
            grads = self._numpy(qs, k.astype(ct), v.astype(ct), mask, sinks, g.astype(ct), scale,
                                dt)
        else:
            grads = [np.empty(a.shape, ct) for a in (q, k, v)]
            dsk = np.empty((B * nkv, N // nkv), ct)
            args = _sdpa_operands(self, qs, k, v, mask, sinks, dt)
            args += (_as_rows(_c(g, ct)), scale, *map(_as_rows, grads), dsk)
            _run(K.sdpa_bwd, B * nkv, args,
                 N // nkv * Tq * Tk * 2 * (Dk + Dv))
            grads.append(dsk.reshape(B, N).sum(axis=0) if sinks is not None else None)
        return [a.astype(dt, copy=False) for a in grads if a is not None]

    def _numpy(self, qs, k, v, mask, sinks, g, scale, dt):
        """The NumPy path (compute-dtype inputs): dq, dk, dv, dsinks (None without)."""
        p, psink, keep = self._probs_np(qs, k, mask, sinks, dt)
        nkv = k.shape[1]
        t = lambda a: np.swapaxes(a, -1, -2)  # noqa: E731
        dp = self._grouped(g, t(v), nkv)
        dd = np.sum(p * dp, axis=-1, keepdims=True)
        ds = p * (dp - dd)
        if keep is not None:
            ds = np.where(keep, ds, 0)
        dq = self._grouped(ds, k, nkv) * scale
        by_kv = lambda a: a.reshape(a.shape[:1] + (nkv, -1) + a.shape[3:])  # noqa: E731
        dk = np.matmul(t(by_kv(ds)), by_kv(qs))
        dv = np.matmul(t(by_kv(p)), by_kv(g))
        dsk = None if psink is None else -np.sum(psink * dd, axis=(0, 2, 3))
        return [dq, dk, dv, dsk]

    def vmap(self, inputs, axes):
        mask = self._split(inputs[:-1])[3]
        n = len(inputs)
        # with sinks, folding would sum their gradient over the vmapped axis too
        folded = None if self.sinks else _fold_vmap(self, inputs, axes, (0, 1, 2, n - 1), mask)
        return folded or super().vmap(inputs, axes)
