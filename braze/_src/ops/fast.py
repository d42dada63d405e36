"""`mx.fast`: layer_norm, rms_norm, rope and scaled_dot_product_attention.

Each checks its arguments as MLX does and binds its primitive (prims/fast.py: one native
kernel, forward and backward), whose results are those of MLX's own fallback graphs (the ones
MLX runs on the CPU: half inputs computed in float32 and rounded where the graph rounds,
attention's softmax in float32). Inside an mx.compile trace the normalisations build that graph
instead (`_compiling`), so the row-fusion passes fuse it with its neighbours. `_*_composite`
build the graph of ordinary ops after the same checks (for tests and benchmarks).
"""
from __future__ import annotations

import numbers
from typing import Optional, Union

from .. import dtypes as D
from ..array import array
from ..prims import fast as F
from ..prims.base import bind
from ..prims.base import ops as O
from ..scheduler import CompileTraces
from ._helpers import as_array, astype
from ._typing import ArrayLike, StreamOrDevice

__all__ = ["layer_norm", "rms_norm", "rope", "scaled_dot_product_attention"]

_HALF = (D.float16, D.bfloat16)


def _arr(x, op):
    return x if type(x) is array else as_array(x, op)


def _real_float(x, op):
    if x.dtype.kind != "f":
        raise ValueError(f"[{op}] Received unsupported type {x.dtype.name}.")


def _check_eps(eps, op):
    if type(eps) is float:  # the common case, without the ABC check (~1 us a call)
        return eps
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"[{op}] eps must be a real number, got {type(eps).__name__}: {eps!r}.")
    return float(eps)


def _compiling() -> bool:
    """Inside an mx.compile trace the normalisations stay the composite graph: the row-fusion
    passes make it one row kernel together with the elementwise ops around it (a residual
    add before, a scale or cast after), which the opaque primitive would split into three
    launches; eager calls take the primitive."""
    return bool(CompileTraces.stack)


def _affine_param(p, x, name, op):
    if p is None:
        return None
    p = _arr(p, op)
    if p.ndim != 1:
        raise ValueError(f"[{op}] {name} must have 1 dimension but has {p.ndim} dimensions.")
    if p.shape[0] != x.shape[-1]:
        raise ValueError(f"[{op}] {name} must have the same size as the last dimension of x "
                         f"but has {p.shape[0]} elements.")
    _real_float(p, op)
    return p


def layer_norm(x: ArrayLike, weight: Optional[ArrayLike], bias: Optional[ArrayLike], eps: float, *,
               stream: StreamOrDevice = None) -> array:
    """(x - mean) / sqrt(var + eps) over the last axis, then * weight + bias (either may be
    None)."""
    return _layer_norm(x, weight, bias, eps, True)


def _layer_norm_composite(x, weight, bias, eps) -> array:
    """layer_norm as the graph of ordinary ops (MLX's CPU fallback), not the primitive."""
    return _layer_norm(x, weight, bias, eps, False)


def _layer_norm(x, weight, bias, eps, native):
    op = "layer_norm"
    x = _arr(x, op)
    if x.ndim == 0:
        raise ValueError(f"[{op}] Input must have at least 1 dimension but got input with 0 "
                         "dimensions.")
    _real_float(x, op)
    eps = _check_eps(eps, op)
    weight = _affine_param(weight, x, "weight", op)
    bias = _affine_param(bias, x, "bias", op)
    if not native or _compiling():
        return F.layer_norm_graph(x, weight, bias, eps)
    prim = F.LayerNorm(eps, weight is not None, bias is not None)
    return bind(prim, tuple(a for a in (x, weight, bias) if a is not None))


def rms_norm(x: ArrayLike, weight: Optional[ArrayLike], eps: float, *,
             stream: StreamOrDevice = None) -> array:
    """x / sqrt(mean(x^2) + eps) over the last axis, then * weight (may be None)."""
    return _rms_norm(x, weight, eps, True)


def _rms_norm_composite(x, weight, eps) -> array:
    """rms_norm as the graph of ordinary ops (MLX's CPU fallback), not the primitive."""
    return _rms_norm(x, weight, eps, False)


def _rms_norm(x, weight, eps, native):
    op = "rms_norm"
    x = _arr(x, op)
    if x.ndim == 0:
        raise ValueError(f"[{op}] Input must have at least 1 dimension but got input with 0 "
                         "dimensions.")
    _real_float(x, op)
    eps = _check_eps(eps, op)
    weight = _affine_param(weight, x, "weight", op)
    if not native or _compiling():
        return F.rms_norm_graph(x, weight, eps)
    return bind(F.RMSNorm(eps), (x,) if weight is None else (x, weight))


def rope(a: ArrayLike, dims: int, *, traditional: bool, base: Optional[float], scale: float,
         offset: Union[int, ArrayLike], freqs: Optional[ArrayLike] = None,
         stream: StreamOrDevice = None) -> array:
    """Rotary positional encoding of the first `dims` features of `a` (shape (B, *, T, D));
    positions (offset + arange(T)) * scale run along axis -2. `offset` is an int or an integer
    array (a scalar, or one offset per batch element)."""
    return _rope(a, dims, traditional, base, scale, offset, freqs, True)


def _rope_composite(a, dims, *, traditional, base, scale, offset, freqs=None) -> array:
    """rope as the graph of ordinary ops (MLX's CPU fallback), not the primitive."""
    return _rope(a, dims, traditional, base, scale, offset, freqs, False)


def _rope(a, dims, traditional, base, scale, offset, freqs, native):
    op = "rope"
    x = _arr(a, op)
    if x.ndim < 3:
        raise ValueError(f"[{op}] Input must have at least 3 dimensions but got input with "
                         f"{x.ndim} dimensions.")
    if x.dtype.kind != "f":
        raise ValueError(f"[{op}] Input must be a floating type but got {x.dtype.name}.")
    if type(dims) is not int and (isinstance(dims, bool)
                                  or not isinstance(dims, numbers.Integral)):
        raise TypeError(f"[{op}] dims must be an int, got {type(dims).__name__}: {dims!r}.")
    dims = int(dims)
    if dims % 2:
        raise ValueError(f"[{op}] dims must be even but got {dims}.")
    if dims > x.shape[-1] or dims <= 0:
        raise ValueError(f"[{op}] dims must be positive and not exceed the input's last "
                         f"dimension ({x.shape[-1]}) but got {dims}.")
    if (base is None) == (freqs is None):
        raise ValueError(f"[{op}] Only one of base or freqs can have a value.")
    half = dims // 2
    if freqs is not None:
        freqs = _arr(freqs, op)
        if freqs.ndim != 1 or freqs.shape[0] != half:
            raise ValueError(f"[{op}] freqs must be one dimensional with size {half} but got "
                             f"shape {freqs.shape}.")
    B = x.shape[0]
    if isinstance(offset, array):
        if offset.dtype.kind not in "ui":
            raise ValueError(f"[{op}] offset must be an integer but got type "
                             f"{offset.dtype.name}.")
        if offset.ndim > 1 or (offset.ndim == 1 and offset.size not in (1, B)):
            raise ValueError(f"[{op}] offset must be a scalar or vector with {B} elements but "
                             f"has shape {offset.shape}.")
    elif type(offset) is int or (isinstance(offset, numbers.Integral)
                                 and not isinstance(offset, bool)):
        offset = array(int(offset), D.int32)
    else:
        raise TypeError(f"[{op}] offset must be an int or an integer array, got "
                        f"{type(offset).__name__}: {offset!r}.")
    if not native:
        return F.rope_graph(x, dims, traditional, base, scale, offset, freqs)
    base = None if base is None else float(base)
    prim = F.Rope(dims, bool(traditional), base, float(scale))
    return bind(prim, (x, offset) if freqs is None else (x, offset, freqs))


def scaled_dot_product_attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, scale: float,
                                 mask: Union[None, str, ArrayLike] = None,
                                 sinks: Optional[ArrayLike] = None, force_fused: bool = False,
                                 stream: StreamOrDevice = None) -> array:
    """softmax(scale * q @ k^T + mask) @ v over (B, N, T, D) arrays.

    k and v may have fewer heads than q (grouped/multi-query attention: query head h uses kv
    head h // (N_q // N_kv)). `mask` is None, "causal" (lower-right aligned), a boolean array
    (True keeps) or an additive array, broadcastable to (B, N_q, T_q, T_kv). `sinks` (N_q,)
    adds one extra logit per head that takes probability mass but no value.
    """
    return _sdpa(q, k, v, scale, mask, sinks, True)


def _sdpa_composite(q, k, v, *, scale, mask=None, sinks=None) -> array:
    """scaled_dot_product_attention as the graph of ordinary ops (MLX's CPU fallback)."""
    return _sdpa(q, k, v, scale, mask, sinks, False)


def _sdpa(q, k, v, scale, mask, sinks, native):
    op = "scaled_dot_product_attention"
    q, k, v = _arr(q, op), _arr(k, op), _arr(v, op)
    for t in (q, k, v):
        if t.ndim != 4:
            raise ValueError(f"[{op}] input with shape {t.shape} expected to be rank 4")
    for t in (q, k, v):
        if t.dtype.kind != "f":
            raise ValueError(f"[{op}] Received unsupported type {t.dtype.name}.")
    B, n_q, L_q, D_q = q.shape
    n_kv = k.shape[1]
    for t in (k, v):  # checked by MLX before the other shapes
        if t.shape[0] != B:
            raise ValueError(f"[{op}] mismatching batch dimension for input with shape "
                             f"{t.shape}.")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"[{op}] query, keys expected to have matching last dimension; found "
                         f"query shape {q.shape} for keys shape {k.shape}.")
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"[{op}] keys and values expected to have matching batch, head and "
                         f"sequence dimensions; found keys shape {k.shape} for values shape "
                         f"{v.shape}.")
    if n_kv == 0 or n_q % n_kv:
        raise ValueError(f"[{op}] The number of query heads ({n_q}) must be a multiple of the "
                         f"number of key/value heads ({n_kv}).")
    if type(scale) is not float and (isinstance(scale, bool)
                                     or not isinstance(scale, numbers.Real)):
        raise TypeError(f"[{op}] scale must be a real number, got {type(scale).__name__}: "
                        f"{scale!r}.")
    final = D.promote_types(q.dtype, k.dtype, v.dtype)
    q, k, v = astype(q, final), astype(k, final), astype(v, final)
    causal = False
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"[{op}] invalid mask option {mask!r}. Must be 'causal', or an "
                             "array.")
        causal, mask = True, None
    elif mask is not None:
        mask = _arr(mask, op)
        if mask.ndim > 4:
            raise ValueError(f"[{op}] the mask with shape {mask.shape} expected to have at "
                             "most rank 4.")
        target = (B, n_q, L_q, k.shape[2])
        try:  # MLX broadcasts the mask *to* the scores shape: it may not grow it
            if tuple(O.broadcast_shapes(mask.shape, target)) != target:
                raise ValueError
        except ValueError:
            raise ValueError(f"[{op}] the mask with shape {mask.shape} does not broadcast to "
                             f"the scores shape {(B, n_q, L_q, k.shape[2])}.") from None
        if mask.dtype is not D.bool_:
            if D.promote(mask.dtype, final) is not final:
                raise ValueError(f"[{op}] Mask type must promote to output type {final.name}, "
                                 f"got {mask.dtype.name}.")
            mask = astype(mask, final)
    if sinks is not None:
        sinks = _arr(sinks, op)
        if D.promote(sinks.dtype, final) is not final:
            raise ValueError(f"[{op}] Type of sinks must promote to output type {final.name}, "
                             f"got {sinks.dtype.name}.")
        if sinks.ndim != 1 or sinks.shape[0] != n_q:
            raise ValueError(f"[{op}] sinks must have shape ({n_q},), got {sinks.shape}.")
        sinks = astype(sinks, final)

    if not native:
        return F.sdpa_graph(q, k, v, scale, causal, mask, sinks)
    kind = None if mask is None else ("bool" if mask.dtype is D.bool_ else "additive")
    prim = F.ScaledDotProductAttention(float(scale), causal, kind, sinks is not None)
    return bind(prim, tuple(a for a in (q, k, v, mask, sinks) if a is not None))
