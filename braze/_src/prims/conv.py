"""Primitives: convolution (MLX's `Convolution`).

One primitive covers every convolution MLX exposes (conv1d/2d/3d, conv_general and the
transposed convolutions): input `(N, *spatial, C_in)`, weight `(C_out, *kernel, C_in / groups)`,
output `(N, *out_spatial, C_out)`, with per-axis stride, low/high zero padding (non-negative:
the op layer turns negative padding into a crop), kernel dilation, input dilation (zeros
inserted between input elements: what transposed convolutions use), groups and `flip` (a true
convolution, kernel reversed, instead of a cross-correlation).

Along one spatial axis, with the input dilated and padded into `xp` and `k_eff = (K-1)*kd + 1`:

    y[o] = sum_k xp[o * stride + k * kd] * w'[k],   w' = w reversed if flip else w

The derivatives are convolutions again (so transforms nest): the input cotangent is the
output cotangent dilated by `stride` convolved with the channel-transposed weight (flip
toggled), cropped back to the input; the weight cotangent is a convolution of the input
(batch and channel axes exchanged) with the cotangent as the kernel, `stride` and `kd`
swapping roles.

eval_cpu gathers windows with `sliding_window_view` (im2col) and multiplies matrices;
float16 and bfloat16 compute in float32 and round once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .base import Primitive, bind, ops
from .linalg import _blas_threads

_HALF = ("float16", "bfloat16")


def conv_out_shape(x_shape, w_shape, stride, lo, hi, kdil, idil, groups, op="conv"):
    """Output shape (N, *O, C_out); ValueError naming `op` for inconsistent arguments."""
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    nd = len(x_shape) - 2
    if nd < 1 or len(w_shape) != len(x_shape):
        raise ValueError(f"[{op}] Input and weight must have the same number of dimensions "
                         f"(at least 3), got shapes {x_shape} and {w_shape}.")
    cin, cout, cg = x_shape[-1], w_shape[0], w_shape[-1]
    if groups < 1 or cin % groups or cout % groups:
        raise ValueError(f"[{op}] The number of input channels ({cin}) and output channels "
                         f"({cout}) must be divisible by groups ({groups}).")
    if cg * groups != cin:
        raise ValueError(f"[{op}] Expect the input channels in the input and weight array to "
                         f"match but got shapes - input: {x_shape} and weight: {w_shape}.")
    out = []
    for i in range(nd):
        L, K = x_shape[1 + i], w_shape[1 + i]
        ld = (L - 1) * idil[i] + 1 if L > 0 else 0
        lp = ld + lo[i] + hi[i]
        ke = (K - 1) * kdil[i] + 1
        if K < 1 or lp < ke:
            raise ValueError(
                f"[{op}] Spatial dimensions of input after padding cannot be smaller than "
                f"weight spatial dimensions: input {x_shape}, weight {w_shape}, padding "
                f"{tuple(lo)}/{tuple(hi)}, dilation {tuple(kdil)}.")
        out.append((lp - ke) // stride[i] + 1)
    return (x_shape[0],) + tuple(out) + (cout,)


def _dilate_pad(x, idil, lo, hi):
    """NumPy: insert idil-1 zeros between spatial elements, then zero-pad lo/hi."""
    nd = x.ndim - 2
    if any(d > 1 for d in idil):
        shape = (x.shape[0],) + tuple((s - 1) * d + 1 if s > 0 else 0
                                      for s, d in zip(x.shape[1:-1], idil)) + (x.shape[-1],)
        xd = np.zeros(shape, x.dtype)
        xd[(slice(None),) + tuple(slice(None, None, d) for d in idil)] = x
        x = xd
    if any(lo) or any(hi):
        x = np.pad(x, [(0, 0)] + [(int(a), int(b)) for a, b in zip(lo, hi)] + [(0, 0)])
    assert x.ndim == nd + 2
    return x


def conv_numpy(x, w, stride, lo, hi, kdil, idil, groups, flip):
    """The reference convolution on NumPy arrays (computes in x's dtype)."""
    nd = x.ndim - 2
    xp = _dilate_pad(x, idil, lo, hi)
    if flip:
        w = w[(slice(None),) + (slice(None, None, -1),) * nd]
    K = w.shape[1:-1]
    ke = [(k - 1) * d + 1 for k, d in zip(K, kdil)]
    O = [(p - e) // s + 1 for p, e, s in zip(xp.shape[1:-1], ke, stride)]
    N, cin, cout = x.shape[0], x.shape[-1], w.shape[0]
    win = sliding_window_view(xp, ke, axis=tuple(range(1, nd + 1)))  # (N, *P, C, *ke)
    win = win[(slice(None),) + tuple(slice(None, (o - 1) * s + 1, s) for o, s in zip(O, stride))
              + (slice(None),) + tuple(slice(None, None, d) for d in kdil)]  # (N, *O, C, *K)
    G, cg, cog = groups, cin // groups, cout // groups
    M, KK = N * math.prod(O), math.prod(K)
    # im2col: one (M, Cg * prod(K)) matrix per group, then a (batched) matrix product
    cols = win.reshape((M, G, cg * KK))
    wmat = w.reshape((G, cog) + tuple(K) + (cg,))
    wmat = np.moveaxis(wmat, -1, 2).reshape((G, cog, cg * KK))
    if G == 1:
        out = cols[:, 0, :] @ wmat[0].T
    else:
        out = np.matmul(cols.transpose(1, 0, 2), wmat.transpose(0, 2, 1))  # (G, M, cog)
        out = out.transpose(1, 0, 2)
    return out.reshape((N,) + tuple(O) + (cout,))


def _spatial_slice(x, starts, stops, steps):
    """x[:, start:stop:step, ..., :] over the spatial axes (braze arrays, rules only)."""
    idx = (slice(None),) + tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps)) + \
        (slice(None),)
    return x[idx]


@dataclass(frozen=True)
class Convolution(Primitive):
    """MLX's general convolution over channels-last arrays (see the module docstring)."""

    stride: tuple
    padding_lo: tuple
    padding_hi: tuple
    kernel_dilation: tuple
    input_dilation: tuple
    groups: int = 1
    flip: bool = False

    def _params(self):
        return (self.stride, self.padding_lo, self.padding_hi, self.kernel_dilation,
                self.input_dilation, self.groups)

    def abstract_eval(self, x, w):
        return [(conv_out_shape(x.shape, w.shape, *self._params()), x.dtype)]

    def eval_cpu(self, x, w):
        _blas_threads()  # the kernel is a matrix product: same BLAS thread knob as matmul
        dt = x.dtype
        if dt.name in _HALF:
            x, w = x.astype(np.float32), w.astype(np.float32)
        out = conv_numpy(x, w, *self._params(), self.flip)
        return [np.ascontiguousarray(out).astype(dt, copy=False)]

    # -- transforms ---------------------------------------------------------------------------
    def vjp(self, primals, cotangents, argnums, outputs):
        x, w = primals
        g = cotangents[0]
        nd = x.ndim - 2
        G = self.groups
        N, cin = x.shape[0], x.shape[-1]
        cout = w.shape[0]
        L, K, O = x.shape[1:-1], w.shape[1:-1], g.shape[1:-1]
        S, kd, idl = self.stride, self.kernel_dilation, self.input_dilation
        lo, hi = self.padding_lo, self.padding_hi
        ld = [(n - 1) * d + 1 for n, d in zip(L, idl)]
        lp = [a + b + c for a, b, c in zip(ld, lo, hi)]
        ke = [(k - 1) * d + 1 for k, d in zip(K, kd)]
        sp = tuple(range(1, nd + 1))
        out = []
        for i in argnums:
            if i == 0:
                # (C_out, *K, Cg) -> (G, Cog, *K, Cg) -> (G, Cg, *K, Cog) -> (C_in, *K, Cog)
                wt = ops.reshape(w, (G, cout // G) + tuple(K) + (cin // G,))
                wt = ops.transpose(wt, (0, nd + 2, *[a + 1 for a in sp], 1))
                wt = ops.reshape(wt, (cin,) + tuple(K) + (cout // G,))
                prim = Convolution(
                    (1,) * nd, tuple(e - 1 for e in ke),
                    tuple(p - (o - 1) * s - 1 for p, o, s in zip(lp, O, S)),
                    kd, S, G, not self.flip)
                dxp = bind(prim, (g, wt))
                out.append(_spatial_slice(dxp, lo, [a + b for a, b in zip(lo, ld)], idl))
            else:
                # x (N, *L, G, Cg) -> (Cg, *L, G, N) -> (Cg, *L, G*N)
                xx = ops.reshape(x, (N,) + tuple(L) + (G, cin // G))
                xx = ops.transpose(xx, (nd + 2, *sp, nd + 1, 0))
                xx = ops.reshape(xx, (cin // G,) + tuple(L) + (G * N,))
                # g (N, *O, C_out) -> (C_out, *O, N)
                gg = ops.transpose(g, (nd + 1, *sp, 0))
                prim = Convolution(kd, lo, hi, S, idl, G, False)
                y = bind(prim, (xx, gg))  # (Cg, *K', C_out), K' >= K
                y = _spatial_slice(y, (0,) * nd, K, (1,) * nd)
                dw = ops.transpose(y, (nd + 1, *sp, 0))
                if self.flip:
                    dw = _spatial_slice(dw, (None,) * nd, (None,) * nd, (-1,) * nd)
                out.append(dw)
        return out

    def jvp(self, primals, tangents, argnums):
        x, w = primals
        res = None
        for i, t in zip(argnums, tangents):
            term = bind(self, (t, w) if i == 0 else (x, t))
            res = term if res is None else res + term
        return [res]

    def vmap(self, inputs, axes):
        x, w = inputs
        ax_x, ax_w = axes
        G = self.groups
        if ax_w is None:
            # fold the batch into N
            x = ops.moveaxis(x, ax_x, 0)
            B = x.shape[0]
            y = bind(self, (ops.reshape(x, (B * x.shape[1],) + x.shape[2:]), w))
            return [ops.reshape(y, (B, -1) + y.shape[1:])], [0]
        w = ops.moveaxis(w, ax_w, 0)
        B, cout = w.shape[0], w.shape[1]
        K, cg = w.shape[2:-1], w.shape[-1]
        nd = len(K)
        if ax_x is None:
            # stack the B weights inside each group: output channels ordered (G, B, Cog)
            wg = ops.reshape(w, (B, G, cout // G) + tuple(K) + (cg,))
            wg = ops.moveaxis(wg, 0, 1)
            y = bind(self, (x, ops.reshape(wg, (G * B * (cout // G),) + tuple(K) + (cg,))))
            y = ops.reshape(y, y.shape[:-1] + (G, B, cout // G))
            y = ops.moveaxis(y, -2, 0)
            return [ops.reshape(y, y.shape[:-2] + (cout,))], [0]
        # both batched: the batch becomes B * G groups
        x = ops.moveaxis(x, ax_x, 0)  # (B, N, *L, Cin)
        x = ops.moveaxis(x, 0, -2)  # (N, *L, B, Cin)
        x = ops.reshape(x, x.shape[:-2] + (B * x.shape[-1],))
        prim = Convolution(*self._params()[:5], B * G, self.flip)
        y = bind(prim, (x, ops.reshape(w, (B * cout,) + tuple(K) + (cg,))))
        y = ops.reshape(y, y.shape[:-1] + (B, cout))
        assert y.ndim == nd + 3
        return [ops.moveaxis(y, -2, 0)], [0]
