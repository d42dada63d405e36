"""Primitive: the discrete Fourier transform over some axes (MLX's `FFT`).

One class serves the four transforms, told apart by `inverse` and `real`:

| inverse | real | input | output |
|---|---|---|---|
| False | False | complex64 | complex64, same shape (fftn) |
| True | False | complex64 | complex64, same shape, scaled 1/N (ifftn) |
| False | True | float32 | complex64, last axis n -> n // 2 + 1 (rfftn) |
| True | True | complex64 | float32, last axis -> `n`, scaled 1/N (irfftn) |

N is the product of the (real-side) sizes along `axes`. The op layer has already cut or
zero-padded the input to the transform's sizes and cast it to the input dtype above, so the
primitive never resizes anything. `n` is the real signal's length along the last transformed
axis; irfftn needs it because n // 2 + 1 complex values come from both 2m - 2 and 2m - 1.

Gradients follow MLX's complex convention (a cotangent is dL/dRe + i dL/dIm), under which the
vjp of a complex-linear map is its adjoint: the unnormalized inverse transform. The real
transforms weight the bins that stand for two conjugate frequencies (all but DC and Nyquist).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..array import array
from .base import Primitive, bind, lazy_dataclass, ops


def _size(shape, axes) -> int:
    n = 1
    for ax in axes:
        n *= shape[ax]
    return n


def _bin_weights(m: int, n: int, ax: int, ndim: int, paired, single, np_dtype):
    """Weights for the m bins of a length-n real signal's half spectrum: `paired` on the bins
    that stand for a conjugate pair, `single` on DC (and on Nyquist when n is even); shaped to
    broadcast along axis `ax`."""
    w = np.full(m, paired, dtype=np_dtype)
    w[0] = single
    if n % 2 == 0 and m > 1:
        w[m - 1] = single
    shape = [1] * ndim
    shape[ax] = m
    return array(w.reshape(shape))


@lazy_dataclass
class FFT(Primitive):
    """Discrete Fourier transform over `axes` (non-negative, distinct; see the module doc)."""
    reinfers_shape = False  # as in MLX: lengths fixed at trace time

    axes: tuple
    inverse: bool = False
    real: bool = False
    n: int = 0  # irfftn only: the output length along axes[-1]

    def abstract_eval(self, x):
        shape = list(x.shape)
        if not self.real:
            return [(tuple(shape), D.complex64)]
        last = self.axes[-1]
        if self.inverse:
            shape[last] = self.n
            return [(tuple(shape), D.float32)]
        shape[last] = shape[last] // 2 + 1
        return [(tuple(shape), D.complex64)]

    def eval_cpu(self, x):
        axes = list(self.axes)
        if not self.real:
            f = np.fft.ifftn if self.inverse else np.fft.fftn
            return [f(x, axes=axes).astype(np.complex64, copy=False)]
        if not self.inverse:
            return [np.fft.rfftn(x, axes=axes).astype(np.complex64, copy=False)]
        sizes = [x.shape[ax] for ax in axes[:-1]] + [self.n]
        return [np.fft.irfftn(x, s=sizes, axes=axes).astype(np.float32, copy=False)]

    def _rebind(self, x, *, inverse, real, n=0):
        return bind(FFT(self.axes, inverse, real, n), (x,))

    def vjp(self, primals, cotangents, argnums, outputs):
        x = primals[0]
        out = outputs[0]
        g = ops.astype(cotangents[0], out.dtype)
        last = self.axes[-1]
        if not self.real:  # adjoint of F is N * ifft, of ifft (F^H / N) is fft / N
            n = _size(x.shape, self.axes)
            back = self._rebind(g, inverse=not self.inverse, real=False)
            scale = float(n) if not self.inverse else 1.0 / n
            return [back * scale]
        if not self.inverse:  # rfftn: halve the paired bins, then N * irfftn
            n = _size(x.shape, self.axes)
            m = out.shape[last]
            w = _bin_weights(m, x.shape[last], last, x.ndim, 0.5, 1.0, np.complex64)
            back = self._rebind(g * w, inverse=True, real=True, n=x.shape[last])
            return [back * float(n)]
        # irfftn: rfftn of the cotangent, paired bins counted twice, all scaled 1/N
        n = _size(out.shape, self.axes)
        w = _bin_weights(x.shape[last], self.n, last, x.ndim, 2.0 / n, 1.0 / n, np.float32)
        back = self._rebind(g, inverse=False, real=True)
        return [back * w]

    def jvp(self, primals, tangents, argnums):
        t = ops.astype(tangents[0], primals[0].dtype)
        return [bind(self, (t,))]

    def vmap(self, inputs, axes):
        x, ax = inputs[0], axes[0]
        shifted = tuple(a + 1 if a >= ax else a for a in self.axes)
        return [bind(FFT(shifted, self.inverse, self.real, self.n), (x,))], [ax]
