"""How long `import braze.core` takes in a fresh interpreter (issue 15's target: 0.3 s), and a
first compiled call and a first random draw with a warm kernel cache.

    python benchmarks/cold_start.py                       # 11 fresh processes per statement
    python benchmarks/cold_start.py --repeat 21 --json out.json
    PYTHONPATH=/path/to/other/tree python benchmarks/cold_start.py   # another checkout

Each statement runs in `--repeat` fresh processes; the table gives the median and the spread
of the wall time (process start to exit), of `python -c pass` (the interpreter alone) and
the difference, plus the modules the statement left in `sys.modules` that the issue wants
imported only when used (numba, llvmlite, ml_dtypes, scipy, mpi4py). Bytecode is cached in a
private directory (PYTHONPYCACHEPREFIX) and every statement runs once before timing, so the
numbers are those of an installed package, not of compiling its sources.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

STATEMENTS = ["import numpy", "import braze.core",
              "import braze.core, braze.nn, braze.optimizers",
              # what a program's start pays with a warm kernel cache (the warm-up run builds):
              # Numba and a kernel loaded from the disk cache; an initialiser's normal draw
              "import braze.core as mx; mx.eval(mx.compile(lambda x: x * 2 + 1)(mx.ones(8)))",
              "import braze.core as mx; mx.eval(mx.random.normal((8,)))"]
HEAVY = ("numba", "llvmlite", "ml_dtypes", "scipy", "mpi4py")


def _env(prefix: str) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = prefix
    return env


def _wall(code: str, env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return time.perf_counter() - t0


def _heavy(code: str, env: dict) -> list:
    probe = code + f"\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.split()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=11, help="fresh processes per statement")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="braze-pyc-") as prefix:
        env = _env(prefix)
        for code in ["pass"] + STATEMENTS:  # warm the bytecode cache
            _wall(code, env)
        results = {}
        for code in ["pass"] + STATEMENTS:
            # interleaved with `pass` so that a load change on the machine hits both
            pairs = [(_wall(code, env), _wall("pass", env)) for _ in range(args.repeat)]
            walls = [w for w, _ in pairs]
            results[code] = {
                "median_s": statistics.median(walls),
                "min_s": min(walls), "max_s": max(walls),
                "over_python_s": statistics.median(w - p for w, p in pairs),
                "heavy_modules": _heavy(code, env) if code != "pass" else [],
            }
    print(f"{'statement':78s} {'median':>8s} {'min':>7s} {'max':>7s} {'- python':>9s}  heavy")
    for code, r in results.items():
        print(f"{code:78s} {r['median_s'] * 1e3:6.0f}ms {r['min_s'] * 1e3:5.0f}ms "
              f"{r['max_s'] * 1e3:5.0f}ms {r['over_python_s'] * 1e3:7.0f}ms  "
              f"{' '.join(r['heavy_modules']) or '-'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return results


if __name__ == "__main__":
    main()
