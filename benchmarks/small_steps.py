"""Compiled training steps of small models, where per-node costs rather than FLOPs decide:
braze, an older braze revision (`--old REV`) and MLX side by side, each round running every
variant in turn in a fresh process.

Usage: python benchmarks/small_steps.py [--old REV] [--rounds N] [--steps N] [--json F]

Programs (float32, Adam, `mx.compile(step, inputs=state, outputs=state)` with the random state
in it, as MLX's examples write them):

- `gcn`: a 3-layer graph convolution (64 nodes, 32 -> 16 -> 16 -> 7 features, dense
  normalized adjacency), ReLU and dropout between layers, cross-entropy over 40 labelled
  nodes plus an L2 penalty on every parameter (mlx-examples' gcn shape);
- `convbn`: two 3x3 convolutions (stride 1 then 2, 1 -> 8 -> 16 channels) each followed by
  BatchNorm and ReLU on a batch of 4 32x32 images, global average pooling, a linear head,
  cross-entropy (the small vision steps of mlx-examples' cvae / mnist kind).

The table gives the median of the rounds' microseconds per step (and the best round).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial

PROGRAMS = ("gcn", "convbn")


def _libs(lib):
    if lib == "mlx":
        import mlx.core as mx
        import mlx.nn as nn
        import mlx.optimizers as optim
    else:
        import braze.core as mx
        import braze.nn as nn
        import braze.optimizers as optim
    return mx, nn, optim


def _gcn(mx, nn, np):
    class Graph(nn.Module):
        def __init__(self, sizes):
            super().__init__()
            self.layers = [nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
            self.drop = nn.Dropout(0.5)

        def __call__(self, x, adj):
            for i, layer in enumerate(self.layers):
                x = adj @ layer(x)
                if i < len(self.layers) - 1:
                    x = self.drop(nn.relu(x))
            return x

    rng = np.random.RandomState(0)
    n = 64
    a = rng.rand(n, n) < 0.1
    a = (a | a.T | np.eye(n, dtype=bool)).astype(np.float32)
    data = (mx.array(rng.randn(n, 32).astype(np.float32)),
            mx.array(a / a.sum(1, keepdims=True)),
            mx.array(rng.randint(0, 7, n).astype(np.int32)), mx.arange(40))
    model = Graph([32, 16, 16, 7])

    def loss(model, x, adj, y, train):
        out = model(x, adj)[train]
        ce = mx.mean(nn.losses.cross_entropy(out, y[train]))
        from_params = [p for _, p in _leaves(model.parameters())]
        return ce + 5e-4 * mx.sqrt(sum(mx.sum(p ** 2) for p in from_params))

    return model, loss, data


def _convbn(mx, nn, np):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.n1 = nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm(8)
            self.c2, self.n2 = nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm(16)
            self.head = nn.Linear(16, 10)

        def __call__(self, x):
            x = nn.relu(self.n1(self.c1(x)))
            x = nn.relu(self.n2(self.c2(x)))
            return self.head(mx.mean(x, axis=(1, 2)))

    rng = np.random.RandomState(1)
    data = (mx.array(rng.rand(4, 32, 32, 1).astype(np.float32)),
            mx.array(rng.randint(0, 10, 4).astype(np.int32)))
    model = Net()

    def loss(model, x, y):
        return mx.mean(nn.losses.cross_entropy(model(x), y))

    return model, loss, data


def _leaves(tree, prefix=""):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _leaves(v, f"{prefix}{k}.")
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            yield from _leaves(v, f"{prefix}{i}.")
    else:
        yield prefix, tree


def worker(lib: str, program: str, steps: int) -> dict:
    import numpy as np
    mx, nn, optim = _libs(lib)
    mx.random.seed(0)
    model, loss, data = {"gcn": _gcn, "convbn": _convbn}[program](mx, nn, np)
    mx.eval(model.parameters())
    opt = optim.Adam(learning_rate=1e-2)
    state = [model.state, opt.state, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(*data):
        value, grads = nn.value_and_grad(model, loss)(model, *data)
        opt.update(model, grads)
        return value

    model.train()
    for _ in range(2):  # kernels built (background builds waited for), caches warm
        for _ in range(20):
            step(*data)
            mx.eval(state)
        if lib == "braze":
            try:
                from braze._src.backends.cpu import background
            except ImportError:  # a revision without background builds
                continue
            background.wait(600)
    t0 = time.perf_counter()
    for _ in range(steps):
        step(*data)
        mx.eval(state)
    return {"bench": "small_steps", "program": program, "lib": lib,
            "step_s": (time.perf_counter() - t0) / steps, "module": mx.__file__}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", help="also run the braze package of this git revision")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200, help="timed steps per round")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--json", help="append one JSON line per round, program and variant")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        for program in args.worker[1].split(","):
            print(json.dumps(worker(args.worker[0], program, args.steps)))
        return 0
    from _revisions import rounds  # beside this script

    names, records = rounds(__file__, args.old, args.rounds,
                            [args.programs, "--steps", str(args.steps)])
    print(f"compiled training steps, µs per step: median of {args.rounds} rounds (best round)")
    print(f"{'program':<10}" + "".join(f"{n:>22}" for n in names))
    for program in args.programs.split(","):
        cells = []
        for name in names:
            t = [r["step_s"] * 1e6 for r in records
                 if r["variant"] == name and r["program"] == program]
            cells.append(f"{statistics.median(t):>13.0f} ({min(t):>5.0f})" if t else
                         f"{'—':>22}")
        print(f"{program:<10}" + "".join(f"{c:>22}" for c in cells))
    if args.json:
        with open(args.json, "a") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    return 0 if records else 1


if __name__ == "__main__":
    sys.exit(main())
