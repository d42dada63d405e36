"""Throughput of the cpu backend's math library against libm (`math.*`) inside Numba loops.

For each function: a `@njit(error_model="numpy")` loop over N float32 elements (default 16 Mi)
calling `mathlib.<fn>_f32`, the same loop calling `math.*`, and a plain copy loop (the memory
roofline: one read + one write per element; binary functions read two inputs, compared against
a two-input copy). Buffers are allocated and touched once up front, so no page faults are timed.
Prints ns/element, the fraction of copy speed, and whether the mathlib loop vectorized (vector
types in its LLVM IR, widest float vector seen).

    python benchmarks/mathlib_bench.py [--n 16777216] [--repeat 5] [--only exp,sin]
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16 * 1024 * 1024)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    n = args.n
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
