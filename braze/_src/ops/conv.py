"""Public ops: convolutions (conv1d, conv2d, conv3d, conv_general and the transposed
convolutions), channels-last as in MLX.

All of them bind the one `Convolution` primitive. Inputs are promoted to a common floating
dtype (integer inputs are rejected, as MLX does). Negative padding (which a transposed
convolution with a large `padding` produces) is turned into a crop of the input here, so the
primitive only ever sees non-negative padding.
"""
from __future__ import annotations

import numbers
from typing import Sequence, Tuple, Union

from .. import dtypes as D
from ..array import array
from ..prims.base import bind
from ..prims.conv import Convolution, crop_negative_padding
from ._helpers import as_array, astype
from ._typing import ArrayLike, StreamOrDevice

__all__ = ["conv1d", "conv2d", "conv3d", "conv_general", "conv_transpose1d",
           "conv_transpose2d", "conv_transpose3d", "convolve"]


def _int(v, name, op):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"[{op}] Expected an integer for {name}, got {type(v).__name__}: {v!r}.")
    return int(v)


def _tuple(v, n, name, op, minimum=None):
    """int or sequence of n ints -> tuple of n ints."""
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"[{op}] Expected {n} values for {name} (one per spatial "
                             f"dimension), got {tuple(v)}.")
        out = tuple(_int(a, name, op) for a in v)
    else:
        out = (_int(v, name, op),) * n
    if minimum is not None and any(a < minimum for a in out):
        raise ValueError(f"[{op}] {name} must be >= {minimum}, got {out}.")
    return out


def _operands(input, weight, op):
    x = input if type(input) is array else as_array(input, op)
    w = weight if type(weight) is array else as_array(weight, op)
    if x.ndim < 3 or x.ndim != w.ndim:
        raise ValueError(f"[{op}] Input and weight must have the same number of dimensions "
                         f"(at least 3: batch, spatial..., channels), got shapes {x.shape} "
                         f"and {w.shape}.")
    dt = D.promote(x.dtype, w.dtype)
    if dt.kind != "f":
        raise ValueError(f"[{op}] Only floating point inputs are supported, got {x.dtype.name} "
                         f"and {w.dtype.name}.")
    return astype(x, dt), astype(w, dt)


def _conv(x, w, stride, lo, hi, kdil, idil, groups, flip, op):
    """Bind the primitive, cropping the input for negative padding first."""
    if any(a < 0 for a in tuple(lo) + tuple(hi)):
        crop = crop_negative_padding(x.shape, lo, hi, idil)
        if crop is None:
            raise ValueError(f"[{op}] Negative padding {tuple(lo)}/{tuple(hi)} crops away a "
                             f"whole spatial dimension of the input with shape {x.shape}.")
        idx, lo, hi = crop
        x = x[idx]
    prim = Convolution(tuple(stride), tuple(lo), tuple(hi), tuple(kdil), tuple(idil),
                       int(groups), bool(flip))
    prim.abstract_eval(x, w)  # validate (errors name the primitive's op as "conv")
    return bind(prim, (x, w))


def conv_general(input: ArrayLike, weight: ArrayLike, /, stride: Union[int, Sequence[int]] = 1,
                 padding: Union[int, Sequence[int], Tuple[Sequence[int], Sequence[int]]] = 0,
                 kernel_dilation: Union[int, Sequence[int]] = 1,
                 input_dilation: Union[int, Sequence[int]] = 1, groups: int = 1, flip: bool = False,
                 *, stream: StreamOrDevice = None) -> array:
    """General convolution: input (N, ..., C_in), weight (C_out, ..., C_in / groups).

    `padding` is an int, a sequence (one per spatial dimension, both sides) or a pair
    `(low_sequence, high_sequence)`.
    """
    op = "conv_general"
    x, w = _operands(input, weight, op)
    nd = x.ndim - 2
    stride = _tuple(stride, nd, "stride", op, 1)
    if (isinstance(padding, tuple) and len(padding) == 2
            and all(isinstance(p, (list, tuple)) for p in padding)):
        lo = _tuple(padding[0], nd, "padding", op)
        hi = _tuple(padding[1], nd, "padding", op)
    else:
        lo = hi = _tuple(padding, nd, "padding", op)
    kdil = _tuple(kernel_dilation, nd, "kernel_dilation", op, 1)
    idil = _tuple(input_dilation, nd, "input_dilation", op, 1)
    groups = _int(groups, "groups", op)
    return _check(x, w, stride, lo, hi, kdil, idil, groups, flip, op)


def _check(x, w, stride, lo, hi, kdil, idil, groups, flip, op):
    cin, cout, cg = x.shape[-1], w.shape[0], w.shape[-1]
    if groups < 1 or cin % groups or cout % groups:
        raise ValueError(f"[{op}] The number of input channels ({cin}) and output channels "
                         f"({cout}) must be divisible by groups ({groups}).")
    if cg * groups != cin:
        raise ValueError(f"[{op}] Expect the input channels in the input and weight array to "
                         f"match but got shapes - input: {x.shape} and weight: {w.shape}.")
    try:
        return _conv(x, w, stride, lo, hi, kdil, idil, groups, flip, op)
    except ValueError as e:
        msg = str(e)
        raise ValueError(msg.replace("[conv]", f"[{op}]", 1)) from None


def _convnd(nd, op, input, weight, stride, padding, dilation, groups):
    x, w = _operands(input, weight, op)
    if nd == 1 and 4 <= x.ndim <= 5 and not any(
            isinstance(v, (list, tuple)) for v in (stride, padding, dilation)):
        # MLX's conv1d is conv_general with one stride/padding/dilation for every spatial
        # axis, so it also convolves 2-D and 3-D inputs
        nd = x.ndim - 2
    if x.ndim != nd + 2:
        raise ValueError(f"[{op}] Expected input and weight with {nd + 2} dimensions, got "
                         f"shapes {x.shape} and {w.shape}.")
    stride = _tuple(stride, nd, "stride", op, 1)
    pad = _tuple(padding, nd, "padding", op, 0)
    dil = _tuple(dilation, nd, "dilation", op, 1)
    groups = _int(groups, "groups", op)
    return _check(x, w, stride, pad, pad, dil, (1,) * nd, groups, False, op)


def conv1d(input: ArrayLike, weight: ArrayLike, /, stride: int = 1, padding: int = 0,
           dilation: int = 1, groups: int = 1, *, stream: StreamOrDevice = None) -> array:
    """1D convolution: input (N, L, C_in), weight (C_out, K, C_in / groups). As in MLX, 4-D
    and 5-D operands give a 2-D or 3-D convolution with the same int parameters on each axis."""
    return _convnd(1, "conv1d", input, weight, stride, padding, dilation, groups)


def conv2d(input: ArrayLike, weight: ArrayLike, /, stride: Union[int, Sequence[int]] = 1,
           padding: Union[int, Sequence[int]] = 0, dilation: Union[int, Sequence[int]] = 1,
           groups: int = 1, *, stream: StreamOrDevice = None) -> array:
    """2D convolution: input (N, H, W, C_in), weight (C_out, KH, KW, C_in / groups)."""
    return _convnd(2, "conv2d", input, weight, stride, padding, dilation, groups)


def conv3d(input: ArrayLike, weight: ArrayLike, /, stride: Union[int, Sequence[int]] = 1,
           padding: Union[int, Sequence[int]] = 0, dilation: Union[int, Sequence[int]] = 1,
           groups: int = 1, *, stream: StreamOrDevice = None) -> array:
    """3D convolution: input (N, D, H, W, C_in), weight (C_out, KD, KH, KW, C_in / groups)."""
    return _convnd(3, "conv3d", input, weight, stride, padding, dilation, groups)


def _conv_transpose(nd, op, input, weight, stride, padding, dilation, output_padding, groups):
    x, w = _operands(input, weight, op)
    if x.ndim != nd + 2:
        raise ValueError(f"[{op}] Expected input and weight with {nd + 2} dimensions, got "
                         f"shapes {x.shape} and {w.shape}.")
    stride = _tuple(stride, nd, "stride", op, 1)
    pad = _tuple(padding, nd, "padding", op, 0)
    dil = _tuple(dilation, nd, "dilation", op, 1)
    opad = _tuple(output_padding, nd, "output_padding", op, 0)
    groups = _int(groups, "groups", op)
    K = w.shape[1:-1]
    lo = tuple(d * (k - 1) - p for d, k, p in zip(dil, K, pad))
    hi = tuple(a + o for a, o in zip(lo, opad))
    return _check(x, w, (1,) * nd, lo, hi, dil, stride, groups, True, op)


def conv_transpose1d(input: ArrayLike, weight: ArrayLike, /, stride: int = 1, padding: int = 0,
                     dilation: int = 1, output_padding: int = 0, groups: int = 1, *,
                     stream: StreamOrDevice = None) -> array:
    """1D transposed convolution: input (N, L, C_in), weight (C_out, K, C_in / groups)."""
    return _conv_transpose(1, "conv_transpose1d", input, weight, stride, padding, dilation,
                           output_padding, groups)


def conv_transpose2d(input: ArrayLike, weight: ArrayLike, /, stride: Union[int, Sequence[int]] = 1,
                     padding: Union[int, Sequence[int]] = 0,
                     dilation: Union[int, Sequence[int]] = 1,
                     output_padding: Union[int, Sequence[int]] = 0, groups: int = 1, *,
                     stream: StreamOrDevice = None) -> array:
    """2D transposed convolution: input (N, H, W, C_in), weight (C_out, KH, KW, C_in / groups)."""
    return _conv_transpose(2, "conv_transpose2d", input, weight, stride, padding, dilation,
                           output_padding, groups)


def conv_transpose3d(input: ArrayLike, weight: ArrayLike, /, stride: Union[int, Sequence[int]] = 1,
                     padding: Union[int, Sequence[int]] = 0,
                     dilation: Union[int, Sequence[int]] = 1,
                     output_padding: Union[int, Sequence[int]] = 0, groups: int = 1, *,
                     stream: StreamOrDevice = None) -> array:
    """3D transposed convolution: input (N, D, H, W, C_in), weight (C_out, KD, KH, KW, C_in)."""
    return _conv_transpose(3, "conv_transpose3d", input, weight, stride, padding, dilation,
                           output_padding, groups)


def convolve(a: ArrayLike, v: ArrayLike, /, mode: str = "full", *,
             stream: StreamOrDevice = None) -> array:
    """NumPy's 1-D discrete convolution (the filter flipped); the longer input is the signal.
    A composite over conv1d: the full result, then cut to 'same' or 'valid'."""
    from .shape import flip, reshape

    a, v = as_array(a, "convolve"), as_array(v, "convolve")
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError("[convolve] Inputs must be 1D.")
    if a.size == 0 or v.size == 0:
        raise ValueError("[convolve] Inputs cannot be empty.")
    if mode not in ("full", "same", "valid"):
        raise ValueError("[convolve] Invalid mode.")
    if v.size > a.size:
        a, v = v, a
    n, m = a.size, v.size
    full = conv1d(reshape(a, (1, n, 1)), reshape(flip(v), (1, m, 1)), padding=m - 1)
    full = reshape(full, (n + m - 1,))
    start, size = {"full": (0, n + m - 1), "same": ((m - 1) // 2, n),
                   "valid": (m - 1, n - m + 1)}[mode]
    return full if size == n + m - 1 else full[start:start + size]
