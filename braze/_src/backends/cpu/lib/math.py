"""A vectorizable float32 math library for Numba kernels (the `cpu` backend's transcendentals).

Why: inside a Numba loop, `math.exp` & co. stay scalar libm calls, which block LLVM's loop
vectorizer (measured: exp 4.5x, erf 12x slower than a memory-bound loop). The functions here are
straight-line polynomial code built from +, *, /, sqrt, min/max, selects and integer bit
manipulation, all inlined into the caller (`inline="always"`), so a kernel loop calling them
vectorizes (AVX2/AVX-512) and runs near memory speed.

Conventions
-----------
* `<name>_f32(x)`: float32 in, float32 out, accurate to a few ulp over the whole domain (tested
  within 4 ulp of a float64 NumPy reference rounded to float32, see tests/test_mathlib.py) with
  NaN/Inf exactly where NumPy has them, ±0 signs kept where IEEE keeps them, denormals handled.
  exp, log/log2/log10/log1p, tanh, sigmoid and erf compute in float32 arithmetic (8 or 16
  lanes); arcsinh/arccosh/arctanh form their log's argument in float64 and take the log in
  float32 (`_log_w32`); the others compute in float64 internally (4 or 8 lanes, still
  vectorized), which is what their accuracy needs: sin/cos/tan (exact Payne-Hanek-style range
  reduction for every |x| >= pi/4, sin(1e30) included), pow, expm1, sinh, cosh, the inverse
  trigonometric functions, erfinv.
* `<name>_f64(x)`: float64 versions. These are the documented fallback: they call libm through
  `math.*` (scalar calls; float64 kernels with transcendentals do not vectorize). `erfinv_f64`
  (no libm erfinv) and `sigmoid_f64` are written here.
* All functions are `numba.njit(inline="always", error_model="numpy")`. No fastmath flags are
  used: `nnan`/`ninf` would break the NaN/Inf semantics, and the exact-rounding tricks below
  (magic-constant rounding, Cody-Waite splits) rely on strict IEEE evaluation. The one
  exception is explicit: `_mad32(a, b, c)` / `_mad64` (LLVM's `fmuladd`) in the polynomial
  steps (and exp's reductions), a fused multiply-add where the CPU has one, whose results stay
  within the tested bounds either way (those tricks hold fused or not); it halves the cost of
  a polynomial step.

How the renderer uses this module
---------------------------------
A primitive's `kernel_op` names its function: op `exp` computing in float32 calls `exp_f32`
(spell.py; float16/bfloat16 compute in float32). A generated kernel either starts with
`from braze._src.backends.cpu.lib.math import exp_f32, ...` or is `exec`'d with `FUNCTIONS`
(name -> dispatcher) merged into its globals; both let Numba inline the calls. Kernels must be
compiled with `error_model="numpy"` (Python's division check would block vectorization).
float16/bfloat16 values are loaded as float32, so they use the `_f32` functions.

Coefficients: exp, log and the small-|x| tanh polynomial are the classic Cephes single-precision
ones; the others were fitted for this module (iteratively reweighted least squares towards the
minimax relative error, against mpmath, float32 coefficients rounded one at a time and the
rest refitted) or are Taylor series where those suffice.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = [
    "FUNCTIONS",
    "exp_f32", "expm1_f32", "log_f32", "log2_f32", "log10_f32", "log1p_f32",
    "sin_f32", "cos_f32", "tan_f32", "tanh_f32", "sinh_f32", "cosh_f32",
    "erf_f32", "erfinv_f32", "sigmoid_f32",
    "arcsin_f32", "arccos_f32", "arctan_f32", "arctan2_f32", "power_f32",
    "arcsinh_f32", "arccosh_f32", "arctanh_f32",
    "exp_f64", "expm1_f64", "log_f64", "log2_f64", "log10_f64", "log1p_f64",
    "sin_f64", "cos_f64", "tan_f64", "tanh_f64", "sinh_f64", "cosh_f64",
    "erf_f64", "erfinv_f64", "sigmoid_f64",
    "arcsin_f64", "arccos_f64", "arctan_f64", "arctan2_f64", "power_f64",
    "arcsinh_f64", "arccosh_f64", "arctanh_f64",
]

_jit = njit(inline="always", error_model="numpy", cache=False)


# -- bit casts (LLVM bitcast: free, and they vectorize) -----------------------------------------
def _bit_pattern(width: int):
    """An intrinsic: the integer bit pattern of a float of `width` (32 or 64) bits."""
    float_t, int_t = (types.float32, types.int32) if width == 32 else (types.float64, types.int64)

    @intrinsic
    def bits(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(width))
        return int_t(float_t), codegen
    return bits


def _from_bit_pattern(width: int):
    """An intrinsic: the float of `width` bits whose bit pattern is integer `i` (truncated or
    sign-extended to `width` bits)."""
    float_t = types.float32 if width == 32 else types.float64

    @intrinsic
    def from_bits(typingctx, i):
        def codegen(context, builder, signature, args):
            v = args[0]
            if v.type.width > width:
                v = builder.trunc(v, ir.IntType(width))
            elif v.type.width < width:
                v = builder.sext(v, ir.IntType(width))
            return builder.bitcast(v, ir.FloatType() if width == 32 else ir.DoubleType())
        return float_t(i), codegen
    return from_bits


_f32_bits, _f64_bits = _bit_pattern(32), _bit_pattern(64)
_bits_f32, _bits_f64 = _from_bit_pattern(32), _from_bit_pattern(64)


def _multiply_add(llvm_name: str, width: int):
    """a * b + c in float`width` through LLVM intrinsic `llvm_name` (arguments cast to it)."""
    nb = types.float32 if width == 32 else types.float64

    @intrinsic
    def multiply_add(typingctx, a, b, c):
        def codegen(context, builder, signature, args):
            f = ir.FloatType() if width == 32 else ir.DoubleType()
            fn = builder.module.declare_intrinsic(llvm_name, [f],
                                                  fnty=ir.FunctionType(f, [f, f, f]))
            args = [context.cast(builder, v, t, nb) for v, t in zip(args, signature.args)]
            return builder.call(fn, args)
        return nb(a, b, c), codegen
    return multiply_add


#: `fmuladd`: one fused multiply-add where the CPU has one (AVX2/AVX-512 FMA), a multiply and
#: an add otherwise; it vectorizes either way. Only for polynomials whose accuracy holds both
#: ways (the result may differ by an ulp between machines).
_mad32, _mad64 = _multiply_add("llvm.fmuladd", 32), _multiply_add("llvm.fmuladd", 64)
#: `fma`: rounded once (the FMA instruction, a library call on CPUs without one), for exact
#: remainders
_fma32 = _multiply_add("llvm.fma", 32)


def _wrapping(op):
    """int64 `op` with two's-complement wrap-around. Numba marks signed integer arithmetic
    `nsw` (overflow is poison); the Payne-Hanek reduction relies on arithmetic mod 2**64."""
    @intrinsic
    def wrap(typingctx, a, b):
        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            va, vb = (context.cast(builder, v, t, types.int64)
                      for v, t in zip(args, signature.args))
            assert va.type == i64
            return getattr(builder, op)(va, vb)
        return types.int64(a, b), codegen
    return wrap


_wadd, _wsub, _wmul = _wrapping("add"), _wrapping("sub"), _wrapping("mul")


# -- constants ------------------------------------------------------------------------------
F = np.float32
_NAN32, _INF32 = F(np.nan), F(np.inf)
_NAN64, _INF64 = np.nan, np.inf
_MAGIC32 = F(12582912.0)                 # 1.5 * 2**23: x + M - M rounds x to an integer
_MAGIC32_BITS = 0x4B400000
_MAGIC64 = 6755399441055744.0            # 1.5 * 2**52
_MAGIC64_BITS = 0x4338000000000000
_LOG2E32 = F(1.44269504088896341)
_LN2HI32, _LN2LO32 = F(0.693359375), F(-2.12194440e-4)   # Cephes split: n * HI is exact
_LOG2EA32 = F(0.44269504088896340736)  # log2(e) - 1
_L102A32, _L102B32 = F(3.0078125e-1), F(2.48745663981195213739e-4)  # log10(2) = A + B
_L10EA32, _L10EB32 = F(4.3359375e-1), F(7.00731903251827651129e-4)  # log10(e) = A + B
_PIO2_HI32, _PIO2_LO32 = F(1.5707963267948966), F(1.5707963267948966 - float(F(1.5707963267948966)))
_PIO4_HI32, _PIO4_LO32 = F(0.7853981633974483), F(0.7853981633974483 - float(F(0.7853981633974483)))
_SIGN32 = -0x80000000                    # float32 sign bit as an int32
_SIGN64 = -0x8000000000000000
_LN2 = 0.6931471805599453
_LOG2E = 1.4426950408889634
_LOG10E = 0.4342944819032518
_LOG10_2 = 0.30102999566398120
_PI = 3.141592653589793
_PIO2 = 1.5707963267948966
_PIO4 = 0.7853981633974483
_TWO_OVER_SQRTPI = 1.1283791670955126

# -- scalar helpers -------------------------------------------------------------------------


@_jit
def _copysign32(mag, sgn):
    """|mag| with the sign bit of sgn (mag must be >= 0 or NaN)."""
    return _bits_f32(_f32_bits(mag) | (_f32_bits(sgn) & _SIGN32))


@_jit
def _copysign64(mag, sgn):
    return _bits_f64(_f64_bits(mag) | (_f64_bits(sgn) & _SIGN64))


@_jit
def _scale32(p, n):
    """p * 2**n for integer n in [-300, 254], one rounding (two exact power-of-two factors)."""
    n1 = n >> 1
    n2 = n - n1
    return p * _bits_f32((n1 + 127) << 23) * _bits_f32((n2 + 127) << 23)


@_jit
def _scale64(p, n):
    """p * 2**n for integer n in [-2000, 2000]."""
    n1 = n >> 1
    n2 = n - n1
    return p * _bits_f64((n1 + 1023) << 52) * _bits_f64((n2 + 1023) << 52)


# ============================================================================================
# float32 arithmetic: exp, log, tanh, sigmoid, erf
# ============================================================================================
@_jit
def exp_f32(x):
    """e**x. Cephes expf reduction and polynomial (multiply-adds LLVM may fuse); result
    scaled by 2**n through the exponent bits (denormal results rounded once)."""
    xc = min(max(x, F(-104.0)), F(89.0))
    xc = xc if xc == xc else F(0.0)       # NaN: keep the integer path finite (result is x)
    t = _mad32(xc, _LOG2E32, _MAGIC32)
    k = t - _MAGIC32                      # rint(x / ln2), exact
    n = _f32_bits(t) - _MAGIC32_BITS      # the same as an integer
    r = _mad32(k, -_LN2HI32, xc)          # exact either way (k * HI is exact)
    r = _mad32(k, -_LN2LO32, r)
    p = _mad32(_mad32(_mad32(_mad32(_mad32(
        F(1.9875691500e-4), r, F(1.3981999507e-3)), r, F(8.3334519073e-3)), r,
        F(4.1665795894e-2)), r, F(1.6666665459e-1)), r, F(5.0000001201e-1))
    p = _mad32(p, r * r, r) + F(1.0)
    res = _scale32(p, n)
    return x if x != x else res


@_jit
def _log_parts32(x):
    """(e, f, t) with log(x) = e*ln2 + f + t, f = m - 1 exact, m in [sqrt(1/2), sqrt(2)),
    t the small float32 polynomial tail. For finite x > 0 (denormals included)."""
    sub = x < F(1.17549435e-38)
    xs = x * F(8388608.0) if sub else x   # 2**23: denormals become normal
    i = _f32_bits(xs)
    e = ((i >> 23) & 0xFF) - 127
    e = e - 23 if sub else e
    m = _bits_f32((i & 0x007FFFFF) | 0x3F800000)
    big = m > F(1.41421356)
    m = m * F(0.5) if big else m
    e = e + 1 if big else e
    f = m - F(1.0)
    z = f * f
    p = _mad32(_mad32(_mad32(_mad32(_mad32(_mad32(_mad32(_mad32(
        F(7.0376836292e-2), f, F(-1.1514610310e-1)), f, F(1.1676998740e-1)), f,
        F(-1.2420140846e-1)), f, F(1.4249322787e-1)), f, F(-1.6668057665e-1)), f,
        F(2.0000714765e-1)), f, F(-2.4999993993e-1)), f, F(3.3333331174e-1))
    t = _mad32(f * z, p, F(-0.5) * z)
    return e, f, t


@_jit
def _log_special32(x, res):
    """IEEE results of log at 0, +inf, negatives and NaN."""
    res = _INF32 if x == _INF32 else res
    res = -_INF32 if x == F(0.0) else res
    res = _NAN32 if x < F(0.0) else res
    return x if x != x else res


@_jit
def log_f32(x):
    """Natural logarithm: Cephes logf, in float32 (ln2 split in two, the small terms added
    first)."""
    e, f, t = _log_parts32(x)
    ef = np.float32(e)
    res = _mad32(ef, _LN2HI32, f + _mad32(ef, _LN2LO32, t))
    return _log_special32(x, res)


@_jit
def log2_f32(x):
    """Cephes log2f: log2(x) = e + (f + t) log2(e), log2(e) = 1 + L with the product by 1
    exact: e + f + t + (f + t) L."""
    e, f, t = _log_parts32(x)
    z = _mad32(t, _LOG2EA32, f * _LOG2EA32) + t
    res = (z + f) + np.float32(e)
    return _log_special32(x, res)


@_jit
def log10_f32(x):
    """Cephes log10f: log10(2) and log10(e) each split in a short head (exact products) and
    a tail."""
    e, f, t = _log_parts32(x)
    ef = np.float32(e)
    z = _mad32(ef, _L102B32, _mad32(f, _L10EB32, t * _L10EB32))
    z = _mad32(f, _L10EA32, _mad32(t, _L10EA32, z))
    res = _mad32(ef, _L102A32, z)
    return _log_special32(x, res)


@_jit
def _log_hl32(h, lo, k):
    """log(h + lo) + k ln2 in float32 arithmetic, for float32 h >= 1 (or inf, NaN, negative:
    the IEEE results) and |lo| <= ulp(h): the relative rest lo / h (below 2**-23, so
    log(1 + rest) = rest to 2**-47) is added to logf's small terms. What log1p and the inverse
    hyperbolics need: the bits of their argument that one float32 would lose (1 + x for small
    x)."""
    rest = lo / h
    e, f, t = _log_parts32(h)
    ef = np.float32(e + k)
    res = _mad32(ef, _LN2HI32, f + _mad32(ef, _LN2LO32, t + rest))
    return _log_special32(h, res)


@_jit
def _log_w32(w, k):
    """log(w) + k ln2 for a float64 w >= 1 (see _log_hl32)."""
    h = np.float32(w)
    return _log_hl32(h, np.float32(w - np.float64(h)), k)


@_jit
def tanh_f32(x):
    """tanh: Cephes odd polynomial for |x| < 0.625, 1 - 2/(e**2|x| + 1) above."""
    a = abs(x)
    z = a * a
    ps = ((((F(-5.70498872745e-3) * z + F(2.06390887954e-2)) * z - F(5.37397155531e-2)) * z
           + F(1.33314422036e-1)) * z - F(3.33332819422e-1))
    small = a + a * z * ps
    e = exp_f32(min(a + a, F(40.0)))
    large = F(1.0) - F(2.0) / (e + F(1.0))
    res = _copysign32(small if a < F(0.625) else large, x)
    return x if x != x else res


@_jit
def sigmoid_f32(x):
    """1 / (1 + e**-x), from e = e**-|x| (never overflows; keeps the negative tail's
    relative accuracy down to denormals)."""
    e = exp_f32(-abs(x))
    s = F(1.0) / (F(1.0) + e)
    return s if x >= F(0.0) else e * s


@_jit
def erf_f32(x):
    """erf, branch-free (both forms computed, one selected, so the loop vectorizes):
    |x| < 1: x + x*Q(x^2); above: 1 - e**W with W = -x^2 + L(|x|), L(a) = log(erfcx(a)) on
    [1, 4] (smooth: a degree-5 polynomial in a - 2.5 suffices; |x| > 4 rounds to 1). The
    polynomials (fitted, float32 coefficients) use multiply-adds that LLVM may fuse; W's exp is
    exp_f32's Cephes core without its range and NaN guards (W is in [-17, -0.8]). At most
    1 ulp fused, 2 ulp unfused (the accuracy tests and an exhaustive check of every float32)."""
    a = abs(x)
    t = a * a
    q = _mad32(_mad32(_mad32(_mad32(_mad32(
        F(-0.0005631533), t, F(0.0049175466)), t, F(-0.026711266)), t, F(0.11280176)), t,
        F(-0.37612325)), t, F(0.12837912))
    small = _mad32(a, q, a)
    ac = min(a, F(4.0))
    s = ac - F(2.5)
    lg = _mad32(_mad32(_mad32(_mad32(_mad32(
        F(-0.0011502495), s, F(0.00039863927)), s, F(-0.012752975)), s, F(0.055181894)), s,
        F(-0.3528329)), s, F(-1.5568084))
    w = _mad32(-ac, ac, lg)
    # e**w, w in [-17, -0.8]: exp_f32's reduction and polynomial, one exact scale 2**n
    tw = _mad32(w, _LOG2E32, _MAGIC32)
    k = tw - _MAGIC32
    n = _f32_bits(tw) - _MAGIC32_BITS
    r = _mad32(k, -_LN2HI32, w)
    r = _mad32(k, -_LN2LO32, r)
    p = _mad32(_mad32(_mad32(_mad32(_mad32(
        F(1.9875691500e-4), r, F(1.3981999507e-3)), r, F(8.3334519073e-3)), r,
        F(4.1665795894e-2)), r, F(1.6666665459e-1)), r, F(5.0000001201e-1))
    p = _mad32(p, r * r, r) + F(1.0)
    large = F(1.0) - p * _bits_f32((n + 127) << 23)
    res = _copysign32(small if a < F(1.0) else large, x)
    return x if x != x else res


# ============================================================================================
# float64 cores (used by the float32 functions that need the extra precision)
# ============================================================================================
@_jit
def _exp2_64(t):
    """2**t for float64 t, to float32 accuracy: t clamped to [-200, 200] (float32 results are
    0 or inf beyond), Taylor series of e**f to f**8, |f| <= ln2/2 (truncation below 2**-32),
    scaled by one exact power of two (a float32 denormal result is rounded once, by the
    caller's conversion)."""
    tc = min(max(t, -200.0), 200.0)
    tc = tc if tc == tc else 0.0
    s = tc + _MAGIC64
    k = s - _MAGIC64
    n = _f64_bits(s) - _MAGIC64_BITS
    f = (tc - k) * _LN2                  # |f| <= ln2/2, exact subtraction
    p = _mad64(_mad64(_mad64(_mad64(_mad64(_mad64(_mad64(_mad64(
        2.48015873015873e-05, f, 0.0001984126984126984), f, 0.001388888888888889), f,
        0.008333333333333333), f, 0.041666666666666664), f, 0.16666666666666666), f, 0.5), f,
        1.0), f, 1.0)
    res = p * _bits_f64((n + 1023) << 52)
    return t if t != t else res


@_jit
def _expm1_64(d):
    """e**d - 1 for float64 d, to float32 accuracy (relative error below 2**-40): d clamped to
    [-104, 100] (beyond, float32 results are -1 or inf anyway; NaN gives 0), d = k ln2 + f
    with |f| <= ln2/2, the Taylor series of expm1(f) to f**9 (truncation below 2**-35 of the
    result), then 2**k expm1(f) + (2**k - 1) (exact scale, one rounding: no cancellation
    matters at float32 precision)."""
    dc = min(max(d, -104.0), 100.0)
    dc = dc if dc == dc else 0.0
    t = _mad64(dc, _LOG2E, _MAGIC64)
    k = t - _MAGIC64
    n = _f64_bits(t) - _MAGIC64_BITS
    f = _mad64(k, -_LN2, dc)
    q = _mad64(_mad64(_mad64(_mad64(_mad64(_mad64(_mad64(
        1.0 / 362880.0, f, 1.0 / 40320.0), f, 1.0 / 5040.0), f, 1.0 / 720.0), f,
        1.0 / 120.0), f, 1.0 / 24.0), f, 1.0 / 6.0), f, 0.5)
    p = _mad64(f * f, q, f)
    sc = _bits_f64((n + 1023) << 52)
    return _mad64(sc, p, sc - 1.0)


@_jit
def _log_parts64(d):
    """(e, l) with log(d) = e*ln2 + l, |l| <= ln(2)/2, for finite d > 0 (normal)."""
    i = _f64_bits(d)
    e = (i >> 52) - 1023
    m = _bits_f64((i & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m
    e = e + 1 if big else e
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    p = _mad64(_mad64(_mad64(_mad64(_mad64(_mad64(_mad64(
        1.0 / 17.0, z, 1.0 / 15.0), z, 1.0 / 13.0), z, 1.0 / 11.0), z, 1.0 / 9.0), z,
        1.0 / 7.0), z, 1.0 / 5.0), z, 1.0 / 3.0) * z
    return np.float64(e), _mad64(s + s, p, s + s)


@_jit
def _log_special64(d, res):
    res = _INF64 if d == _INF64 else res
    res = -_INF64 if d == 0.0 else res
    res = _NAN64 if d < 0.0 else res
    return d if d != d else res


@_jit
def _log64(d):
    e, lm = _log_parts64(d)
    return _log_special64(d, e * _LN2 + lm)


@_jit
def _log2_64(d):
    e, lm = _log_parts64(d)
    return _log_special64(d, e + lm * _LOG2E)


@_jit
def _atan64(t):
    """arctan of a float64 (any value): reduction to |z| <= tan(pi/8), fitted polynomial."""
    a = abs(t)
    big = a > 2.414213562373095
    mid = a > 0.41421356237309503
    z = -1.0 / a if big else ((a - 1.0) / (a + 1.0) if mid else a)
    base = _PIO2 if big else (_PIO4 if mid else 0.0)
    w = z * z
    p = _mad64(_mad64(_mad64(_mad64(_mad64(_mad64(_mad64(_mad64(
        0.030713057633515548, w, -0.05877988110470062), w, 0.07564677729790577), w,
        -0.09078534136812655), w, 0.1111039654196649), w, -0.14285690930276718), w,
        0.19999999615897507), w, -0.333333333308956), w, 0.9999999999999746)
    return _copysign64(_mad64(z, p, base), t)


# ============================================================================================
# float32 functions computed in float64
# ============================================================================================
@_jit
def expm1_f32(x):
    res = np.float32(_expm1_64(np.float64(x)))
    return x if (x != x or x == F(0.0)) else res        # NaN and -0 kept


@_jit
def log1p_f32(x):
    h = x + F(1.0)                 # and its rounding error lo, exactly (Knuth's two-sum)
    hb = h - x
    lo = (x - (h - hb)) + (F(1.0) - hb)
    lo = lo if abs(x) < _INF32 else F(0.0)
    res = _log_hl32(h, lo, 0)
    return x if abs(x) < F(5.9604645e-08) else res    # |x| < 2**-24: log1p(x) rounds to x


@_jit
def sinh_f32(x):
    """sinh(a) = (m + m / (m + 1)) / 2 with m = expm1(a), a = |x|: no cancellation anywhere."""
    d = np.float64(x)
    m = _expm1_64(abs(d))
    res = np.float32(_copysign64(0.5 * (m + m / (m + 1.0)), d))
    return x if x != x else res


@_jit
def cosh_f32(x):
    e = _expm1_64(abs(np.float64(x))) + 1.0
    res = np.float32(0.5 * e + 0.5 / e)
    return x if x != x else res


# -- trigonometric: exact range reduction ----------------------------------------------------
def _two_over_pi_bits(nbits: int) -> int:
    """floor(2/pi * 2**nbits), from Machin's formula in integer arithmetic (guard bits)."""
    g = nbits + 64
    one = 1 << g

    def atan_inv(k):  # atan(1/k) * 2**g
        total, term, n, k2 = 0, one // k, 1, k * k
        while term:
            total += term // n if (n // 2) % 2 == 0 else -(term // n)
            term //= k2
            n += 2
        return total

    pi = 4 * (4 * atan_inv(5) - atan_inv(239))
    return ((2 << g) << nbits) // pi


def _payne_hanek_tables():
    """For each float32 biased exponent b, the 96-bit window W_b = floor(2**(s+94) * 2/pi) mod
    2**96, s = b - 150 (x = m * 2**s with a 24-bit integer m), split into A = W_b >> 32 (as
    int64 bits) and B = W_b mod 2**32. Then m*A + (m*B >> 32) mod 2**64 is x * 2/pi mod 4 in
    2.62 fixed point, with an error below 2**-60 of a quadrant."""
    nb = 256 - 150 + 94 + 8
    g = _two_over_pi_bits(nb)                 # 2/pi * 2**nb
    a = np.zeros(256, np.int64)
    b = np.zeros(256, np.int64)
    for be in range(256):
        sh = (be - 150) + 94                  # want floor(2/pi * 2**sh) mod 2**96
        w = (g >> (nb - sh)) if sh <= nb else 0
        w &= (1 << 96) - 1
        hi = w >> 32
        a[be] = hi - (1 << 64) if hi >= (1 << 63) else hi
        b[be] = w & 0xFFFFFFFF
    return a, b


_PH_A, _PH_B = _payne_hanek_tables()
_PIO2_2M62 = _PIO2 * 2.0 ** -62


@_jit
def _reduce_pio2(x):
    """(r, q): |x| = r + (q + 4k) * pi/2, |r| <= pi/4 (r as float64, relative error < 1e-9
    for every float32), q in 0..3. Branch-free: |x| < pi/4 passes through."""
    ia = _f32_bits(x) & 0x7FFFFFFF
    be = (ia >> 23) & 0xFF
    m = np.int64((ia & 0x007FFFFF) | 0x00800000)
    y = _wadd(_wmul(m, _PH_A[be]), (m * _PH_B[be]) >> 32)    # mod 2**64
    n = _wadd(y, 1 << 61) >> 62
    rr = np.float64(_wsub(y, n << 62)) * _PIO2_2M62
    ax = np.float64(_bits_f32(ia))
    tiny = ax < 0.7853981633974483
    r = ax if tiny else rr
    q = 0 if tiny else (n & 3)
    return r, q


@_jit
def _sincos_poly(r):
    """(sin r, cos r) for |r| <= pi/4 (a little more when the quadrant rounds the other
    way): Taylor series to r**11 and r**12, truncation below 2**-36 relative."""
    z = r * r
    s = _mad64(r * z, _mad64(_mad64(_mad64(_mad64(
        -1.0 / 39916800.0, z, 1.0 / 362880.0), z, -1.0 / 5040.0), z, 1.0 / 120.0), z,
        -1.0 / 6.0), r)
    c = _mad64(z, _mad64(_mad64(_mad64(_mad64(_mad64(
        1.0 / 479001600.0, z, -1.0 / 3628800.0), z, 1.0 / 40320.0), z, -1.0 / 720.0), z,
        1.0 / 24.0), z, -0.5), 1.0)
    return s, c


@_jit
def sin_f32(x):
    r, q = _reduce_pio2(x)
    s, c = _sincos_poly(r)
    v = c if (q & 1) else s
    v = -v if (q & 2) else v
    res = _bits_f32(_f32_bits(np.float32(v)) ^ (_f32_bits(x) & _SIGN32))
    return res if abs(x) < _INF32 else x - x


@_jit
def cos_f32(x):
    r, q = _reduce_pio2(x)
    s, c = _sincos_poly(r)
    v = s if (q & 1) else c
    v = -v if ((q + 1) & 2) else v
    res = np.float32(v)
    return res if abs(x) < _INF32 else x - x


@_jit
def tan_f32(x):
    r, q = _reduce_pio2(x)
    s, c = _sincos_poly(r)
    v = -c / s if (q & 1) else s / c
    res = _bits_f32(_f32_bits(np.float32(v)) ^ (_f32_bits(x) & _SIGN32))
    return res if abs(x) < _INF32 else x - x


# -- inverse trigonometric -------------------------------------------------------------------
@_jit
def _atan32(t):
    """arctan in float32 arithmetic: Cephes atanf (reduction to |z| <= tan(pi/8) by
    z = -1/a or z = (a - 1)/(a + 1), its odd polynomial), the base angle added as a float32
    pair last. The quotient's rounding error zl is added back (results just below 0.5,
    where an ulp is half as large, would otherwise see 2 ulp): a - 1 and a + 1 as exact
    two-sums, the remainder of the division exact through a true fma."""
    a = abs(t)
    big = a > F(2.414213562373095)
    mid = a > F(0.41421356237309503)
    sn = a - F(1.0)
    bs = sn - a
    sl = (a - (sn - bs)) + (F(-1.0) - bs)
    sd = a + F(1.0)
    bd = sd - a
    dl = (a - (sd - bd)) + (F(1.0) - bd)
    zm = sn / sd
    zl = (_fma32(-zm, sd, sn) + _mad32(-zm, dl, sl)) / sd
    zl = zl if mid else F(0.0)
    z = F(-1.0) / a if big else (zm if mid else a)
    hi = _PIO2_HI32 if big else (_PIO4_HI32 if mid else F(0.0))
    lo = _PIO2_LO32 if big else (_PIO4_LO32 + zl if mid else F(0.0))
    w = z * z
    p = _mad32(_mad32(_mad32(F(8.05374449538e-2), w, F(-1.38776856032e-1)), w,
                      F(1.99777106478e-1)), w, F(-3.33329491539e-1)) * w
    return _copysign32(hi + (lo + _mad32(z, p, z)), t)


@_jit
def arctan_f32(x):
    return _atan32(x)


@_jit
def arcsin_f32(x):
    d = np.float64(x)
    return np.float32(_atan64(d / math.sqrt((1.0 - d) * (1.0 + d))))


@_jit
def arccos_f32(x):
    d = np.float64(x)
    return np.float32(2.0 * _atan64(math.sqrt((1.0 - d) / (1.0 + d))))


@_jit
def arctan2_f32(y, x):
    """NumPy's arctan2 (all signed-zero and infinity cases), computed in float64."""
    yd, xd = np.float64(y), np.float64(x)
    ay, ax = abs(yd), abs(xd)
    mx = max(ax, ay)
    mn = min(ax, ay)
    t = mn / mx
    t = 0.0 if mx == 0.0 else t
    t = 1.0 if mn == _INF64 else t
    a = _atan64(t)
    a = _PIO2 - a if ay > ax else a
    a = _PI - a if (_f64_bits(xd) < 0) else a
    res = np.float32(_copysign64(a, yd))
    return res if (x == x and y == y) else x + y


# -- inverse hyperbolic ----------------------------------------------------------------------
# The logarithm's argument w >= 1 is formed in float64 (exact or rounded once) and its log taken
# by _log_w32 (float32 arithmetic); above 2**13, acosh(x) and asinh(x) are log(2x) to 2**-28
# (passed as log(x) + ln2: 2x would overflow float32). Below 2**-12 asinh and atanh are the
# first two terms of their series (truncation below 2**-48 relative).
@_jit
def arcsinh_f32(x):
    """asinh(x) = sign(x) * log1p(a + a**2 / (1 + sqrt(1 + a**2))), a = |x| (no
    cancellation)."""
    d = np.float64(x)
    a = abs(d)
    z = a * a
    big = a >= 8192.0
    w = a if big else 1.0 + (a + z / (1.0 + math.sqrt(1.0 + z)))
    lg = _log_w32(w, 1 if big else 0)
    small = np.float32(a - a * z * (1.0 / 6.0))
    res = _copysign32(small if a < 2.44140625e-4 else lg, x)
    return res if abs(x) < _INF32 else x                # +-inf and NaN pass through


@_jit
def arccosh_f32(x):
    """acosh(x) = log(x + sqrt(x**2 - 1)): x**2 - 1 is exact in float64 for a float32 x, so
    near 1 the result (about sqrt(2 (x - 1)) >= 2**-11) keeps its relative accuracy."""
    d = np.float64(x)
    big = d >= 8192.0
    res = _log_w32(d if big else d + math.sqrt(d * d - 1.0), 1 if big else 0)
    return _NAN32 if x < F(1.0) else res


@_jit
def arctanh_f32(x):
    """atanh(x) = sign(x) * log((1 + a) / (1 - a)) / 2: 1 +- a exact in float64, the quotient
    rounded once; a = 1 gives inf, a > 1 a negative quotient (NaN)."""
    d = np.float64(x)
    a = abs(d)
    big = F(0.5) * _log_w32((1.0 + a) / (1.0 - a), 0)
    small = np.float32(a + a * (a * a) * (1.0 / 3.0))
    return _copysign32(small if a < 2.44140625e-4 else big, x)


# -- power -------------------------------------------------------------------------------------
@_jit
def power_f32(x, y):
    """x**y with C/NumPy pow semantics, as 2**(y * log2|x|) in float64. Whether y is an
    integer, and an odd one, is read from its float32 bits (exponent e, 24-bit significand
    m: an integer when the bits of m below 2**(23 - e) are zero)."""
    xd = np.float64(x)
    yd = np.float64(y)
    ax = abs(xd)
    ay = abs(yd)
    r = _exp2_64(yd * _log2_64(ax))
    iy = _f32_bits(y)
    e23 = 150 - ((iy >> 23) & 0xFF)                    # 23 - e
    sh = min(max(e23, 0), 31)                          # as a valid shift
    m = (iy & 0x007FFFFF) | 0x00800000
    is_int = (m & ((1 << sh) - 1)) == 0                # e < 0: never (y == 0 is handled below)
    odd = is_int & (((m >> sh) & 1) == 1) & (e23 >= 0)
    r = -r if (odd & (_f64_bits(xd) < 0)) else r
    r = _NAN64 if ((xd < 0.0) & (ax < _INF64) & (not is_int)) else r
    r = 1.0 if ((yd == 0.0) | (xd == 1.0) | ((xd == -1.0) & (ay == _INF64))) else r
    return np.float32(r)


# -- erfinv ----------------------------------------------------------------------------------
@_jit
def _erfinv_poly(d, w):
    """erfinv(d) from w = -log((1-d)(1+d)): fitted central (w < 5) and tail polynomials,
    relative error < 1e-9 for w <= 16.8 (|d| <= 1 - 2**-25)."""
    v = w - 2.5
    pc = (((((((((((1.3286036239533273e-10 * v + 4.370251723198844e-10) * v
                   - 1.1023240160734705e-08) * v + 1.6457316456702332e-08) * v
                 + 4.796990248008046e-07) * v - 3.4260125970162327e-06) * v
               - 4.998760215241467e-06) * v + 0.00021826355841118638) * v
             - 0.0012527048765573025) * v - 0.004177324636983981) * v
           + 0.24664027578555667) * v + 1.5014093516920433)
    u = math.sqrt(w) - 3.0
    pt = (((((((((2.1710365627235587e-06 * u - 1.9091548954447214e-05) * u
                 + 5.391604291513605e-05) * u - 3.92911047815137e-05) * u
               - 0.00021992082982066514) * u + 0.0011430774577693913) * u
             - 0.003445289534041645) * u + 0.00684362955202103) * u
           + 1.0026623954555378) * u + 2.832801985773423)
    return d * pc if w < 5.0 else _copysign64(pt, d)


@_jit
def erfinv_f32(x):
    d = np.float64(x)
    w = -_log64((1.0 - d) * (1.0 + d))
    res = np.float32(_erfinv_poly(d, w))
    return _copysign32(_INF32, x) if abs(x) == F(1.0) else res


# ============================================================================================
# float64: libm fallbacks (scalar calls; documented)
# ============================================================================================
@_jit
def exp_f64(x):
    return math.exp(x)


@_jit
def expm1_f64(x):
    return math.expm1(x)


@_jit
def log_f64(x):
    return math.log(x)


@_jit
def log2_f64(x):
    return math.log2(x)


@_jit
def log10_f64(x):
    return math.log10(x)


@_jit
def log1p_f64(x):
    return math.log1p(x)


@_jit
def sin_f64(x):
    return math.sin(x)


@_jit
def cos_f64(x):
    return math.cos(x)


@_jit
def tan_f64(x):
    return math.tan(x)


@_jit
def tanh_f64(x):
    return math.tanh(x)


@_jit
def sinh_f64(x):
    return math.sinh(x)


@_jit
def cosh_f64(x):
    return math.cosh(x)


@_jit
def erf_f64(x):
    return math.erf(x)


@_jit
def sigmoid_f64(x):
    e = math.exp(-abs(x))
    s = 1.0 / (1.0 + e)
    return s if x >= 0.0 else e * s


@_jit
def arcsin_f64(x):
    return math.asin(x)


@_jit
def arccos_f64(x):
    return math.acos(x)


@_jit
def arctan_f64(x):
    return math.atan(x)


@_jit
def arctan2_f64(y, x):
    return math.atan2(y, x)


@_jit
def arcsinh_f64(x):
    return math.asinh(x)


@_jit
def arccosh_f64(x):
    return math.acosh(x)


@_jit
def arctanh_f64(x):
    return math.atanh(x)


@_jit
def power_f64(x, y):
    return x ** y


@_jit
def erfinv_f64(x):
    """erfinv in float64: the polynomial (or an asymptotic start beyond its range) refined by
    three Newton steps on libm's erf / erfc (erfc near |x| = 1 for relative accuracy)."""
    a = abs(x)
    c = 1.0 - a
    w = -math.log(c * (1.0 + a)) if c > 0.0 else _INF64
    y = abs(_erfinv_poly(a, w)) if w <= 16.5 else math.sqrt(
        max(-math.log(c) - 0.5 * math.log(-_PI * math.log(c)), 0.0))
    for _ in range(3):
        g = (c - math.erfc(y)) if a > 0.5 else (math.erf(y) - a)
        y = y - g / (_TWO_OVER_SQRTPI * math.exp(-y * y))
    y = _copysign64(y, x)
    y = _copysign64(_INF64, x) if a == 1.0 else y
    y = _NAN64 if a > 1.0 else y
    return x if (x != x or a == 0.0) else y


# ============================================================================================
# registry
# ============================================================================================
#: function name -> Numba dispatcher, to merge into an exec'd kernel's globals.
FUNCTIONS = {name: globals()[name] for name in __all__ if name.endswith(("_f32", "_f64"))}
