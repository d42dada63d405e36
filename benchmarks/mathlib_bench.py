"""Throughput of the cpu backend's math library against libm (`math.*`) inside Numba loops.

For each function: a `@njit(error_model="numpy")` loop over N float32 elements (default 16 Mi)
calling `mathlib.<fn>_f32`, the same loop calling `math.*`, and a plain copy loop (the memory
roofline: one read + one write per element; binary functions read two inputs, compared against
a two-input copy). Buffers are allocated and touched once up front, so no page faults are timed.
Prints ns/element, the fraction of copy speed, and whether the mathlib loop vectorized (vector
types in its LLVM IR, widest float vector seen).

With --fused: what a user sees, side by side in one run. For each op, eager NumPy
`op(x) * 2.0` (two NumPy passes, its SIMD transcendentals) against braze's fused kernel
`mx.compile(lambda x: op(x) * 2.0)` (one generated Numba loop calling lib/math.py or
lib/scalar.py), in float32 and float64, inputs uniform in (0.1, 0.9) (binary ops: both
operands), min of --repeat runs (NumPy: the faster of allocating its results and writing
into a preallocated one); default N 4 Mi there.

    python benchmarks/mathlib_bench.py [--n 16777216] [--repeat 5] [--only exp,sin]
    python benchmarks/mathlib_bench.py --fused [--n 4194304] [--repeat 5] [--only sin,power]
"""
from __future__ import annotations

import argparse
import math
import re
import time
import types

import numpy as np
from numba import njit

from braze._src.backends.cpu.lib import math as M

_J = dict(error_model="numpy", cache=False)


def _unary(fn):
    def k(a, out):
        for i in range(a.size):
            out[i] = fn(a[i])
    return njit(**_J)(k)


def _binary(fn):
    def k(a, b, out):
        for i in range(a.size):
            out[i] = fn(a[i], b[i])
    return njit(**_J)(k)


@njit(**_J)
def _copy1(a, out):
    for i in range(a.size):
        out[i] = a[i]


@njit(**_J)
def _copy2(a, b, out):
    for i in range(a.size):
        out[i] = a[i] + b[i]


def _wrap(lib, binary):
    """An inlinable njit function calling the libm function `lib`."""
    if not isinstance(lib, types.BuiltinFunctionType):
        return njit(inline="always", **_J)(lib)
    if binary:
        return njit(inline="always", **_J)(lambda x, y: lib(x, y))
    return njit(inline="always", **_J)(lambda x: lib(x))


def _libm_sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def _libm_pow(x, y):
    return x ** y


# name: (libm scalar equivalent or None, input generator)
_LIBM = {
    "exp": math.exp, "expm1": math.expm1, "log": math.log, "log2": math.log2,
    "log10": math.log10, "log1p": math.log1p, "sin": math.sin, "cos": math.cos, "tan": math.tan,
    "tanh": math.tanh, "sinh": math.sinh, "cosh": math.cosh, "erf": math.erf, "erfinv": None,
    "sigmoid": _libm_sigmoid, "arcsin": math.asin, "arccos": math.acos, "arctan": math.atan,
    "arctan2": math.atan2, "power": _libm_pow,
}
_BINARY = ("arctan2", "power")


def _inputs(name, n, rng):
    if name in ("log", "log2", "log10", "log1p"):
        return (rng.uniform(0.0, 100.0, n).astype(np.float32),)
    if name in ("erfinv", "arcsin", "arccos"):
        return (rng.uniform(-1.0, 1.0, n).astype(np.float32),)
    if name == "power":
        return (rng.uniform(0.0, 4.0, n).astype(np.float32),
                rng.uniform(-8.0, 8.0, n).astype(np.float32))
    x = rng.uniform(-10.0, 10.0, n).astype(np.float32)
    return (x, rng.uniform(-10.0, 10.0, n).astype(np.float32)) if name in _BINARY else (x,)


def _time(fn, args, repeat):
    fn(*args)  # compile + warm
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def vector_widths(kernel):
    """Widest `<N x float>` / `<N x double>` in the kernel's LLVM IR (0: scalar code)."""
    ir = kernel.inspect_llvm(kernel.signatures[0])
    w = {"float": 0, "double": 0}
    for n, t in re.findall(r"<(\d+) x (float|double)>", ir):
        w[t] = max(w[t], int(n))
    return w["float"], w["double"]


# op name -> (NumPy function, arity) for --fused (mx has the same names)
_FUSED = {
    "sin": 1, "cos": 1, "tan": 1, "expm1": 1, "arcsinh": 1, "arctanh": 1, "arccosh": 1,
    "sinh": 1, "cosh": 1, "power": 2, "arctan2": 2, "log": 1, "log2": 1, "log10": 1,
    "log1p": 1, "arcsin": 1, "arccos": 1, "arctan": 1, "exp": 1, "tanh": 1,
}


def _built():
    """Wait for braze's background kernel builds (BRAZE_BACKGROUND_BUILDS): the times are those
    of native kernels, not of launches that ran on the reference while they built."""
    try:
        from braze._src.backends.cpu import background
    except ImportError:  # a revision without background builds
        return
    background.wait(600)


def _min_time(fn, repeat):
    fn()  # compile + warm
    _built()
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def fused(n, repeat, names):
    import warnings

    import braze.core as mx
    warnings.filterwarnings("ignore", message=r".*mx.compile wraps")  # one wrapper per op
    rng = np.random.default_rng(0)
    names = names or list(_FUSED)
    print(f"N = {n}, inputs uniform in (0.1, 0.9) (arccosh: 1 + that), min of {repeat} runs; "
          "ms per call")
    hdr = (f"{'op':8s} {'f32 numpy':>10s} {'f32 fused':>10s} {'ratio':>6s}   "
           f"{'f64 numpy':>10s} {'f64 fused':>10s} {'ratio':>6s}")
    print(hdr)
    print("-" * len(hdr))
    floor = []
    for dt, mdt in ((np.float32, mx.float32), (np.float64, mx.float64)):
        x = mx.array(rng.uniform(0.1, 0.9, n).astype(dt), dtype=mdt)
        f = mx.compile(lambda a: a * 2.0 + 1.0)
        floor.append(_min_time(lambda: mx.eval(f(x)), repeat))
    print(f"{'(x*2+1)':8s} {'':10s} {floor[0] * 1e3:10.2f} {'':6s}   {'':10s} "
          f"{floor[1] * 1e3:10.2f}   <- a memory-bound fused kernel: the floor", flush=True)
    for name in names:
        cells = []
        for dt in (np.float32, np.float64):
            xs = [rng.uniform(0.1, 0.9, n).astype(dt) for _ in range(_FUSED[name])]
            if name == "arccosh":
                xs = [x + dt(1.0) for x in xs]
            np_fn, mx_fn = getattr(np, name), getattr(mx, name)
            t_np = _min_time(lambda: np_fn(*xs) * 2.0, repeat)
            o = np.empty_like(xs[0])

            def np_out():  # no allocation (page faults) in NumPy's time
                np_fn(*xs, out=o)
                np.multiply(o, 2.0, out=o)
            t_np = min(t_np, _min_time(np_out, repeat))
            ms = [mx.array(x, dtype=mx.float32 if dt == np.float32 else mx.float64)
                  for x in xs]
            f = mx.compile(lambda *a: mx_fn(*a) * 2.0)
            assert f(*ms).dtype == ms[0].dtype

            def run():
                mx.eval(f(*ms))
            t_mx = _min_time(run, repeat)
            cells.append(f"{t_np * 1e3:10.2f} {t_mx * 1e3:10.2f} {t_np / t_mx:6.2f}")
        print(f"{name:8s} {cells[0]}   {cells[1]}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--fused", action="store_true",
                    help="eager NumPy vs braze's fused kernel, float32 and float64")
    args = ap.parse_args(argv)
    if args.fused:
        return fused(args.n or 4 * 1024 * 1024, args.repeat,
                     [s for s in args.only.split(",") if s])
    n = args.n or 16 * 1024 * 1024
    names = [s for s in args.only.split(",") if s] or list(_LIBM)
    rng = np.random.default_rng(0)
    out = np.zeros(n, np.float32)
    src = rng.uniform(-1, 1, n).astype(np.float32)
    src2 = rng.uniform(-1, 1, n).astype(np.float32)
    copy1 = _time(_copy1, (src, out), args.repeat)
    copy2 = _time(_copy2, (src, src2, out), args.repeat)
    print(f"N = {n} float32; copy: {copy1 / n * 1e9:.3f} ns/elem "
          f"({2 * 4 * n / copy1 / 1e9:.1f} GB/s), 2-input copy: {copy2 / n * 1e9:.3f} ns/elem")
    hdr = (f"{'function':9s} {'mathlib ns/el':>13s} {'of copy':>8s} {'math.* ns/el':>13s} "
           f"{'of copy':>8s} {'speedup':>8s}  vectorized (f32 / f64 lanes)")
    print(hdr)
    print("-" * len(hdr))
    for name in names:
        ins = _inputs(name, n, rng)
        base = copy2 if name in _BINARY else copy1
        make = _binary if name in _BINARY else _unary
        k = make(getattr(M, f"{name}_f32"))
        t = _time(k, (*ins, out), args.repeat)
        wf, wd = vector_widths(k)
        vec = f"yes ({wf} / {wd})" if (wf or wd) else "NO"
        lib = _LIBM[name]
        if lib is not None:
            tl = _time(make(_wrap(lib, name in _BINARY)), (*ins, out), args.repeat)
            lib_s = f"{tl / n * 1e9:13.3f} {base / tl:8.2f} {tl / t:8.2f}"
        else:
            lib_s = f"{'-':>13s} {'-':>8s} {'-':>8s}"
        print(f"{name:9s} {t / n * 1e9:13.3f} {base / t:8.2f} {lib_s}  {vec}", flush=True)


if __name__ == "__main__":
    main()
