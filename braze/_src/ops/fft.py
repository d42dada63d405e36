"""Public ops: `mx.fft` (fft, ifft, fft2, ifft2, fftn, ifftn, the real variants, fftshift,
ifftshift, fftfreq, rfftfreq, stft, istft).

Every transform goes through `_transform`, which follows MLX's `fft_impl`: check the axes and
sizes, cut or zero-pad the input to the requested sizes, cast it (complex64; float32 for
rfft, whose complex input silently loses its imaginary part), bind the one `FFT` primitive and
apply the `norm` scale. Like MLX, results are complex64/float32 whatever the input dtype
(float64 included), and the checks shared by all transforms name `[fftn]` in their messages,
as MLX's do. These names live in `mx.fft` only, not in the top-level namespace.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .. import dtypes as D
from ..array import array
from ..prims.base import bind
from ..prims.fft import FFT
from ..prims.shape import Slice
from ._helpers import AxisError, astype, normalize_axis
from ._typing import ArrayLike, Axes, StreamOrDevice
from .creation import zeros
from .elementwise import maximum, real
from .indexing import take
from .shape import moveaxis, pad, reshape, roll, swapaxes

__all__ = [
    "fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
    "rfftn", "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq", "stft", "istft",
]

_NORMS = ("backward", "ortho", "forward")


# -- argument checks --------------------------------------------------------------------------
def _arr(a, op):
    if not isinstance(a, array):  # MLX's fft functions take arrays only
        raise TypeError(f"[{op}] Expected an array, got {type(a).__name__}.")
    return a


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer))


def _int(v, op, what) -> int:
    if not _is_int(v):
        raise TypeError(f"[{op}] Expected an int {what}, got {type(v).__name__}: {v!r}.")
    return int(v)


def _ints(v, op, what) -> tuple:
    if isinstance(v, np.ndarray):
        v = v.tolist() if v.ndim == 1 else v
    if not isinstance(v, (list, tuple)) or not all(_is_int(x) for x in v):
        raise TypeError(f"[{op}] Expected {what} as a sequence of ints, got {v!r}.")
    return tuple(int(x) for x in v)


def _norm(norm, op) -> str:
    if not isinstance(norm, str):
        raise TypeError(f"[{op}] Expected a str norm, got {type(norm).__name__}.")
    if norm not in _NORMS:
        raise ValueError(f"[{op}] Invalid norm. Expected one of {{'backward', 'ortho', "
                         f"'forward'}}.")
    return norm


def _pvec(v) -> str:
    return "(" + ",".join(str(x) for x in v) + ")"


def _scale(sizes, norm, inverse) -> float:
    if norm == "backward" or not sizes:
        return 1.0
    n = float(np.prod([float(s) for s in sizes]))
    if norm == "ortho":
        return float(np.sqrt(n)) if inverse else 1.0 / float(np.sqrt(n))
    return n if inverse else 1.0 / n


# -- the shared implementation (MLX's fft_impl) ------------------------------------------------
def _default_sizes(a, axes, real, inverse, op) -> tuple:
    """The transform sizes when none are given: the input's, except that irfft's last one is
    the even length 2 (m - 1) of a Hermitian half spectrum of m bins."""
    sizes = [a.shape[normalize_axis(ax, a.ndim, op)] for ax in axes]
    if real and inverse and sizes:
        sizes[-1] = (sizes[-1] - 1) * 2
    return tuple(sizes)


def _check(a, sizes, axes) -> tuple:
    """Normalized axes, with MLX's errors (and MLX's order of checks)."""
    if a.ndim < 1:
        raise ValueError("[fftn] Requires array with at least one dimension.")
    if len(sizes) != len(axes):
        raise ValueError("[fftn] Shape and axes have different sizes.")
    valid = tuple(ax + a.ndim if ax < 0 else ax for ax in axes)
    if len(set(valid)) != len(valid):
        raise ValueError(f"[fftn] Duplicated axis received {_pvec(axes)}")
    if valid and (min(valid) < 0 or max(valid) >= a.ndim):
        raise AxisError(f"[fftn] Invalid axis received for array with {a.ndim} dimensions.")
    if any(s <= 0 for s in sizes):
        raise ValueError(f"[fftn] Invalid FFT output size requested {_pvec(sizes)}")
    return valid


def _resize(a, shape):
    """`a` cut and zero-padded (at the end of each axis) to `shape`."""
    if any(t < s for t, s in zip(shape, a.shape)):
        stops = tuple(min(t, s) for t, s in zip(shape, a.shape))
        a = bind(Slice((0,) * a.ndim, stops, (1,) * a.ndim), (a,))
    if any(t > s for t, s in zip(shape, a.shape)):
        a = pad(a, [(0, t - s) for t, s in zip(shape, a.shape)])
    return a


def _transform(a, sizes, axes, real, inverse, norm):
    valid = _check(a, sizes, axes)
    if not valid:
        return a
    shape = list(a.shape)
    for ax, s in zip(valid, sizes):
        shape[ax] = s
    if real and inverse:
        shape[valid[-1]] = sizes[-1] // 2 + 1
    x = _resize(a, shape)
    x = astype(x, D.float32 if real and not inverse else D.complex64)
    out = bind(FFT(valid, inverse, real, sizes[-1] if real and inverse else 0), (x,))
    scale = _scale(sizes, norm, inverse)
    return out if scale == 1.0 else out * scale


def _one_axis(op, a, n, axis, norm, real, inverse):
    norm = _norm(norm, op)
    a = _arr(a, op)
    axis = _int(axis, op, "axis")
    if n is None:
        if a.ndim < 1:  # MLX looks the axis up first (an IndexError)
            raise AxisError(f"[{op}] Invalid axis {axis} for array with 0 dimensions.")
        sizes = _default_sizes(a, (axis,), real, inverse, op)
    else:
        sizes = (_int(n, op, "n"),)
    return _transform(a, sizes, (axis,), real, inverse, norm)


def _many_axes(op, a, s, axes, norm, real, inverse):
    norm = _norm(norm, op)
    a = _arr(a, op)
    if axes is None:
        if s is not None:
            raise ValueError(f"[{op}] `axes` should not be `None` if `s` is not `None`.")
        axes = tuple(range(a.ndim))
    axes = _ints(axes, op, "axes")
    if s is None:
        sizes = _default_sizes(a, axes, real, inverse, op)
    else:
        sizes = _ints(s, op, "s")
    return _transform(a, sizes, axes, real, inverse, norm)


# -- one axis ----------------------------------------------------------------------------------
def fft(a: ArrayLike, n: Optional[int] = None, axis: int = -1, norm: str = "backward",
        stream: StreamOrDevice = None) -> array:
    """One-dimensional discrete Fourier transform along `axis` (size `n`: cut or zero-padded)."""
    return _one_axis("fft", a, n, axis, norm, False, False)


def ifft(a: ArrayLike, n: Optional[int] = None, axis: int = -1, norm: str = "backward",
         stream: StreamOrDevice = None) -> array:
    """One-dimensional inverse discrete Fourier transform."""
    return _one_axis("ifft", a, n, axis, norm, False, True)


def rfft(a: ArrayLike, n: Optional[int] = None, axis: int = -1, norm: str = "backward",
         stream: StreamOrDevice = None) -> array:
    """Fourier transform of a real signal: n // 2 + 1 bins along `axis`."""
    return _one_axis("rfft", a, n, axis, norm, True, False)


def irfft(a: ArrayLike, n: Optional[int] = None, axis: int = -1, norm: str = "backward",
          stream: StreamOrDevice = None) -> array:
    """The inverse of rfft: a real signal of length `n` (default 2 (m - 1) for m bins)."""
    return _one_axis("irfft", a, n, axis, norm, True, True)


# -- several axes ------------------------------------------------------------------------------
def fft2(a: ArrayLike, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = (-2, -1),
         norm: str = "backward", stream: StreamOrDevice = None) -> array:
    """Two-dimensional discrete Fourier transform over `axes` (default: the last two; `s`:
    their sizes, each input axis cut or zero-padded to it)."""
    return _many_axes("fft2", a, s, axes, norm, False, False)


def ifft2(a: ArrayLike, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = (-2, -1),
          norm: str = "backward", stream: StreamOrDevice = None) -> array:
    """Two-dimensional inverse discrete Fourier transform over `axes` (default: the last two;
    `s`: their sizes)."""
    return _many_axes("ifft2", a, s, axes, norm, False, True)


def rfft2(a: ArrayLike, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = (-2, -1),
          norm: str = "backward", stream: StreamOrDevice = None) -> array:
    """Two-dimensional Fourier transform of a real signal over `axes` (default: the last two);
    the last of `axes` is the halved one, as in `rfftn`."""
    return _many_axes("rfft2", a, s, axes, norm, True, False)


def irfft2(a: ArrayLike, s: Optional[Sequence[int]] = None,
           axes: Optional[Sequence[int]] = (-2, -1), norm: str = "backward",
           stream: StreamOrDevice = None) -> array:
    """The inverse of rfft2: a real signal (the last of `axes` has size `s[-1]`, default
    2 (m - 1) for m bins).
    """
    return _many_axes("irfft2", a, s, axes, norm, True, True)


def fftn(a: ArrayLike, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None,
         norm: str = "backward", stream: StreamOrDevice = None) -> array:
    """n-dimensional transform over `axes` (all axes by default; `s` requires `axes`)."""
    return _many_axes("fftn", a, s, axes, norm, False, False)


def ifftn(a: ArrayLike, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None,
          norm: str = "backward", stream: StreamOrDevice = None) -> array:
    """n-dimensional inverse transform over `axes` (all axes by default; `s` requires
    `axes`).
    """
    return _many_axes("ifftn", a, s, axes, norm, False, True)


def rfftn(a: ArrayLike, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None,
          norm: str = "backward", stream: StreamOrDevice = None) -> array:
    """Real n-dimensional transform; the last of `axes` is the halved one."""
    return _many_axes("rfftn", a, s, axes, norm, True, False)


def irfftn(a: ArrayLike, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None,
           norm: str = "backward", stream: StreamOrDevice = None) -> array:
    """The inverse of rfftn: a real signal (the last of `axes` has size `s[-1]`, default
    2 (m - 1) for m bins).
    """
    return _many_axes("irfftn", a, s, axes, norm, True, True)


# -- shifts and frequencies --------------------------------------------------------------------
def _shift(op, a, axes, inverse):
    a = _arr(a, op)
    if axes is None:
        axes = tuple(range(a.ndim))
    elif _is_int(axes):
        axes = (int(axes),)
    else:
        axes = _ints(axes, op, "axes")
    if not axes:
        return a
    shifts = []
    for ax in axes:
        if not -a.ndim <= ax < a.ndim:
            raise AxisError(f"[{op}] Invalid axis {ax} for array with {a.ndim} dimensions.")
        half = a.shape[ax % a.ndim] // 2
        shifts.append(-half if inverse else half)
    return roll(a, tuple(shifts), axes)


def fftshift(a: ArrayLike, axes: Axes = None, stream: StreamOrDevice = None) -> array:
    """Move the zero-frequency bin to the centre (roll by size // 2 along `axes`)."""
    return _shift("fftshift", a, axes, False)


def ifftshift(a: ArrayLike, axes: Axes = None, stream: StreamOrDevice = None) -> array:
    """The inverse of fftshift (they differ on odd sizes)."""
    return _shift("ifftshift", a, axes, True)


def _spacing(op, n, d):
    n = _int(n, op, "n")
    if not isinstance(d, (int, float, np.integer, np.floating)):
        raise TypeError(f"[{op}] Expected a float d, got {type(d).__name__}.")
    if n <= 0:
        raise ValueError(f"[{op}] `n` must be greater than 0.")
    if d == 0:
        raise ValueError(f"[{op}] `d` must be non-zero.")
    return n, np.float32(1.0 / (n * float(d)))


def fftfreq(n: int, d: float = 1.0, stream: StreamOrDevice = None) -> array:
    """Sample frequencies of an n-point transform: [0, 1, ..., -2, -1] / (n d), float32."""
    n, scale = _spacing("fftfreq", n, d)
    k = np.concatenate([np.arange(0, (n + 1) // 2), np.arange(-(n // 2), 0)])
    # float32 index times float32 scale, rounded once: MLX's values bit for bit
    return array(k.astype(np.float32) * scale)


def rfftfreq(n: int, d: float = 1.0, stream: StreamOrDevice = None) -> array:
    """Sample frequencies of rfft's n // 2 + 1 bins, float32."""
    n, scale = _spacing("rfftfreq", n, d)
    return array(np.arange(0, n // 2 + 1).astype(np.float32) * scale)


# -- short-time transforms ---------------------------------------------------------------------
def _frame_window(op, window, win_length, n_fft):
    """The analysis window zero-padded (centred) to n_fft; ones(win_length) when None."""
    if window is None:
        win_length = n_fft if win_length is None else _int(win_length, op, "win_length")
        if win_length < 0:
            raise ValueError(f"[{op}] win_length must not be negative.")
        if win_length > n_fft:
            raise ValueError(f"[{op}] window length must not exceed n_fft.")
        w = array(np.ones(win_length, dtype=np.float32))
    else:
        w = _arr(window, op)
        if w.ndim != 1:
            raise ValueError(f"[{op}] window must be a one-dimensional array.")
        if w.shape[0] > n_fft:
            raise ValueError(f"[{op}] window length must not exceed n_fft.")
    left = (n_fft - w.shape[0]) // 2
    return pad(w, [(left, n_fft - w.shape[0] - left)])


def _hop(op, hop_length, n_fft):
    hop = n_fft // 4 if hop_length is None else _int(hop_length, op, "hop_length")
    if hop <= 0:
        raise ValueError(f"[{op}] hop_length must be positive.")
    return hop


def _frame_index(n_frames, n_fft, hop):
    return array((np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :])
                 .astype(np.int32))


def stft(x: ArrayLike, n_fft: int = 2048, hop_length: Optional[int] = None,
         win_length: Optional[int] = None, window: Optional[ArrayLike] = None, center: bool = True,
         pad_mode: str = "reflect", norm: str = "backward", onesided: Optional[bool] = None,
         stream: StreamOrDevice = None) -> array:
    """Short-time Fourier transform of the last axis: (..., n_freq, n_frames), complex64."""
    norm = _norm(norm, "stft")
    x = _arr(x, "stft")
    if x.ndim < 1:
        raise ValueError("[stft] Input must have at least one dimension.")
    n_fft = _int(n_fft, "stft", "n_fft")
    if n_fft <= 0:
        raise ValueError("[stft] n_fft must be positive.")
    hop = _hop("stft", hop_length, n_fft)
    w = _frame_window("stft", window, win_length, n_fft)
    if center:
        half = n_fft // 2
        x = pad(x, [(0, 0)] * (x.ndim - 1) + [(half, half)], mode=pad_mode)
    length = x.shape[-1]
    if length < n_fft:
        raise ValueError("[stft] Input is too short for the given n_fft.")
    n_frames = 1 + (length - n_fft) // hop
    frames = take(x, _frame_index(n_frames, n_fft, hop), axis=-1) * w
    if onesided is None:
        onesided = x.dtype is not D.complex64
    spec = (rfft if onesided else fft)(frames, n=n_fft, axis=-1, norm=norm)
    return swapaxes(spec, -1, -2)


def _overlap_add(frames, hop, length):
    """Sum frames (..., T, n_fft) into a signal (..., length), frame t starting at t * hop."""
    n_frames, n_fft = frames.shape[-2:]
    idx = reshape(_frame_index(n_frames, n_fft, hop), (-1,))
    vals = moveaxis(reshape(frames, frames.shape[:-2] + (n_frames * n_fft,)), -1, 0)
    out = zeros((length,) + vals.shape[1:], dtype=frames.dtype).at[idx].add(vals)
    return moveaxis(out, 0, -1)


def _fit_length(y, start, count):
    """y[..., start:start + count], zero-padded at the end when y is too short."""
    stop = min(y.shape[-1], start + count)
    y = y[..., start:max(start, stop)]
    if y.shape[-1] < count:
        y = pad(y, [(0, 0)] * (y.ndim - 1) + [(0, count - y.shape[-1])])
    return y


def istft(stft_matrix: ArrayLike, n_fft: Optional[int] = None, hop_length: Optional[int] = None,
          win_length: Optional[int] = None, window: Optional[ArrayLike] = None, center: bool = True,
          norm: str = "backward", onesided: Optional[bool] = None, length: Optional[int] = None,
          stream: StreamOrDevice = None) -> array:
    """Inverse of stft: overlap-add of the windowed inverse transforms, divided by the summed
    squared window (floored at 1e-8, as MLX does, so uncovered samples come out 0)."""
    norm = _norm(norm, "istft")
    s = _arr(stft_matrix, "istft")
    if s.ndim < 2:
        raise ValueError("[istft] Input must have at least two dimensions (freq, frames).")
    onesided = True if onesided is None else bool(onesided)
    n_freq, n_frames = s.shape[-2:]
    if n_fft is None:
        n_fft = 2 * (n_freq - 1) if onesided else n_freq
    n_fft = _int(n_fft, "istft", "n_fft")
    if n_fft <= 0:
        raise ValueError("[istft] n_fft must be positive.")
    hop = _hop("istft", hop_length, n_fft)
    w = _frame_window("istft", window, win_length, n_fft)
    if n_frames == 0:
        raise ValueError("[istft] Input has no frames.")
    spec = swapaxes(s, -1, -2)
    if onesided:
        frames = irfft(spec, n=n_fft, axis=-1, norm=norm)
    else:
        frames = real(ifft(spec, n=n_fft, axis=-1, norm=norm))
    frames = frames * w
    total = n_fft + hop * (n_frames - 1)
    y = _overlap_add(frames, hop, total)
    w2 = astype(w, frames.dtype)  # the envelope in the result's dtype (1e-8 is no float16)
    env = _overlap_add(reshape(w2 * w2, (1, n_fft)) + zeros((n_frames, n_fft), w2.dtype), hop,
                       total)
    start = n_fft // 2 if center else 0
    if length is None:
        count = total - 2 * start
    else:
        count = max(0, _int(length, "istft", "length"))
    y = _fit_length(y, start, max(0, count))
    env = _fit_length(env, start, max(0, count))
    return y / maximum(env, 1e-8)
