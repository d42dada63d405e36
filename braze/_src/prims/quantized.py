"""Primitives: gathered and quantized matrix products (GatherMM, Quantize, Dequantize).

Quantization is MLX's "affine" mode: every `group_size` consecutive elements of a row share a
scale and a bias; each element is rounded to `bits` bits and the values are packed into uint32
words as one little-endian bit stream (element i of a row occupies bits [i*bits, (i+1)*bits) of
the row's words). For bits 2, 3, 4, 5, 6, 8 the bias is the group's extremum of larger
magnitude, and the scale is adjusted so that extremum is represented exactly; 1-bit groups use
the minimum as bias (both bit-for-bit MLX's CPU results).

`quantized_matmul` and `gather_qmm` are composites over Dequantize and GatherMM/matmul in the op
layer, so they differentiate (w.r.t. x, scales and biases), vmap and compile for free.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .base import Primitive, broadcast_shapes, lazy_dataclass, ops

BITS = (1, 2, 3, 4, 5, 6, 8)
GROUP_SIZES = (32, 64, 128)


def _compute(x):
    return x.astype(np.float32) if D.is_half(x.dtype) else x


def _prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


# -- GatherMM ---------------------------------------------------------------------------------
def gather_mm_shape(a_shape, b_shape, li_shape, ri_shape, op="gather_mm"):
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise ValueError(f"[{op}] Operands must have at least 2 dimensions, got shapes "
                         f"{tuple(a_shape)} and {tuple(b_shape)}.")
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(
            f"[{op}] Last dimension of first input with shape {tuple(a_shape)} must match "
            f"second to last dimension of second input with shape {tuple(b_shape)}.")
    batch = broadcast_shapes(tuple(li_shape), tuple(ri_shape), op=op)
    return tuple(batch) + (a_shape[-2], b_shape[-1])


def _flat_index(idx, n):
    """Flat batch indices: negatives wrap (Python style), out-of-range ones are clipped (MLX
    does not check them; braze never reads out of bounds)."""
    idx = idx.astype(np.int64, copy=False)
    idx = np.where(idx < 0, idx + n, idx)
    return np.clip(idx, 0, max(n - 1, 0))


@lazy_dataclass
class GatherMM(Primitive):
    """Inputs (a, b, lhs_indices, rhs_indices): out[i...] = A[lhs[i...]] @ B[rhs[i...]], where
    A and B are a and b with their batch axes flattened; the index arrays broadcast together.
    a and b share one inexact dtype (the op layer promotes)."""

    def abstract_eval(self, a, b, li, ri):
        return [(gather_mm_shape(a.shape, b.shape, li.shape, ri.shape), a.dtype)]

    def eval_cpu(self, a, b, li, ri):
        M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
        af = _compute(a).reshape((-1, M, K))
        bf = _compute(b).reshape((-1, K, N))
        li, ri = np.broadcast_arrays(li, ri)
        shape = li.shape + (M, N)
        if af.shape[0] == 0 or bf.shape[0] == 0 or li.size == 0:
            return [np.zeros(shape, a.dtype)]
        out = np.matmul(af[_flat_index(li, af.shape[0])], bf[_flat_index(ri, bf.shape[0])])
        return [np.ascontiguousarray(out.reshape(shape)).astype(a.dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        a, b, li, ri = primals
        g = cotangents[0]
        batch = g.shape[:-2]
        out = []
        for i in argnums:
            if i == 0:  # g[i] @ B[rhs[i]]^T, summed into A[lhs[i]]
                ga = ops.gather_mm(g, ops.swapaxes(b, -1, -2), None,
                                   ops.broadcast_to(ri, batch))
                out.append(_scatter_add(a, li, batch, ga))
            elif i == 1:  # A[lhs[i]]^T @ g[i], summed into B[rhs[i]]
                gb = ops.gather_mm(ops.swapaxes(a, -1, -2), g, ops.broadcast_to(li, batch),
                                   None)
                out.append(_scatter_add(b, ri, batch, gb))
            else:  # as MLX: indices have no gradient, and asking for one is an error
                raise ValueError("[GatherMM] Cannot calculate VJP with respect to indices. Use "
                                 "stop_gradient on indices to stop gradients from being "
                                 "computed.")
        return out

    def jvp(self, primals, tangents, argnums):
        a, b, li, ri = primals
        out = None
        for i, t in zip(argnums, tangents):
            if i == 0:
                term = ops.gather_mm(t, b, li, ri)
            elif i == 1:
                term = ops.gather_mm(a, t, li, ri)
            else:
                continue
            out = term if out is None else out + term
        if out is None:
            shape, dtype = self.abstract_eval(*primals)[0]
            out = ops.zeros(shape, dtype)
        return [out]

    def vmap(self, inputs, axes):
        a, b, li, ri = inputs
        ax_a, ax_b, ax_l, ax_r = axes
        n = next(x.shape[ax] for x, ax in zip(inputs, axes) if ax is not None)
        il = li.shape if ax_l is None else li.shape[:ax_l] + li.shape[ax_l + 1:]
        ir = ri.shape if ax_r is None else ri.shape[:ax_r] + ri.shape[ax_r + 1:]
        nd = len(broadcast_shapes(tuple(il), tuple(ir), op="gather_mm"))

        def index(idx, ax, mat, ax_m):
            # the index with a leading batch axis (size n or 1) and rank 1 + nd
            idx = ops.moveaxis(idx, ax, 0) if ax is not None else ops.expand_dims(idx, 0)
            lead = idx.shape[0]
            rest = idx.shape[1:]
            idx = ops.reshape(idx, (lead,) + (1,) * (nd - len(rest)) + tuple(rest))
            if ax_m is None:
                return mat, idx
            # the batch axis of the matrix becomes its leading batch axis: flat index
            # v * (matrices per batch element) + idx
            mat = ops.moveaxis(mat, ax_m, 0)
            per = _prod(mat.shape[1:-2])
            dt = idx.dtype if idx.dtype in (D.int32, D.uint32, D.int64, D.uint64) else D.int32
            off = ops.reshape(ops.arange(n, dtype=dt) * per, (n,) + (1,) * nd)
            return mat, ops.astype(idx, dt) + off

        a, li = index(li, ax_l, a, ax_a)
        b, ri = index(ri, ax_r, b, ax_b)
        return [ops.gather_mm(a, b, li, ri)], [0]


def _scatter_add(x, idx, batch, upd):
    """zeros like x with the matrices `upd` (batch + (R, C)) added at flat batch indices idx."""
    R, C = x.shape[-2], x.shape[-1]
    flat = ops.zeros((_prod(x.shape[:-2]), R, C), upd.dtype)
    res = flat.at[ops.broadcast_to(idx, batch)].add(upd)
    return ops.reshape(res, x.shape)


# -- quantization -----------------------------------------------------------------------------
def _np_dtype(dt: D.Dtype):
    return dt.np_dtype


def pack_bits(q: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned values < 2**bits along the last axis -> little-endian bit stream in uint32."""
    K = q.shape[-1]
    shifts = np.arange(bits, dtype=np.uint32)
    stream = ((q.astype(np.uint32)[..., None] >> shifts) & 1).astype(np.uint8)
    stream = stream.reshape(q.shape[:-1] + (K * bits,))
    packed = np.packbits(stream, axis=-1, bitorder="little")
    packed = np.ascontiguousarray(packed).view("<u4").astype(np.uint32, copy=False)
    return packed.reshape(q.shape[:-1] + (K * bits // 32,))


def unpack_bits(w: np.ndarray, bits: int) -> np.ndarray:
    """Inverse of pack_bits: uint32 words -> uint32 values (..., nwords * 32 // bits)."""
    nw = w.shape[-1]
    K = nw * 32 // bits
    by = np.ascontiguousarray(w.astype("<u4", copy=False)).view(np.uint8)
    stream = np.unpackbits(by, axis=-1, bitorder="little")
    stream = stream.reshape(w.shape[:-1] + (K, bits)).astype(np.uint32)
    return (stream << np.arange(bits, dtype=np.uint32)).sum(-1, dtype=np.uint32)


def affine_quantize(w: np.ndarray, group_size: int, bits: int):
    """NumPy affine quantization: (packed uint32, scales, biases), scales/biases in w's dtype.

    Float32 arithmetic for half inputs; float64 inputs are computed in float64.
    """
    dt = w.dtype
    ct = np.float64 if dt == np.float64 else np.float32
    K = w.shape[-1]
    g = w.astype(ct).reshape(w.shape[:-1] + (K // group_size, group_size))
    n_bins = ct((1 << bits) - 1)
    eps = ct(1e-7)
    wmax = g.max(-1, keepdims=True) if g.size else np.zeros(g.shape[:-1] + (1,), ct)
    wmin = g.min(-1, keepdims=True) if g.size else np.zeros(g.shape[:-1] + (1,), ct)
    with np.errstate(divide="ignore", invalid="ignore"):
        if bits == 1:
            scales = np.maximum((wmax - wmin) / n_bins, eps)
            biases = wmin
        else:
            mask = np.abs(wmin) > np.abs(wmax)
            scales = np.maximum((wmax - wmin) / n_bins, eps)
            scales = np.where(mask, scales, -scales)
            edge = np.where(mask, wmin, wmax)
            q0 = np.round(edge / scales)
            nz = q0 != 0
            scales = np.where(nz, edge / np.where(nz, q0, 1), scales)
            biases = np.where(nz, edge, ct(0))
        q = np.clip(np.round((g - biases) / scales), 0, n_bins)
    q = np.nan_to_num(q).astype(np.uint32).reshape(w.shape[:-1] + (K,))
    return pack_bits(q, bits), scales[..., 0].astype(dt), biases[..., 0].astype(dt)


@lazy_dataclass
class Quantize(Primitive):
    """Affine quantization of w along its last axis: outputs (w_q uint32, scales, biases)."""

    group_size: int
    bits: int
    differentiable = False

    def abstract_eval(self, w):
        K = w.shape[-1]
        lead = tuple(w.shape[:-1])
        return [(lead + (K * self.bits // 32,), D.uint32),
                (lead + (K // self.group_size,), w.dtype),
                (lead + (K // self.group_size,), w.dtype)]

    def eval_cpu(self, w):
        return list(affine_quantize(w, self.group_size, self.bits))

    def vmap(self, inputs, axes):
        w = ops.moveaxis(inputs[0], axes[0], 0)
        return list(ops.quantize(w, self.group_size, self.bits)), [0, 0, 0]


@lazy_dataclass
class Dequantize(Primitive):
    """Inputs (w_q, scales, biases): scales * q + biases per group, rounded to the output dtype
    after the product and after the sum (as MLX's CPU kernel does). Linear in (scales, biases);
    the packed integer weights get zero gradients (MLX's QuantizedMatmul raises instead)."""

    group_size: int
    bits: int
    dtype: D.Dtype

    def abstract_eval(self, w, scales, biases):
        K = w.shape[-1] * 32 // self.bits
        return [(tuple(w.shape[:-1]) + (K,), self.dtype)]

    def eval_cpu(self, w, scales, biases):
        q = unpack_bits(w, self.bits)
        K = q.shape[-1]
        gs = self.group_size
        out_t = _np_dtype(self.dtype)
        ct = np.float64 if out_t == np.float64 else np.float32
        q = q.reshape(q.shape[:-1] + (K // gs, gs)).astype(ct)
        s = scales.astype(ct)[..., None]
        b = biases.astype(ct)[..., None]
        out = ((s * q).astype(out_t).astype(ct) + b).astype(out_t)
        return [out.reshape(w.shape[:-1] + (K,))]

    def _unpacked(self, w, like):
        """The integer values of w as an array of like's dtype (scale 1, bias 0)."""
        ones = ops.ones(like.shape, like.dtype)
        return ops.dequantize(w, ones, ops.zeros(like.shape, like.dtype), self.group_size,
                              self.bits, dtype=self.dtype)

    def _grouped(self, x):
        return ops.reshape(x, tuple(x.shape[:-1]) + (x.shape[-1] // self.group_size,
                                                     self.group_size))

    def vjp(self, primals, cotangents, argnums, outputs):
        w, scales, biases = primals
        g = cotangents[0]
        out = []
        for i in argnums:
            if i == 0:  # packed integers: no derivative (zeros, like any integer input)
                out.append(ops.zeros_like(w))
                continue
            if i == 1:
                q = self._unpacked(w, scales)
                r = ops.sum(self._grouped(g * q), axis=-1)
            else:
                r = ops.sum(self._grouped(g), axis=-1)
            dt = primals[i].dtype
            out.append(r if r.dtype == dt else ops.astype(r, dt))
        return out

    def jvp(self, primals, tangents, argnums):
        w, scales, biases = primals
        ts = tangents[argnums.index(1)] if 1 in argnums else ops.zeros_like(scales)
        tb = tangents[argnums.index(2)] if 2 in argnums else ops.zeros_like(biases)
        return [ops.dequantize(w, ts, tb, self.group_size, self.bits, dtype=self.dtype)]

    def vmap(self, inputs, axes):
        n = next(x.shape[ax] for x, ax in zip(inputs, axes) if ax is not None)
        moved = []
        for x, ax in zip(inputs, axes):
            if ax is None:
                moved.append(ops.broadcast_to(ops.expand_dims(x, 0), (n,) + tuple(x.shape)))
            else:
                moved.append(ops.moveaxis(x, ax, 0))
        w, s, b = moved
        return [ops.dequantize(w, s, b, self.group_size, self.bits, dtype=self.dtype)], [0]
