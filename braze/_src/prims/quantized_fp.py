"""Primitives: MLX's floating-point quantization modes and fp8 conversions.

Modes (group size, bits): "mxfp4" (32, 4) and "mxfp8" (32, 8) share one e8m0 scale per group,
a uint8 holding the exponent + 127 of a power of two; "nvfp4" (16, 4) has one e4m3 (fp8) scale
per group, optionally rescaled by a float32 `global_scale`. 4-bit values are e2m1 (fp4) codes,
eight per uint32 word, low nibble first; 8-bit values are e4m3 bytes, four per word.

The NumPy kernels reproduce MLX's CPU results bit for bit. On the CPU MLX computes quantize and
dequantize as a chain of ordinary ops, so each step here rounds to the dtype that step has in
MLX (half inputs: float32 arithmetic, rounded after every op), and fp4 codes are chosen by
argmin over |x - table| (ties and NaN: the first entry). `to_fp8`/`from_fp8` are MLX's bit-level
conversions (round to nearest even, saturating at 448; codes 0x7F and 0xFF are NaN).

The e8m0 exponent is ceil(log2(max|w| / max code)), computed from an unrounded log2: what the
installed MLX 0.32.4 does (its source snapshot rounds to nearest instead).
"""
from __future__ import annotations

from dataclasses import field

import numpy as np

from .. import dtypes as D
from ..casts import cast
from .base import Primitive, bind, lazy_dataclass, ops

MODES = {"mxfp4": (32, 4), "nvfp4": (16, 4), "mxfp8": (32, 8)}
FP4_LUT = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                    -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)
NV_ENCODE = 448.0 * 6.0  # nvfp4's global scale maps the largest |w| to e4m3 max * fp4 max
_F32 = np.dtype(np.float32)


# -- bit-level conversions --------------------------------------------------------------------
def to_fp8(x: np.ndarray) -> np.ndarray:
    """Floats -> e4m3 codes (uint8): nearest even, |x| >= 464 (and inf, NaN) saturate to 448."""
    with np.errstate(all="ignore"):
        f = np.ascontiguousarray(x, np.float32).view(np.uint32)
        sign = f & np.uint32(0x80000000)
        f = f ^ sign
        denorm = np.uint32(141 << 23)
        low = ((f.view(np.float32) + denorm.view(np.float32)).view(np.uint32) - denorm)
        odd = (f >> np.uint32(20)) & np.uint32(1)
        high = (f + np.uint32(((7 - 127) << 23) % (1 << 32)) + np.uint32(0x7FFFF) + odd)
        high = high >> np.uint32(20)
        out = np.where(f < np.uint32(121 << 23), low, high).astype(np.uint8)
        out = np.where(f >= np.uint32(543 << 21), np.uint8(0x7E), out)
        return (out | (sign >> np.uint32(24)).astype(np.uint8)).astype(np.uint8)


def from_fp8(b: np.ndarray) -> np.ndarray:
    """e4m3 codes (uint8) -> float32 values (exact)."""
    b = np.asarray(b, np.uint8)
    half = ((b & np.uint8(127)).astype(np.uint16) << np.uint16(7)).view(np.float16)
    mag = half.astype(np.float32) * np.float32(256.0)
    mag = np.where((b & np.uint8(127)) == 127, np.float32(np.nan), mag)  # e4m3fn's NaN codes
    return np.where(b & np.uint8(128), -mag, mag)


def _rounder(dt):
    """(compute dtype, r): r(x) rounds an op's result to dt, as MLX does after every op."""
    ct = np.float64 if dt == np.float64 else np.float32
    return ct, (lambda x: np.asarray(x, ct).astype(dt).astype(ct))


def _argmin_first_nan(d):
    return np.argmin(np.where(np.isnan(d), -1.0, d), axis=-1)


def _pack_fp4(codes, rows, K):
    words = codes.reshape(rows, K // 8, 8).astype(np.uint32)
    return (words << (np.arange(8, dtype=np.uint32) * 4)).sum(-1, dtype=np.uint32)


def _unpack(wq, bits):
    """Packed words (rows, n) -> fp4 codes (uint8) or e4m3 bytes, (rows, n * 32 // bits)."""
    by = np.ascontiguousarray(wq.astype("<u4", copy=False)).view(np.uint8)
    if bits == 8:
        return by
    return np.stack([by & np.uint8(15), by >> np.uint8(4)], axis=-1).reshape(by.shape[0], -1)


# -- quantize ---------------------------------------------------------------------------------
def _e8m0_scales(amax, maxval, r, ct, dt):
    """mx modes: (power-of-two divisor in dt, uint8 codes) from each group's max |w|."""
    scales = r(amax / ct(maxval))
    with np.errstate(all="ignore"):  # MLX 0.32.4: the exponent rounds up, from a float log2
        n = cast(np.ceil(np.log2(scales)), np.dtype(np.int32))
        e = r(np.where(scales == 0, ct(0), r(n.astype(np.float32))))
        return r(np.power(ct(2), e)), cast(r(e + ct(127)).astype(dt), np.dtype(np.uint8))


def _e4m3_scales(amax, r, ct, dt, gscale):
    """nvfp4: (divisor in dt, encode factor, uint8 codes)."""
    st = np.promote_types(dt, _F32).type
    enc = st(1.0) if gscale is None else st(np.float32(NV_ENCODE) / np.float32(gscale))
    codes = to_fp8((r(amax / ct(6.0)).astype(st) * enc).astype(np.float32))
    return r(from_fp8(codes)), enc, codes


def fp_quantize(w: np.ndarray, mode: str, gscale=None):
    """(packed uint32 (..., K * bits / 32), uint8 scales (..., K / group size))."""
    gs, bits = MODES[mode]
    lead, K = w.shape[:-1], w.shape[-1]
    rows = int(np.prod(lead, dtype=np.int64))
    if rows * K == 0:
        return (np.zeros(lead + (K * bits // 32,), np.uint32),
                np.zeros(lead + (K // gs,), np.uint8))
    dt = w.dtype
    ct, r = _rounder(dt)
    g = w.astype(ct).reshape(-1, gs)
    amax = np.max(np.abs(g), axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        if gs == 16:
            div, enc, codes = _e4m3_scales(amax, r, ct, dt, gscale)
            q = r(g / div).astype(type(enc)) * enc
            sub = lambda a, b: np.abs(a - b.astype(q.dtype))  # noqa: E731  (in q's dtype)
        else:
            div, codes = _e8m0_scales(amax, 6.0 if bits == 4 else 448.0, r, ct, dt)
            q = r(g / div)
            sub = lambda a, b: r(np.abs(a - b.astype(ct)))  # noqa: E731  (in w's dtype)
        if bits == 4:
            idx = _argmin_first_nan(sub(q[..., None], FP4_LUT))
            packed = _pack_fp4(idx, rows, K)
        else:
            packed = to_fp8(q.astype(np.float32)).reshape(rows, K).view("<u4").astype(np.uint32)
    return packed.reshape(lead + (K * bits // 32,)), codes.reshape(lead + (K // gs,))


# -- dequantize -------------------------------------------------------------------------------
def dequantized_dtype(mode, dtype: D.Dtype, has_global: bool) -> D.Dtype:
    """MLX (CPU) multiplies by a float32 global scale, so that promotes the result."""
    return D.promote(dtype, D.float32) if mode == "nvfp4" and has_global else dtype


def fp_dequantize(wq: np.ndarray, scales: np.ndarray, mode: str, out_dt, gscale=None):
    gs, bits = MODES[mode]
    lead = wq.shape[:-1]
    K = wq.shape[-1] * 32 // bits
    ot = np.dtype(out_dt)
    ct, r = _rounder(ot)
    rows = int(np.prod(lead, dtype=np.int64))
    codes = _unpack(wq.reshape(rows, -1), bits)
    vals = (FP4_LUT[codes] if bits == 4 else from_fp8(codes)).astype(ot).astype(ct)
    vals = vals.reshape(-1, gs)
    s = scales.reshape(-1, 1)
    with np.errstate(all="ignore"):
        if gs == 16:
            sc = r(from_fp8(s))
            if gscale is not None:
                st = np.promote_types(ot, _F32).type
                inv = st(np.float32(gscale)) / st(ot.type(NV_ENCODE))
                res = np.promote_types(ot, _F32)
                out = (vals.astype(st) * (sc.astype(st) * inv)).astype(res)
                return out.reshape(lead + (K,))
        else:
            sc = r(np.power(ct(2), r(s.astype(ct) - ct(127))))
        out = r(vals * sc).astype(ot)
    return out.reshape(lead + (K,))


def fake_quantize(x: np.ndarray, mode: str, gscale=None) -> np.ndarray:
    """x rounded to the values `mode` represents: quantize then dequantize to x's dtype (what
    MLX's qqmm does to its activations)."""
    return fp_dequantize(*fp_quantize(x, mode, gscale), mode, x.dtype, gscale).astype(x.dtype)


# -- primitives -------------------------------------------------------------------------------
def _moved(inputs, axes):
    """Every input with its batch axis first (unbatched ones broadcast along the batch)."""
    n = next(x.shape[ax] for x, ax in zip(inputs, axes) if ax is not None)
    out = []
    for x, ax in zip(inputs, axes):
        if ax is None:
            out.append(ops.broadcast_to(ops.expand_dims(x, 0), (n,) + tuple(x.shape)))
        else:
            out.append(ops.moveaxis(x, ax, 0))
    return out


@lazy_dataclass
class ConvertFP8(Primitive):
    """to_fp8 (float -> uint8 e4m3 codes) or from_fp8 (codes -> `dtype`); elementwise."""

    to: bool
    dtype: D.Dtype = D.float32
    differentiable = False

    def abstract_eval(self, x):
        return [(x.shape, D.uint8 if self.to else self.dtype)]

    def eval_cpu(self, x):
        if self.to:
            return [to_fp8(x)]
        return [from_fp8(x).astype(self.dtype.np_dtype)]

    def vmap(self, inputs, axes):
        return [ops.to_fp8(inputs[0]) if self.to
                else ops.from_fp8(inputs[0], self.dtype)], [axes[0]]


@lazy_dataclass
class FPQuantize(Primitive):
    """Inputs (w,) or (w, global_scale): outputs (packed uint32, uint8 scales)."""

    mode: str
    differentiable = False

    def abstract_eval(self, w, *gscale):
        gs, bits = MODES[self.mode]
        lead, K = tuple(w.shape[:-1]), w.shape[-1]
        return [(lead + (K * bits // 32,), D.uint32), (lead + (K // gs,), D.uint8)]

    def eval_cpu(self, w, *gscale):
        g = gscale[0].reshape(-1)[0] if gscale else None
        return list(fp_quantize(w, self.mode, g))

    def vmap(self, inputs, axes):
        if len(inputs) > 1 and axes[1] is not None:
            raise ValueError("[quantize] vmap over global_scale is not supported.")
        w = ops.moveaxis(inputs[0], axes[0], 0)
        gs = inputs[1] if len(inputs) > 1 else None
        return list(ops.quantize(w, mode=self.mode, global_scale=gs)), [0, 0]


@lazy_dataclass
class FPDequantize(Primitive):
    """Inputs (w, scales) or (w, scales, global_scale): the values in `dtype` (promoted to
    float32 by a global scale). No gradient w.r.t. the scales (MLX raises, naming `op`, the
    public op that built the node); the global scale has one."""

    mode: str
    dtype: D.Dtype
    op: str = field(default="dequantize", compare=False)

    def abstract_eval(self, w, scales, *gscale):
        K = w.shape[-1] * 32 // MODES[self.mode][1]
        dt = dequantized_dtype(self.mode, self.dtype, bool(gscale))
        return [(tuple(w.shape[:-1]) + (K,), dt)]

    def eval_cpu(self, w, scales, *gscale):
        g = gscale[0].reshape(-1)[0] if gscale else None
        out = fp_dequantize(w, scales, self.mode, self.dtype.np_dtype, g)
        return [out.astype(self.abstract_eval(w, scales, *gscale)[0][1].np_dtype, copy=False)]

    def _unit(self, w, scales):
        """d(out)/d(global_scale), elementwise: the values without the global scale / 2688."""
        base = ops.dequantize(w, scales, mode=self.mode, dtype=D.float32)
        return base / NV_ENCODE

    def vjp(self, primals, cotangents, argnums, outputs):
        out = []
        for i in argnums:
            if i == 1:
                raise ValueError(f"[{self.op}] no gradient wrt scales in {self.mode} "
                                 "quantization.")
            if i == 0:
                out.append(ops.zeros_like(primals[0]))
                continue
            gs = primals[2]
            g = ops.sum(ops.astype(cotangents[0], D.float32) * self._unit(*primals[:2]))
            out.append(ops.reshape(ops.astype(g, gs.dtype), gs.shape))
        return out

    def jvp(self, primals, tangents, argnums):
        shape, dt = self.abstract_eval(*primals)[0]
        if 2 not in argnums:
            return [ops.zeros(shape, dt)]
        t = ops.reshape(tangents[argnums.index(2)], ())
        return [ops.astype(self._unit(*primals[:2]) * t, dt)]

    def vmap(self, inputs, axes):
        if len(inputs) > 2 and axes[2] is not None:
            raise ValueError(f"[{self.op}] vmap over global_scale is not supported.")
        w, s = _moved(inputs[:2], axes[:2])
        gs = inputs[2] if len(inputs) > 2 else None
        return [ops.dequantize(w, s, mode=self.mode, dtype=self.dtype, global_scale=gs)], [0]


@lazy_dataclass
class FakeQuantize(Primitive):
    """Inputs (x,) or (x, global_scale): x rounded to the values `mode` can represent
    (qqmm's activations). The gradient passes straight through the rounding to x."""

    mode: str

    def abstract_eval(self, x, *gscale):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x, *gscale):
        return [fake_quantize(x, self.mode, gscale[0].reshape(-1)[0] if gscale else None)]

    def vjp(self, primals, cotangents, argnums, outputs):
        return [cotangents[0] if i == 0 else ops.zeros_like(primals[i]) for i in argnums]

    def jvp(self, primals, tangents, argnums):
        if 0 in argnums:
            return [tangents[argnums.index(0)]]
        return [ops.zeros_like(primals[0])]

    def vmap(self, inputs, axes):
        if len(inputs) > 1 and axes[1] is not None:
            raise ValueError("[qqmm] vmap over a global scale is not supported.")
        x, ax = inputs[0], axes[0]
        if ax == x.ndim - 1:  # groups run along the last axis: keep the batch off it
            x, ax = ops.moveaxis(x, ax, 0), 0
        return [bind(self, (x,) + tuple(inputs[1:]))], [ax]
