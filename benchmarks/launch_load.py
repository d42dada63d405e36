"""Kernel launches on a busy machine: a few real workloads timed quiet and with one core kept
busy by a spinning process (started here, pinned to the last core this process may use).

    python benchmarks/launch_load.py [--rounds 3] [--only chain,softmax] [--json out.jsonl]

Workloads: the Transformer LM training step of examples/transformer_lm.py (synthetic tokens,
2 layers x 128 dims, batch 32, context 64), the README demo's MLP training step, a 10-op
elementwise chain on 16 Mi float32, a softmax over 4096 x 4096 float32 and 4 Mi uniform
random numbers (Threefry). BLAS is limited to one thread, as the demo and the example do.
Quiet and busy phases alternate round by round; each prints the
median time per call of every phase and the busy / quiet ratio (the launcher's target: at
most 1.3 for every workload). Other jobs on the machine skew both columns: the load average
is printed at the start.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from functools import partial

import numpy as np

# steady-state kernel speed and build latency: kernels are built in the call, not in the
# background while calls run on the numpy reference (BRAZE_BACKGROUND_BUILDS)
os.environ.setdefault("BRAZE_BACKGROUND_BUILDS", "0")
import braze.core as mx
import braze.nn as nn
import braze.optimizers as optim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def transformer_step():
    from transformer_lm import TransformerLM, loss_fn
    mx.random.seed(0)
    model = TransformerLM(64, 128, 4, 2, 0.1)
    optimizer = optim.AdamW(learning_rate=3e-3, weight_decay=0.01)
    optimizer.init(model.trainable_parameters())
    mx.eval(model.parameters())
    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(inputs, targets):
        loss, grads = loss_and_grad(model, inputs, targets)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        optimizer.update(model, grads)
        return loss

    tokens = np.random.default_rng(0).integers(0, 64, (32, 65)).astype(np.int32)
    x, y = mx.array(tokens[:, :-1]), mx.array(tokens[:, 1:])
    return lambda: mx.eval(step(x, y), state)


def demo_step():
    from braze.demo import MLP, load_digits_split
    from braze.demo import loss_fn as demo_loss
    mx.random.seed(0)
    model = MLP()
    mx.eval(model.parameters())
    optimizer = optim.AdamW(learning_rate=1e-3)
    loss_and_grad = nn.value_and_grad(model, demo_loss)
    state = [model.state, optimizer.state, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        optimizer.update(model, grads)
        return loss

    xtr, ytr, _, _ = load_digits_split()
    x, y = mx.array(xtr[:32]), mx.array(ytr[:32])
    return lambda: mx.eval(step(x, y), state)


def chain():
    def f(v):
        for k in range(10):
            v = v * 1.0001 + 0.5 if k % 2 else v - 0.25
        return v
    g = mx.compile(f)
    x = mx.array(np.random.default_rng(0).standard_normal(1 << 24).astype(np.float32))
    return lambda: mx.eval(g(x))


def softmax():
    g = mx.compile(lambda v: mx.softmax(v, axis=-1))
    x = mx.array(np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32))
    return lambda: mx.eval(g(x))


def uniform():
    key = mx.random.key(0)
    return lambda: mx.eval(mx.random.uniform(shape=(1 << 22,), key=key))


WORKLOADS = {"transformer": (transformer_step, 20), "demo": (demo_step, 100),
             "chain": (chain, 20), "softmax": (softmax, 10), "uniform": (uniform, 20)}


def timed(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return ts


def spinner():
    core = max(os.sched_getaffinity(0))
    return subprocess.Popen([sys.executable, "-c", SPIN, str(core)])


def measure(fn, reps, rounds):
    """Median seconds per call quiet and busy, phases alternating `rounds` times."""
    fn(), fn()  # warm: kernels built or loaded, buffers cached
    quiet, busy = [], []
    for _ in range(rounds):
        quiet += timed(fn, reps)
        sp = spinner()
        try:
            time.sleep(0.05)  # the spinner is running
            busy += timed(fn, reps)
        finally:
            sp.kill()
            sp.wait()
    return statistics.median(quiet), statistics.median(busy)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--json", help="append JSON lines to this file")
    args = ap.parse_args(argv)
    print(f"launch_load  cores: {len(os.sched_getaffinity(0))}  "
          f"load average at start: {[round(v, 2) for v in os.getloadavg()]}")
    print(f"{'workload':12s} {'quiet':>10s} {'1 core busy':>12s} {'ratio':>6s}")
    from braze.demo import limit_blas_threads
    with limit_blas_threads(1):
        for name in args.only.split(","):
            make, reps = WORKLOADS[name]
            q, b = measure(make(), reps, args.rounds)
            print(f"{name:12s} {q * 1e3:8.2f}ms {b * 1e3:10.2f}ms {b / q:6.2f}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"workload": name, "quiet_s": q, "busy_s": b}) + "\n")


if __name__ == "__main__":
    main()
