"""Per-token cost of a KV-cache decode step at context 128 and 2048: braze, an older braze
revision and MLX side by side in one run.

Usage: python benchmarks/kv_cache.py [--old REV] [--rounds N] [--steps N] [--json out.jsonl]

A step writes one token into a key and a value cache of shape (1, 8, capacity, 64) float32
(`cache[..., t:t+1, :] = k`, or a compiled `mx.slice_update` with the position as an array)
and, in the "step" column, attends over the filled part (softmax(q kᵀ/√d) v, one query).
When an update writes into the cache's own buffer the "update" column is flat in the
context; when it copies the cache it grows with it. `--old REV` also runs the braze package
of git revision REV (extracted with `git archive` into a temporary directory, put first on
PYTHONPATH). Each variant runs in its own process; rounds alternate the variants, and each
cell is the smallest of the rounds' medians.
"""
import argparse
import json
import os
import statistics
import sys
import time

from _revisions import rounds

# steady-state per-token cost: kernels are built in the call, not in the background while
# calls run on the numpy reference (BRAZE_BACKGROUND_BUILDS; the variants' processes inherit it)
os.environ.setdefault("BRAZE_BACKGROUND_BUILDS", "0")

H, D = 8, 64
CONTEXTS = (128, 2048)
MODES = ("eager", "compiled")
WARMUP = 8


def _decode(mx, context, mode, attend, steps):
    """Median seconds per decode step after WARMUP steps."""
    n = WARMUP + steps
    cap = context + n
    kc, vc = mx.zeros((1, H, cap, D)), mx.zeros((1, H, cap, D))
    kc[..., :context, :] = mx.random.normal((1, H, context, D))
    vc[..., :context, :] = mx.random.normal((1, H, context, D))
    q = mx.random.normal((1, H, 1, D))
    new = [(mx.random.normal((1, H, 1, D)), mx.random.normal((1, H, 1, D))) for _ in range(n)]
    update = mx.compile(lambda kc, vc, k, v, t: (mx.slice_update(kc, k, t, axes=(2,)),
                                                 mx.slice_update(vc, v, t, axes=(2,))))
    mx.eval(kc, vc, q, new)
    times = []
    for i in range(n):
        t = context + i
        k, v = new[i]
        t0 = time.perf_counter()
        if mode == "compiled":
            kc, vc = update(kc, vc, k, v, mx.array([t]))
        else:
            kc[..., t:t + 1, :] = k
            vc[..., t:t + 1, :] = v
        if attend:
            keys, values = kc[..., :t + 1, :], vc[..., :t + 1, :]
            w = mx.softmax((q @ keys.swapaxes(-1, -2)) * (D ** -0.5), axis=-1)
            out = w @ values
            mx.eval(out, kc, vc)
        else:
            mx.eval(kc, vc)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[WARMUP:])


def worker(variant, steps):
    """Time every cell in this process, one JSON line each."""
    if variant == "mlx":
        import mlx.core as mx
        where = mx.__file__
    else:
        import braze
        import braze.core as mx
        where = braze.__file__
    for mode in MODES:
        for context in CONTEXTS:
            rec = {"bench": "kv_cache", "variant": variant, "mode": mode, "context": context,
                   "update_s": _decode(mx, context, mode, False, steps),
                   "step_s": _decode(mx, context, mode, True, steps), "module": where}
            print(json.dumps(rec), flush=True)


def _best(records):
    """The smallest of the rounds' medians per (variant, mode, context)."""
    best = {}
    for r in records:
        key = (r["variant"], r["mode"], r["context"])
        b = best.setdefault(key, dict(r))
        b["update_s"] = min(b["update_s"], r["update_s"])
        b["step_s"] = min(b["step_s"], r["step_s"])
    return best


def _table(best, names):
    lo, hi = CONTEXTS
    print(f"µs per token (median of a round, best of rounds); ratio = context {hi} / {lo}")
    print(f"{'variant':<22}{'mode':<10}" + "".join(
        f"{f'update@{c}':>12}" for c in CONTEXTS) + f"{'ratio':>7}" + "".join(
        f"{f'step@{c}':>12}" for c in CONTEXTS) + f"{'ratio':>7}")
    for name in names:
        for mode in MODES:
            cells = [best.get((name, mode, c)) for c in CONTEXTS]
            if None in cells:
                continue
            line = f"{name:<22}{mode:<10}"
            for col in ("update_s", "step_s"):
                line += "".join(f"{c[col] * 1e6:>12.1f}" for c in cells)
                line += f"{cells[1][col] / cells[0][col]:>7.2f}"
            print(line)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", help="also run the braze package of this git revision")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=64, help="timed decode steps per cell")
    ap.add_argument("--json", help="append one JSON line per cell to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.steps)
        return 0
    names, records = rounds(__file__, args.old, args.rounds, ["--steps", str(args.steps)])
    best = _best(records)
    _table(best, names)
    if args.json:
        with open(args.json, "a") as f:
            for rec in best.values():
                f.write(json.dumps(rec) + "\n")
    return 0 if records else 1


if __name__ == "__main__":
    sys.exit(main())
