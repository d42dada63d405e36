"""Op table: gathered and quantized products (gather_mm, quantize, dequantize,
quantized_matmul, gather_qmm) and the `mx.fast` composites (layer_norm, rms_norm, rope,
scaled_dot_product_attention).

References are written here in plain NumPy, independently of braze: a per-group loop for
affine quantization (MLX's algorithm; tests/test_quantized.py checks braze against MLX itself
bit for bit), Python loops over the gathered matrices, float64 formulas for the fast ops.
"""
import math

import ml_dtypes
import numpy as np

import braze.core as mx

from . import OpCase

FL = ("float32", "float16", "bfloat16", "float64")
CASES = []


def _np_dtype(dt):
    return ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt)


def gen(rng, shape, dt):
    return rng.standard_normal(shape).astype(_np_dtype(dt))


def _case(name, mx_fn, np_fn, inputs, dtypes=FL, **kw):
    kw.setdefault("rtol", 1e-4)
    kw.setdefault("atol", 1e-5)
    CASES.append(OpCase(name, mx_fn, np_fn, inputs, dtypes, **kw))


# -- reference affine quantization ------------------------------------------------------------
def ref_quantize(w, group_size, bits):
    """Per-group loop: (packed uint32, scales, biases) with scales/biases in w's dtype."""
    dt = w.dtype
    ct = np.float64 if dt == np.float64 else np.float32
    lead, K = w.shape[:-1], w.shape[-1]
    rows = w.astype(ct).reshape(-1, K)
    n_bins = (1 << bits) - 1
    ng = K // group_size
    scales = np.zeros((rows.shape[0], ng), ct)
    biases = np.zeros((rows.shape[0], ng), ct)
    words = np.zeros((rows.shape[0], K * bits // 32), np.uint32)
    for r in range(rows.shape[0]):
        stream = 0
        for g in range(ng):
            grp = rows[r, g * group_size:(g + 1) * group_size]
            hi, lo = grp.max(), grp.min()
            s = max((hi - lo) / ct(n_bins), ct(1e-7))
            if bits == 1:
                b = lo
            else:
                edge = lo if abs(lo) > abs(hi) else hi
                s = s if abs(lo) > abs(hi) else -s
                q0 = np.round(edge / s)
                if q0 != 0:
                    s, b = edge / q0, edge
                else:
                    b = ct(0)
            scales[r, g], biases[r, g] = s, b
            q = np.clip(np.round((grp - b) / s), 0, n_bins).astype(np.int64)
            for i, v in enumerate(q):
                stream |= int(v) << ((g * group_size + i) * bits)
        for j in range(words.shape[1]):
            words[r, j] = (stream >> (32 * j)) & 0xFFFFFFFF
    return (words.reshape(lead + (-1,)), scales.reshape(lead + (ng,)).astype(dt),
            biases.reshape(lead + (ng,)).astype(dt))


def ref_dequantize(q, scales, biases, group_size, bits):
    lead, nw = q.shape[:-1], q.shape[-1]
    K = nw * 32 // bits
    rows = q.reshape(-1, nw)
    vals = np.zeros((rows.shape[0], K), np.float64)
    for r in range(rows.shape[0]):
        stream = 0
        for j, wd in enumerate(rows[r]):
            stream |= int(wd) << (32 * j)
        for i in range(K):
            vals[r, i] = (stream >> (i * bits)) & ((1 << bits) - 1)
    vals = vals.reshape(lead + (K // group_size, group_size))
    s = np.asarray(scales, np.float64)[..., None]
    b = np.asarray(biases, np.float64)[..., None]
    return (s * vals + b).reshape(lead + (K,))


def _quantized(rng, shape, dt, group_size, bits):
    """Sample packed weights, with scales/biases in dt."""
    w = gen(rng, shape, "float32")
    q, s, b = ref_quantize(w, group_size, bits)
    return q, s.astype(_np_dtype(dt)), b.astype(_np_dtype(dt))


# -- gather_mm --------------------------------------------------------------------------------
def ref_gather_mm(a, b, li=None, ri=None):
    a2 = a[None] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    A = a2.reshape((-1,) + a2.shape[-2:])
    B = b2.reshape((-1,) + b2.shape[-2:])
    li = np.arange(A.shape[0]).reshape(a2.shape[:-2]) if li is None else li
    ri = np.arange(B.shape[0]).reshape(b2.shape[:-2]) if ri is None else ri
    li, ri = np.broadcast_arrays(li, ri)
    out = np.zeros(li.shape + (A.shape[1], B.shape[2]), np.result_type(a, b))
    for ix in np.ndindex(li.shape):
        out[ix] = A[li[ix]] @ B[ri[ix]]
    if b.ndim == 1:
        out = out[..., 0]
    if a.ndim == 1:
        out = out[..., 0, :] if b.ndim != 1 else out[..., 0]
    return out


def _gmm_inputs(sa, sb, li=None, ri=None):
    def f(rng, dt):
        xs = [gen(rng, sa, dt), gen(rng, sb, dt)]
        na = math.prod(sa[:-2]) if len(sa) > 2 else 1
        nb = math.prod(sb[:-2]) if len(sb) > 2 else 1
        if li is not None:
            xs.append(rng.integers(0, na, size=li).astype(np.uint32))
        if ri is not None:
            xs.append(rng.integers(0, nb, size=ri).astype(np.int32))
        return tuple(xs)
    return f


_case("gather_mm", mx.gather_mm, ref_gather_mm, _gmm_inputs((2, 3, 4), (2, 4, 5)),
      variant="no_indices")
_case("gather_mm", lambda a, b: mx.gather_mm(a, b), ref_gather_mm,
      _gmm_inputs((2, 3, 2, 4), (3, 4, 5)), variant="broadcast_batches")
_case("gather_mm", mx.gather_mm, ref_gather_mm, _gmm_inputs((3, 2, 4), (4, 4, 5), (2, 3), (3,)),
      variant="both_indices")
_case("gather_mm", lambda a, b, r: mx.gather_mm(a, b, rhs_indices=r),
      lambda a, b, r: ref_gather_mm(a, b, None, r),
      _gmm_inputs((6, 1, 4), (3, 4, 5), None, (6,)), variant="rhs_only")
_case("gather_mm", lambda a, b, l: mx.gather_mm(a, b, l),
      lambda a, b, l: ref_gather_mm(a, b, l), _gmm_inputs((2, 2, 3, 4), (4, 5), (5,)),
      variant="lhs_only_2d_b")
_case("gather_mm", lambda a, b, r: mx.gather_mm(a, b, None, r),
      lambda a, b, r: ref_gather_mm(a, b, None, r), _gmm_inputs((4,), (3, 4, 2), None, (4,)),
      variant="vector_a")
_case("gather_mm", lambda a, b, l: mx.gather_mm(a, b, l),
      lambda a, b, l: ref_gather_mm(a, b, l), _gmm_inputs((3, 2, 4), (4,), (2, 2)),
      variant="vector_b")
_case("gather_mm", lambda a, b: mx.gather_mm(a, b, mx.array([0, 0, 1, 0]), mx.array([1, 1, 0, 1])),
      lambda a, b: ref_gather_mm(a, b, np.array([0, 0, 1, 0]), np.array([1, 1, 0, 1])),
      _gmm_inputs((2, 3, 4), (2, 4, 2)), variant="duplicates")
_case("gather_mm", lambda a, b: mx.gather_mm(a, b, mx.array([1, 0, 1])),
      lambda a, b: ref_gather_mm(a.astype(np.float64), b.astype(np.float64),
                                 np.array([1, 0, 1])),
      lambda rng, dt: (gen(rng, (2, 3, 4), dt), gen(rng, (4, 2), "float32")),
      dtypes=("float16", "float32"), out_dtype=lambda dt: "float32", variant="mixed_dtypes")


# -- quantize / dequantize --------------------------------------------------------------------
for _gs, _bits in ((32, 4), (64, 2), (32, 3), (64, 6), (128, 8), (32, 5), (32, 1)):
    _ins = (lambda gs: lambda rng, dt: (gen(rng, (3, 2 * gs), dt),))(_gs)
    for _k, _part in enumerate(("q", "scales", "biases")):
        _case("quantize",
              lambda w, gs=_gs, bits=_bits, k=_k: mx.quantize(w, gs, bits)[k],
              lambda w, gs=_gs, bits=_bits, k=_k: ref_quantize(w, gs, bits)[k],
              # not bfloat16: the driver hands bfloat16 to references as float64
              _ins, dtypes=("float32", "float16", "float64"), exact=True,
              differentiable=False, ref_float64=False,
              out_dtype=(lambda dt: "uint32") if _k == 0 else None,
              variant=f"g{_gs}_b{_bits}_{_part}")
    _case("dequantize",
          lambda q, s, b, gs=_gs, bits=_bits: mx.dequantize(q, s, b, gs, bits),
          lambda q, s, b, gs=_gs, bits=_bits: ref_dequantize(q, s, b, gs, bits),
          (lambda gs, bits: lambda rng, dt: _quantized(rng, (2, 3, 2 * gs), dt, gs, bits))(
              _gs, _bits),
          grad_inputs=(1, 2), variant=f"g{_gs}_b{_bits}")
_case("dequantize", lambda w: mx.dequantize(*mx.quantize(w, 32, 8), 32, 8),
      lambda w: ref_dequantize(*ref_quantize(w, 32, 8), 32, 8),
      lambda rng, dt: (gen(rng, (4, 64), dt),), ref_float64=False, differentiable=False,
      rtol=1e-6, atol=1e-6, variant="round_trip")
_case("dequantize", lambda q, s, b: mx.dequantize(q, s, b, 32, 4, dtype=mx.float32),
      lambda q, s, b: ref_dequantize(q, s, b, 32, 4),
      lambda rng, dt: _quantized(rng, (3, 64), dt, 32, 4), dtypes=("float16", "bfloat16"),
      out_dtype=lambda dt: "float32", grad_inputs=(1, 2), variant="dtype")


# -- quantized_matmul / gather_qmm ------------------------------------------------------------
# float16/bfloat16 products round the dequantized weights to the half type (as MLX does), which
# the driver's half tolerances do not cover: tests/test_quantized.py compares them with MLX
_QFL = ("float32", "float64")
def _qmm_inputs(xshape, wshape, gs, bits):
    def f(rng, dt):
        return (gen(rng, xshape, dt),) + _quantized(rng, wshape, dt, gs, bits)
    return f


for _v, (_xs, _ws, _tr, _gs, _bits) in {
        "t_g32_b4": ((3, 64), (5, 64), True, 32, 4),
        "t_g64_b8": ((2, 3, 128), (4, 128), True, 64, 8),
        "t_g32_b3": ((3, 96), (2, 96), True, 32, 3),
        "nt_g32_b4": ((3, 6), (6, 64), False, 32, 4),
        "vector": ((64,), (5, 64), True, 64, 2),
        "batched_w": ((2, 3, 32), (2, 4, 32), True, 32, 6)}.items():
    _case("quantized_matmul",
          lambda x, q, s, b, tr=_tr, gs=_gs, bits=_bits:
          mx.quantized_matmul(x, q, s, b, transpose=tr, group_size=gs, bits=bits),
          lambda x, q, s, b, tr=_tr, gs=_gs, bits=_bits:
          np.matmul(x, np.swapaxes(ref_dequantize(q, s, b, gs, bits), -1, -2) if tr
                    else ref_dequantize(q, s, b, gs, bits)),
          _qmm_inputs(_xs, _ws, _gs, _bits), grad_inputs=(0, 2, 3), rtol=1e-4, atol=1e-4,
          dtypes=_QFL, variant=_v)


def _gqmm_ref(x, q, s, b, li, ri, tr, gs, bits):
    w = ref_dequantize(q, s, b, gs, bits)
    return ref_gather_mm(x, np.swapaxes(w, -1, -2) if tr else w, li, ri)


def _gqmm_inputs(xshape, wshape, gs, bits, li, ri):
    def f(rng, dt):
        xs = (gen(rng, xshape, dt),) + _quantized(rng, wshape, dt, gs, bits)
        na = math.prod(xshape[:-2]) if len(xshape) > 2 else 1
        return xs + (rng.integers(0, na, size=li).astype(np.uint32),
                     rng.integers(0, wshape[0], size=ri).astype(np.uint32))
    return f


for _v, (_xs, _ws, _tr, _li, _ri) in {
        "experts": ((4, 2, 64), (3, 8, 64), True, (4,), (4,)),
        "moe_topk": ((5, 1, 1, 64), (4, 6, 64), True, (5, 1), (5, 2)),
        "no_transpose": ((3, 2, 6), (3, 6, 64), False, (2,), (2,))}.items():
    _case("gather_qmm",
          lambda x, q, s, b, li, ri, tr=_tr:
          mx.gather_qmm(x, q, s, b, lhs_indices=li, rhs_indices=ri, transpose=tr,
                        group_size=32, bits=4),
          lambda x, q, s, b, li, ri, tr=_tr: _gqmm_ref(x, q, s, b, li, ri, tr, 32, 4),
          _gqmm_inputs(_xs, _ws, 32, 4, _li, _ri), grad_inputs=(0, 2, 3), rtol=1e-4,
          atol=1e-4, dtypes=_QFL, variant=_v)


# -- mx.fast ----------------------------------------------------------------------------------
def ref_layer_norm(x, w=None, b=None, eps=1e-5):
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def ref_rms_norm(x, w=None, eps=1e-5):
    y = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps)
    return y if w is None else y * w


def ref_rope(x, dims, traditional, base, scale, offset, freqs=None):
    T = x.shape[-2]
    half = dims // 2
    inv = base ** (-np.arange(half) * 2.0 / dims) if freqs is None else 1.0 / freqs
    off = np.asarray(offset, np.float64)
    pos = np.arange(T) + (off.reshape((-1,) + (1,) * (x.ndim - 2)) if off.ndim else off)
    theta = (pos * scale)[..., None] * inv
    c, s = np.cos(theta), np.sin(theta)
    out = np.array(x, np.float64)
    if traditional:
        x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2] = x1 * c - x2 * s
        out[..., 1:dims:2] = x1 * s + x2 * c
    else:
        x1, x2 = x[..., :half], x[..., half:dims]
        out[..., :half] = x1 * c - x2 * s
        out[..., half:dims] = x1 * s + x2 * c
    return out


def ref_sdpa(q, k, v, scale, mask=None, sinks=None):
    rep = q.shape[1] // k.shape[1]
    k = np.repeat(k, rep, axis=1)
    v = np.repeat(v, rep, axis=1)
    s = scale * q @ np.swapaxes(k, -1, -2)
    Lq, Lk = q.shape[-2], k.shape[-2]
    if isinstance(mask, str):
        mask = np.arange(Lk - Lq, Lk)[:, None] >= np.arange(Lk)[None]
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    if sinks is not None:
        s = np.concatenate([np.broadcast_to(sinks[None, :, None, None], s.shape[:-1] + (1,)),
                            s], -1)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    if sinks is not None:
        p = p[..., 1:]
    return p @ v


_X = (2, 3, 4, 8)
_case("fast.layer_norm", lambda x, w, b: mx.fast.layer_norm(x, w, b, 1e-5), ref_layer_norm,
      lambda rng, dt: (gen(rng, _X, dt) * 2 + 1, gen(rng, (8,), dt), gen(rng, (8,), dt)),
      variant="affine")
_case("fast.layer_norm", lambda x: mx.fast.layer_norm(x, None, None, 1e-5), ref_layer_norm,
      lambda rng, dt: (gen(rng, (3, 16), dt),), variant="plain")
_case("fast.layer_norm", lambda x, w: mx.fast.layer_norm(x, w, None, 1e-3),
      lambda x, w: ref_layer_norm(x, w, None, 1e-3),
      lambda rng, dt: (gen(rng, (5, 8), dt), gen(rng, (8,), dt)), variant="weight_only")
_case("fast.rms_norm", lambda x, w: mx.fast.rms_norm(x, w, 1e-5), ref_rms_norm,
      lambda rng, dt: (gen(rng, _X, dt), gen(rng, (8,), dt)), variant="weight")
_case("fast.rms_norm", lambda x: mx.fast.rms_norm(x, None, 1e-4),
      lambda x: ref_rms_norm(x, None, 1e-4), lambda rng, dt: (gen(rng, (3, 16), dt),),
      variant="plain")
for _v, (_dims, _trad, _scale, _off) in {
        "full": (8, False, 1.0, 0), "traditional": (8, True, 1.0, 0),
        "partial": (4, False, 0.5, 3), "partial_traditional": (6, True, 2.0, 5)}.items():
    _case("fast.rope",
          lambda x, d=_dims, t=_trad, s=_scale, o=_off:
          mx.fast.rope(x, d, traditional=t, base=10000.0, scale=s, offset=o),
          lambda x, d=_dims, t=_trad, s=_scale, o=_off: ref_rope(x, d, t, 10000.0, s, o),
          lambda rng, dt: (gen(rng, _X, dt),), variant=_v)
_case("fast.rope",
      lambda x: mx.fast.rope(x, 8, traditional=False, base=500.0, scale=1.0,
                             offset=mx.array([1, 4])),
      lambda x: ref_rope(x, 8, False, 500.0, 1.0, np.array([1, 4])),
      lambda rng, dt: (gen(rng, _X, dt),), variant="batch_offsets")
_case("fast.rope",
      lambda x, f: mx.fast.rope(x, 8, traditional=True, base=None, scale=1.0, offset=2,
                                freqs=f),
      lambda x, f: ref_rope(x, 8, True, None, 1.0, 2, f),
      lambda rng, dt: (gen(rng, (2, 5, 8), dt),
                       np.exp(rng.standard_normal(4)).astype(_np_dtype(dt))),
      grad_inputs=(0,), variant="freqs_3d")
_Q, _K, _V = (2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 6)


def _attn(mask=None, qs=_Q, ks=_K, vs=_V):
    def f(rng, dt):
        xs = (gen(rng, qs, dt), gen(rng, ks, dt), gen(rng, vs, dt))
        if mask == "bool":
            m = rng.random((qs[1], qs[2], ks[2])) < 0.7
            m[..., 0] = True  # no fully masked row (the float64 reference would give NaN)
            xs += (m,)
        elif mask == "additive":
            xs += (gen(rng, (qs[0], 1, qs[2], ks[2]), dt),)
        elif mask == "sinks":
            xs += (gen(rng, (qs[1],), dt),)
        return xs
    return f


_sdpa = mx.fast.scaled_dot_product_attention
_case("fast.scaled_dot_product_attention", lambda q, k, v: _sdpa(q, k, v, scale=0.35),
      lambda q, k, v: ref_sdpa(q, k, v, 0.35), _attn(), variant="gqa")
_case("fast.scaled_dot_product_attention",
      lambda q, k, v: _sdpa(q, k, v, scale=0.35, mask="causal"),
      lambda q, k, v: ref_sdpa(q, k, v, 0.35, "causal"), _attn(), variant="causal")
_case("fast.scaled_dot_product_attention",
      lambda q, k, v: _sdpa(q, k, v, scale=0.2, mask="causal"),
      lambda q, k, v: ref_sdpa(q, k, v, 0.2, "causal"),
      _attn(None, (1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)), variant="causal_mha")
_case("fast.scaled_dot_product_attention",
      lambda q, k, v, m: _sdpa(q, k, v, scale=0.35, mask=m),
      lambda q, k, v, m: ref_sdpa(q, k, v, 0.35, m), _attn("bool"), variant="bool_mask")
_case("fast.scaled_dot_product_attention",
      lambda q, k, v, m: _sdpa(q, k, v, scale=0.35, mask=m),
      lambda q, k, v, m: ref_sdpa(q, k, v, 0.35, m), _attn("additive"),
      variant="additive_mask")
_case("fast.scaled_dot_product_attention",
      lambda q, k, v, s: _sdpa(q, k, v, scale=0.35, mask="causal", sinks=s),
      lambda q, k, v, s: ref_sdpa(q, k, v, 0.35, "causal", s), _attn("sinks"),
      variant="sinks")


# -- floating-point modes ("mxfp4", "nvfp4", "mxfp8") -----------------------------------------
# Per-group loops written from the formats: an e8m0 scale 2**ceil(log2(max|w| / max code))
# (MLX 0.32.4's rounding) or an e4m3 scale max|w| / 6, e2m1 codes by nearest value (ties: the
# smaller magnitude, +0 before -0), e4m3 codes by ml_dtypes (saturated at +-448 first).
# Products in float32 only: MLX's CPU fp kernels have no float64.
FP_LUT = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float64)
FP_MODES = {"mxfp4": (32, 4), "nvfp4": (16, 4), "mxfp8": (32, 8)}


def _e4m3(v):
    v = np.clip(np.asarray(v, np.float32), -448, 448)
    return v.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def _e4m3_value(code):
    return np.asarray(code, np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _group_scale(grp, mode):
    """(divisor, uint8 code) of one group."""
    amax = np.float32(np.abs(grp).max())
    if mode == "nvfp4":
        code = _e4m3(amax / np.float32(6))
        return _e4m3_value(code), code
    e = 0 if amax == 0 else int(np.ceil(np.log2(amax / np.float32(448 if mode == "mxfp8"
                                                                     else 6))))
    return 2.0 ** e, np.uint8(e + 127)


def ref_fp_quantize(w, mode):
    gs, bits = FP_MODES[mode]
    rows = w.astype(np.float32).reshape(-1, w.shape[-1])
    codes = np.zeros(rows.shape, np.uint8)
    scales = np.zeros((rows.shape[0], w.shape[-1] // gs), np.uint8)
    for r, g in np.ndindex(scales.shape):
        grp = rows[r, g * gs:(g + 1) * gs]
        div, scales[r, g] = _group_scale(grp, mode)
        q = grp / div if div else np.full(gs, np.nan)
        if bits == 8:
            codes[r, g * gs:(g + 1) * gs] = _e4m3(q)
        else:
            d = np.abs(np.nan_to_num(q, nan=0.0)[:, None] - FP_LUT[None])
            codes[r, g * gs:(g + 1) * gs] = np.argmin(d, axis=1)
    if bits == 4:
        nib = codes.reshape(rows.shape[0], -1, 8).astype(np.uint64)
        words = (nib << (4 * np.arange(8, dtype=np.uint64))).sum(-1).astype(np.uint32)
    else:
        words = codes.view("<u4").astype(np.uint32)
    lead = w.shape[:-1]
    return words.reshape(lead + (-1,)), scales.reshape(lead + (-1,))


def ref_fp_dequantize(q, s, mode):
    gs, bits = FP_MODES[mode]
    by = np.ascontiguousarray(q.astype("<u4")).view(np.uint8).reshape(q.shape[:-1] + (-1,))
    if bits == 4:
        codes = np.stack([by & 15, by >> 4], -1).reshape(by.shape[:-1] + (-1,))
        vals = FP_LUT[codes]
    else:
        vals = _e4m3_value(by)
    sc = _e4m3_value(s) if mode == "nvfp4" else 2.0 ** (s.astype(np.float64) - 127)
    vals = vals.reshape(s.shape + (gs,)) * sc[..., None]
    return vals.reshape(q.shape[:-1] + (-1,))


def _fp_quantized(rng, shape, mode):
    return ref_fp_quantize(gen(rng, shape, "float32"), mode)


for _mode in FP_MODES:
    for _k, _part in enumerate(("q", "scales")):
        _case("quantize", lambda w, m=_mode, k=_k: mx.quantize(w, mode=m)[k],
              lambda w, m=_mode, k=_k: ref_fp_quantize(w, m)[k],
              lambda rng, dt: (gen(rng, (3, 64), dt) * 4,), dtypes=("float32",), exact=True,
              differentiable=False, ref_float64=False,
              out_dtype=lambda dt, k=_k: ("uint32", "uint8")[k], variant=f"{_mode}_{_part}")
    _case("dequantize", lambda q, s, m=_mode: mx.dequantize(q, s, mode=m, dtype=mx.float32),
          lambda q, s, m=_mode: ref_fp_dequantize(q, s, m),
          lambda rng, dt, m=_mode: _fp_quantized(rng, (2, 3, 64), m), exact=True,
          dtypes=("float32",), differentiable=False, out_dtype=lambda dt: "float32",
          variant=_mode)
    _case("quantized_matmul",
          lambda x, q, s, m=_mode: mx.quantized_matmul(x, q, s, mode=m),
          lambda x, q, s, m=_mode: x @ np.swapaxes(ref_fp_dequantize(q, s, m), -1, -2),
          lambda rng, dt, m=_mode: (gen(rng, (2, 3, 64), dt),) + _fp_quantized(rng, (5, 64), m),
          grad_inputs=(0,), rtol=1e-4, atol=1e-4, dtypes=("float32",), variant=_mode)
    _case("quantized_matmul",
          lambda x, q, s, m=_mode: mx.quantized_matmul(x, q, s, transpose=False, mode=m),
          lambda x, q, s, m=_mode: x @ ref_fp_dequantize(q, s, m),
          lambda rng, dt, m=_mode: (gen(rng, (3, 6), dt),) + _fp_quantized(rng, (6, 64), m),
          grad_inputs=(0,), rtol=1e-4, atol=1e-4, dtypes=("float32",),
          variant=f"{_mode}_nt")
_case("gather_qmm",
      lambda x, q, s, ri: mx.gather_qmm(x, q, s, rhs_indices=ri, mode="mxfp8"),
      lambda x, q, s, ri: ref_gather_mm(x, np.swapaxes(ref_fp_dequantize(q, s, "mxfp8"), -1, -2),
                                        None, ri),
      lambda rng, dt: ((gen(rng, (4, 2, 64), dt),) + _fp_quantized(rng, (3, 8, 64), "mxfp8")
                       + (rng.integers(0, 3, size=(4,)).astype(np.uint32),)),
      grad_inputs=(0,), rtol=1e-4, atol=1e-4, dtypes=("float32",), variant="mxfp8")
