"""Accuracy of the cpu backend's float32 math library (braze/_src/backends/cpu/lib/math.py).

Every float32 function is evaluated the way kernels call it (inlined into a vectorized
`@njit(error_model="numpy")` loop over an array) on 2**20 random values plus edge values and
compared with a float64 reference rounded to float32:

* within MAX_ULP ulp (distance counted on the float32 grid, so denormal results are measured
  in denormal steps), wherever the reference is finite;
* NaN exactly where the reference is NaN, +-Inf exactly where it is +-Inf;
* signed zeros: where the reference is a zero, ours is a zero of the same sign.

Random inputs mix uniformly random float32 bit patterns (filtered to the function's domain),
uniform values over the interesting range and log-uniform magnitudes down to the smallest
denormal. The reference is NumPy in float64, libm's erf for erf, a stable float64 formula for
sigmoid, and for erfinv (SciPy is not a dependency) Newton's method on libm's float64 erf/erfc,
started from our value and iterated to convergence.

Run as a script to print the maximum ulp error per function.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import njit  # noqa: E402

from braze._src.backends.cpu.lib import math as M  # noqa: E402

MAX_ULP = 4
N = 1 << 20
F32 = np.float32
TINY = float(np.finfo(np.float32).smallest_subnormal)
BIG = float(np.finfo(np.float32).max)

EDGE = np.array([0.0, -0.0, TINY, -TINY, 2 * TINY, 1e-40, -1e-40, 1.1754942e-38, -1.1754942e-38,
                 1.1754944e-38, -1.1754944e-38, 1e-30, -1e-30, 2.0 ** -24, -(2.0 ** -24), 1e-7,
                 -1e-7, 1e-4, 0.03125, 0.0312, 0.5, -0.5, 0.625, -0.625, 0.7853982, -0.7853982,
                 1.0, -1.0, 0.99999994, -0.99999994, 1.0000001, -1.0000001, 1.5707964,
                 -1.5707964, 2.0, -2.0, 3.1415927, -3.1415927, 4.0, -4.0, 10.0, -10.0, 87.33655,
                 -87.33655, 88.72283, 88.72284, -88.72283, 89.41598, 89.416, -89.416, 100.0,
                 -103.97208, -103.97209, -104.0, 1e4, 1e6, 16777216.0, 1e10, 1e20, 1e30,
                 -1e30, 1.7e38, 3.4e38, BIG, -BIG, np.inf, -np.inf, np.nan], dtype=np.float32)
# float32 values nearest to multiples of pi/2 (tan poles, sin/cos zeros), incl. huge ones
_K = np.concatenate([np.arange(1, 200), np.round(np.geomspace(200, 1e12, 200))])
NEAR_PIO2 = (_K * (np.pi / 2)).astype(np.float32)
NEAR_PIO2 = np.concatenate([NEAR_PIO2, -NEAR_PIO2, np.nextafter(NEAR_PIO2, F32(np.inf)),
                            np.nextafter(NEAR_PIO2, F32(-np.inf))])
NEAR_ONE = np.concatenate([np.nextafter(F32(1.0), F32(0.0)) - np.arange(64, dtype=F32)
                           * F32(2.0 ** -24), F32(1.0) + np.arange(1, 64, dtype=F32)
                           * F32(2.0 ** -23)]).astype(np.float32)


# -- references (float64 in, float64 out) ------------------------------------------------------
@njit(error_model="numpy", cache=False)
def _erf_ref(x):
    out = np.empty(x.size, np.float64)
    for i in range(x.size):
        out[i] = math.erf(x[i])
    return out


@njit(error_model="numpy", cache=False)
def _erfinv_ref(x, y0):
    """Newton on libm's float64 erf (erfc near |x| = 1) from start y0, to convergence."""
    out = np.empty(x.size, np.float64)
    for i in range(x.size):
        a = abs(x[i])
        y = abs(y0[i])
        if not (a < 1.0) or a == 0.0 or not math.isfinite(y):
            out[i] = y0[i]
            continue
        for _ in range(8):
            g = ((1.0 - a) - math.erfc(y)) if a > 0.5 else (math.erf(y) - a)
            y = y - g / (1.1283791670955126 * math.exp(-y * y))
        out[i] = math.copysign(y, x[i])
    return out


def _sigmoid_ref(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _erfinv_ref_np(x, ours):
    y0 = ours.astype(np.float64)
    y0 = np.where(np.isfinite(y0), y0, 0.0)
    r = _erfinv_ref(x, y0)
    r = np.where(np.abs(x) == 1.0, np.copysign(np.inf, x), r)
    return np.where((np.abs(x) > 1.0) | np.isnan(x), np.nan, np.where(x == 0, x, r))


# name: (reference, domain filter, interesting range, extra edge values)
UNARY = {
    "exp": (np.exp, None, 105.0, None),
    "expm1": (np.expm1, None, 105.0, None),
    "log": (np.log, "pos", BIG, NEAR_ONE),
    "log2": (np.log2, "pos", BIG, NEAR_ONE),
    "log10": (np.log10, "pos", BIG, NEAR_ONE),
    "log1p": (np.log1p, "gt-1", BIG, -NEAR_ONE),
    "sin": (np.sin, None, 100.0, NEAR_PIO2),
    "cos": (np.cos, None, 100.0, NEAR_PIO2),
    "tan": (np.tan, None, 100.0, NEAR_PIO2),
    "tanh": (np.tanh, None, 12.0, None),
    "sinh": (np.sinh, None, 92.0, None),
    "cosh": (np.cosh, None, 92.0, None),
    "erf": (_erf_ref, None, 5.0, None),
    "erfinv": (None, "unit", 1.0, np.concatenate([NEAR_ONE, -NEAR_ONE])),
    "sigmoid": (_sigmoid_ref, None, 120.0, None),
    "arcsin": (np.arcsin, "unit", 1.0, np.concatenate([NEAR_ONE, -NEAR_ONE])),
    "arccos": (np.arccos, "unit", 1.0, np.concatenate([NEAR_ONE, -NEAR_ONE])),
    "arctan": (np.arctan, None, 100.0, None),
    "arcsinh": (np.arcsinh, None, BIG, None),
    "arccosh": (np.arccosh, "ge1", BIG, NEAR_ONE),
    "arctanh": (np.arctanh, "unit", 1.0, np.concatenate([NEAR_ONE, -NEAR_ONE])),
}


def _random_inputs(rng, n, domain, rng_hi):
    """n float32 values: random bit patterns, uniform over [-hi, hi], log-uniform magnitudes."""
    q = n // 4
    bits = rng.integers(0, 2 ** 32, size=4 * q, dtype=np.uint64).astype(np.uint32).view(F32)
    bits = bits[np.isfinite(bits)]
    if domain == "pos":
        bits = np.abs(bits)
    elif domain == "unit":
        bits = bits[np.abs(bits) <= 1]
    elif domain == "gt-1":
        bits = bits[bits > -1]
    elif domain == "ge1":
        bits = np.abs(bits)
        bits = bits[bits >= 1]
    bits = bits[:q]
    lo = {"pos": 0.0, "gt-1": -1.0, "ge1": 1.0}.get(domain, -rng_hi)
    uni = rng.uniform(lo, rng_hi, size=q).astype(F32)
    mag = np.exp(rng.uniform(math.log(TINY), math.log(rng_hi), size=n - 2 * q)).astype(F32)
    sign = rng.choice(np.array([-1.0, 1.0], F32), size=mag.size)
    if domain in ("pos", "ge1"):
        sign = np.abs(sign)
    logu = mag * sign
    if domain == "ge1":
        logu = F32(1.0) + logu
    if domain == "gt-1":
        logu = np.where(logu > -1, logu, -logu)
    if domain == "unit":
        logu = np.minimum(logu, F32(1.0))
    out = np.concatenate([bits, uni, logu]).astype(F32)
    return out[:n] if out.size >= n else np.concatenate([out, uni[: n - out.size]])


def _ordered(a32):
    """float32 -> int64 monotone in the float order (+0 and -0 both map to 0)."""
    i = a32.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def check(name, x_args, ours, ref64):
    """Assert the accuracy contract; return the max ulp error over finite reference values."""
    with np.errstate(all="ignore"):
        ref = ref64.astype(F32)
    rnan, onan = np.isnan(ref), np.isnan(ours)
    bad = np.flatnonzero(rnan != onan)
    assert bad.size == 0, (name, "NaN mismatch", [a[bad[:5]] for a in x_args], ours[bad[:5]],
                           ref[bad[:5]])
    rinf, oinf = np.isinf(ref), np.isinf(ours)
    bad = np.flatnonzero((rinf | oinf) & (ref != ours))
    assert bad.size == 0, (name, "Inf mismatch", [a[bad[:5]] for a in x_args], ours[bad[:5]],
                           ref[bad[:5]])
    fin = ~rnan & ~rinf
    zero = fin & (ref == 0)
    bad = np.flatnonzero(zero & ((ours != 0) | (np.signbit(ours) != np.signbit(ref))))
    assert bad.size == 0, (name, "signed zero mismatch", [a[bad[:5]] for a in x_args],
                           ours[bad[:5]], ref[bad[:5]])
    ulp = np.abs(_ordered(ours[fin]) - _ordered(ref[fin]))
    worst = int(ulp.max()) if ulp.size else 0
    if worst > MAX_ULP:
        j = np.flatnonzero(fin)[np.argmax(ulp)]
        raise AssertionError(f"{name}: {worst} ulp at {[a[j] for a in x_args]}: "
                             f"ours {ours[j]!r} ref {ref64[j]!r}")
    return worst


_KERNELS = {}


def _kernel(name, arity):
    """A vectorizable loop calling mathlib.<name>_f32 on each element."""
    if name not in _KERNELS:
        fn = getattr(M, f"{name}_f32")
        if arity == 1:
            def k(a, out):
                for i in range(a.size):
                    out[i] = fn(a[i])
        else:
            def k(a, b, out):
                for i in range(a.size):
                    out[i] = fn(a[i], b[i])
        _KERNELS[name] = njit(error_model="numpy", cache=False)(k)
    return _KERNELS[name]


def run_unary(name, n=N, seed=0):
    ref_fn, domain, hi, extra = UNARY[name]
    rng = np.random.default_rng(seed)
    parts = [_random_inputs(rng, n, domain, hi), EDGE, -EDGE]
    if extra is not None:
        parts.append(extra)
    x = np.concatenate(parts).astype(F32)
    out = np.empty_like(x)
    _kernel(name, 1)(x, out)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        ref = _erfinv_ref_np(x64, out) if name == "erfinv" else ref_fn(x64)
    return check(name, (x,), out, ref)


_SPECIAL = np.array([0.0, -0.0, TINY, -TINY, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.25,
                     1.5, -1.5, 1e-30, 1e30, BIG, -BIG, np.inf, -np.inf, np.nan], dtype=F32)


def _binary_inputs(name, rng, n):
    q = n // 4
    pair = np.array(np.meshgrid(_SPECIAL, _SPECIAL)).reshape(2, -1).astype(F32)
    bits = rng.integers(0, 2 ** 32, size=(2, q), dtype=np.uint64).astype(np.uint32).view(F32)
    if name == "power":
        # x log-uniform over every magnitude with either sign; y sized so x**y spans the range
        xm = np.exp(rng.uniform(math.log(TINY), math.log(BIG), size=2 * q))
        x = (xm * rng.choice([-1.0, 1.0], size=2 * q)).astype(F32)
        lim = 150.0 / np.maximum(np.abs(np.log2(np.abs(x.astype(np.float64)))), 1e-3)
        y = (rng.uniform(-1.0, 1.0, size=2 * q) * lim).astype(F32)
        yi = np.round(y[:q]).astype(F32)      # integer exponents (negative bases keep a sign)
        y = np.concatenate([yi, y[q:]])
        xs = rng.uniform(0.0, 4.0, size=q).astype(F32)         # ordinary bases and exponents
        ys = rng.uniform(-30.0, 30.0, size=q).astype(F32)
        x, y = np.concatenate([x, xs]), np.concatenate([y, ys])
    else:
        m = np.exp(rng.uniform(math.log(TINY), math.log(BIG), size=(2, 3 * q)))
        x = (m[0] * rng.choice([-1.0, 1.0], size=3 * q)).astype(F32)
        y = (m[1] * rng.choice([-1.0, 1.0], size=3 * q)).astype(F32)
    return (np.concatenate([bits[0], x, pair[0]]).astype(F32),
            np.concatenate([bits[1], y, pair[1]]).astype(F32))


def run_binary(name, n=N, seed=1):
    rng = np.random.default_rng(seed)
    a, b = _binary_inputs(name, rng, n)
    out = np.empty_like(a)
    _kernel(name, 2)(a, b, out)
    with np.errstate(all="ignore"):
        if name == "power":
            ref = np.power(a.astype(np.float64), b.astype(np.float64))
        else:
            ref = np.arctan2(a.astype(np.float64), b.astype(np.float64))
    return check(name, (a, b), out, ref)


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_f32(name):
    run_unary(name)


@njit(error_model="numpy", cache=False)
def _erf_sweep(lo, hi):
    """Max ulp distance of erf_f32 from libm's float64 erf rounded to float32, over every
    float32 bit pattern in [lo, hi) (positive values: erf_f32 is odd by construction)."""
    worst = 0
    for i in range(lo, hi):
        x = M._bits_f32(np.int32(i))
        d = abs(np.int64(M._f32_bits(M.erf_f32(x)))
                - np.int64(M._f32_bits(np.float32(math.erf(np.float64(x))))))
        worst = max(worst, d)
    return worst


def test_erf_every_float_across_the_two_forms():
    """Every float32 in [0.5, 4.5): both sides of the switch at 1 and the rounding to 1 near
    3.92 (an exhaustive sweep of [0, 4.5) gave 1 ulp)."""
    lo = int(np.array([0.5], F32).view(np.int32)[0])
    hi = int(np.array([4.5], F32).view(np.int32)[0])
    assert _erf_sweep(lo, hi) <= MAX_ULP


def _sweeper(fn, ref):
    """A loop over every `step`-th float32 bit pattern (both signs) returning the max ulp
    distance of fn from libm's float64 ref rounded to float32 (finite references), and the
    number of NaN / Inf / signed-zero mismatches (a NaN counts as equal to a NaN)."""
    @njit(error_model="numpy", cache=False)
    def sweep(start, stop, step):
        worst = 0
        bad = 0
        for i in range(start, stop, step):
            x = M._bits_f32(np.int32(i - (1 << 32) if i >= (1 << 31) else i))
            o = fn(x)
            r = np.float32(ref(np.float64(x)))
            if r != r or o != o:
                bad += (r == r) or (o == o)
                continue
            if abs(r) == np.inf or abs(o) == np.inf or r == 0:
                bad += (r != o) or (M._f32_bits(r) != M._f32_bits(o))
                continue
            io, ir = np.int64(M._f32_bits(o)), np.int64(M._f32_bits(r))
            io = -(io & 0x7FFFFFFF) if io < 0 else io
            ir = -(ir & 0x7FFFFFFF) if ir < 0 else ir
            worst = max(worst, abs(io - ir))
        return worst, bad
    return sweep


def _libm(name):
    return njit(inline="always", error_model="numpy", cache=False)(
        {"arcsinh": lambda v: math.asinh(v), "arccosh": lambda v: math.acosh(v),
         "arctanh": lambda v: math.atanh(v), "sin": lambda v: math.sin(v),
         "cos": lambda v: math.cos(v), "tan": lambda v: math.tan(v),
         "expm1": lambda v: math.expm1(v), "sinh": lambda v: math.sinh(v),
         "cosh": lambda v: math.cosh(v), "log": lambda v: math.log(v),
         "log2": lambda v: math.log2(v), "log10": lambda v: math.log10(v),
         "log1p": lambda v: math.log1p(v), "arctan": lambda v: math.atan(v)}[name])


SWEPT = ["arcsinh", "arccosh", "arctanh", "sin", "cos", "tan", "expm1", "sinh", "cosh", "log",
         "log2", "log10", "log1p", "arctan"]


def run_sweep(name, step):
    """(max ulp, mismatches) over every `step`-th float32 (step 1: exhaustive)."""
    sweep = _sweeper(getattr(M, f"{name}_f32"), _libm(name))
    return sweep(0, 1 << 32, step)


@pytest.mark.parametrize("name", SWEPT)
def test_dense_sweep(name):
    """Every 4099th float32 bit pattern (about a million values, both signs, every binade);
    denser sweeps (step 1-17) were run when these functions were written (see main)."""
    worst, bad = run_sweep(name, 4099)
    assert bad == 0 and worst <= 2, (name, worst, bad)


@pytest.mark.parametrize("name", ["arctan2", "power"])
def test_binary_f32(name):
    run_binary(name)


def test_float64_fallbacks():
    """The float64 versions (libm calls; erfinv and sigmoid written in mathlib)."""
    x = np.array([-0.999999, -0.5, -1e-3, -0.0, 0.0, 1e-300, 0.3, 0.75, 0.9999, 1 - 1e-15,
                  1.0, -1.0, 1.5, np.nan])
    f = njit(error_model="numpy", cache=False)(
        lambda a: [M.erfinv_f64(v) for v in a])
    y = np.array(f(x))
    with np.errstate(all="ignore"):
        back = np.array([math.erf(v) if np.isfinite(v) else np.nan for v in y])
    fin = np.isfinite(y)
    np.testing.assert_allclose(back[fin], x[fin], rtol=4e-16, atol=0)
    assert np.isnan(y[[12, 13]]).all() and y[10] == np.inf and y[11] == -np.inf
    assert np.signbit(y[3]) and not np.signbit(y[4])
    g = njit(error_model="numpy", cache=False)(lambda a: [M.sigmoid_f64(v) for v in a])
    s = np.array(g(np.array([-800.0, -30.0, 0.0, 30.0, np.inf, -np.inf, np.nan])))
    np.testing.assert_allclose(s[:6], _sigmoid_ref(np.array([-800.0, -30.0, 0.0, 30.0, np.inf,
                                                             -np.inf])), rtol=1e-15)
    assert np.isnan(s[6])


def test_every_costly_kernel_op_has_its_math_functions():
    """A costly primitive's kernel op names a math-library function in both float types,
    except logaddexp (the scalar library's, from mathlib's exp and log1p)."""
    from braze._src.prims import binary, unary
    from braze._src.prims.base import REGISTRY
    assert unary.LOG2.kernel_op == "log2" and binary.POWER.kernel_op == "power"
    scalar_lib = {"logaddexp"}
    ops = {cls.kernel_op for cls in REGISTRY.values()
           if cls.costly and isinstance(cls.kernel_op, str)}
    ops |= {unary.LOG.kernel_op, unary.LOG10.kernel_op}
    for op in ops - scalar_lib - {None}:
        assert f"{op}_f32" in M.FUNCTIONS and f"{op}_f64" in M.FUNCTIONS, op


def main(argv=None):  # pragma: no cover - report
    """python tests/test_mathlib.py [--sweep STEP name ...]: max ulp per function, or a sweep
    of every STEP-th float32 (STEP 1: exhaustive) for the SWEPT functions named."""
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--sweep"]:
        for name in argv[2:] or SWEPT:
            worst, bad = run_sweep(name, int(argv[1]))
            print(f"{name:8s} sweep step {argv[1]}: max ulp {worst}, mismatches {bad}",
                  flush=True)
        return
    for name in [*UNARY, "arctan2", "power"]:
        try:
            r = run_binary(name) if name in ("arctan2", "power") else run_unary(name)
            print(f"{name:8s} max ulp {r}")
        except AssertionError as e:
            print(f"{name:8s} FAIL {e}")


if __name__ == "__main__":  # pragma: no cover
    main()
