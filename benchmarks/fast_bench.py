"""mx.fast at LLM shapes: the native primitives against the composite graphs they replaced
(ops/fast.py's `_*_composite`), eager and compiled, and MLX's mx.fast on the same inputs.

    python benchmarks/fast_bench.py               # every op, the default shapes
    python benchmarks/fast_bench.py --ops sdpa --grad --repeat 5
    python benchmarks/fast_bench.py --ops sdpa --grad --sizes train,small --seqs prefill256

Shapes: `tiny` (d=64: B=1, 4 heads of 16, 2 kv heads), `small` (d=1024: 16 heads of 64, 4 kv
heads) and `train` (B=4, 8 heads of 64, 8 kv heads: a training step's batch, not in the
defaults); sequence shapes decode (Tq=1, Tkv=128 and 2048) and prefill (Tq=Tkv=128, causal;
prefill256, Tq=Tkv=256, not in the defaults).
rms_norm / layer_norm run on (B, T, d), rope on (B, heads, T, D) at offset Tkv - T. Times
are medians of `--repeat` rounds of `--number` calls (each call evaluated), in microseconds;
`--grad` adds the gradient of sum(out * c) with respect to every float input. The machine is
noisy: alternate runs before drawing conclusions.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import braze.core as bz
from braze._src.ops import fast as OF

try:
    import mlx.core as mlx
except Exception:  # pragma: no cover - MLX is optional
    mlx = None

SIZES = {"tiny": dict(d=64, heads=4, kv=2, D=16), "small": dict(d=1024, heads=16, kv=4, D=64),
         "train": dict(B=4, d=512, heads=8, kv=8, D=64)}
SEQS = {"decode128": (1, 128), "decode2048": (1, 2048), "prefill128": (128, 128),
        "prefill256": (256, 256)}
DEFAULT_SIZES, DEFAULT_SEQS = "tiny,small", "decode128,decode2048,prefill128"


def _time(fn, args, m, number, repeat):
    for _ in range(3):
        m.eval(fn(*args))
    rounds = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            m.eval(fn(*args))
        rounds.append((time.perf_counter() - t) / number)
    return statistics.median(rounds) * 1e6


def _cases(size, seq):
    s = SIZES[size]
    B = s.get("B", 1)
    Tq, Tk = SEQS[seq]
    r = np.random.default_rng(0)
    f32 = lambda *shape: r.standard_normal(shape).astype(np.float32)  # noqa: E731
    mask = "causal" if Tq > 1 else None
    sc = 1 / np.sqrt(s["D"])
    yield ("rms_norm", [f32(B, Tq, s["d"]), f32(s["d"])],
           lambda m: lambda x, w: m.fast.rms_norm(x, w, 1e-5),
           lambda x, w: OF._rms_norm_composite(x, w, 1e-5))
    yield ("layer_norm", [f32(B, Tq, s["d"]), f32(s["d"]), f32(s["d"])],
           lambda m: lambda x, w, b: m.fast.layer_norm(x, w, b, 1e-5),
           lambda x, w, b: OF._layer_norm_composite(x, w, b, 1e-5))
    yield ("rope", [f32(B, s["heads"], Tq, s["D"])],
           lambda m: lambda x: m.fast.rope(x, s["D"], traditional=False, base=10000.0,
                                           scale=1.0, offset=Tk - Tq),
           lambda x: OF._rope_composite(x, s["D"], traditional=False, base=10000.0, scale=1.0,
                                        offset=Tk - Tq))
    yield ("sdpa", [f32(B, s["heads"], Tq, s["D"]), f32(B, s["kv"], Tk, s["D"]),
                    f32(B, s["kv"], Tk, s["D"])],
           lambda m: lambda q, k, v: m.fast.scaled_dot_product_attention(q, k, v, scale=sc,
                                                                         mask=mask),
           lambda q, k, v: OF._sdpa_composite(q, k, v, scale=sc, mask=mask))


def _grad(m, fn, n, cot):
    c = m.array(cot)
    return m.grad(lambda *a: (fn(*a) * c).sum(), argnums=tuple(range(n)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", default="rms_norm,layer_norm,rope,sdpa")
    p.add_argument("--sizes", default=DEFAULT_SIZES)
    p.add_argument("--seqs", default=DEFAULT_SEQS)
    p.add_argument("--number", type=int, default=20)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--grad", action="store_true", help="also time the gradients")
    a = p.parse_args()
    ops = a.ops.split(",")
    head = ["op", "size", "seq", "eager native", "eager comp", "compiled native",
            "compiled comp", "mlx", "mlx compiled"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for size in a.sizes.split(","):
        for seq in a.seqs.split(","):
            for name, inputs, native, comp in _cases(size, seq):
                if name not in ops or (name != "sdpa" and seq == "decode2048"):
                    continue  # the norms and rope do not see Tkv
                kinds = ["", " grad"] if a.grad else [""]
                cot = np.random.default_rng(1).standard_normal(
                    native(bz)(*[bz.array(x) for x in inputs]).shape).astype(np.float32)
                for suffix in kinds:
                    bargs = [bz.array(x) for x in inputs]
                    n = len(inputs)
                    g = (lambda f: f) if not suffix else (lambda f: _grad(bz, f, n, cot))
                    row = [_time(g(native(bz)), bargs, bz, a.number, a.repeat),
                           _time(g(comp), bargs, bz, a.number, a.repeat),
                           _time(bz.compile(g(native(bz))), bargs, bz, a.number, a.repeat),
                           _time(bz.compile(g(comp)), bargs, bz, a.number, a.repeat)]
                    if mlx is not None:
                        margs = [mlx.array(x) for x in inputs]
                        gm = (lambda f: f) if not suffix else (lambda f: _grad(mlx, f, n, cot))
                        row += [_time(gm(native(mlx)), margs, mlx, a.number, a.repeat),
                                _time(mlx.compile(gm(native(mlx))), margs, mlx, a.number,
                                      a.repeat)]
                    else:
                        row += [float("nan")] * 2
                    print(f"| {name}{suffix} | {size} | {seq} | "
                          + " | ".join(f"{t:.0f}" for t in row) + " |", flush=True)


if __name__ == "__main__":
    main()
