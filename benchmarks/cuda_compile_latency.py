"""NVRTC build time of the cuda backend's kernels (issue 18's target: a new kernel <= 0.2 s).

    python benchmarks/cuda_compile_latency.py [--arch sm_90a] [--json out.jsonl]

Renders the contiguous kernel of gelu (erf form), gelu_tanh, the Adam step and a float16 and an
int8 chain, then builds each (no disk cache) five times and prints the median; the first build
of the process (NVRTC loading its builtins) is reported apart. Needs the `cuda` extra, not a GPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import braze.core as mx
import braze.nn as nn
from braze._src.backends.cuda import CudaBackend, render_kernel
from braze._src.backends.cuda.compiler import NvrtcCompiler, nvrtc_version


def _adam(p, m, v, g, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * mx.square(g)
    return p - lr * m / (mx.sqrt(v) + eps), m, v


def workloads() -> dict:
    x = mx.array(np.linspace(-3, 3, 4096, dtype=np.float32))
    h = x.astype(mx.float16)
    i = mx.array(np.arange(4096, dtype=np.int8))
    fns = {"gelu": (nn.gelu, x), "gelu_tanh": (nn.gelu_approx, x),
           "adam": (_adam, x, x, x * x, x),
           "float16 chain": (lambda a: mx.exp(a) * a + mx.tanh(a) - 1, h),
           "int8 chain": (lambda a: (a // 3) * (a % 5) + (a << 1), i)}
    out = {}
    for name, (fn, *args) in fns.items():
        ir = max(mx.compile(fn).lower_for("numpy", *args).irs, key=lambda r: len(r.ops))
        out[name] = render_kernel(ir, CudaBackend.default_variant(ir))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default=None)
    ap.add_argument("--json", help="append JSON lines to this file")
    a = ap.parse_args()
    comp = NvrtcCompiler(arch=a.arch)
    srcs = workloads()
    t0 = time.perf_counter()
    comp.build(next(iter(srcs.values())))
    first = time.perf_counter() - t0
    print(f"NVRTC {nvrtc_version()}, {comp.arch}: first build of the process {first:.3f} s")
    rows = []
    for name, src in srcs.items():
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            cubin = comp.build(src)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        rows.append({"kernel": name, "arch": comp.arch, "seconds": med, "cubin": len(cubin)})
        print(f"  {name:14s} {med * 1e3:7.1f} ms  ({len(cubin)} bytes of CUBIN)"
              + ("" if med <= 0.2 else "  > 0.2 s target"))
    if a.json:
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
