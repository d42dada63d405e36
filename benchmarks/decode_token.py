"""Per-token cost of programs.py's llm-tiny greedy decode, split into building the token's graph
(the model call and argmax) and evaluating it (`mx.eval`), for braze, an older braze revision
(`--old REV`) and MLX, each round running every variant in turn in a fresh process.

Usage: python benchmarks/decode_token.py [--old REV] [--rounds N] [--tokens N] [--json F]

A decode step of a small model is ~100 tiny ops: what it measures is the per-op cost of the
eager path (Python op code, node construction, the scheduler, each primitive's NumPy or Numba
kernel), which `programs.py --quick` (16 tokens) is too noisy to resolve. Rounds alternate
the variants so a shared machine's drift falls on all of them; the table gives the median of
the rounds' per-token times and the best round.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from _revisions import rounds

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = 128


def worker(lib: str, tokens: int) -> dict:
    os.environ["BENCH_LIB"] = lib
    sys.path.insert(0, HERE)
    import _programs_mx as P
    import numpy as np
    mx = P.mx
    cfg = P.LLM_SIZES["tiny"]
    mx.random.seed(0)
    model = P.Llama(**cfg)
    mx.eval(model.parameters())
    prompt = mx.array(np.random.default_rng(0).integers(0, cfg["vocab"], PROMPT)
                      .astype(np.int32))

    def run(n):
        cache = [P.KVCache() for _ in model.layers]
        y = mx.argmax(model(prompt[None], cache)[:, -1, :], axis=-1)
        mx.eval(y)
        build = ev = 0.0
        for _ in range(n):
            t0 = time.perf_counter()
            y = mx.argmax(model(y[:, None], cache)[:, -1, :], axis=-1)
            t1 = time.perf_counter()
            mx.eval(y)
            build += t1 - t0
            ev += time.perf_counter() - t1
        return build / n, ev / n

    for _ in range(2):  # kernels built (background builds waited for), caches warm
        run(20)
        if lib == "braze":
            try:
                from braze._src.backends.cpu import background
            except ImportError:  # a revision without background builds
                continue
            background.wait(600)
    build, ev = run(tokens)
    return {"bench": "decode_token", "lib": lib, "build_s": build, "eval_s": ev,
            "module": mx.__file__}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", help="also run the braze package of this git revision")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=150, help="timed decode tokens per round")
    ap.add_argument("--json", help="append one JSON line per round and variant to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.tokens)))
        return 0
    names, records = rounds(__file__, args.old, args.rounds, ["--tokens", str(args.tokens)])
    recs = {name: [r for r in records if r["variant"] == name] for name in names}
    print(f"llm-tiny decode, µs per token: median of {args.rounds} rounds (best round)")
    print(f"{'variant':<22}{'total':>16}{'build':>10}{'eval':>10}")
    for name, rows in recs.items():
        if not rows:
            continue
        tot = [r["build_s"] + r["eval_s"] for r in rows]
        med = lambda k: statistics.median(r[k] for r in rows) * 1e6  # noqa: E731
        print(f"{name:<22}{statistics.median(tot) * 1e6:>9.0f} ({min(tot) * 1e6:>4.0f})"
              f"{med('build_s'):>10.0f}{med('eval_s'):>10.0f}")
    if args.json:
        with open(args.json, "a") as f:
            for rows in recs.values():
                for r in rows:
                    f.write(json.dumps(r) + "\n")
    return 0 if any(recs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
