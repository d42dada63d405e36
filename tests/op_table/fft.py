"""Op table: mx.fft. References are NumPy's FFTs in double precision.

Rows with complex results are forward-only (the drivers differentiate real outputs); the
gradient rows return the real and imaginary parts of the transform, and build complex inputs
from two real ones (re + 1j * im), so every transform's vjp and jvp meets finite differences.
"""
import ml_dtypes
import numpy as np

import braze.core as mx

from . import OpCase

C = "complex64"
# forward rows: the dtypes MLX promotes (every input becomes complex64, or float32 for rfft)
PROMOTED = ("float32", "float64", "float16", "int32", "bool", C)


def _np_dtype(dt):
    return ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype("bool" if dt == "bool" else dt)


def gen(rng, shape, dt):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt.startswith(("int", "uint")):
        return rng.integers(-3, 4, size=shape).astype(dt)
    if dt == C:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    return rng.standard_normal(shape).astype(_np_dtype(dt))


def _ins(*shapes, dtype=None):
    return lambda rng, dt: tuple(gen(rng, s, dtype or dt) for s in shapes)


def _c128(x):
    return np.asarray(x).astype(np.complex128)


def _f64(x):
    return np.asarray(x).real.astype(np.float64)


def _parts(y):
    return [mx.real(y), mx.imag(y)]


def _np_parts(y):
    return [y.real, y.imag]


CASES = []


def _case(name, mx_fn, np_fn, inputs, dtypes=("float32",), **kw):
    kw.setdefault("rtol", 1e-4)
    kw.setdefault("atol", 1e-5)
    CASES.append(OpCase(name, mx_fn, np_fn, inputs, dtypes, **kw))


def _fwd(name, mx_fn, np_fn, inputs, dtypes=("float32",), out=C, **kw):
    _case(name, mx_fn, np_fn, inputs, dtypes, differentiable=False,
          out_dtype=lambda dt: out, **kw)


# -- forward: dtypes, sizes, axes, norms ------------------------------------------------------
_fwd("fft.fft", lambda a: mx.fft.fft(a), lambda a: np.fft.fft(_c128(a)), _ins((8,)),
     PROMOTED, variant="1d")
_fwd("fft.fft", lambda a: mx.fft.fft(a, n=11, axis=0), lambda a: np.fft.fft(a, 11, axis=0),
     _ins((3, 5)), (C,), variant="pad_axis0")
_fwd("fft.ifft", lambda a: mx.fft.ifft(a, n=4), lambda a: np.fft.ifft(a, 4), _ins((3, 6)),
     ("float32", C), variant="cut")
_fwd("fft.rfft", lambda a: mx.fft.rfft(a), lambda a: np.fft.rfft(_f64(a)), _ins((3, 8)),
     PROMOTED, variant="even")
_fwd("fft.rfft", lambda a: mx.fft.rfft(a, n=5, norm="ortho"),
     lambda a: np.fft.rfft(a, 5, norm="ortho"), _ins((2, 8)), variant="cut_odd_ortho")
_fwd("fft.irfft", lambda a: mx.fft.irfft(a), lambda a: np.fft.irfft(_c128(a)), _ins((3, 5)),
     ("float32", "int32", C), out="float32", variant="default_n")
_fwd("fft.irfft", lambda a: mx.fft.irfft(a, n=7, axis=0, norm="forward"),
     lambda a: np.fft.irfft(a, 7, axis=0, norm="forward"), _ins((3, 2)), (C,), out="float32",
     variant="odd_axis0_forward")
_fwd("fft.fft2", lambda a: mx.fft.fft2(a), lambda a: np.fft.fft2(a), _ins((2, 3, 4)), (C,),
     variant="default")
_fwd("fft.ifft2", lambda a: mx.fft.ifft2(a, s=(5, 2), axes=(0, 2)),
     lambda a: np.fft.ifft2(a, s=(5, 2), axes=(0, 2)), _ins((3, 2, 4)), (C,), variant="s_axes")
_fwd("fft.rfft2", lambda a: mx.fft.rfft2(a, s=(3, 5)), lambda a: np.fft.rfft2(a, s=(3, 5)),
     _ins((4, 6)), ("float32", "float64"), variant="s")
_fwd("fft.irfft2", lambda a: mx.fft.irfft2(a, norm="ortho"),
     lambda a: np.fft.irfft2(a, norm="ortho"), _ins((4, 3)), (C,), out="float32",
     variant="ortho")
_fwd("fft.fftn", lambda a: mx.fft.fftn(a), lambda a: np.fft.fftn(_c128(a)), _ins((2, 3, 4)),
     ("float32", C), variant="all_axes")
_fwd("fft.ifftn", lambda a: mx.fft.ifftn(a, s=(3, 2), axes=(2, 0)),
     lambda a: np.fft.ifftn(a, s=(3, 2), axes=(2, 0)), _ins((2, 3, 4)), (C,),
     variant="s_reversed_axes")
_fwd("fft.rfftn", lambda a: mx.fft.rfftn(a, axes=(2, 0)),
     lambda a: np.fft.rfftn(a, axes=(2, 0)), _ins((4, 3, 5)), variant="reversed_axes")
_fwd("fft.irfftn", lambda a: mx.fft.irfftn(a, s=(3, 5), axes=(0, 1)),
     lambda a: np.fft.irfftn(a, s=(3, 5), axes=(0, 1)), _ins((4, 3, 2)), (C,), out="float32",
     variant="s_odd")

# -- shifts and frequencies -------------------------------------------------------------------
for _name, _np in (("fftshift", np.fft.fftshift), ("ifftshift", np.fft.ifftshift)):
    for _v, _ax in (("all", None), ("int", 1), ("list", [0, -1])):
        _case(f"fft.{_name}", lambda a, f=getattr(mx.fft, _name), ax=_ax: f(a, axes=ax),
              lambda a, f=_np, ax=_ax: f(a, axes=ax), _ins((5, 4)),
              ("float32", "int32", C) if _v == "all" else ("float32",), exact=True,
              variant=_v)
for _n, _d in ((7, 0.3), (8, -0.5)):
    _case("fft.fftfreq", lambda dt, n=_n, d=_d: mx.fft.fftfreq(n, d),
          lambda dt, n=_n, d=_d: np.fft.fftfreq(n, d), lambda rng, dt: (dt,),
          differentiable=False, variant=f"n{_n}")
    _case("fft.rfftfreq", lambda dt, n=_n, d=_d: mx.fft.rfftfreq(n, d),
          lambda dt, n=_n, d=_d: np.fft.rfftfreq(n, d), lambda rng, dt: (dt,),
          differentiable=False, variant=f"n{_n}")


# -- gradients: real outputs of every transform ------------------------------------------------
def _cplx(re, im):
    return re + 1j * im


def _np_cplx(re, im):
    return re + 1j * im


_case("fft.fft", lambda re, im: _parts(mx.fft.fft(_cplx(re, im), n=6)),
      lambda re, im: _np_parts(np.fft.fft(_np_cplx(re, im), 6)), _ins((2, 5), (2, 5)),
      variant="grad_pad")
_case("fft.fft", lambda x: _parts(mx.fft.fft(x, axis=0)),
      lambda x: _np_parts(np.fft.fft(x, axis=0)), _ins((4, 3)), variant="grad_real_input")
_case("fft.ifft", lambda re, im: _parts(mx.fft.ifft(_cplx(re, im), n=3, axis=0)),
      lambda re, im: _np_parts(np.fft.ifft(_np_cplx(re, im), 3, axis=0)),
      _ins((4, 2), (4, 2)), variant="grad_cut")
_case("fft.rfft", lambda x: _parts(mx.fft.rfft(x)), lambda x: _np_parts(np.fft.rfft(x)),
      _ins((2, 8)), variant="grad_even")
_case("fft.rfft", lambda x: _parts(mx.fft.rfft(x, n=7)),
      lambda x: _np_parts(np.fft.rfft(x, 7)), _ins((2, 6)), variant="grad_odd_pad")
_case("fft.irfft", lambda re, im: mx.fft.irfft(_cplx(re, im)),
      lambda re, im: np.fft.irfft(_np_cplx(re, im)), _ins((2, 5), (2, 5)), variant="grad_even")
_case("fft.irfft", lambda re, im: mx.fft.irfft(_cplx(re, im), n=7),
      lambda re, im: np.fft.irfft(_np_cplx(re, im), 7), _ins((2, 3), (2, 3)),
      variant="grad_odd_pad")
_case("fft.ifftn", lambda re, im: _parts(mx.fft.ifftn(_cplx(re, im), axes=(0, 2))),
      lambda re, im: _np_parts(np.fft.ifftn(_np_cplx(re, im), axes=(0, 2))),
      _ins((2, 3, 4), (2, 3, 4)), variant="grad")
_case("fft.rfftn", lambda x: _parts(mx.fft.rfftn(x, s=(3, 5), axes=(0, 1))),
      lambda x: _np_parts(np.fft.rfftn(x, s=(3, 5), axes=(0, 1))), _ins((4, 4)),
      variant="grad")
_case("fft.irfftn", lambda re, im: mx.fft.irfftn(_cplx(re, im), s=(2, 5), axes=(1, 0)),
      lambda re, im: np.fft.irfftn(_np_cplx(re, im), s=(2, 5), axes=(1, 0)),
      _ins((3, 3), (3, 3)), variant="grad")


# -- short-time transforms ---------------------------------------------------------------------
def _np_stft(x, n_fft, hop, window=None):
    w = np.ones(n_fft) if window is None else window
    x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)], mode="reflect")
    count = 1 + (x.shape[-1] - n_fft) // hop
    frames = np.stack([x[..., t * hop:t * hop + n_fft] for t in range(count)], axis=-2)
    return np.swapaxes(np.fft.rfft(frames * w, axis=-1), -1, -2)


_HANN = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(8) / 8)).astype(np.float32)
_case("fft.stft", lambda x: _parts(mx.fft.stft(x, n_fft=8, hop_length=3)),
      lambda x: _np_parts(_np_stft(x, 8, 3)), _ins((2, 20)), variant="grad")
_fwd("fft.stft", lambda x, w: mx.fft.stft(x, n_fft=8, window=w),
     lambda x, w: _np_stft(x, 8, 2, w),
     lambda rng, dt: (gen(rng, (3, 16), dt), _HANN.astype(_np_dtype(dt))),
     ("float32", "float64"), variant="window")
# istft undoes stft where the window covers the signal (every sample of a centred STFT)
_case("fft.istft", lambda x: mx.fft.istft(mx.fft.stft(x, n_fft=8, hop_length=2), n_fft=8,
                                          hop_length=2, length=20),
      lambda x: x, _ins((2, 20)), variant="round_trip")
