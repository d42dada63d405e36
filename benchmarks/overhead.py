"""Per-op overhead of building and evaluating a 10-op elementwise chain, beside NumPy.

Usage: python benchmarks/overhead.py [--json out.jsonl]
Prints µs per op for 1-element and 4096-element float32 inputs and the ratio to NumPy.
"""
import argparse
import json
import time

import numpy as np

import braze.core as mx

OPS = 10


def chain(xp, x, y):
    """10 elementwise ops mixing binary array ops, unary math and Python scalars; xp is np or mx."""
    z = x + y
    z = z * x
    z = z - y
    z = xp.exp(z)
    z = z * 0.5
    z = z + x
    z = xp.maximum(z, y)
    z = z / 3.0
    z = -z
    z = z * z
    return z


def bench(fn, repeat=7, number=2000):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", help="append JSON lines to this file")
    args = ap.parse_args()
    rows = []
    for n in (1, 4096):
        xn = np.random.default_rng(0).random(n, dtype=np.float32)
        yn = np.random.default_rng(1).random(n, dtype=np.float32)
        xm, ym = mx.array(xn), mx.array(yn)
        t_np = bench(lambda: chain(np, xn, yn)) / OPS
        t_bz = bench(lambda: mx.eval(chain(mx, xm, ym))) / OPS
        rows.append({"bench": "overhead", "elements": n, "numpy_us_per_op": t_np * 1e6,
                     "braze_us_per_op": t_bz * 1e6, "ratio": t_bz / t_np})
    print(f"{'elements':>9} {'numpy µs/op':>12} {'braze µs/op':>12} {'ratio':>7}")
    for r in rows:
        print(f"{r['elements']:>9} {r['numpy_us_per_op']:>12.2f} {r['braze_us_per_op']:>12.2f} "
              f"{r['ratio']:>7.2f}")
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
