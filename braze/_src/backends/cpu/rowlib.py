"""Reductions of one chunk of a row, called by row kernels (render_rows.py).

A row kernel computes a reduction's operand for up to `CHUNK` elements into a scratch buffer
(a loop that vectorizes), then reduces the buffer with one of these. Without `fastmath`, LLVM
will not reorder a floating-point accumulation, so the sums keep 8 independent accumulators
(lane i takes elements i, i+8, ...; each lane is a short sequential sum) and combine them
pairwise: per chunk that is NumPy's own pairwise leaf, and the kernel adds the chunk sums in
float64, so the error grows no faster than NumPy's pairwise summation on long rows.

The functions are generic (Numba compiles one version per buffer type); `z` / `one` / `lo` /
`hi` give the identity in the accumulator's type. max/min propagate NaN as `np.max` does;
`largmax`/`largmin` return the first index of the extremum (the first NaN if any), as
`np.argmax`.
"""
from __future__ import annotations

from numba import njit


def _jit(py_func):
    """njit, cached on disk by Numba (compiling these costs ~0.3 s inside the first row
    kernel of a process); without a cache location Numba refuses cache=True."""
    try:
        return njit(error_model="numpy", nogil=True, boundscheck=False, cache=True)(py_func)
    except Exception:  # pragma: no cover - no writable cache location
        return njit(error_model="numpy", nogil=True, boundscheck=False)(py_func)


@_jit
def lsum(b, m, z):
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = z
    nb = m - m % 8
    for i in range(0, nb, 8):
        a0 += b[i]
        a1 += b[i + 1]
        a2 += b[i + 2]
        a3 += b[i + 3]
        a4 += b[i + 4]
        a5 += b[i + 5]
        a6 += b[i + 6]
        a7 += b[i + 7]
    s = z
    for i in range(nb, m):
        s += b[i]
    return ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) + s


@_jit
def lprod(b, m, one):
    a0 = a1 = a2 = a3 = one
    nb = m - m % 4
    for i in range(0, nb, 4):
        a0 *= b[i]
        a1 *= b[i + 1]
        a2 *= b[i + 2]
        a3 *= b[i + 3]
    s = one
    for i in range(nb, m):
        s *= b[i]
    return ((a0 * a2) * (a1 * a3)) * s


@_jit
def _mx(a, v):
    return a if (a > v or a != a) else v


@_jit
def _mn(a, v):
    return a if (a < v or a != a) else v


@_jit
def lmax(b, m, lo):
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = lo
    nb = m - m % 8
    for i in range(0, nb, 8):
        a0 = _mx(a0, b[i])
        a1 = _mx(a1, b[i + 1])
        a2 = _mx(a2, b[i + 2])
        a3 = _mx(a3, b[i + 3])
        a4 = _mx(a4, b[i + 4])
        a5 = _mx(a5, b[i + 5])
        a6 = _mx(a6, b[i + 6])
        a7 = _mx(a7, b[i + 7])
    s = lo
    for i in range(nb, m):
        s = _mx(s, b[i])
    return _mx(_mx(_mx(a0, a1), _mx(a2, a3)), _mx(_mx(_mx(a4, a5), _mx(a6, a7)), s))


@_jit
def lmin(b, m, hi):
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = hi
    nb = m - m % 8
    for i in range(0, nb, 8):
        a0 = _mn(a0, b[i])
        a1 = _mn(a1, b[i + 1])
        a2 = _mn(a2, b[i + 2])
        a3 = _mn(a3, b[i + 3])
        a4 = _mn(a4, b[i + 4])
        a5 = _mn(a5, b[i + 5])
        a6 = _mn(a6, b[i + 6])
        a7 = _mn(a7, b[i + 7])
    s = hi
    for i in range(nb, m):
        s = _mn(s, b[i])
    return _mn(_mn(_mn(a0, a1), _mn(a2, a3)), _mn(_mn(_mn(a4, a5), _mn(a6, a7)), s))


@_jit
def lall(b, m):
    for i in range(m):
        if not b[i]:
            return False
    return True


@_jit
def lany(b, m):
    for i in range(m):
        if b[i]:
            return True
    return False


@_jit
def largmax(b, m):
    """(index, value) of the first maximum of b[:m] (the first NaN if any); m >= 1."""
    best = b[0]
    k = 0
    if best != best:
        return k, best
    for i in range(1, m):
        v = b[i]
        if v > best or v != v:
            best = v
            k = i
            if v != v:
                break
    return k, best


@_jit
def largmin(b, m):
    best = b[0]
    k = 0
    if best != best:
        return k, best
    for i in range(1, m):
        v = b[i]
        if v < best or v != v:
            best = v
            k = i
            if v != v:
                break
    return k, best


@_jit
def lsqdev(b, m, c):
    """sum((b[:m] - c)^2) in float64 (c: the chunk's mean)."""
    s0 = s1 = s2 = s3 = 0.0
    nb = m - m % 4
    for i in range(0, nb, 4):
        d0 = b[i] - c
        d1 = b[i + 1] - c
        d2 = b[i + 2] - c
        d3 = b[i + 3] - c
        s0 += d0 * d0
        s1 += d1 * d1
        s2 += d2 * d2
        s3 += d3 * d3
    s = 0.0
    for i in range(nb, m):
        d = b[i] - c
        s += d * d
    return (s0 + s2) + (s1 + s3) + s


__all__ = ["lsum", "lprod", "lmax", "lmin", "lall", "lany", "largmax", "largmin", "lsqdev"]
