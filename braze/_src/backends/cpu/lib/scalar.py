"""Scalar helpers the generated kernels call: half-precision conversions, braze's float ->
integer casts, and the integer, shift and min/max semantics of the NumPy reference backend.

Every function is a small `numba.njit(error_model="numpy")` function written with selects and
bit manipulation only (no libm calls, no Python exceptions), so LLVM inlines it into a kernel
loop and the loop still vectorizes.

float16 / bfloat16
------------------
Kernels keep float16 and bfloat16 values as float32 (exactly representable) and round after
every op whose dtype is half precision, which is what NumPy's and ml_dtypes' ufunc loops do
(convert to float32, compute, convert back with round-to-nearest-even):

* `f16_to_f32` / `bf16_to_f32`: exact widening from the uint16 bit pattern;
* `f32_to_f16`: NumPy's `npy_floatbits_to_halfbits` (RNE, overflow to inf at 65520, NaN
  payloads truncated but kept a NaN);
* `f32_to_bf16`: RNE; NaN becomes the quiet NaN 0x7fc0 with its sign.

Other dtypes convert to float16/bfloat16 through float32 (braze's cast semantics, as MLX: from
float64 this can round twice).

Casts from floats to integers are braze's cast semantics (braze/_src/casts.py, which the
reference backend runs; MLX's x86-64 results): int64/int32 use the truncating conversion whose
out-of-range (and NaN) result is the minimum integer (`f_to_i64`, `f_to_i32`); 8- and 16-bit
targets convert to int32 and keep the low bits, uint32 converts to int64 and keeps the low bits
(the renderer spells these with an integer cast around `f_to_i32` / `f_to_i64`); uint64 uses
the compilers' "subtract 2**63 above the signed range" sequence (`f_to_u64`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from . import math as mathlib
from .math import (
    _bits_f32,
    _f32_bits,
    exp_f32,
    exp_f64,
    log1p_f32,
    log1p_f64,
)
from .math import _wadd as wadd
from .math import _wmul as wmul
from .math import _wsub as wsub


def _jit(py_func):
    """njit for the helpers below, cached on disk by Numba (each costs 40-75 ms to compile on
    first use in a process, paid inside the first kernel that calls it); without a usable
    cache location Numba refuses `cache=True` and the helper compiles per process. Numba
    invalidates a cached helper when this file changes, not when math.py does: helpers that
    inline mathlib *functions* use `_jit_uncached` (mathlib's bit-cast and wrap-around
    intrinsics, fixed operations, are fine)."""
    try:
        return njit(error_model="numpy", cache=True)(py_func)
    except Exception:  # pragma: no cover - no writable cache location
        return njit(error_model="numpy")(py_func)


_jit_uncached = njit(error_model="numpy", cache=False)
#: inlined in Numba's IR (as mathlib's functions are), so a kernel loop calling it vectorizes
_jit_inlined = njit(error_model="numpy", cache=False, inline="always")


__all__ = [
    "f16_to_f32", "bf16_to_f32", "f32_to_f16", "f32_to_bf16", "round_f16", "round_bf16",
    "f_to_i64", "f_to_i32", "f_to_u64",
    "floordiv_i", "floordiv_u", "rem_i", "rem_u", "rem_f", "shl", "shr_i", "shr_u",
    "max_f", "min_f", "logaddexp_f32", "logaddexp_f64", "ipow", "upow",
    "rint_f32", "rint_f64", "nan_equal", "wadd", "wsub", "wmul",
    "erfinv_mlx_f32",
]


# -- half precision ----------------------------------------------------------------------------
@_jit
def f16_to_f32(h):
    """float16 bits (uint16) -> float32, exact (ryg's half_to_float_fast: denormals are
    renormalised by one float subtraction)."""
    hu = np.int32(h) & 0xFFFF
    sign = (hu & 0x8000) << 16
    o = (hu & 0x7FFF) << 13
    e = o & 0x0F800000
    o = o + ((127 - 15) << 23)
    o = o + ((128 - 16) << 23) if e == 0x0F800000 else o  # inf / nan
    f = _bits_f32(o + (1 << 23)) - _bits_f32(113 << 23)  # denormal (e == 0)
    o = _f32_bits(f) if e == 0 else o
    return _bits_f32(o | sign)


@_jit
def bf16_to_f32(h):
    """bfloat16 bits (uint16) -> float32, exact."""
    return _bits_f32((np.int32(h) & 0xFFFF) << 16)


@_jit
def f32_to_f16(f):
    """float32 -> float16 bits (uint16), NumPy's rounding (RNE) and NaN handling."""
    x = np.int64(_f32_bits(f)) & 0xFFFFFFFF
    sign = (x >> 16) & 0x8000
    ax = x & 0x7FFFFFFF
    # normal range: round the mantissa to 10 bits (ties to even)
    r = (ax - ((127 - 15) << 23) + 0xFFF + ((ax >> 13) & 1)) >> 13
    # subnormal range: let the FPU round (adding 0.5 puts the half ulp 2**-24 at bit 0)
    d = np.int64(_f32_bits(_bits_f32(ax) + np.float32(0.5))) - 0x3F000000
    r = d if ax < 0x38800000 else r
    r = 0x7C00 if ax >= 0x477FF000 else r  # overflow and inf
    nan = 0x7C00 + ((ax & 0x7FFFFF) >> 13)
    nan = nan + 1 if nan == 0x7C00 else nan
    r = nan if ax > 0x7F800000 else r
    return np.uint16(r | sign)


@_jit
def f32_to_bf16(f):
    """float32 -> bfloat16 bits (uint16), RNE; NaN -> quiet NaN 0x7fc0 with the sign."""
    x = np.int64(_f32_bits(f)) & 0xFFFFFFFF
    r = (x + 0x7FFF + ((x >> 16) & 1)) >> 16
    r = ((x >> 16) & 0x8000) | 0x7FC0 if (x & 0x7FFFFFFF) > 0x7F800000 else r
    return np.uint16(r)


@_jit
def round_f16(f):
    """A float32 rounded to the nearest float16 value (as float32)."""
    return f16_to_f32(f32_to_f16(f))


@_jit
def round_bf16(f):
    return bf16_to_f32(f32_to_bf16(f))


# -- float -> integer casts (braze's casts: x86-64 C semantics) ---------------------------------
@_jit
def f_to_i64(x):
    ok = x >= -9.223372036854775808e18 and x < 9.223372036854775808e18
    return np.int64(x if ok else 0) if ok else np.int64(-9223372036854775807 - 1)


@_jit
def f_to_i32(x):
    ok = x >= -2147483648.0 and x < 2147483648.0
    return np.int32(x if ok else 0) if ok else np.int32(-2147483648)


@_jit
def f_to_u64(x):
    big = x >= 9.223372036854775808e18
    lo = f_to_i64(x)
    hi = f_to_i64(x - 9.223372036854775808e18) ^ np.int64(-9223372036854775807 - 1)
    return np.uint64(hi if big else lo)


# -- integer division, remainder, shifts, power -------------------------------------------------
@_jit
def floordiv_i(a, b):
    """Python's a // b for signed ints (computed in int64); x // 0 == 0; MIN // -1 wraps."""
    a = np.int64(a)
    b = np.int64(b)
    bb = b if b != 0 else np.int64(1)
    bb = bb if bb != -1 else np.int64(1)
    q = a // bb  # Python semantics (floor)
    q = wsub(0, a) if b == -1 else q
    return q if b != 0 else np.int64(0)


@_jit
def floordiv_u(a, b):
    # np.uint64(1), not 1: Numba types uint64 + int64 as float64, which rounds large values
    bb = b if b != 0 else np.uint64(1)
    q = a // bb
    return q if b != 0 else q - q


@_jit
def rem_i(a, b):
    """Python's a % b for signed ints (sign of b); x % 0 == 0."""
    a = np.int64(a)
    b = np.int64(b)
    bb = b if (b != 0 and b != -1) else np.int64(1)
    r = a % bb
    return r if (b != 0 and b != -1) else np.int64(0)


@_jit
def rem_u(a, b):
    bb = b if b != 0 else np.uint64(1)  # (see floordiv_u)
    r = a % bb
    return r if b != 0 else r - r


@_jit
def rem_f(a, b):
    """NumPy's float remainder (npy_remainder: fmod, then moved to the sign of the divisor;
    an exact zero takes the divisor's sign; b == 0 gives NaN)."""
    mod = np.fmod(a, b)
    fix = (b < 0) != (mod < 0)
    mod2 = mod + b if fix else mod
    return mod2 if mod != 0 else np.copysign(mod - mod, b)


@_jit
def shl(a, b, bits):
    """NumPy's left_shift: 0 when the shift is negative or >= the bit width."""
    ok = np.uint64(np.int64(b)) < np.uint64(bits)
    s = np.int64(b) if ok else np.int64(0)
    r = np.int64(a) << s
    return r if ok else r - r


@_jit
def shr_i(a, b, bits):
    """NumPy's right_shift of signed ints: sign fill when the shift is out of range."""
    ok = np.uint64(np.int64(b)) < np.uint64(bits)
    s = np.int64(b) if ok else np.int64(0)
    a = np.int64(a)
    fill = np.int64(-1) if a < 0 else np.int64(0)
    return (a >> s) if ok else fill


@_jit
def shr_u(a, b, bits):
    ok = np.uint64(b) < np.uint64(bits)
    s = np.uint64(b) if ok else np.uint64(0)
    r = np.uint64(a) >> s
    return r if ok else r - r


@_jit
def ipow(a, b):
    """a ** b for signed ints with wrap-around; 0 for b < 0 (MLX)."""
    a = np.int64(a)
    b = np.int64(b)
    r = np.int64(1)
    neg = b < 0
    e = np.int64(0) if neg else b
    while e > 0:
        if e & 1:
            r = wmul(r, a)
        a = wmul(a, a)
        e = e >> 1
    return np.int64(0) if neg else r


@_jit
def upow(a, b):
    a = np.uint64(a)
    e = np.uint64(b)
    r = np.uint64(1)
    while e > 0:
        if e & np.uint64(1):
            r = r * a
        a = a * a
        e = e >> np.uint64(1)
    return r


# -- floats ----------------------------------------------------------------------------------
@_jit
def max_f(a, b):
    """np.maximum: NaN propagates (the first NaN), ties go to b."""
    return a if (a > b or a != a) else b


@_jit
def min_f(a, b):
    return a if (a < b or a != a) else b


@_jit
def nan_equal(a, b):
    return a == b or (a != a and b != b)


@_jit
def _rint(x, magic):
    """Round half to even, exact for every float: adding and subtracting `magic` (2**mantissa
    bits) rounds |x| below it in the FPU's mode; larger values are integers already."""
    ax = abs(x)
    r = np.copysign((ax + magic) - magic, x)
    return r if ax < magic else x


@_jit
def rint_f32(x):
    return _rint(x, np.float32(8388608.0))


@_jit
def rint_f64(x):
    return _rint(x, 4503599627370496.0)


@_jit_inlined
def _logaddexp(x, y, tmp, soft, ln2):
    """NumPy's npy_logaddexp given tmp = x - y and soft = log1p(exp(-|tmp|)): equal
    arguments (infinities included) give x + ln 2, a NaN difference propagates."""
    r = (x if tmp > 0 else y) + soft
    r = r if tmp == tmp else tmp
    return x + ln2 if x == y else r


@_jit_inlined
def logaddexp_f32(x, y):
    """With the vectorizable exp / log1p of mathlib."""
    tmp = x - y
    return _logaddexp(x, y, tmp, log1p_f32(exp_f32(-abs(tmp))), np.float32(0.6931471805599453))


@_jit_inlined
def logaddexp_f64(x, y):
    tmp = x - y
    return _logaddexp(x, y, tmp, log1p_f64(exp_f64(-abs(tmp))), 0.6931471805599453)


# -- erfinv in single and half precision: MLX's algorithm, as the reference backend ----------
@_jit
def _fma32(a, b, c):
    """A float32 fma emulated as erf_numpy._fma32 does (exact product, rounded sum)."""
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


@_jit
def erfinv_mlx_f32(a):
    """erfinv exactly as the reference backend computes float32/float16/bfloat16 erfinv
    (braze/_src/prims/erf_numpy.py `erfinv32`, MLX's float algorithm, the C library's logf):
    compiled and eager mx.random.normal give the same samples bit for bit. It calls logf, so a
    kernel with erfinv does not vectorize (mathlib's `erfinv_f32` would, but differs by an ulp
    or two from MLX)."""
    t = math.log(_fma32(a, -a, np.float32(1.0)))
    if abs(t) > np.float32(6.125):
        p = np.float32(3.03697567e-10)
        p = _fma32(p, t, np.float32(2.93243101e-8))
        p = _fma32(p, t, np.float32(1.22150334e-6))
        p = _fma32(p, t, np.float32(2.84108955e-5))
        p = _fma32(p, t, np.float32(3.93552968e-4))
        p = _fma32(p, t, np.float32(3.02698812e-3))
        p = _fma32(p, t, np.float32(4.83185798e-3))
        p = _fma32(p, t, np.float32(-2.64646143e-1))
        p = _fma32(p, t, np.float32(8.40016484e-1))
    else:
        p = np.float32(5.43877832e-9)
        p = _fma32(p, t, np.float32(1.43285448e-7))
        p = _fma32(p, t, np.float32(1.22774793e-6))
        p = _fma32(p, t, np.float32(1.12963626e-7))
        p = _fma32(p, t, np.float32(-5.61530760e-5))
        p = _fma32(p, t, np.float32(-1.47697632e-4))
        p = _fma32(p, t, np.float32(2.31468678e-3))
        p = _fma32(p, t, np.float32(1.15392581e-2))
        p = _fma32(p, t, np.float32(-2.32015476e-1))
        p = _fma32(p, t, np.float32(8.86226892e-1))
    return np.float32(a * p)


# -- the math library, for kernels -------------------------------------------------------------
# mathlib's functions are `inline="always"`: Numba inlines them at its IR level, which costs
# 0.2-0.4 s of typing per call site and per kernel. Kernels call these copies instead: plain
# dispatchers compiled on first use and marked `alwaysinline` for LLVM, so a kernel that calls
# them compiles in ~0.1 s and LLVM still inlines and vectorizes them. Compiling a copy costs
# 0.1-0.35 s, so they are cached on disk by Numba (`cache=True`, in `__pycache__` beside
# math.py, or Numba's user cache directory when that is read-only; invalidated when
# math.py changes), like memory.py's allocator hooks: only the first process on a machine
# pays, later ones load them in milliseconds. The cached object code keeps its LLVM bitcode,
# which is what kernels link and inline.
def _math_copy(py_func):
    """The kernel-callable copy of one mathlib function (disk-cached when Numba has a cache
    location; Numba refuses `cache=True` when it has none)."""
    try:
        return njit(error_model="numpy", nogil=True, cache=True)(py_func)
    except Exception:  # pragma: no cover - no writable cache location
        return njit(error_model="numpy", nogil=True)(py_func)


class _Copies(dict):
    """name -> the copy, made on first use: a disk-cached dispatcher costs ~0.1 ms to make
    (Numba checks its cache directory), and making all of them up front was a third of the
    cpu backend's start in a process that only loads its kernels from the disk cache."""

    def __missing__(self, name):
        copy = self[name] = globals()[name] = _math_copy(mathlib.FUNCTIONS[name].py_func)
        return copy


MATH = _Copies()
__all__.extend(mathlib.FUNCTIONS)
_PREPARED: set = set()


def __getattr__(name):
    """A kernel module's `from ...scalar import exp_f32` makes that copy (PEP 562)."""
    if name in mathlib.FUNCTIONS:
        return MATH[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _force_inline(disp) -> None:
    """Mark every compiled overload of `disp` `alwaysinline` in the LLVM module that callers
    link (best effort: without it the call stays a call). Works for a fresh compile and for an
    overload loaded from Numba's disk cache alike: both link the library's shared module."""
    for cres in disp.overloads.values():
        try:
            mod = cres.library._get_module_for_linking()
            mod.get_function(cres.fndesc.llvm_func_name).add_function_attribute("alwaysinline")
        except Exception:  # pragma: no cover - Numba internals moved
            pass


def prepare(names) -> None:
    """Compile the math functions `names` (as used by a kernel about to be built)."""
    for name in names:
        if name in _PREPARED or name not in mathlib.FUNCTIONS:
            continue
        disp = MATH[name]
        ty = types.float64 if name.endswith("_f64") else types.float32
        disp.compile((ty,) * disp.py_func.__code__.co_argcount)
        _force_inline(disp)
        _PREPARED.add(name)
