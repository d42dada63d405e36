"""Public ops: gathered and quantized matrix products (gather_mm, quantize, dequantize,
quantized_matmul, gather_qmm), with MLX's signatures and "affine" quantization format.

`quantized_matmul` and `gather_qmm` are composites: dequantize the packed weights, then matmul
or gather_mm. They differentiate w.r.t. x, scales and biases (never the packed weights), vmap
and compile like any other ops.
"""
from __future__ import annotations

import math

from .. import dtypes as D
from ..array import array
from ..prims.base import bind
from ..prims.quantized import BITS, GROUP_SIZES, Dequantize, GatherMM, Quantize
from ..prims.shape import ExpandDims, Squeeze
from ._helpers import as_array, astype
from .creation import arange
from .linalg import matmul
from .shape import reshape, swapaxes

__all__ = ["gather_mm", "quantize", "dequantize", "quantized_matmul", "gather_qmm"]

_OTHER_MODES = ("mxfp4", "mxfp8", "nvfp4")


def _arr(x, op):
    return x if type(x) is array else as_array(x, op)


# -- gather_mm --------------------------------------------------------------------------------
def _indices(idx, batch_shape, op, name):
    if idx is None:
        n = math.prod(batch_shape)
        r = arange(n, dtype=D.uint32)
        return reshape(r, tuple(batch_shape)) if len(batch_shape) != 1 else r
    idx = _arr(idx, op)
    if idx.dtype.kind not in "ui":
        raise ValueError(f"[{op}] Got {name} with invalid dtype {idx.dtype.name}. Indices must "
                         "be integral.")
    return idx


def gather_mm(a, b, /, lhs_indices=None, rhs_indices=None, *, sorted_indices=False,
              stream=None) -> array:
    """Matrix product with a gather of the matrices: out[i...] = A[lhs[i...]] @ B[rhs[i...]],
    where A, B are a, b with their batch axes flattened and the index arrays broadcast together
    (a missing index array means every matrix of that operand, in order)."""
    op = "gather_mm"
    a, b = _arr(a, op), _arr(b, op)
    dt = D.promote(a.dtype, b.dtype)
    if dt.kind not in "fc":
        raise ValueError(f"[{op}] Only inexact types are supported but {a.dtype.name} and "
                         f"{b.dtype.name} were provided which results in {dt.name}, which is "
                         "not a floating point type.")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"[{op}] Got 0 dimension input with shapes {a.shape} and {b.shape}. "
                         "Inputs must have at least one dimension.")
    a, b = astype(a, dt), astype(b, dt)
    squeeze = []
    if a.ndim == 1:
        a = bind(ExpandDims((0,)), (a,))
        squeeze.append(-2)
    if b.ndim == 1:
        b = bind(ExpandDims((1,)), (b,))
        squeeze.append(-1)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"[{op}] Last dimension of first input with shape {a.shape} must match second to "
            f"last dimension of second input with shape {b.shape}.")
    li = _indices(lhs_indices, a.shape[:-2], op, "lhs_indices")
    ri = _indices(rhs_indices, b.shape[:-2], op, "rhs_indices")
    out = bind(GatherMM(), (a, b, li, ri))
    if squeeze:
        nd = out.ndim
        out = bind(Squeeze(tuple(sorted(nd + s for s in squeeze))), (out,))
    return out


# -- quantization -----------------------------------------------------------------------------
def _params(group_size, bits, mode, op):
    if not isinstance(mode, str):
        raise TypeError(f"[{op}] mode must be a string, got {type(mode).__name__}: {mode!r}.")
    if mode in _OTHER_MODES:
        raise ValueError(f"[{op}] Quantization mode {mode!r} is not supported by braze; only "
                         "'affine' is.")
    if mode != "affine":
        raise ValueError(f"[{op}] Invalid quantization mode {mode!r}; expected 'affine'.")
    group_size = 64 if group_size is None else group_size
    bits = 4 if bits is None else bits
    for name, v in (("group_size", group_size), ("bits", bits)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"[{op}] {name} must be an int, got {type(v).__name__}: {v!r}.")
    if bits not in BITS:
        raise ValueError(f"[{op}] The requested number of bits {bits} is not supported. The "
                         "supported bits are 1, 2, 3, 4, 5, 6 and 8.")
    if group_size not in GROUP_SIZES:
        raise ValueError(f"[{op}] The requested group size {group_size} is not supported. The "
                         "supported group sizes are 32, 64, and 128.")
    return group_size, bits


def quantize(w, /, group_size=None, bits=None, mode="affine", *, global_scale=None,
             stream=None):
    """Affine quantization of `w` along its last axis: (w_q, scales, biases), MLX's layout.

    Defaults: group_size 64, bits 4. w must have at least 2 dimensions, a floating dtype and a
    last axis divisible by group_size.
    """
    op = "quantize"
    group_size, bits = _params(group_size, bits, mode, op)
    if global_scale is not None:
        raise ValueError(f"[{op}] global_scale is only used by 'nvfp4' quantization.")
    w = _arr(w, op)
    if w.dtype.kind != "f":
        raise ValueError(f"[{op}] Only real floating types can be quantized but w has type "
                         f"{w.dtype.name}.")
    if w.ndim < 2:
        raise ValueError(f"[{op}] The matrix to be quantized must have at least 2 dimension "
                         f"but it has only {w.ndim}.")
    if w.shape[-1] % group_size:
        raise ValueError(f"[{op}] The last dimension of the matrix needs to be divisible by "
                         f"the quantization group size {group_size}. However the provided "
                         f"matrix has shape {w.shape}.")
    return tuple(bind(Quantize(group_size, bits), (w,)))


def _check_packed(w, scales, biases, group_size, bits, op):
    if w.dtype is not D.uint32:
        raise ValueError(f"[{op}] The matrix should be given as a uint32, got {w.dtype.name}.")
    if biases is None:
        raise ValueError(f"[{op}] Biases must be provided for affine quantization.")
    if scales.dtype.kind != "f" or biases.dtype.kind != "f":
        raise ValueError(f"[{op}] Scales and biases must have a floating dtype, got "
                         f"{scales.dtype.name} and {biases.dtype.name}.")
    if w.ndim < 2:
        raise ValueError(f"[{op}] The quantized matrix must have at least 2 dimension but it "
                         f"has only {w.ndim}.")
    K = w.shape[-1] * 32 // bits
    if (scales.shape != biases.shape or scales.shape[:-1] != w.shape[:-1]
            or (w.shape[-1] * 32) % bits or scales.shape[-1] * group_size != K):
        raise ValueError(f"[{op}] Shape of scales and biases does not match the matrix given "
                         f"the quantization parameters. Provided matrix of shape {w.shape} "
                         f"and scales/biases of shape {scales.shape}/{biases.shape} with "
                         f"group_size={group_size} and bits={bits}.")
    return K


def dequantize(w, /, scales, biases=None, group_size=None, bits=None, mode="affine",
               global_scale=None, dtype=None, *, stream=None) -> array:
    """scales * q + biases for each group of the packed matrix w (the inverse of quantize)."""
    op = "dequantize"
    group_size, bits = _params(group_size, bits, mode, op)
    w, scales = _arr(w, op), _arr(scales, op)
    biases = None if biases is None else _arr(biases, op)
    _check_packed(w, scales, biases, group_size, bits, op)
    if dtype is None:
        dtype = scales.dtype
    else:
        dtype = D.to_dtype(dtype, op)
        if dtype.kind != "f":
            raise ValueError(f"[{op}] dtype must be a floating type, got {dtype.name}.")
    if biases.dtype is not scales.dtype:
        biases = astype(biases, scales.dtype)
    return bind(Dequantize(group_size, bits, dtype), (w, scales, biases))


def _qmm_operands(x, w, scales, biases, transpose, group_size, bits, mode, op):
    group_size, bits = _params(group_size, bits, mode, op)
    x, w, scales = _arr(x, op), _arr(w, op), _arr(scales, op)
    biases = None if biases is None else _arr(biases, op)
    K = _check_packed(w, scales, biases, group_size, bits, op)
    dt = D.promote(x.dtype, scales.dtype)
    if dt.kind != "f":
        raise ValueError(f"[{op}] Only real floating types are supported, got x of type "
                         f"{x.dtype.name} and scales of type {scales.dtype.name}.")
    rows = w.shape[-2]
    inner = K if transpose else rows
    if x.ndim == 0 or x.shape[-1] != inner:
        full = (rows, K)
        expanded = full[::-1] if transpose else full
        raise ValueError(f"[{op}] Last dimension of first input with shape {x.shape} does not "
                         f"match the expanded quantized matrix {expanded} computed from shape "
                         f"{w.shape} with group_size={group_size}, bits={bits} and "
                         f"transpose={transpose}.")
    wd = dequantize(w, astype(scales, dt), astype(biases, dt), group_size, bits)
    if transpose:
        wd = swapaxes(wd, -1, -2)
    return astype(x, dt), wd


def quantized_matmul(x, w, /, scales, biases=None, transpose=True, group_size=None, bits=None,
                     mode="affine", *, stream=None) -> array:
    """x @ dequantize(w).T (transpose=True) or x @ dequantize(w)."""
    x, wd = _qmm_operands(x, w, scales, biases, transpose, group_size, bits, mode,
                          "quantized_matmul")
    return matmul(x, wd)


def gather_qmm(x, w, /, scales, biases=None, lhs_indices=None, rhs_indices=None,
               transpose=True, group_size=None, bits=None, mode="affine", global_scale=None,
               *, sorted_indices=False, stream=None) -> array:
    """gather_mm(x, dequantize(w).T (or dequantize(w)), lhs_indices, rhs_indices)."""
    op = "gather_qmm"
    if global_scale is not None:
        raise ValueError(f"[{op}] global_scale is only used by 'nvfp4' quantization.")
    x, wd = _qmm_operands(x, w, scales, biases, transpose, group_size, bits, mode, op)
    try:
        return gather_mm(x, wd, lhs_indices, rhs_indices, sorted_indices=sorted_indices)
    except ValueError as e:
        raise ValueError(str(e).replace("[gather_mm]", f"[{op}]")) from None
