"""Threefry-2x32 compiled with Numba: the same bits as `prims.random.threefry2x32` (NumPy,
~110 array passes, ~90 us per call even for a few words) in one loop. The cpu backend installs
it with `prims.random.set_threefry` when it is built (an eager program's draws ask for that,
`prims.random._threefry`), so `RandomBits` (dropout masks, every sampler) costs microseconds.
Large draws are split across threads like any kernel (`threads.POOL`: the loop takes a range
of counter positions).
"""
from __future__ import annotations

import numpy as np

from ...jit import njit
from ...threads import POOL

_M = 0xFFFFFFFF
_PARITY = 0x1BD11BDA


@njit(error_model="numpy", nogil=True)
def _rotl(v, r):
    return ((v << r) | (v >> (32 - r))) & _M


@njit(error_model="numpy", nogil=True, inline="always")
def _block(c0, c1, ka, kb):
    """Threefry-2x32 of the counter pair (c0, c1) under key (ka, kb): 20 rounds, key injection
    every 4, in uint64 arithmetic masked to 32 bits."""
    kc = ka ^ kb ^ np.uint64(_PARITY)
    a = (c0 + ka) & _M
    b = (c1 + kb) & _M
    for rnd in range(5):
        if rnd % 2 == 0:
            r0, r1, r2, r3 = 13, 15, 26, 6
        else:
            r0, r1, r2, r3 = 17, 29, 16, 24
        a = (a + b) & _M
        b = _rotl(b, r0) ^ a
        a = (a + b) & _M
        b = _rotl(b, r1) ^ a
        a = (a + b) & _M
        b = _rotl(b, r2) ^ a
        a = (a + b) & _M
        b = _rotl(b, r3) ^ a
        s = rnd % 3
        ks1 = kb if s == 0 else (kc if s == 1 else ka)
        ks2 = kc if s == 0 else (ka if s == 1 else kb)
        a = (a + ks1) & _M
        b = (b + ks2 + np.uint64(rnd + 1)) & _M
    return a, b


@njit(error_model="numpy", nogil=True)
def _threefry(start, stop, k0, k1, x0, x1):
    """In place over 2-D (keys, words) counters x0, x1 at the row-major positions [start,
    stop), under keys k0[i, 0], k1[i, 0]."""
    w = x0.shape[1]
    for i in range(start // w, (stop + w - 1) // w):
        ka = np.uint64(k0[i, 0])
        kb = np.uint64(k1[i, 0])
        for j in range(max(start - i * w, 0), min(stop - i * w, w)):
            a, b = _block(np.uint64(x0[i, j]), np.uint64(x1[i, j]), ka, kb)
            x0[i, j] = np.uint32(a)
            x1[i, j] = np.uint32(b)


@njit(error_model="numpy", nogil=True)
def _fill(start, stop, keys, words, half, odd):
    """The words (keys, nwords) of a draw at the pair positions [start, stop) of `fill_words`
    (half + odd pairs per key): pair j < half is the counters (j, j + half + odd), its words
    land at j and j + half + odd; an odd word count's middle word is the first of (half, 0)."""
    w = half + odd
    for i in range(start // w, (stop + w - 1) // w):
        ka = np.uint64(keys[i, 0])
        kb = np.uint64(keys[i, 1])
        lo = max(start - i * w, 0)
        hi = min(stop - i * w, w)
        first = words[i, :half]  # the two halves of the row, as 1-D views
        second = words[i, w:]
        for j in range(lo, min(hi, half)):
            a, b = _block(np.uint64(j), np.uint64(j + w), ka, kb)
            first[j] = np.uint32(a)
            second[j] = np.uint32(b)
        if hi > half:  # the odd middle word is in this range
            a, b = _block(np.uint64(half), np.uint64(0), ka, kb)
            words[i, half] = np.uint32(a)


def fill_words(keys, words, half, odd) -> None:
    """`prims.random.random_bits`' words in one kernel call: the counters never exist as
    arrays (a small draw, such as a dropout mask, was a dozen NumPy calls around the
    Threefry). Large draws split across threads by pairs."""
    POOL.run(_fill, keys.shape[0] * (half + odd), (keys, words, half, odd))


def threefry2x32(k0, k1, x0, x1) -> None:
    """`prims.random.threefry2x32`'s contract: uint32 keys broadcasting against the counters
    (here: shapes (n, 1) or scalars), counters x0, x1 updated in place."""
    if x0.ndim == 2 and getattr(k0, "ndim", 0) == 2:  # what `random_bits` passes
        POOL.run(_threefry, x0.size, (k0, k1, x0, x1))
        return
    n = x0.shape[0] if x0.ndim else 1
    k0 = np.broadcast_to(np.asarray(k0, np.uint32).reshape(-1, 1), (n, 1))
    k1 = np.broadcast_to(np.asarray(k1, np.uint32).reshape(-1, 1), (n, 1))
    a = x0.reshape(n, -1)
    b = x1.reshape(n, -1)
    POOL.run(_threefry, a.size, (k0, k1, a, b))
    if not np.shares_memory(a, x0):  # pragma: no cover - reshape copied: write back
        x0[...] = a.reshape(x0.shape)
        x1[...] = b.reshape(x1.shape)
