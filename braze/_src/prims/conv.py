"""Primitives: convolution (MLX's `Convolution`) and its weight gradient (`ConvWeightGrad`).

One primitive covers every convolution MLX exposes (conv1d/2d/3d, conv_general and the
transposed convolutions): input `(N, *spatial, C_in)`, weight `(C_out, *kernel, C_in / groups)`,
output `(N, *out_spatial, C_out)`, with per-axis stride, low/high zero padding (non-negative:
negative padding is a crop of the input, `crop_negative_padding`), kernel dilation, input
dilation (zeros inserted between input elements: what transposed convolutions use), groups and
`flip` (a true convolution, kernel reversed, instead of a cross-correlation).

Along one spatial axis, with the input dilated and padded into `xp` and `k_eff = (K-1)*kd + 1`:

    y[o] = sum_k xp[o * stride + k * kd] * w'[k],   w' = w reversed if flip else w

Evaluation (NumPy; BLAS does the arithmetic):

- gather: the windows of `xp` form one `(N * prod(O), prod(K) * C_g)` patch matrix per group
  (im2col, the input's only copy, kept in the weight's own `(*K, C_g)` order so the weight is
  used in place) times the weight: one GEMM per group;
- scatter (input dilation > 1 and stride 1: transposed convolutions, input gradients of strided
  ones): one GEMM of the undilated input with every tap of the weight, each tap's product added
  into its strided slice of the output, so no inserted zero is ever multiplied;
- depthwise (one input channel per group): a multiply-add per kernel tap over cache-sized
  blocks of the output, since a GEMM of inner size prod(K) runs far below BLAS speed.

The weight gradient takes the same three forms (the patches transposed times the cotangent;
for input dilation the cotangent's windows against the input; an einsum when depthwise). Input
dilation with stride > 1 (only conv_general reaches it) multiplies the inserted zeros.
float16 and bfloat16 compute in float32 and round once, as MLX does.

The derivatives are the triad of a bilinear map: the input cotangent is a convolution of the
output cotangent (dilated by `stride`, strided by the input dilation) with the
channel-transposed kernel, flip toggled; the weight cotangent is `ConvWeightGrad`, the patch
matrix transposed times the cotangent. ConvWeightGrad's own derivatives are the convolution and
its input cotangent again, so transforms nest.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import dtypes as D
from .base import Primitive, bind, lazy_dataclass, ops
from .linalg import _blas_threads, blas_matmul


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


def crop_negative_padding(x_shape, lo, hi, idil):
    """Negative padding as a crop of the input: `(index, lo, hi)` with `x[index]` the kept part
    and lo, hi >= 0 (input dilation keeps the zeros between kept elements), or None when the
    crop leaves nothing of some spatial axis."""
    idx, lo, hi = [slice(None)], list(lo), list(hi)
    for i, d in enumerate(idil):
        L = x_shape[1 + i]
        ld = (L - 1) * d + 1 if L > 0 else 0
        c_lo, c_hi = max(-lo[i], 0), max(-hi[i], 0)
        first, last = -(-c_lo // d), (ld - c_hi - 1) // d
        if ld - c_lo - c_hi <= 0 or last < first:
            return None
        lo[i] = max(lo[i], first * d - c_lo)
        hi[i] = max(hi[i], (ld - c_hi - 1) - last * d)
        idx.append(slice(first, last + 1))
    return tuple(idx) + (slice(None),), tuple(lo), tuple(hi)


def _dilate_pad(x, idil, lo, hi):
    """NumPy: insert idil-1 zeros between spatial elements, then zero-pad lo/hi."""
    if any(d > 1 for d in idil):
        shape = (x.shape[0],) + tuple((s - 1) * d + 1 if s > 0 else 0
                                      for s, d in zip(x.shape[1:-1], idil)) + (x.shape[-1],)
        xd = np.zeros(shape, x.dtype)
        xd[(slice(None),) + tuple(slice(None, None, d) for d in idil)] = x
        x = xd
    return _zero_pad(x, lo, hi)


def _zero_pad(x, lo, hi):
    """x with its spatial axes zero-padded by lo / hi (non-negative) elements: a zeroed
    buffer and one copy (np.pad takes ~17 us even for a small input, several a step)."""
    if not (any(lo) or any(hi)):
        return x
    spatial = x.shape[1:-1]
    out = np.zeros((x.shape[0],) + tuple(n + int(a) + int(b) for n, a, b in
                                         zip(spatial, lo, hi)) + (x.shape[-1],), x.dtype)
    out[(slice(None),) + tuple(slice(int(a), int(a) + n) for a, n in zip(lo, spatial))] = x
    return out


def _windows(xp, K, kdil, stride, O):
    """The view (N, *O, *K, C) of every kernel window of the padded input: no copy, and the
    channels stay the contiguous inner axis, so a later copy moves whole channel rows."""
    nd = len(K)
    ke = [(k - 1) * d + 1 for k, d in zip(K, kdil)]
    win = sliding_window_view(xp, ke, axis=tuple(range(1, nd + 1)))  # (N, *P, C, *ke)
    win = win[(slice(None),) + tuple(slice(None, (o - 1) * s + 1, s) for o, s in zip(O, stride))
              + (slice(None),) + tuple(slice(None, None, d) for d in kdil)]  # (N, *O, C, *K)
    return np.moveaxis(win, nd + 1, -1)


def _im2col(win, groups):
    """(G, M, prod(K) * C_g): one patch matrix per group, rows in output order."""
    C = win.shape[-1]
    win = win.reshape(win.shape[:-1] + (groups, C // groups))
    win = np.moveaxis(win, -2, 0)  # (G, N, *O, *K, C_g)
    nd = (win.ndim - 3) // 2
    M = math.prod(win.shape[1:2 + nd])
    return win.reshape((groups, M, math.prod(win.shape[2 + nd:])))


def _group_matmul(a, b):
    """(G, m, k) @ (G, k, n), one 2-D product per group: NumPy's stacked matmul misses BLAS
    for transposed operands (measured 1.8x slower), its 2-D one passes the transpose on."""
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), np.result_type(a, b))
    for i in range(a.shape[0]):
        blas_matmul(a[i], b[i], out[i])
    return out


def _taps(K):
    """Every kernel position as an index tuple, with its flat number."""
    return enumerate(np.ndindex(*K))


def _blocks(shape, itemsize, budget=1 << 19):
    """Index tuples cutting the first two axes of `shape` into blocks of about `budget` bytes,
    so that a block's accumulator stays in the L2 cache across the taps (measured 2x)."""
    row = itemsize * math.prod(shape[2:])
    per = max(1, budget // max(row, 1))
    if per >= shape[1]:
        nb = per // shape[1]
        return [(slice(i, i + nb),) for i in range(0, shape[0], nb)]
    return [(slice(i, i + 1), slice(j, j + per))
            for i in range(shape[0]) for j in range(0, shape[1], per)]


def _conv_depthwise(win, w, out_shape):
    """One input channel per group: sum over taps of window * weight (channel c feeds outputs
    c*m .. c*m + m - 1), one cache-sized block of outputs at a time."""
    nd = (win.ndim - 2) // 2
    C, K = win.shape[-1], w.shape[1:-1]
    wk = w.reshape((C, w.shape[0] // C, math.prod(K)))  # (C, m, taps)
    out = np.empty(win.shape[:1 + nd] + wk.shape[:2], win.dtype)
    for blk in _blocks(out.shape, out.itemsize):
        acc, part = out[blk], win[blk]
        tmp = np.empty_like(acc)
        for t, k in _taps(K):
            tap = part[(slice(None),) * (1 + nd) + k][..., None]
            if t == 0:
                np.multiply(tap, wk[..., t], out=acc)
            else:
                np.multiply(tap, wk[..., t], out=tmp)
                acc += tmp
    return out.reshape(out_shape)


def _conv_gather(xp, w, stride, kdil, groups):
    """Convolution of the dilated, padded input: im2col and one GEMM per group."""
    K, cout, cg = w.shape[1:-1], w.shape[0], w.shape[-1]
    O = tuple((p - (k - 1) * d - 1) // s + 1
              for p, k, d, s in zip(xp.shape[1:-1], K, kdil, stride))
    out_shape = (xp.shape[0],) + O + (cout,)
    win = _windows(xp, K, kdil, stride, O)
    if cg == 1 and groups > 1:
        return _conv_depthwise(win, w, out_shape)
    cols = _im2col(win, groups)
    wm = w.reshape((groups, cout // groups, math.prod(K) * cg))  # rows (*K, C_g) match cols
    out = _group_matmul(cols, wm.transpose(0, 2, 1))  # (G, M, C_out / G)
    out = out[0] if groups == 1 else out.transpose(1, 0, 2)
    return out.reshape(out_shape)


def _scatter_products(x, w, groups):
    """Per tap t, the (N, *L, G, C_out / G) product of the input with w[:, t]: a generator
    over (tap index, product)."""
    K, cout, cg = w.shape[1:-1], w.shape[0], w.shape[-1]
    if cg == 1 and groups > 1:
        wk = w.reshape((groups, cout // groups, math.prod(K)))  # (C, m, taps)
        for t, k in _taps(K):
            yield k, x[..., None] * wk[..., t]
        return
    # (G, C_g, prod(K) * C_out/G): for each group, the input channels times every tap
    KK, cog = math.prod(K), cout // groups
    wm = w.reshape((groups, cog, KK, cg)).transpose(0, 3, 2, 1).reshape((groups, cg, KK * cog))
    xg = x.reshape((math.prod(x.shape[:-1]), groups, cg)).transpose(1, 0, 2)  # (G, M, C_g)
    z = _group_matmul(xg, wm).reshape((groups,) + x.shape[:-1] + (KK, cog))
    for t, k in _taps(K):
        yield k, np.moveaxis(z[..., t, :], 0, -2)


def _conv_scatter(x, w, lo, hi, kdil, idil, groups):
    """Stride-1 convolution of the input dilated by idil (a transposed convolution): each
    input element times each tap lands at o = lo + i * idil - k * kd."""
    K, L, cout = w.shape[1:-1], x.shape[1:-1], w.shape[0]
    ke = [(k - 1) * d + 1 for k, d in zip(K, kdil)]
    O = [(n - 1) * s + a + b - e + 2 for n, s, a, b, e in zip(L, idil, lo, hi, ke)]
    # full-result coordinate q = o - lo + ke - 1, in a buffer wide enough for the output
    first = [min(0, e - 1 - a) for e, a in zip(ke, lo)]
    ext = [max((n - 1) * s + e, e - 1 - a + o) - f
           for n, s, e, a, o, f in zip(L, idil, ke, lo, O, first)]
    buf = np.zeros((x.shape[0], *ext, groups, cout // groups), x.dtype)
    for k, prod in _scatter_products(x, w, groups):
        idx = tuple(slice(e - 1 - kk * d - f, e - 1 - kk * d - f + (n - 1) * s + 1, s)
                    for e, kk, d, f, n, s in zip(ke, k, kdil, first, L, idil))
        buf[(slice(None),) + idx] += prod
    idx = tuple(slice(e - 1 - a - f, e - 1 - a - f + o) for e, a, f, o in zip(ke, lo, first, O))
    out = buf[(slice(None),) + idx]
    return out.reshape(out.shape[:-2] + (cout,))


def conv_numpy(x, w, stride, lo, hi, kdil, idil, groups, flip):
    """The convolution on NumPy arrays (computes in x's dtype)."""
    if flip:
        w = w[(slice(None),) + (slice(None, None, -1),) * (x.ndim - 2)]
    if x.size and any(d > 1 for d in idil) and all(s == 1 for s in stride):
        return _conv_scatter(x, w, lo, hi, kdil, idil, groups)
    return _conv_gather(_dilate_pad(x, idil, lo, hi), w, stride, kdil, groups)


def _patch_grad(win, cot, groups):
    """sum over batch and positions of cot (N, *P, G * b) times the windows win
    (N, *P, *K, G * a), per group: (G, b, *K, a)."""
    nd = (win.ndim - 2) // 2
    K = win.shape[1 + nd:-1]
    a, b = win.shape[-1] // groups, cot.shape[-1] // groups
    if groups > 1 and min(a, b) == 1:
        # depthwise: a dot product per channel and tap (GEMMs this thin run far below BLAS speed)
        sp, ks = "opqr"[:nd], "ijkl"[:nd]
        wr = win.reshape(win.shape[:-1] + (groups, a))
        cr = cot.reshape(cot.shape[:-1] + (groups, b))
        return np.einsum(f"n{sp}{ks}ga,n{sp}gb->gb{ks}a", wr, cr)
    cols = _im2col(win, groups)
    cm = cot.reshape((math.prod(cot.shape[:-1]), groups, b)).transpose(1, 0, 2)  # (G, M, b)
    # patches^T @ cot, then the small result transposed: OpenBLAS's threads handle the other
    # orientation (few output rows, long contraction) badly, up to 15x slower on a busy machine
    r = _group_matmul(cols.transpose(0, 2, 1), cm)  # (G, prod(K) * a, b)
    return np.swapaxes(r, 1, 2).reshape((groups, b) + K + (a,))


def _pad_or_crop(x, lo, hi):
    """x with its spatial axes zero-padded (positive) or cut (negative) at both ends."""
    idx = (slice(None),) + tuple(slice(max(-a, 0), n - max(-b, 0))
                                 for a, b, n in zip(lo, hi, x.shape[1:-1]))
    return _zero_pad(x[idx], [max(a, 0) for a in lo], [max(b, 0) for b in hi])


def _weight_grad_scatter(x, g, K, lo, kdil, idil, groups):
    """The weight gradient of a stride-1 convolution of x dilated by idil: input element i
    meets, through tap k, the cotangent at o = lo + i * idil - k * kd, so the windows of the
    cotangent (stride idil, taps reversed) play the patches and x the cotangent."""
    nd = x.ndim - 2
    L, O = x.shape[1:-1], g.shape[1:-1]
    ke = [(k - 1) * d + 1 for k, d in zip(K, kdil)]
    a = [e - 1 - p for e, p in zip(ke, lo)]
    gp = _pad_or_crop(g, a, [(n - 1) * s + e - o - b
                             for n, s, e, o, b in zip(L, idil, ke, O, a)])
    r = _patch_grad(_windows(gp, K, kdil, idil, L), x, groups)  # (G, C_g, *K reversed, Cog)
    r = r[(slice(None),) * 2 + (slice(None, None, -1),) * nd]
    r = np.swapaxes(r, 1, -1)  # (G, Cog, *K, C_g)
    return r.reshape((g.shape[-1],) + tuple(K) + (x.shape[-1] // groups,))


def conv_weight_grad_numpy(x, g, K, stride, lo, hi, kdil, idil, groups, flip):
    """d conv / d w for the output cotangent g: patches transposed times g, per group."""
    nd = x.ndim - 2
    if x.size and any(d > 1 for d in idil) and all(s == 1 for s in stride):
        dw = _weight_grad_scatter(x, g, K, lo, kdil, idil, groups)
    else:
        win = _windows(_dilate_pad(x, idil, lo, hi), K, kdil, stride, g.shape[1:-1])
        dw = _patch_grad(win, g, groups)
        dw = dw.reshape((g.shape[-1],) + tuple(K) + (x.shape[-1] // groups,))
    if flip:
        dw = dw[(slice(None),) + (slice(None, None, -1),) * nd]
    return dw


def _in_float(xs, fn):
    """Run fn on the arrays in float32 when they are half floats, rounding the result once."""
    _blas_threads()  # the kernels are matrix products: same BLAS thread knob as matmul
    dt = xs[0].dtype
    if D.is_half(dt):
        xs = [a.astype(np.float32) for a in xs]
    return [np.ascontiguousarray(fn(*xs)).astype(dt, copy=False)]


def _input_grad(conv, x_shape, g, w):
    """d conv(x, w) / d x for the cotangent g: g dilated by the stride, convolved with stride
    input_dilation with the channel-transposed kernel, flip toggled."""
    nd = len(x_shape) - 2
    if 0 in x_shape:
        return ops.zeros(x_shape, g.dtype)
    G, cin, cout = conv.groups, x_shape[-1], w.shape[0]
    K, L, O = w.shape[1:-1], x_shape[1:-1], g.shape[1:-1]
    S, idl = conv.stride, conv.input_dilation
    ke = [(k - 1) * d + 1 for k, d in zip(K, conv.kernel_dilation)]
    lo = [e - 1 - p for e, p in zip(ke, conv.padding_lo)]
    hi = [(n - 1) * i + e - (o - 1) * s - 1 - a
          for n, i, e, o, s, a in zip(L, idl, ke, O, S, lo)]
    crop = crop_negative_padding(g.shape, lo, hi, S)
    if crop is None:  # no input element reaches any output
        return ops.zeros(x_shape, g.dtype)
    idx, lo, hi = crop
    if any(s != slice(None) for s in idx):
        g = g[idx]
    # (C_out, *K, C_g) -> (G, C_out/G, *K, C_g) -> (G, C_g, *K, C_out/G) -> (C_in, *K, C_out/G)
    wt = ops.reshape(w, (G, cout // G) + tuple(K) + (cin // G,))
    wt = ops.transpose(wt, (0, nd + 2, *range(2, nd + 2), 1))
    wt = ops.reshape(wt, (cin,) + tuple(K) + (cout // G,))
    prim = Convolution(idl, lo, hi, conv.kernel_dilation, S, G, not conv.flip)
    return bind(prim, (g, wt))


def _bilinear_jvp(prim, primals, tangents, argnums):
    """Both primitives are bilinear: d f(a, b) = f(da, b) + f(a, db)."""
    a, b = primals
    res = None
    for i, t in zip(argnums, tangents):
        term = bind(prim, (t, b) if i == 0 else (a, t))
        res = term if res is None else res + term
    return [res]


def _batch_first(v, ax, B):
    """v with its batch axis first, broadcast along a new one when unbatched."""
    if ax is None:
        return ops.broadcast_to(ops.expand_dims(v, 0), (B,) + v.shape)
    return ops.moveaxis(v, ax, 0)


def _batch_into_channels(v):
    """(B, N, *S, C) -> (N, *S, B * C): the batch becomes B blocks of channels."""
    v = ops.moveaxis(v, 0, -2)
    return ops.reshape(v, v.shape[:-2] + (v.shape[-2] * v.shape[-1],))


@lazy_dataclass
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
        return _in_float([x, w], lambda x, w: conv_numpy(x, w, *self._params(), self.flip))

    # -- transforms ---------------------------------------------------------------------------
    def vjp(self, primals, cotangents, argnums, outputs):
        x, w = primals
        g = cotangents[0]
        grad_w = ConvWeightGrad(self, tuple(w.shape[1:-1]))
        return [_input_grad(self, x.shape, g, w) if i == 0 else bind(grad_w, (x, g))
                for i in argnums]

    def jvp(self, primals, tangents, argnums):
        return _bilinear_jvp(self, primals, tangents, argnums)

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
        x = _batch_into_channels(ops.moveaxis(x, ax_x, 0))  # (N, *L, B * Cin)
        prim = replace(self, groups=B * G)
        y = bind(prim, (x, ops.reshape(w, (B * cout,) + tuple(K) + (cg,))))
        y = ops.reshape(y, y.shape[:-1] + (B, cout))
        assert y.ndim == nd + 3
        return [ops.moveaxis(y, -2, 0)], [0]


@lazy_dataclass
class ConvWeightGrad(Primitive):
    """d conv(x, w) / d w for the output cotangent g: inputs (x, g), output shaped like w.
    `conv` is the forward convolution, `kernel_shape` its kernel's spatial shape."""

    conv: Convolution
    kernel_shape: tuple

    def abstract_eval(self, x, g):
        cg = x.shape[-1] // self.conv.groups
        return [((g.shape[-1],) + self.kernel_shape + (cg,), x.dtype)]

    def eval_cpu(self, x, g):
        c = self.conv
        return _in_float([x, g], lambda x, g: conv_weight_grad_numpy(
            x, g, self.kernel_shape, *c._params(), c.flip))

    # <c, dW(x, g)> = <g, conv(x, c)>: the derivatives are the convolution's own
    def vjp(self, primals, cotangents, argnums, outputs):
        x, g = primals
        c = cotangents[0]
        return [_input_grad(self.conv, x.shape, g, c) if i == 0 else bind(self.conv, (x, c))
                for i in argnums]

    def jvp(self, primals, tangents, argnums):
        return _bilinear_jvp(self, primals, tangents, argnums)

    def vmap(self, inputs, axes):
        # the batch becomes B * G groups of both operands' channels
        B = next(v.shape[a] for v, a in zip(inputs, axes) if a is not None)
        x, g = (_batch_into_channels(_batch_first(v, a, B)) for v, a in zip(inputs, axes))
        prim = replace(self, conv=replace(self.conv, groups=B * self.conv.groups))
        dw = bind(prim, (x, g))
        return [ops.reshape(dw, (B, dw.shape[0] // B) + dw.shape[1:])], [0]
