"""braze's conversion semantics: `cast(x, dtype)` is what `astype` (the AsType primitive), array
construction with a dtype and assignment into an array of another dtype compute.

The rules (docs/architecture.md, "Casts") are MLX's CPU results on x86-64, written down so they
hold whatever NumPy or ml_dtypes version is installed: only conversions that NumPy defines
(in-range float -> int truncation, int -> int wrap-around, correctly rounded float narrowing)
are left to `ndarray.astype`; out-of-range and NaN float -> int results are set explicitly.

float (float16, bfloat16, float32, float64; complex: its real part) -> integer, for a value x
and t = x truncated toward zero:

=================================  ===========================================================
target                             result
=================================  ===========================================================
bool                               x != 0 (NaN is True; complex: either part non-zero)
int64                              t if -2**63 <= x < 2**63, else -2**63 (NaN and +-inf too)
int32                              t if -2**31 <= x < 2**31, else -2**31
int8, int16, uint8, uint16         the int32 result's low 8 / 16 bits (300.7 -> int8 44,
                                   -1.5 -> uint8 255; NaN, +-inf, |x| >= 2**31 -> 0)
uint32                             the int64 result's low 32 bits (1e10 -> 1410065408,
                                   -1.5 -> 4294967295; NaN, +-inf, |x| >= 2**63 -> 0)
uint64                             t mod 2**64 if -2**63 <= x < 2**64; 0 if x >= 2**64;
                                   2**63 if x < -2**63 or NaN
=================================  ===========================================================

These are C++'s `static_cast` as compiled on x86-64 (cvttss2si / cvttsd2si; narrower targets
through int32, uint32 through int64, uint64 through the "subtract 2**63" sequence). MLX's
vectorised loop for float32/float64/bfloat16 -> uint32 gives other values for NaN and
x outside [-2**31, 2**32) in the body of a contiguous array (its scalar tail, 0-d and strided
arrays and float16 follow the rule above), so those values are not MLX-defined.

to float16 / bfloat16 from any non-half dtype: through float32 (round to nearest even to float32,
then to the half type), as MLX does; from float64 and from large integers this can round twice.
Other conversions are `astype`: float narrowing rounds to nearest even (overflow -> inf), int ->
float rounds to nearest even, int -> int keeps the low bits, bool -> number is 0/1, number ->
bool is `!= 0`, complex -> real drops the imaginary part. A NaN stays a NaN; its sign and payload
are not part of the semantics.
"""
from __future__ import annotations

import numpy as np

from . import np_errors
from .dtypes import is_bf16, is_half

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_I32_MIN = np.int32(-2**31)
_I64_MIN = np.int64(-2**63)
#: the targets narrower than 32 bits -> the unsigned type of their width
_NARROW = {np.dtype(t): np.dtype(u) for t, u in ((np.int8, np.uint8), (np.uint8, np.uint8),
                                                 (np.int16, np.uint16), (np.uint16, np.uint16))}


def widen(x: np.ndarray) -> np.ndarray:
    """float16 / bfloat16 -> float32 (exact); other arrays unchanged. bfloat16 is widened from
    its bits (the top half of a float32)."""
    if is_bf16(x.dtype):
        bits = x.view(np.uint16).astype(np.uint32)
        bits <<= 16
        return bits.view(np.float32)
    if x.dtype == _F16:
        return x.astype(np.float32)
    return x


def _trunc(x: np.ndarray, bits: int) -> np.ndarray:
    """x (float32 or float64) truncated to a signed `bits`-bit integer; x outside
    [-2**(bits-1), 2**(bits-1)) and NaN give -2**(bits-1) (x86's "integer indefinite")."""
    np_int = np.int32 if bits == 32 else np.int64
    lim = x.dtype.type(2.0 ** (bits - 1))  # a power of two: exact in float32 and float64
    ok = (x >= -lim) & (x < lim)  # False for NaN
    if ok.all():
        return x.astype(np_int)
    out = np.where(ok, x, 0).astype(np_int)
    out[~ok] = _I32_MIN if bits == 32 else _I64_MIN
    return out


def _signed(v: float, bits: int) -> int:
    lim = 1 << (bits - 1)
    return int(v) if -lim <= v < lim else -lim  # a NaN fails the comparison


def scalar_float_to_int(v: float, target: np.dtype):
    """The rules of the module docstring for one Python float (a Python int or bool)."""
    if target.kind == "b":
        return v != 0
    n = 8 * target.itemsize
    if n < 32:
        t = _signed(v, 32)
    elif target == np.uint32:
        t = _signed(v, 64)
    elif target == np.uint64 and v >= 2.0 ** 63:
        t = int(v) if v < 2.0 ** 64 else 0
    else:
        t = _signed(v, n)
    t &= (1 << n) - 1
    return t - (1 << n) if target.kind == "i" and t >> (n - 1) else t


def float_to_int(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """A float or complex array converted to the integer or bool NumPy dtype `target` by the
    rules of the module docstring."""
    if x.dtype.kind == "c":
        if target.kind == "b":
            return np.not_equal(x, 0)
        x = x.real
    if x.size == 1:  # scalars: Python arithmetic costs less than a handful of NumPy calls
        v = scalar_float_to_int(float(x.reshape(-1)[0]), target)  # float(): exact widening
        return np.full(x.shape, v, dtype=target)
    x = widen(x)
    if target.kind == "b":
        return x != 0
    if x.size == 0:
        return x.astype(target)
    lo, hi = float(x.min()), float(x.max())  # a NaN propagates, and fails both comparisons
    info = np.iinfo(target)
    if info.min - 1 < lo and hi < info.max + 1:  # exact: Python compares float and int exactly
        return x.astype(target)  # every value truncates into range: NumPy's cast is defined
    if target in _NARROW:  # through int32, keep the low bits (unsigned narrowing: modular)
        return _trunc(x, 32).view(np.uint32).astype(_NARROW[target]).view(target)
    if target == np.int32:
        return _trunc(x, 32)
    i64 = _trunc(x, 64)
    if target == np.int64:
        return i64
    if target == np.uint32:
        return i64.view(np.uint64).astype(np.uint32)
    # uint64: values at or above 2**63 are converted as x - 2**63 (exact) with the top bit set
    lim = x.dtype.type(2.0 ** 63)
    big = x >= lim
    if big.any():
        i64 = np.where(big, _trunc(np.where(big, x - lim, 0), 64) ^ _I64_MIN, i64)
    return i64.view(np.uint64)


def plain(src: np.dtype, target: np.dtype) -> bool:
    """Whether `ndarray.astype(target)` computes braze's cast from `src` (so callers may use
    NumPy's copying machinery directly): not for float/complex -> int/bool, complex -> real,
    anything -> float16/bfloat16 except from float32, or bfloat16 -> float."""
    if target.kind in "biu":
        return src.kind in "biu"
    if src.kind == "c" and target.kind != "c":
        return False
    if is_half(target):
        return src == _F32
    return not is_bf16(src)


def cast(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """`x` converted to the NumPy dtype `target` with braze's semantics (module docstring).
    May return `x` itself when the dtypes already agree. Emits no NumPy warnings."""
    target = np.dtype(target)
    src = x.dtype
    if src == target:
        return x
    if target.kind in "biu" and src.kind in "fcV":
        return float_to_int(x, target)
    token = np_errors.silence()  # float overflow to inf is a result, not an error
    try:
        if src.kind == "c" and target.kind != "c":
            x = x.real
        if is_half(target):
            if x.dtype != _F32:  # float64, integers, the other half type: through float32
                x = widen(x) if is_half(x.dtype) else x.astype(np.float32)
        elif is_bf16(x.dtype):
            x = widen(x)
        return x if x.dtype == target else x.astype(target)
    finally:
        np_errors.restore(token)
