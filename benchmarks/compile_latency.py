"""How long `mx.compile` takes to compile large graphs: trace, each pass, kernel build.

    python benchmarks/compile_latency.py                      # everything (a few minutes)
    python benchmarks/compile_latency.py --no-build           # trace and passes only
    python benchmarks/compile_latency.py --workloads chain --sizes 1000,8000 --repeat 5

Workloads: `chain` (N elementwise ops on two inputs, N from --sizes), `mlp` (value_and_grad of
a --layers deep MLP), `transformer` (value_and_grad of a --blocks deep TransformerEncoder).
Each is compiled --repeat times (a fresh `mx.compile` each time; medians are printed): `trace`
is the first call's time outside the passes (running the function on placeholders, copying the tape,
replaying it lazily), then each pass of the pipeline (compile/pipeline.py) is timed by a wrapper.
`ops` is the number of primitives after simplify; `/1k` columns are seconds per 1000 of them.

Kernel build time (unless --no-build) is measured in child processes so that no kernel is
already in memory: `cold` with a fresh BRAZE_CACHE_DIR, `warm` with the same directory again
(kernels load from the disk cache); both are the first evaluation's time minus a steady one.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

# steady-state kernel speed and build latency: kernels are built in the call, not in the
# background while calls run on the numpy reference (BRAZE_BACKGROUND_BUILDS)
os.environ.setdefault("BRAZE_BACKGROUND_BUILDS", "0")
import braze.core as mx
import braze.nn as nn
from braze._src import config
from braze._src.compile import pipeline

# every repeat compiles afresh on purpose: the compile-in-a-loop warning is expected here
warnings.filterwarnings("ignore", message=r"\[compile\] mx.compile wraps")

WORKLOADS = ("chain", "mlp", "transformer")
PASS_NAMES = tuple(p.name for p in pipeline.PASSES)


# -- workloads: (compiled function's body, its arguments, its compile kwargs) -----------------
def chain(n):
    """n elementwise ops cycling through sin, two Python scalars (each one broadcast after
    simplify: the broadcast splitting of `fuse` sees n/4 consumers) and a second input."""
    def f(x, y):
        for i in range(n):
            k = i % 4
            x = mx.sin(x) if k == 0 else x * 0.999 if k == 1 else x + 0.5 if k == 2 \
                else x + y
        return x
    return f, (mx.ones((1024,)), mx.full((1024,), 0.5)), {}


def mlp(layers, width=64, batch=32):
    mx.random.seed(0)
    params = [(mx.random.normal((width, width)) * (1 / width ** 0.5), mx.zeros((width,)))
              for _ in range(layers)]

    def loss(params, x):
        for w, b in params:
            x = nn.gelu(x @ w + b)
        return mx.mean(x * x)

    def f(params, x):
        return mx.value_and_grad(loss)(params, x)
    return f, (params, mx.random.normal((batch, width))), {}


def transformer(blocks, dims=128, heads=4, seq=64):
    mx.random.seed(0)
    model = nn.TransformerEncoder(blocks, dims, heads)
    mx.eval(model.parameters())
    mask = nn.MultiHeadAttention.create_additive_causal_mask(seq)

    def loss(model, x):
        return mx.mean(model(x, mask) ** 2)

    grad = nn.value_and_grad(model, loss)

    def f(x):
        return grad(model, x)
    return f, (mx.random.normal((2, seq, dims)),), {"inputs": model.state}


def make(name, size):
    """The workload `name` at `size` (chain length, MLP layers or transformer blocks)."""
    return {"chain": chain, "mlp": mlp, "transformer": transformer}[name](size)


def cases(args):
    """(workload, size label) pairs in the order they run."""
    out = []
    for w in args.workloads:
        if w == "chain":
            out.extend(("chain", n) for n in args.sizes)
        else:
            out.append((w, args.layers if w == "mlp" else args.blocks))
    return out


# -- timing hooks ------------------------------------------------------------------------------
def _timed(fn, name, times):
    @functools.wraps(fn)
    def wrapper(tape):
        t0 = time.perf_counter()
        out = fn(tape)
        times[name] = times.get(name, 0.0) + time.perf_counter() - t0
        return out
    return wrapper


@contextlib.contextmanager
def pass_timers(times):
    """Wrap each pass the compiler calls (it looks them up at trace time) with a timer."""
    saved = pipeline.PASSES
    pipeline.PASSES = tuple(dataclasses.replace(p, run=_timed(p.run, p.name, times))
                            for p in saved)
    try:
        yield
    finally:
        pipeline.PASSES = saved


def compile_once(name, size):
    """One fresh compile (no evaluation): {"trace", pass names..., "ops", "kernels"}."""
    f, args, kw = make(name, size)
    c = mx.compile(f, **kw)
    times = {}
    with pass_timers(times):
        t0 = time.perf_counter()
        out = c(*args)
        total = time.perf_counter() - t0
    st = c.stats()
    times["trace"] = total - sum(times.get(p, 0.0) for p in PASS_NAMES)
    times["ops"] = st["primitives_before_fusion"]
    times["kernels"] = st["fused_kernels"]
    del out
    return times


def build_once(name, size):
    """Kernel build seconds: the first evaluation minus a steady one (in this process)."""
    f, args, kw = make(name, size)
    c = mx.compile(f, **kw)
    out = c(*args)
    t0 = time.perf_counter()
    mx.eval(out)
    first = time.perf_counter() - t0
    steady = []
    for _ in range(3):
        out = c(*args)
        t0 = time.perf_counter()
        mx.eval(out)
        steady.append(time.perf_counter() - t0)
    return max(first - min(steady), 0.0)


def build_child(name, size, cache_dir):
    """build_once in a child process using `cache_dir` (no kernel in memory)."""
    env = dict(os.environ, BRAZE_CACHE_DIR=cache_dir)
    cmd = [sys.executable, os.path.abspath(__file__), "--child-build", f"{name}:{size}"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return float(res.stdout.strip().splitlines()[-1])


# -- the table ---------------------------------------------------------------------------------
def measure(name, size, args):
    runs = [compile_once(name, size) for _ in range(args.repeat)]
    rec = {"workload": name, "size": size, "repeat": args.repeat,
           "ops": runs[0]["ops"], "kernels": runs[0]["kernels"]}
    for key in ("trace",) + PASS_NAMES:
        rec[key] = statistics.median(r.get(key, 0.0) for r in runs)
    rec["passes"] = statistics.median(sum(r.get(p, 0.0) for p in PASS_NAMES) for r in runs)
    if args.build:
        with tempfile.TemporaryDirectory(prefix="braze-latency-") as d:
            rec["build_cold"] = build_child(name, size, d)
            rec["build_warm"] = build_child(name, size, d)
    return rec


def _row(rec, build):
    k = max(rec["ops"], 1) / 1000
    cols = [f"{rec['workload']:<11}", f"{rec['size']:>5}", f"{rec['ops']:>6}",
            f"{rec['kernels']:>5}", f"{rec['trace']:7.3f}"]
    cols += [f"{rec[p]:7.3f}" for p in PASS_NAMES]
    cols += [f"{rec['passes']:7.3f}", f"{rec['trace'] / k:7.3f}", f"{rec['passes'] / k:7.3f}"]
    if build:
        cols += [f"{rec['build_cold']:7.2f}", f"{rec['build_warm']:7.2f}"]
    return " ".join(cols)


def header(build):
    short = {"merge_scalar_constants": "consts", "remove_noops": "noops",
             "square_powers": "square", "decompose": "decomp", "online_softmax": "online",
             "chan_variance": "chan"}
    cols = [f"{'workload':<11}", f"{'size':>5}", f"{'ops':>6}", f"{'kern':>5}",
            f"{'trace':>7}"]
    cols += [f"{short.get(p, p)[:7]:>7}" for p in PASS_NAMES]
    cols += [f"{'passes':>7}", f"{'trace/k':>7}", f"{'pass/k':>7}"]
    if build:
        cols += [f"{'cold':>7}", f"{'warm':>7}"]
    return " ".join(cols)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--sizes", default="1000,2000,4000,8000", help="chain lengths")
    ap.add_argument("--layers", type=int, default=100, help="MLP depth")
    ap.add_argument("--blocks", type=int, default=8, help="transformer depth")
    ap.add_argument("--repeat", type=int, default=3, help="compiles per workload (median)")
    ap.add_argument("--no-build", dest="build", action="store_false",
                    help="skip the kernel build columns (no child processes)")
    ap.add_argument("--json", help="append JSON lines to this file")
    ap.add_argument("--child-build", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.workloads = [w for w in args.workloads.split(",") if w]
    bad = [w for w in args.workloads if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown workloads {bad}; choose from {WORKLOADS}")
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child_build:
        name, size = args.child_build.split(":")
        print(build_once(name, int(size)))
        return 0
    print(f"compile latency, seconds (median of {args.repeat}), backend "
          f"{config.get().backend}; /k: per 1000 ops; cold/warm: kernel build")
    print(header(args.build))
    for name, size in cases(args):
        rec = measure(name, size, args)
        print(_row(rec, args.build), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
