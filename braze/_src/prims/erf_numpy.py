"""Vectorized NumPy erf / erfinv (the eager kernels of `Erf` and `ErfInv`).

NumPy has no erf, SciPy is optional, and a per-element `math.erf` costs ~100 ns an element.
These run as a few dozen whole-array NumPy operations, in float64 (lower precisions round the
float64 result once, as the libm fallback did; the cpu backend's kernels and the tests compare
eager results bit for bit, so a cheaper float32 approximation is not used here):

- `erf64` / `erfc64`: W. J. Cody's rational Chebyshev approximations (Math. Comp. 23, 1969;
  Netlib's CALERF) in float64: erf on |x| <= 0.46875, erfc on (0.46875, 4] and the asymptotic
  form beyond, with exp(-x^2) split as in CALERF so the exponent is exact; within a few ulp.
- `erfinv64`: Giles' single-precision approximation ("Approximating the erfinv function", GPU
  Computing Gems, 2011) refined by Newton steps on erf (on log erfc for |x| >= 0.5, where
  1 - |x| is exact, so the tails keep full relative accuracy); within a few ulp.

NaN -> NaN; erf(+-Inf) = +-1; erfinv(+-1) = +-Inf, |x| > 1 -> NaN; signed zeros are kept.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["erf64", "erfc64", "erfinv64"]

# -- erf / erfc, float64 (Cody) -------------------------------------------------------------------
_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
      3.20937758913846947e03, 1.85777706184603153e-1)
_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
      2.84423683343917062e03)
_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
      2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
      2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
      1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
      3.43936767414372164e03, 1.23033935480374942e03)
_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
      1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
      6.05183413124413191e-2, 2.33520497626869185e-3)
_RSQRTPI = 0.56418958354775628695
_THRESH = 0.46875


def _rational(z, num, den, n):
    """Cody's Horner scheme: (num[n+1] z^(n+1) + ... + num[n]) / (z^(n+1) + ... + den[n])."""
    xn = z * num[-1]
    xd = z.copy()
    for i in range(n):
        xn += num[i]
        xn *= z
        xd += den[i]
        xd *= z
    xn += num[n]
    xd += den[n]
    xn /= xd
    return xn


def _erf_small(x):
    """erf(x) for |x| <= 0.46875."""
    r = _rational(x * x, _A, _B, 3)
    r *= x
    return r


def _erfc_pos(y):
    """erfc(y) for y > 0.46875 (no NaN); `y` is overwritten."""
    m = y <= 4.0
    j = np.flatnonzero(m)
    if j.size == y.size:
        r = _rational(y, _C, _D, 7)
    else:
        r = np.empty_like(y)
        if j.size:
            r.put(j, _rational(y.take(j), _C, _D, 7))
        k = np.flatnonzero(~m)
        yb = y.take(k)
        z = np.reciprocal(yb * yb)
        rb = _rational(z, _P, _Q, 4)
        rb *= z
        np.subtract(_RSQRTPI, rb, out=rb)
        rb /= yb
        r.put(k, rb)
    # r * exp(-y*y), with y*y = ys*ys + (y-ys)*(y+ys) and ys = y rounded down to 1/16
    np.minimum(y, 40.0, out=y)  # erfc(40) underflows: keeps Inf out of the split
    ys = y * 16.0
    np.trunc(ys, out=ys)
    ys *= 0.0625
    d = y - ys
    y += ys
    d *= y
    ys *= ys
    np.negative(ys, out=ys)
    np.exp(ys, out=ys)
    np.negative(d, out=d)
    np.exp(d, out=d)
    r *= ys
    r *= d
    return r


def erf64(x):
    """erf of a float64 array."""
    x = np.asarray(x, dtype=np.float64)
    shape = x.shape
    x = x.reshape(-1)
    ax = np.abs(x)
    i1 = np.flatnonzero(ax <= _THRESH)
    if i1.size == x.size:
        return _erf_small(x).reshape(shape)
    out = np.full_like(x, np.nan)  # NaN lands in neither interval
    if i1.size:
        out.put(i1, _erf_small(x.take(i1)))
    i2 = np.flatnonzero(ax > _THRESH)
    if i2.size:
        r = _erfc_pos(ax.take(i2))
        np.subtract(1.0, r, out=r)
        np.copysign(r, x.take(i2), out=r)
        out.put(i2, r)
    return out.reshape(shape)


def erfc64(x):
    """erfc of a float64 array."""
    x = np.asarray(x, dtype=np.float64)
    shape = x.shape
    x = x.reshape(-1)
    ax = np.abs(x)
    out = np.full_like(x, np.nan)
    i1 = np.flatnonzero(ax <= _THRESH)
    if i1.size:
        r = _erf_small(x.take(i1))
        np.subtract(1.0, r, out=r)
        out.put(i1, r)
    i2 = np.flatnonzero(ax > _THRESH)
    if i2.size:
        r = _erfc_pos(ax.take(i2))
        neg = np.flatnonzero(x.take(i2) < 0)
        if neg.size:
            r.put(neg, 2.0 - r.take(neg))
        out.put(i2, r)
    return out.reshape(shape)


# -- erfinv -------------------------------------------------------------------------------
_G1 = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
       -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_G2 = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
       -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _giles(x, dt):
    """Giles' single-precision erfinv, evaluated in dtype `dt` (finite result for |x| < 1)."""
    one = dt.type(1.0)
    w = (one - x) * (one + x)
    np.log(w, out=w)
    np.negative(w, out=w)  # w = -log(1 - x^2) >= 0; +Inf at |x| = 1, NaN beyond
    central = w < 5.0
    t = w - dt.type(2.5)
    p = np.full_like(t, _G1[0])
    for c in _G1[1:]:
        p *= t
        p += dt.type(c)
    if not central.all():
        np.maximum(w, dt.type(5.0), out=t)
        np.sqrt(t, out=t)
        t -= dt.type(3.0)
        q = np.full_like(t, _G2[0])
        for c in _G2[1:]:
            q *= t
            q += dt.type(c)
        np.copyto(p, q, where=~central)
    p *= x
    return p


def _fix_erfinv(r, x):
    """erfinv(+-1) = +-Inf and |x| > 1 -> NaN (x NaN stays NaN through the arithmetic)."""
    ax = np.abs(x)
    edge = ax >= 1.0
    if edge.any():
        np.copyto(r, np.copysign(np.inf, x).astype(r.dtype), where=ax == 1.0)
        r[ax > 1.0] = np.nan
    return r


_TWO_OVER_SQRTPI = 1.1283791670955126
_NEWTON_STEPS = 8  # two for all elements; the far tails (1 - |x| < 1e-13) need up to six


def _newton_step(x, r):
    """The Newton correction for erf(r) = x (|x| < 1); on erfc in the tails, where the target
    1 - |x| is exact: there log(erfc(|r|)) = log(1 - |x|), nearly linear in r^2, so a rough
    start still converges."""
    d = np.exp(-r * r)
    d *= _TWO_OVER_SQRTPI
    e = erf64(r)
    e -= x
    a = np.abs(x)
    tail = np.flatnonzero(a >= 0.5)
    if tail.size:
        rt = r.take(tail)
        c = erfc64(np.abs(rt))
        ec = np.log(c)
        ec -= np.log(1.0 - a.take(tail))  # exact for |x| >= 0.5
        ec *= c
        ec *= np.where(rt < 0, 1.0, -1.0)
        e.put(tail, ec)
    e /= d
    return e


def erfinv64(x):
    """erfinv of a float64 array: Giles' estimate and two Newton steps (on erfc in the
    tails, where the target 1 - |x| is exact)."""
    x = np.asarray(x, dtype=np.float64)
    shape = x.shape
    x = x.reshape(-1)
    r = _giles(x, np.dtype(np.float64))
    ax = np.abs(x)
    ok = np.flatnonzero(ax < 1.0)  # finite estimates only (not +-1, |x| > 1, NaN)
    for step in range(_NEWTON_STEPS):
        if not ok.size:
            break
        xo, ro = x.take(ok), r.take(ok)
        e = _newton_step(xo, ro)
        ro -= e
        r.put(ok, ro)
        if step >= 1:  # quadratic convergence: most elements are done after two steps
            ok = ok[np.abs(e) > 1e-15 * np.abs(ro)]
    return _fix_erfinv(r, x).reshape(shape)


# -- MLX's single-precision erfinv, bit for bit ------------------------------------------------
# MLX computes float erfinv as a polynomial in t = log(1 - a*a) (two ranges), every step a fused
# multiply-add, with the C library's logf. Matching it bit for bit is what makes
# mx.random.normal give MLX's samples for the same key. A float32 fma is emulated exactly enough
# in float64 (the product is exact; one rounding of the sum, then one to float32), and logf is
# the C library's, reached through Numba (whose float32 math.log is the libm call).
_ERFINV_TAIL = (3.03697567e-10, 2.93243101e-8, 1.22150334e-6, 2.84108955e-5, 3.93552968e-4,
                3.02698812e-3, 4.83185798e-3, -2.64646143e-1, 8.40016484e-1)
_ERFINV_CORE = (5.43877832e-9, 1.43285448e-7, 1.22774793e-6, 1.12963626e-7, -5.61530760e-5,
                -1.47697632e-4, 2.31468678e-3, 1.15392581e-2, -2.32015476e-1, 8.86226892e-1)
_LOGF = []


def _logf(x):
    """logf of each element of a float32 array (a loop cached on disk: a ufunc built with
    numba.vectorize compiled in every process, ~0.2 s of the first mx.random.normal)."""
    if not _LOGF:
        from ..jit import njit

        @njit(nogil=True)
        def logf(v, out):
            for i in range(v.size):
                out[i] = math.log(v[i])

        _LOGF.append(logf)
    x = np.asarray(x, np.float32, order="C")
    out = np.empty_like(x)
    if x.size:
        _LOGF[0](x.reshape(-1), out.reshape(-1))
    return out


def _fma32(a, b, c):
    return (a.astype(np.float64) * b + c).astype(np.float32)


def erfinv32(a):
    """erfinv of a float32 array, as MLX computes it (within 2.4 ulp of the true value)."""
    a = np.asarray(a, dtype=np.float32)
    t = _logf(_fma32(a, -a, np.float32(1.0)))
    big = np.abs(t) > np.float32(6.125)
    t64 = t.astype(np.float64)

    def poly(coefs):
        p = np.full(t.shape, np.float32(coefs[0]), np.float32)
        for c in coefs[1:]:
            p = (p.astype(np.float64) * t64 + np.float64(np.float32(c))).astype(np.float32)
        return p

    return a * np.where(big, poly(_ERFINV_TAIL), poly(_ERFINV_CORE))
