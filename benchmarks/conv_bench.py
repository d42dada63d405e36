"""Convolution speed: braze (this checkout), an older braze checkout and MLX, side by side.

Each shape is timed forward (`y = conv(x, w)`) and forward + backward (`mx.vjp` with a fixed
random cotangent: y, dx and dw), float32, channels last: the fastest of `--repeat` runs after
one warm-up (on a shared machine the minimum is the stablest estimate of a kernel's own cost).
Every library runs in its own subprocess (two braze versions cannot share one process), shape by
shape in turn, so load that drifts during the run touches all of them alike.

    python benchmarks/conv_bench.py                               # this checkout and MLX
    python benchmarks/conv_bench.py --old /tmp/conv_old           # also an older checkout
    python benchmarks/conv_bench.py --new /tmp/conv_new --old /tmp/conv_old   # two snapshots
    python benchmarks/conv_bench.py --only resnet3x3,conv1d --repeat 5 --json out.jsonl
    python benchmarks/conv_bench.py --threads 1 --cpu-time   # one core's work, robust to load
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

# name: (op, x shape, w shape, keyword arguments)
SHAPES = {
    "resnet3x3": ("conv2d", (32, 32, 32, 64), (64, 3, 3, 64), dict(padding=1)),
    "1x1": ("conv2d", (32, 32, 32, 64), (256, 1, 1, 64), {}),
    "strided3x3": ("conv2d", (32, 32, 32, 64), (128, 3, 3, 64), dict(stride=2, padding=1)),
    "depthwise3x3": ("conv2d", (32, 32, 32, 64), (64, 3, 3, 1), dict(padding=1, groups=64)),
    "grouped3x3": ("conv2d", (32, 32, 32, 64), (64, 3, 3, 16), dict(padding=1, groups=4)),
    "conv1d": ("conv1d", (8, 1024, 256), (256, 3, 256), dict(padding=1)),
    "transpose2d": ("conv_transpose2d", (32, 16, 16, 64), (32, 4, 4, 64),
                    dict(stride=2, padding=1)),
}


def _inputs(name):
    op, xs, ws, kw = SHAPES[name]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal(ws, dtype=np.float32) * 0.1
    return op, x, w, kw


def _best_time(fn, repeat, clock):
    fn()  # warm-up (allocations, BLAS threads, first-call costs)
    times = []
    for _ in range(repeat):
        t = clock()
        fn()
        times.append(clock() - t)
    return min(times)


def worker(lib, names, repeat, clock):
    """Time every shape with one library (`braze` from sys.path, or `mlx`); JSON lines out."""
    mx = __import__("mlx.core" if lib == "mlx" else "braze.core", fromlist=["core"])
    for name in names:
        op, x, w, kw = _inputs(name)
        f = getattr(mx, op)
        xa, wa = mx.array(x), mx.array(w)
        y = f(xa, wa, **kw)
        mx.eval(y)
        ct = mx.array(np.random.default_rng(1).standard_normal(y.shape, dtype=np.float32))

        def fwd():
            mx.eval(f(xa, wa, **kw))

        def fwd_bwd():
            outs, grads = mx.vjp(lambda a, b: f(a, b, **kw), [xa, wa], [ct])
            mx.eval(outs, grads)

        print(json.dumps(dict(lib=lib, shape=name, fwd=_best_time(fwd, repeat, clock),
                              fwd_bwd=_best_time(fwd_bwd, repeat, clock))), flush=True)


def _run(label, lib, path, names, a):
    env = dict(os.environ)
    if a.threads:
        n = str(a.threads)
        env.update(OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n)
    if path:
        env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, __file__, "--worker", lib, "--only", ",".join(names),
           "--repeat", str(a.repeat)] + (["--cpu-time"] if a.cpu_time else [])
    print(f"... {label}: {','.join(names)}", file=sys.stderr, flush=True)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode:
        print(f"{label} failed:\n{res.stderr[-2000:]}", file=sys.stderr)
        return {}
    return {r["shape"]: r for r in map(json.loads, res.stdout.splitlines())}


def _table(results, names):
    labels = list(results)
    ref = "braze" if "braze" in results else labels[0]
    others = [lab for lab in labels if lab != ref]
    head = f"{'shape':<14}{'pass':<9}" + "".join(f"{lab + ' ms':>13}" for lab in labels)
    head += "".join(f"{lab + '/' + ref:>15}" for lab in others)
    print(head)
    for name in names:
        for kind in ("fwd", "fwd_bwd"):
            row = f"{name:<14}{kind:<9}"
            vals = {lab: results[lab].get(name, {}).get(kind) for lab in labels}
            row += "".join(f"{v * 1e3:13.2f}" if v else f"{'-':>13}" for v in vals.values())
            for lab in others:
                r = vals[lab] / vals[ref] if vals[lab] and vals[ref] else None
                row += f"{r:15.2f}" if r else f"{'-':>15}"
            print(row)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", help="path of an older braze checkout to time beside this one")
    p.add_argument("--new", help="path of the braze checkout timed as 'braze' (default: the "
                   "one holding this script)")
    p.add_argument("--only", default=",".join(SHAPES), help="comma list of shapes")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", help="append one record per library and shape to this file")
    p.add_argument("--no-mlx", action="store_true")
    p.add_argument("--threads", type=int, help="BLAS/OpenMP threads of every library")
    p.add_argument("--cpu-time", action="store_true",
                   help="time the process's CPU seconds (all threads) instead of wall time")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args()
    names = a.only.split(",")
    if a.worker:
        return worker(a.worker, names, a.repeat,
                      time.process_time if a.cpu_time else time.perf_counter)
    here = a.new or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = [("braze", "braze", here)] + ([("old", "braze", a.old)] if a.old else [])
    runs += [] if a.no_mlx else [("mlx", "mlx", None)]
    results = {label: {} for label, _, _ in runs}
    for name in names:
        for label, lib, path in runs:
            results[label].update(_run(label, lib, path, [name], a))
    results = {k: v for k, v in results.items() if v}
    _table(results, names)
    if a.json:
        with open(a.json, "a") as fh:
            for lab, rows in results.items():
                for r in rows.values():
                    fh.write(json.dumps(dict(r, label=lab)) + "\n")


if __name__ == "__main__":
    main()
