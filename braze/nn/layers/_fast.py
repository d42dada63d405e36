"""Plain-op versions of the `mx.fast` kernels the layers use (layer_norm, rms_norm, rope,
scaled_dot_product_attention), with MLX's semantics. float16/bfloat16 inputs are normalised
in float32 and rounded once, as MLX's fused kernels do."""
from __future__ import annotations

import math

import braze.core as mx

_HALF = (mx.float16, mx.bfloat16)


def _up(x):
    return (x.astype(mx.float32), x.dtype) if x.dtype in _HALF else (x, None)


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last axis, then * weight + bias."""
    y, dt = _up(x)
    mean = mx.mean(y, axis=-1, keepdims=True)
    var = mx.var(y, axis=-1, keepdims=True)
    y = (y - mean) * mx.rsqrt(var + eps)
    if dt is not None:
        y = y.astype(dt)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x, weight=None, eps=1e-5):
    """x / sqrt(mean(x^2) + eps) over the last axis, then * weight."""
    y, dt = _up(x)
    y = y * mx.rsqrt(mx.mean(mx.square(y), axis=-1, keepdims=True) + eps)
    if dt is not None:
        y = y.astype(dt)
    return y * weight if weight is not None else y


def rope(x, dims, *, traditional=False, base=10000.0, scale=1.0, offset=0, freqs=None):
    """Rotary positional encoding of the first `dims` features; positions run along axis -2
    starting at `offset`, multiplied by `scale`."""
    if dims % 2 or dims > x.shape[-1]:
        raise ValueError(f"[rope] dims must be even and at most the feature size "
                         f"{x.shape[-1]}, got {dims}.")
    L = x.shape[-2]
    half = dims // 2
    ft = mx.float64 if x.dtype == mx.float64 else mx.float32
    if freqs is None:
        inv = mx.exp(mx.arange(0, half, dtype=ft) * (-2.0 * math.log(base) / dims))
    else:
        inv = 1.0 / freqs.astype(ft)
    off = offset if isinstance(offset, mx.array) else mx.array(offset)
    pos = (mx.arange(L, dtype=ft) + off.astype(ft)) * scale
    theta = pos[:, None] * inv[None, :]  # (L, half)
    cos, sin = mx.cos(theta), mx.sin(theta)
    y, dt = _up(x)
    rot, rest = y[..., :dims], y[..., dims:]
    if traditional:
        pairs = rot.reshape(rot.shape[:-1] + (half, 2))
        x1, x2 = pairs[..., 0], pairs[..., 1]
        r = mx.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
        r = r.reshape(rot.shape)
    else:
        x1, x2 = rot[..., :half], rot[..., half:]
        r = mx.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    out = mx.concatenate([r, rest], axis=-1) if dims < x.shape[-1] else r
    return out.astype(dt) if dt is not None else out.astype(x.dtype)


def scaled_dot_product_attention(q, k, v, *, scale, mask=None):
    """softmax(q k^T * scale + mask) v over (B, heads, L, D) arrays; k and v may have fewer
    heads than q (grouped-query attention). `mask` is "causal", a boolean array (True keeps)
    or an additive array."""
    B, Hq, Lq, D = q.shape
    Hk, Lk = k.shape[1], k.shape[2]
    if Hq % Hk:
        raise ValueError(f"[scaled_dot_product_attention] The number of query heads ({Hq}) "
                         f"must be a multiple of the number of key/value heads ({Hk}).")
    rep = Hq // Hk
    if rep > 1:
        q = q.reshape(B, Hk, rep, Lq, D)
        k = mx.expand_dims(k, 2)
        v = mx.expand_dims(v, 2)
    scores = mx.matmul(q * scale, mx.swapaxes(k, -1, -2))
    if rep > 1:
        scores = scores.reshape(B, Hq, Lq, Lk)
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"[scaled_dot_product_attention] Unknown mask {mask!r}.")
        qi = mx.arange(Lk - Lq, Lk)[:, None]
        ki = mx.arange(Lk)[None, :]
        mask = qi >= ki
    if mask is not None:
        if mask.dtype == mx.bool_:
            scores = mx.where(mask, scores, mx.finfo(scores.dtype).min)
        else:
            scores = scores + mask
    if scores.dtype in _HALF:
        w = mx.softmax(scores.astype(mx.float32), axis=-1).astype(scores.dtype)
    else:
        w = mx.softmax(scores, axis=-1)
    if rep > 1:
        w = w.reshape(B, Hk, rep, Lq, Lk)
    out = mx.matmul(w, v)
    return out.reshape(B, Hq, Lq, v.shape[-1]) if rep > 1 else out
