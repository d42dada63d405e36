"""Random primitives: `RandomBits` (Threefry-2x32, MLX's algorithm and bit layout) and
`CovarianceSqrt` (the SVD square root of a covariance matrix, for multivariate_normal).

Every sampler in `braze._src.random` is a composite of ordinary ops over `RandomBits`, so it
traces, compiles and vmaps like any op.

Bit layout (MLX's `RandomBits::eval_cpu`): a key array of shape (..., 2) gives one stream of
`B = itemsize * prod(shape)` bytes per key. The stream is made of `W = ceil(B / 4)` uint32 words,
`h = W // 2`: word `j < h` is the first output word of threefry(key, (j, j + h + odd)) and word
`j + h + odd` its second; when W is odd, word `h` is the first word of threefry(key, (h, 0)).
The words are written little-endian and truncated to B bytes, then read as the output dtype.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .base import Primitive, bind, lazy_dataclass, ops

_U32 = np.uint32
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = _U32(0x1BD11BDA)
_WIDTH_DTYPES = {4: D.uint32, 2: D.uint16, 1: D.uint8}


def threefry2x32(k0, k1, x0, x1) -> None:
    """Threefry-2x32 (20 rounds) of the counters (x0, x1) under the key (k0, k1), in place.

    All arguments are uint32 NumPy arrays (the keys broadcast against the counters); x0 and x1
    must be distinct writable arrays of the counters' full shape. Wrapping uint32 arithmetic
    is NumPy's native behaviour, so the whole computation is ~110 vectorized passes.
    """
    k2 = k0 ^ k1 ^ _PARITY
    ks = (k0, k1, k2)
    x0 += k0
    x1 += k1
    t = np.empty_like(x1)
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 += x1
            np.left_shift(x1, _U32(r), out=t)
            x1 >>= _U32(32 - r)
            x1 |= t
            x1 ^= x0
        x0 += ks[(i + 1) % 3]
        x1 += ks[(i + 2) % 3] + _U32(i + 1)


#: the Threefry implementation `random_bits` calls; a native backend may install a compiled
#: one with the same contract (`set_threefry`), e.g. the cpu backend's Numba kernel
_THREEFRY = [threefry2x32]
#: how an eager program gets the native one: a callable the compile layer registers, which
#: builds the active backend (the cpu backend installs its kernel); asked for once
_NATIVE = [None]
#: NumPy draws before `random_bits` asks (building the cpu backend imports Numba, ~0.3 s: a
#: short script's few draws stay on NumPy), and the words from which one draw asks at once
NUMPY_DRAWS = 8
NUMPY_WORDS = 1 << 14
_numpy_draws = [0]


#: with a native Threefry: `fill(keys (n, 2), words (n, nwords), half, odd)` writing a draw's
#: words as `random_bits` lays them out (counters j and j + half + odd per pair), in one call
_FILL = [None]
#: the draws (in words, all keys) that `fill` computes: it saves the counters' NumPy calls
#: (a key split: 5.0 -> 2.7 us), but its loop ran ~25 % slower per word than the counter
#: kernel's (measured, 64Ki words: 300 -> 384 us), so larger draws keep the counters
FILL_WORDS = 2048


def set_threefry(fn, fill=None) -> None:
    """Install `fn(k0, k1, x0, x1)` (same contract and results as `threefry2x32`), and the
    `fill` that computes a draw's words with it directly."""
    _THREEFRY[0] = fn
    _FILL[0] = fill


def _threefry(words: int):
    """The Threefry to run for a draw of `words` words per key: the installed one, after
    asking for the native one when NumPy's has run long enough (~50 us a call whatever the
    size) or this draw is large."""
    if _THREEFRY[0] is threefry2x32 and _NATIVE[0] is not None:
        _numpy_draws[0] += 1
        if _numpy_draws[0] > NUMPY_DRAWS or words >= NUMPY_WORDS:
            ask, _NATIVE[0] = _NATIVE[0], None
            try:
                ask()
            except Exception:  # no native backend here (Numba missing): NumPy's stays
                pass
    return _THREEFRY[0]


def random_bits(keys: np.ndarray, shape: tuple, width: int) -> np.ndarray:
    """MLX's random bits: keys (..., 2) uint32 -> keys.shape[:-1] + shape of uint{8*width}."""
    keys = np.ascontiguousarray(keys, dtype=_U32).reshape(-1, 2)
    nk = keys.shape[0]
    n = 1
    for s in shape:
        n *= s
    out_dtype = _WIDTH_DTYPES[width].np_dtype
    nbytes = n * width
    if nk == 0 or nbytes == 0:
        return np.zeros((nk,) + tuple(shape), out_dtype)
    nwords = (nbytes + 3) // 4
    half, odd = nwords // 2, nwords % 2
    threefry = _threefry(nk * nwords)
    words = np.empty((nk, nwords), _U32)
    fill = _FILL[0]
    if fill is not None and threefry is not threefry2x32 and nk * nwords <= FILL_WORDS:
        fill(keys, words, half, odd)
        return _as_bits(words, nk, nwords, nbytes, out_dtype, shape)
    k0, k1 = keys[:, :1], keys[:, 1:]
    if half:
        x0 = words[:, :half]
        x1 = words[:, half + odd:]
        x0[...] = np.arange(half, dtype=_U32)
        np.add(x0, _U32(half + odd), out=x1)
        # x0/x1 are strided views when nk > 1; run on contiguous buffers and copy back then
        if nk == 1:
            threefry(k0, k1, x0, x1)
        else:
            c0, c1 = np.ascontiguousarray(x0), np.ascontiguousarray(x1)
            threefry(k0, k1, c0, c1)
            x0[...] = c0
            x1[...] = c1
    if odd:
        m0 = np.full((nk, 1), half, _U32)
        m1 = np.zeros((nk, 1), _U32)
        threefry(k0, k1, m0, m1)
        words[:, half:half + 1] = m0
    return _as_bits(words, nk, nwords, nbytes, out_dtype, shape)


def _as_bits(words, nk, nwords, nbytes, out_dtype, shape):
    """A draw's words (nk, nwords) as its bits: the first nbytes of each key's, in `shape`."""
    raw = words.astype("<u4", copy=False).view(np.uint8)  # MLX's layout is little-endian
    if nwords * 4 != nbytes:
        raw = np.ascontiguousarray(raw[:, :nbytes])
    return raw.view(out_dtype).reshape((nk,) + tuple(shape))


@lazy_dataclass
class RandomBits(Primitive):
    """Random bits from keys: input keys (..., 2) uint32, output keys.shape[:-1] + shape of
    uint8/uint16/uint32 (width 1/2/4 bytes). Same key, same bits as MLX."""
    reinfers_shape = False  # the traced shape of random numbers

    shape: tuple
    width: int = 4
    differentiable = False

    def abstract_eval(self, key):
        if key.dtype != D.uint32:
            raise ValueError(f"[RandomBits] Expected key type uint32 but received {key.dtype}.")
        if len(key.shape) < 1 or key.shape[-1] != 2:
            raise ValueError(f"[RandomBits] Expected keys of shape (..., 2) but received "
                             f"{tuple(key.shape)}.")
        if self.width not in _WIDTH_DTYPES:
            raise ValueError(f"[RandomBits] Bit width must be in {{1, 2, 4}} but got "
                             f"{self.width}.")
        return [(tuple(key.shape[:-1]) + tuple(self.shape), _WIDTH_DTYPES[self.width])]

    def eval_cpu(self, key):
        out = random_bits(key, self.shape, self.width)
        return [out.reshape(key.shape[:-1] + tuple(self.shape))]

    def vmap(self, inputs, axes):
        key, ax = inputs[0], axes[0]
        if ax is None:
            return [bind(self, (key,))], [None]
        key = ops.moveaxis(key, ax, 0)
        return [bind(self, (key,))], [0]


@lazy_dataclass
class CovarianceSqrt(Primitive):
    """`U * sqrt(S) @ Vt` of the SVD of each (..., n, n) matrix, in float32 (MLX's
    multivariate_normal computes its scale matrix this way). No derivative, as MLX's."""

    differentiable = False

    def abstract_eval(self, cov):
        if len(cov.shape) < 2 or cov.shape[-1] != cov.shape[-2]:
            raise ValueError(f"[CovarianceSqrt] Expected (..., n, n) matrices, got "
                             f"{tuple(cov.shape)}.")
        return [(tuple(cov.shape), D.float32)]

    def eval_cpu(self, cov):
        c = np.asarray(cov, np.float32)
        if c.size == 0:
            return [np.zeros(c.shape, np.float32)]
        u, s, vt = np.linalg.svd(c)
        return [np.ascontiguousarray(((u * np.sqrt(s)[..., None, :]) @ vt).astype(np.float32))]

    def vmap(self, inputs, axes):
        cov, ax = inputs[0], axes[0]
        if ax is None:
            return [bind(self, (cov,))], [None]
        cov = ops.moveaxis(cov, ax, 0)
        return [bind(self, (cov,))], [0]
