"""The README demo's compiled training step (MLP on the 8x8 digits, AdamW, Dropout, batch 32),
timed with and without this session's two step-level features, in one run:

- `no_reduce_fusion`: reductions are not fused with their neighbours (MLX's fusion rules);
- `numpy_threefry`: RandomBits (the dropout mask) runs the NumPy Threefry instead of the cpu
  backend's Numba kernel.

    python benchmarks/demo_step.py [--steps 200] [--rounds 5] [--json out.jsonl]

Each configuration gets its own compiled step (same weights, same batches); configurations
alternate round by round and the median step time of each is printed with its ratio to the
first (baseline) row. BLAS is limited to one thread, as the demo does.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from functools import partial

# steady-state kernel speed and build latency: kernels are built in the call, not in the
# background while calls run on the numpy reference (BRAZE_BACKGROUND_BUILDS)
os.environ.setdefault("BRAZE_BACKGROUND_BUILDS", "0")
import braze.core as mx
import braze.nn as nn
import braze.optimizers as optim
from braze._src import config
from braze._src.prims import random as R
from braze.demo import MLP, limit_blas_threads, load_digits_split, loss_fn

CONFIGS = [  # (label, compile mode, use the Numba Threefry)
    ("MLX-style fusion, NumPy Threefry", "no_reduce_fusion", False),
    ("+ reduction fusion", "", False),
    ("+ Numba Threefry (default)", "", True),
]


def make_step(mode):
    mx.random.seed(0)
    model = MLP()
    mx.eval(model.parameters())
    opt = optim.AdamW(learning_rate=1e-3, weight_decay=1e-4)
    opt.init(model.trainable_parameters())
    loss_and_grad = nn.value_and_grad(model, loss_fn)

    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        opt.update(model, grads)
        return loss

    state = [model.state, opt.state, mx.random.state]
    with config.override(compile_mode=mode):
        compiled = partial(mx.compile, inputs=state, outputs=state)(step)
        compiled(mx.zeros((32, 64)), mx.zeros((32,), mx.int32))  # trace under this mode
    return compiled, state


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    x_train, y_train, _, _ = load_digits_split(0)
    batches = [(mx.array(x_train[i:i + 32]), mx.array(y_train[i:i + 32]))
               for i in range(0, len(x_train) - 32, 32)]
    import braze._src.backends as backends
    native = None
    with limit_blas_threads(1):
        backends.get("cpu")  # builds the cpu backend, which installs the Numba Threefry
        native = R._THREEFRY[0]
        steps = [make_step(mode) for _, mode, _ in CONFIGS]
        times = [[] for _ in CONFIGS]
        for _ in range(args.rounds):
            for k, ((label, mode, numba_rng), (fn, state)) in enumerate(zip(CONFIGS, steps)):
                R.set_threefry(native if numba_rng else R.threefry2x32)
                with config.override(compile_mode=mode):
                    for x, y in batches[:5]:  # warm
                        mx.eval(fn(x, y), state)
                    t0 = time.perf_counter()
                    for i in range(args.steps):
                        x, y = batches[i % len(batches)]
                        mx.eval(fn(x, y), state)
                    times[k].append((time.perf_counter() - t0) / args.steps)
        R.set_threefry(native)
    base = statistics.median(times[0])
    print(f"demo training step (MLP, batch 32), median of {args.rounds} rounds x "
          f"{args.steps} steps")
    for (label, mode, numba_rng), ts, (fn, _) in zip(CONFIGS, times, steps):
        med = statistics.median(ts)
        st = fn.stats()
        print(f"  {label:36s} {med * 1e3:7.3f} ms  x{med / base:5.2f}   "
              f"{st['primitives_after_fusion']} nodes, {st['row_kernels']} row kernels")
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps({"config": label, "median_s": med, "samples": ts,
                                    "nodes": st["primitives_after_fusion"],
                                    "row_kernels": st["row_kernels"]}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
