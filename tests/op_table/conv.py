"""Op table: convolutions (conv1d, conv2d, conv3d, conv_general, conv_transpose*).

The reference is `conv_loop`: a direct loop over output and kernel positions that maps each
tap back to an input element (no sliding windows, no dilated copies), so it shares nothing with
the implementation under test.
"""
import itertools

import ml_dtypes
import numpy as np

import braze.core as mx

from . import OpCase

DTYPES = ("float16", "bfloat16", "float32", "float64")


def _np_dtype(dt):
    return ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt)


def conv_loop(x, w, stride=1, padding=0, kernel_dilation=1, input_dilation=1, groups=1,
              flip=False):
    """Reference convolution. padding: int, per-axis sequence, or (lows, highs)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    nd = x.ndim - 2

    def per_axis(v):
        return tuple(v) if isinstance(v, (list, tuple)) else (v,) * nd

    if isinstance(padding, tuple) and len(padding) == 2 and isinstance(padding[0], (list, tuple)):
        lo, hi = per_axis(padding[0]), per_axis(padding[1])
    else:
        lo = hi = per_axis(padding)
    S, kd, idl = per_axis(stride), per_axis(kernel_dilation), per_axis(input_dilation)
    N, L = x.shape[0], x.shape[1:-1]
    cout, K, cg = w.shape[0], w.shape[1:-1], w.shape[-1]
    cog = cout // groups
    ld = [(n - 1) * d + 1 for n, d in zip(L, idl)]
    O = [(a + b + c - ((k - 1) * d + 1)) // s + 1
         for a, b, c, k, d, s in zip(ld, lo, hi, K, kd, S)]
    out = np.zeros((N, *O, cout))
    for o in itertools.product(*[range(n) for n in O]):
        for k in itertools.product(*[range(n) for n in K]):
            idx = []
            for a in range(nd):
                pos = o[a] * S[a] + k[a] * kd[a] - lo[a]  # position in the dilated input
                if pos < 0 or pos % idl[a] or pos // idl[a] >= L[a]:
                    break
                idx.append(pos // idl[a])
            else:
                kk = tuple(n - 1 - i for n, i in zip(K, k)) if flip else k
                for g in range(groups):
                    xs = x[(slice(None), *idx, slice(g * cg, (g + 1) * cg))]  # (N, cg)
                    ws = w[(slice(g * cog, (g + 1) * cog), *kk, slice(None))]  # (cog, cg)
                    out[(slice(None), *o, slice(g * cog, (g + 1) * cog))] += xs @ ws.T
    return out


def conv_transpose_loop(x, w, stride=1, padding=0, dilation=1, output_padding=0, groups=1):
    """Transposed convolution by scattering each input element (the textbook definition)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    nd = x.ndim - 2

    def per_axis(v):
        return tuple(v) if isinstance(v, (list, tuple)) else (v,) * nd

    S, P, D, OP = per_axis(stride), per_axis(padding), per_axis(dilation), \
        per_axis(output_padding)
    N, L, cin = x.shape[0], x.shape[1:-1], x.shape[-1]
    cout, K = w.shape[0], w.shape[1:-1]
    cg, cog = cin // groups, cout // groups
    O = [(n - 1) * s - 2 * p + d * (k - 1) + 1 + op for n, s, p, d, k, op in zip(L, S, P, D, K, OP)]
    out = np.zeros((N, *O, cout))
    for i in itertools.product(*[range(n) for n in L]):
        for k in itertools.product(*[range(n) for n in K]):
            o = [i[a] * S[a] + k[a] * D[a] - P[a] for a in range(nd)]
            if any(v < 0 or v >= n for v, n in zip(o, O)):
                continue
            for g in range(groups):
                xs = x[(slice(None), *i, slice(g * cg, (g + 1) * cg))]
                ws = w[(slice(g * cog, (g + 1) * cog), *k, slice(None))]
                out[(slice(None), *o, slice(g * cog, (g + 1) * cog))] += xs @ ws.T
    return out


def _ins(xs, ws):
    def make(rng, dt):
        t = _np_dtype(dt)
        return rng.standard_normal(xs).astype(t), rng.standard_normal(ws).astype(t)
    return make


CASES = []


def _case(name, variant, mx_fn, np_fn, xs, ws):
    CASES.append(OpCase(name, mx_fn, np_fn, _ins(xs, ws), DTYPES, rtol=1e-4, atol=1e-5,
                        variant=variant))


# conv1d / conv2d / conv3d: (variant, x shape, w shape, keyword arguments)
_CONV = {
    "conv1d": [
        ("basic", (2, 7, 3), (4, 3, 3), {}),
        ("stride_pad", (2, 9, 2), (3, 3, 2), dict(stride=2, padding=1)),
        ("dilation", (1, 10, 2), (2, 3, 2), dict(dilation=3, padding=2)),
        ("groups", (2, 8, 4), (6, 2, 2), dict(groups=2, stride=3)),
        ("depthwise", (1, 6, 3), (3, 3, 1), dict(groups=3, padding=1)),
    ],
    "conv2d": [
        ("basic", (2, 5, 4, 3), (2, 3, 2, 3), {}),
        ("stride_pad", (1, 7, 6, 2), (3, 3, 3, 2), dict(stride=(2, 1), padding=(1, 2))),
        ("dilation_groups", (2, 6, 7, 4), (4, 2, 2, 2), dict(dilation=(2, 1), groups=2)),
    ],
    "conv3d": [
        ("basic", (1, 4, 3, 4, 2), (2, 2, 2, 2, 2), dict(stride=(1, 1, 2), padding=1)),
    ],
}
for _name, _rows in _CONV.items():
    for _v, _xs, _ws, _kw in _rows:
        _ref_kw = dict(_kw)
        if "dilation" in _ref_kw:
            _ref_kw["kernel_dilation"] = _ref_kw.pop("dilation")
        _case(_name, _v, lambda x, w, f=getattr(mx, _name), kw=_kw: f(x, w, **kw),
              lambda x, w, kw=_ref_kw: conv_loop(x, w, **kw), _xs, _ws)

_GENERAL = [
    ("input_dilation", (2, 5, 3), (2, 3, 3), dict(input_dilation=2, padding=1)),
    ("lo_hi_flip", (1, 5, 4, 2), (4, 2, 3, 1),
     dict(stride=(1, 2), padding=([1, 0], [2, 3]), kernel_dilation=(1, 2),
          input_dilation=(2, 1), groups=2, flip=True)),
]
for _v, _xs, _ws, _kw in _GENERAL:
    _case("conv_general", _v, lambda x, w, kw=_kw: mx.conv_general(x, w, **kw),
          lambda x, w, kw=_kw: conv_loop(x, w, **kw), _xs, _ws)

_TRANSPOSE = [
    ("conv_transpose1d", "stride", (2, 4, 3), (2, 3, 3), dict(stride=2, padding=1)),
    ("conv_transpose1d", "output_padding", (1, 5, 2), (3, 2, 2),
     dict(stride=3, output_padding=1, dilation=2)),
    ("conv_transpose2d", "stride_pad", (1, 3, 4, 2), (3, 3, 2, 2),
     dict(stride=(2, 1), padding=(1, 0))),
]
for _name, _v, _xs, _ws, _kw in _TRANSPOSE:
    _case(_name, _v, lambda x, w, f=getattr(mx, _name), kw=_kw: f(x, w, **kw),
          lambda x, w, kw=_kw: conv_transpose_loop(x, w, **kw), _xs, _ws)

# -- convolve (issue 13): NumPy's 1-D convolution, every mode, the longer input either side ----
for _mode in ("full", "same", "valid"):
    _case("convolve", _mode, lambda a, v, _m=_mode: mx.convolve(a, v, _m),
          lambda a, v, _m=_mode: np.convolve(a, v, _m), (7,), (3,))
_case("convolve", "swapped", lambda a, v: mx.convolve(a, v, "same"),
      lambda a, v: np.convolve(a, v, "same"), (2,), (5,))
