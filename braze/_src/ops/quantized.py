"""Public ops: gathered and quantized matrix products (gather_mm, quantize, dequantize,
quantized_matmul, gather_qmm, qqmm, gather_qqmm) and fp8 conversions (to_fp8, from_fp8), with
MLX's signatures and its quantization modes: "affine" (scales and biases in the weights'
dtype) and the floating-point "mxfp4", "nvfp4", "mxfp8" (uint8 scales, no biases; see
prims/quantized_fp.py).

`quantized_matmul` and `gather_qmm` are composites: dequantize the packed weights, then matmul
or gather_mm. They differentiate w.r.t. x, and for "affine" w.r.t. scales and biases (never the
packed weights), vmap and compile like any other ops. `qqmm` also rounds x to the mode's values.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

from .. import dtypes as D
from ..array import array
from ..prims.base import bind
from ..prims.quantized import BITS, GROUP_SIZES, Dequantize, GatherMM, Quantize
from ..prims.quantized_fp import MODES, ConvertFP8, FakeQuantize, FPDequantize, FPQuantize
from ..prims.shape import ExpandDims, Squeeze
from ._helpers import as_array, astype
from ._typing import ArrayLike, Dtype, StreamOrDevice
from .creation import arange
from .linalg import matmul
from .shape import reshape, swapaxes

__all__ = ["gather_mm", "quantize", "dequantize", "quantized_matmul", "gather_qmm", "qqmm",
           "gather_qqmm", "to_fp8", "from_fp8"]

_DEFAULTS = {"affine": (64, 4), **MODES}


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


def gather_mm(a: ArrayLike, b: ArrayLike, /, lhs_indices: Optional[ArrayLike] = None,
              rhs_indices: Optional[ArrayLike] = None, *, sorted_indices: bool = False,
              stream: StreamOrDevice = None) -> array:
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


# -- quantization parameters ------------------------------------------------------------------
def _mode(mode, op):
    if not isinstance(mode, str):
        raise TypeError(f"[{op}] mode must be a string, got {type(mode).__name__}: {mode!r}.")
    if mode not in _DEFAULTS:
        raise ValueError(f"[{op}] Invalid quantization mode '{mode}'. Valid modes are: "
                         f"{', '.join(_DEFAULTS)}.")
    return mode


def _params(group_size, bits, mode, op):
    """(mode, group_size, bits): the mode's defaults filled in, each value checked."""
    mode = _mode(mode, op)
    dg, db = _DEFAULTS[mode]
    group_size = dg if group_size is None else group_size
    bits = db if bits is None else bits
    for name, v in (("group_size", group_size), ("bits", bits)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"[{op}] {name} must be an int, got {type(v).__name__}: {v!r}.")
    if mode != "affine":
        if group_size != dg:
            raise ValueError(f"[{op}] {mode} quantization requires group size {dg} but got "
                             f"{group_size}.")
        if bits != db:
            raise ValueError(f"[{op}] {mode} quantization requires bits to be {db} but got "
                             f"{bits}.")
        return mode, group_size, bits
    if bits not in BITS:
        raise ValueError(f"[{op}] The requested number of bits {bits} is not supported. The "
                         "supported bits are 1, 2, 3, 4, 5, 6 and 8.")
    if group_size not in GROUP_SIZES:
        raise ValueError(f"[{op}] The requested group size {group_size} is not supported. The "
                         "supported group sizes are 32, 64, and 128.")
    return mode, group_size, bits


def _global_scale(gs, mode, op):
    if gs is None:
        return None
    if mode != "nvfp4":
        raise ValueError(f"[{op}] Global scale is only supported for 'nvfp4' quantization "
                         "mode.")
    gs = _arr(gs, op)
    if gs.size != 1:
        raise ValueError(f"[{op}] Global scale must be a scalar but got shape {gs.shape}.")
    if gs.dtype is not D.float32:
        raise ValueError(f"[{op}] Global scale must have dtype float32 but got "
                         f"{gs.dtype.name}.")
    return gs


def _scale_types(scales, biases, mode, op):
    """MLX's checks of the scales (and biases) for `mode`."""
    if mode == "affine":
        if biases is None:
            raise ValueError(f"[{op}] Biases must be provided for affine quantization.")
        if scales.dtype.kind != "f" or biases.dtype.kind != "f":
            raise ValueError(f"[{op}] Only real floating types are supported but "
                             f"scales.dtype() == {scales.dtype.name} and biases.dtype() == "
                             f"{biases.dtype.name}.")
        return
    if scales.dtype is not D.uint8:
        raise ValueError(f"[{op}] Scale type must be uint8 but received type "
                         f"{scales.dtype.name}.")
    if biases is not None:
        raise ValueError(f"[{op}] Biases must be null for quantization mode '{mode}'.")


# -- quantize / dequantize --------------------------------------------------------------------
def quantize(w: ArrayLike, /, group_size: Optional[int] = None, bits: Optional[int] = None,
             mode: str = "affine", *, global_scale: Optional[ArrayLike] = None,
             stream: StreamOrDevice = None
             ) -> Union[Tuple[array, array, array], Tuple[array, array]]:
    """Quantize `w` along its last axis. "affine": (w_q, scales, biases), defaults group_size
    64, bits 4; "mxfp4" (32, 4), "nvfp4" (16, 4), "mxfp8" (32, 8): (w_q, uint8 scales).

    w must have at least 2 dimensions, a floating dtype and a last axis divisible by
    group_size; `global_scale` (a float32 scalar) is for "nvfp4" only.
    """
    op = "quantize"
    mode, group_size, bits = _params(group_size, bits, mode, op)
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
    gs = _global_scale(global_scale, mode, op)
    if mode != "affine":
        return tuple(bind(FPQuantize(mode), (w,) if gs is None else (w, gs)))
    return tuple(bind(Quantize(group_size, bits), (w,)))


def _check_packed(w, scales, biases, group_size, bits, op):
    """The packed matrix against its scales (and biases): returns the unpacked last dim."""
    if w.dtype is not D.uint32:
        raise ValueError(f"[{op}] The matrix should be given as a uint32, got {w.dtype.name}.")
    if w.ndim < 2:
        raise ValueError(f"[{op}] The quantized matrix must have at least 2 dimension but it "
                         f"has only {w.ndim}.")
    K = w.shape[-1] * 32 // bits
    same = biases is None or scales.shape == biases.shape
    if (not same or scales.shape[:-1] != w.shape[:-1] or (w.shape[-1] * 32) % bits
            or scales.shape[-1] * group_size != K):
        what = "scales" if biases is None else "scales and biases"
        raise ValueError(f"[{op}] Shape of {what} does not match the matrix given the "
                         f"quantization parameters. Provided matrix of shape {w.shape} and "
                         f"{what} of shape {scales.shape}"
                         f"{'' if biases is None else '/' + str(biases.shape)} with "
                         f"group_size={group_size} and bits={bits}.")
    return K


def _fp_dequantize(w, scales, mode, dtype, gs, op):
    inputs = (w, scales) if gs is None else (w, scales, gs)
    return bind(FPDequantize(mode, dtype, op), inputs)


def dequantize(w: ArrayLike, /, scales: ArrayLike, biases: Optional[ArrayLike] = None,
               group_size: Optional[int] = None, bits: Optional[int] = None, mode: str = "affine",
               global_scale: Optional[ArrayLike] = None, dtype: Optional[Dtype] = None, *,
               stream: StreamOrDevice = None) -> array:
    """The inverse of quantize: scales * q + biases per group ("affine"), or the fp values
    times their group's scale (fp modes; default dtype bfloat16, as MLX)."""
    op = "dequantize"
    mode = _mode(mode, op)
    w, scales = _arr(w, op), _arr(scales, op)
    biases = None if biases is None else _arr(biases, op)
    if dtype is not None:
        dtype = D.to_dtype(dtype, op)
        if dtype.kind != "f":
            raise ValueError(f"[{op}] Only real floating types are supported but output "
                             f"dtype == {dtype.name}.")
    _scale_types(scales, biases, mode, op)
    mode, group_size, bits = _params(group_size, bits, mode, op)
    _check_packed(w, scales, biases, group_size, bits, op)
    gs = _global_scale(global_scale, mode, op)
    if mode != "affine":
        return _fp_dequantize(w, scales, mode, dtype or D.bfloat16, gs, op)
    if dtype is None:
        dtype = D.promote(scales.dtype, biases.dtype)
    st = D.promote(scales.dtype, biases.dtype)
    scales, biases = astype(scales, st), astype(biases, st)
    return bind(Dequantize(group_size, bits, dtype), (w, scales, biases))


# -- quantized products -----------------------------------------------------------------------
def _qmm_operands(x, w, scales, biases, transpose, group_size, bits, mode, op, gs=None):
    """MLX's checks; returns (x, the dequantized weight oriented for x @ W)."""
    mode = _mode(mode, op)
    x, w, scales = _arr(x, op), _arr(w, op), _arr(scales, op)
    biases = None if biases is None else _arr(biases, op)
    _scale_types(scales, biases, mode, op)
    mode, group_size, bits = _params(group_size, bits, mode, op)
    K = _check_packed(w, scales, biases, group_size, bits, op)
    dt = D.promote(x.dtype, scales.dtype) if mode == "affine" else x.dtype
    if dt.kind != "f":
        raise ValueError(f"[{op}] Only real floating types are supported but x.dtype() == "
                         f"{x.dtype.name}.")
    rows = w.shape[-2]
    inner, outer = (K, rows) if transpose else (rows, K)
    if x.ndim == 0 or x.shape[-1] != inner:
        raise ValueError(f"[{op}] Last dimension of first input with shape "
                         f"(..., {x.shape[-1] if x.ndim else ''}) does not match the expanded "
                         f"quantized matrix ({inner}, {outer}) computed from shape {w.shape} "
                         f"with group_size={group_size}, bits={bits} and "
                         f"transpose={transpose}.")
    if mode == "affine":
        wd = dequantize(w, astype(scales, dt), astype(biases, dt), group_size, bits)
    else:
        wd = astype(_fp_dequantize(w, scales, mode, dt, _global_scale(gs, mode, op), op), dt)
    if transpose:
        wd = swapaxes(wd, -1, -2)
    return astype(x, dt), wd


def quantized_matmul(x: ArrayLike, w: ArrayLike, /, scales: ArrayLike,
                     biases: Optional[ArrayLike] = None, transpose: bool = True,
                     group_size: Optional[int] = None, bits: Optional[int] = None,
                     mode: str = "affine", *, stream: StreamOrDevice = None) -> array:
    """x @ dequantize(w).T (transpose=True) or x @ dequantize(w)."""
    x, wd = _qmm_operands(x, w, scales, biases, transpose, group_size, bits, mode,
                          "quantized_matmul")
    return matmul(x, wd)


def gather_qmm(x: ArrayLike, w: ArrayLike, /, scales: ArrayLike, biases: Optional[ArrayLike] = None,
               lhs_indices: Optional[ArrayLike] = None, rhs_indices: Optional[ArrayLike] = None,
               transpose: bool = True, group_size: Optional[int] = None, bits: Optional[int] = None,
               mode: str = "affine", global_scale: Optional[ArrayLike] = None, *,
               sorted_indices: bool = False, stream: StreamOrDevice = None) -> array:
    """gather_mm(x, dequantize(w).T (or dequantize(w)), lhs_indices, rhs_indices)."""
    op = "gather_qmm"
    x, wd = _qmm_operands(x, w, scales, biases, transpose, group_size, bits, mode, op,
                          global_scale)
    if lhs_indices is None and rhs_indices is None:
        return matmul(x, wd)
    return _renamed(op, gather_mm, x, wd, lhs_indices, rhs_indices,
                    sorted_indices=sorted_indices)


def _renamed(op, fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except ValueError as e:
        raise ValueError(str(e).replace("[gather_mm]", f"[{op}]")) from None


# -- qqmm: both operands quantized ------------------------------------------------------------
def _qq_weight(w, scales, mode, gs_w, op):
    """The weight as qqmm uses it: (N, K) values, dequantized or rounded to the mode."""
    if w.dtype is D.uint32:
        if scales is None:
            raise ValueError(f"[{op}] Scales must be provided if second argument is "
                             "quantized.")
        scales = _arr(scales, op)
        _scale_types(scales, None, mode, op)
        _, group_size, bits = _params(None, None, mode, op)
        _check_packed(w, scales, None, group_size, bits, op)
        return _fp_dequantize(w, scales, mode, D.float32, gs_w, op)
    if w.dtype.kind != "f" or w.dtype is D.float64:
        raise ValueError(f"[{op}] Only real floating types except float64 are supported but "
                         f"second argument dtype == {w.dtype.name}.")
    return _round_to_mode(w, mode, gs_w, op)


def _round_to_mode(x, mode, gs, op):
    return bind(FakeQuantize(mode), (x,) if gs is None else (x, gs))


def _qq_checks(x, w, group_size, bits, mode, gs_x, gs_w, op):
    if mode == "affine":
        raise ValueError(f"[{op}] Only the 'mxfp4', 'nvfp4' and 'mxfp8' modes are supported, "
                         "got 'affine'.")
    _params(group_size, bits, mode, op)
    if x.dtype.kind != "f" or x.dtype is D.float64:
        raise ValueError(f"[{op}] Only real floating types except float64 are supported but "
                         f"first argument dtype == {x.dtype.name}.")
    gs_x, gs_w = _global_scale(gs_x, mode, op), _global_scale(gs_w, mode, op)
    if mode == "nvfp4" and (gs_x is None) != (gs_w is None):
        raise ValueError(f"[{op}] For nvfp4 mode, either both global_scale_x and "
                         "global_scale_w must be provided, or neither.")
    return gs_x, gs_w


def _qq_operands(x, w, scales, group_size, bits, mode, gs_x, gs_w, op):
    """(rounded x, weight (..., N, K) as float32 values) after MLX's checks."""
    mode = _mode(mode, op)
    x, w = _arr(x, op), _arr(w, op)
    gs_x, gs_w = _qq_checks(x, w, group_size, bits, mode, gs_x, gs_w, op)
    wv = _qq_weight(w, scales, mode, gs_w, op)
    if x.ndim == 0 or x.shape[-1] != wv.shape[-1]:
        raise ValueError(f"[{op}] Last dimension of first input with shape {x.shape} must "
                         f"match last dimension of second input with shape {wv.shape}.")
    if x.shape[-1] % _DEFAULTS[mode][0]:
        raise ValueError(f"[{op}] The last dimension of the first input {x.shape} must be "
                         f"divisible by the group size {_DEFAULTS[mode][0]}.")
    return _round_to_mode(x, mode, gs_x, op), astype(wv, x.dtype)


def qqmm(x: ArrayLike, w: ArrayLike, /, scales: Optional[ArrayLike] = None,
         group_size: Optional[int] = None, bits: Optional[int] = None, mode: str = "nvfp4",
         global_scale_x: Optional[ArrayLike] = None, global_scale_w: Optional[ArrayLike] = None, *,
         stream: StreamOrDevice = None) -> array:
    """x @ w.T with x rounded to the mode's values per group along K, and w either packed
    (with its uint8 scales) or a float matrix rounded the same way. Beyond MLX's CPU, any
    number of rows and batched x; the gradient passes through the rounding of x."""
    op = "qqmm"
    xq, wv = _qq_operands(x, w, scales, group_size, bits, mode, global_scale_x,
                          global_scale_w, op)
    if wv.ndim > 2:
        raise ValueError(f"[{op}] Only 2D inputs are supported but x.ndim() == {xq.ndim} and "
                         f"w.ndim() == {wv.ndim}.")
    return matmul(xq, swapaxes(wv, -1, -2))


def gather_qqmm(x: ArrayLike, w: ArrayLike, /, scales: Optional[ArrayLike] = None,
                lhs_indices: Optional[ArrayLike] = None, rhs_indices: Optional[ArrayLike] = None,
                group_size: Optional[int] = None, bits: Optional[int] = None, mode: str = "nvfp4",
                global_scale_x: Optional[ArrayLike] = None,
                global_scale_w: Optional[ArrayLike] = None, *, sorted_indices: bool = False,
                stream: StreamOrDevice = None) -> array:
    """gather_mm of the rounded x with the (dequantized or rounded) w transposed."""
    op = "gather_qqmm"
    xq, wv = _qq_operands(x, w, scales, group_size, bits, mode, global_scale_x,
                          global_scale_w, op)
    return _renamed(op, gather_mm, xq, swapaxes(wv, -1, -2), lhs_indices, rhs_indices,
                    sorted_indices=sorted_indices)


# -- fp8 --------------------------------------------------------------------------------------
def to_fp8(x: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """Floats -> e4m3 codes as uint8 (round to nearest even, saturating at +-448)."""
    x = _arr(x, "to_fp8")
    if x.dtype.kind != "f":
        raise ValueError(f"[to_fp8] Only real floating types are supported but x.dtype() == "
                         f"{x.dtype.name}.")
    return bind(ConvertFP8(True), (x,))


def from_fp8(x: ArrayLike, dtype: Optional[Dtype] = None, *,
             stream: StreamOrDevice = None) -> array:
    """e4m3 codes (uint8) -> floats of `dtype` (default bfloat16)."""
    x = _arr(x, "from_fp8")
    if x.dtype is not D.uint8:
        raise ValueError(f"[from_fp8] Input must have type uint8 but x.dtype() == "
                         f"{x.dtype.name}.")
    dtype = D.bfloat16 if dtype is None else D.to_dtype(dtype, "from_fp8")
    if dtype.kind != "f":
        raise ValueError(f"[from_fp8] Only real floating types are supported but dtype == "
                         f"{dtype.name}.")
    return bind(ConvertFP8(False, dtype), (x,))
