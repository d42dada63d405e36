"""Realistic programs on braze, MLX and PyTorch, side by side: training steps and LLM inference,
cold and warm, on a quiet machine and with one core kept busy.

    python benchmarks/programs.py                         # everything (a long run)
    python benchmarks/programs.py --quick                 # short runs, a smoke check
    python benchmarks/programs.py --programs mlp,llm --sizes tiny --libs braze,mlx
    python benchmarks/programs.py --conditions warm,busy --json out.jsonl --plot ratios.png

Programs (written once against MLX's API in `_programs_mx.py`, run on braze or MLX by the
import; the PyTorch versions in `_programs_torch.py`): `mlp` (784-512-512-10 ReLU MLP, batch
256, SGD with momentum), `cnn` (a CIFAR ResNet with one basic block per stage, 16/32/64
channels, BatchNorm, batch 32 at 32x32, Adam), `transformer` (examples/transformer_lm.py:
2 layers x 128 dims x 4 heads, context 64, batch 32, AdamW, gradient clipping, dropout), `flow`
(RealNVP, 6 affine coupling layers of 4 x 128 GELU MLPs on 2-D two moons, batch 256, Adam) --
each one compiled training step with `mx.compile(step, inputs=state, outputs=state)` -- and
`llm`, a Llama-style decoder (RoPE, GQA, RMSNorm, SwiGLU, mlx-lm's KV cache, random weights)
that prefills 128 tokens and then greedily decodes 128, at `--sizes tiny` (d=64, 2 layers,
4 heads / 2 KV heads, vocab 1024) and `small` (d=1024, 8 layers, 16 / 4 heads, SwiGLU 2816,
vocab 32000, 155 M parameters).

Libraries (`--libs`): `braze`, `mlx`, and when installed `torch` (eager) and `torch.c`
(`torch.compile(model)`). Conditions (`--conditions`):
- `warm`: steady state: warm-up units, then the median of timed units (≥ `--min-time` seconds).
  braze uses the environment's kernel cache (BRAZE_CACHE_DIR or ~/.cache/braze).
- `cold`: a fresh process with an empty kernel cache (a new BRAZE_CACHE_DIR; torch.compile gets
  a new TORCHINDUCTOR_CACHE_DIR; MLX keeps the shared libraries its CPU backend compiles for
  `mx.compile` in `$TMPDIR/mlx/<version>/cpu`, so every cell gets a new TMPDIR): the
  rate over the first `--cold-steps` training steps, or the first prefill + decode, compiles and
  kernel builds included. braze's modules are byte-compiled first, as `pip install` does (with
  PYTHONDONTWRITEBYTECODE set an editable checkout has no .pyc files otherwise).
- `busy`: as `warm`, while a spinning process (started and stopped by the worker around its
  timed units) keeps the last core of this process's affinity busy.
Every (library, program, condition) runs in its own child process. Rates are steps/s
(training) or tokens/s (prefill, decode); `bz/mlx` is braze's rate ÷ MLX's; `busy/quiet` is
braze's warm rate ÷ its busy rate (the slowdown). The targets of issue 15 are judged at the end.
Other processes skew everything on a small machine: the load average is printed at the start
and at the end. See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAMS = ("mlp", "cnn", "transformer", "llm", "flow")
SIZES = ("tiny", "small")
LIBS = ("braze", "mlx", "torch", "torch.c")
CONDITIONS = ("warm", "cold", "busy")
SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


# -- the worker (one child process per cell) --------------------------------------------------
def _spinner():
    core = max(os.sched_getaffinity(0))
    return subprocess.Popen([sys.executable, "-c", SPIN, str(core)])


def _blas_limit(n):
    if n <= 0:
        return None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=n, user_api="blas")


def worker(job: dict) -> dict:
    """Build one program on one library and time it under one condition."""
    quick, cond = job["quick"], job["condition"]
    rec = dict(job, kind="result", status="ok")
    t0 = time.perf_counter()
    if job["lib"] in ("torch", "torch.c"):
        import _programs_torch as lib
    else:
        import _programs_mx as lib
    rec["import_s"] = time.perf_counter() - t0
    _blas_limit(job["blas_threads"])  # applies for the rest of the process
    t0 = time.perf_counter()
    prog = lib.make(job["program"], job["size"], job["dtype"], quick)
    rec["setup_s"] = time.perf_counter() - t0
    train = prog.phases == ("step",)
    units = []
    if cond == "cold":
        n = job["cold_steps"] if train else 1
        t0 = time.perf_counter()
        for _ in range(n):
            units.append(prog.unit())
        rec["first_unit_s"] = sum(units[0].values())
        rec["cold_s"] = time.perf_counter() - t0
        per = {ph: sum(u[ph] for u in units) / n for ph in prog.phases}
    else:
        warm = 3 if train else 1  # the first steps trace (optimizer state appears) and build
        t0 = time.perf_counter()
        for _ in range(warm):
            prog.unit()
        for _ in range(5):  # until a unit finds every kernel it needs built
            _kernels_built(job["lib"])
            prog.unit()
            if _kernels_built(job["lib"]):
                break
        rec["warmup_s"] = time.perf_counter() - t0
        spinner = _spinner() if cond == "busy" else None
        try:
            if spinner is not None:
                time.sleep(0.05)  # the spinner is running
            t0 = time.perf_counter()
            min_reps = (2 if quick else 5) if train else (1 if quick else 2)
            while len(units) < min_reps or time.perf_counter() - t0 < job["min_time"]:
                units.append(prog.unit())
                if len(units) >= 10000:
                    break
        finally:
            if spinner is not None:
                spinner.kill()
                spinner.wait()
        per = {ph: statistics.median(u[ph] for u in units) for ph in prog.phases}
    rec["samples"] = len(units)
    rec["phases"] = {ph: {"median_s": per[ph], "rate": prog.per_unit[ph] / per[ph],
                          "per_unit": prog.per_unit[ph]} for ph in prog.phases}
    rec["version"] = _version(job["lib"])
    return rec


def _kernels_built(lib) -> bool:
    """Wait for braze's background kernel builds (BRAZE_BACKGROUND_BUILDS): warm times are
    those of native kernels, not of launches that ran on the reference while they built.
    Returns whether nothing was being built."""
    if not lib.startswith("braze"):
        return True
    try:
        from braze._src.backends.cpu import background
    except ImportError:  # a revision without background builds
        return True
    idle = background.idle()
    background.wait(600)
    return idle


def _version(lib):
    try:
        if lib.startswith("torch"):
            import torch
            return torch.__version__
        if lib == "mlx":
            import mlx.core
            return mlx.core.__version__
        import braze
        return braze.__version__
    except Exception:  # pragma: no cover
        return ""


def _worker_main(spec: str) -> int:
    job = json.loads(spec)
    try:
        rec = worker(job)
    except Exception as e:  # the parent shows "error: ..." in the cell
        import traceback
        traceback.print_exc()
        msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        rec = dict(job, kind="result", status="error", error=msg)
    print("RESULT " + json.dumps(rec), flush=True)
    return 0


# -- the parent -------------------------------------------------------------------------------
def available_libs(wanted):
    out, missing = [], []
    for lib in wanted:
        mod = {"braze": "braze", "mlx": "mlx.core", "torch": "torch", "torch.c": "torch"}[lib]
        try:
            __import__(mod)
            out.append(lib)
        except ImportError:
            missing.append(lib)
    return out, missing


def run_cell(job, timeout, tmp):
    env = dict(os.environ)
    # the caller's PYTHONPATH first: it may name another braze (a snapshot of a revision)
    env["PYTHONPATH"] = os.pathsep.join([p for p in [env.get("PYTHONPATH")] if p] + [HERE, ROOT])
    lib = job["lib"]
    env["BENCH_LIB"] = "mlx" if lib == "mlx" else ("torch" if lib.startswith("torch")
                                                  else "braze")
    env["BENCH_TORCH_COMPILE"] = "1" if lib == "torch.c" else "0"
    fresh = None
    if job["condition"] == "cold":
        fresh = tempfile.mkdtemp(prefix="cold-", dir=tmp)
        env["BRAZE_CACHE_DIR"] = os.path.join(fresh, "braze")
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(fresh, "inductor")
        env["TMPDIR"] = os.path.join(fresh, "tmp")  # MLX's kernel cache lives under it
        os.mkdir(env["TMPDIR"])
    t0 = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker",
                              json.dumps(job)], env=env, capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(job, kind="result", status="timeout", error=f"timeout after {timeout}s")
    finally:
        if fresh:
            shutil.rmtree(fresh, ignore_errors=True)
    wall = time.perf_counter() - t0
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            rec = json.loads(line[7:])
            rec["wall_s"] = wall
            if rec["status"] != "ok":
                rec["stderr_tail"] = out.stderr.strip()[-3000:]
            return rec
    err = (out.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return dict(job, kind="result", status="error", error=f"exit {out.returncode}: {err}",
                stderr_tail=out.stderr.strip()[-3000:], wall_s=wall)


def rows_of(programs, sizes):
    rows = []
    for p in programs:
        if p == "llm":
            rows += [("llm", s) for s in sizes]
        else:
            rows.append((p, None))
    return rows


def row_name(program, size, phase):
    base = program if size is None else f"llm-{size}"
    return base if phase == "step" else f"{base} {phase}"


def fmt_rate(v):
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 0.1 else f"{v:.3f}"


def fmt_ratio(v):
    return "—" if v is None or not math.isfinite(v) else f"{v:.2f}×"


class Results:
    def __init__(self):
        self.recs = []

    def add(self, rec):
        self.recs.append(rec)

    def cell(self, program, size, lib, cond, phase):
        """rate (float), an error string, or None (not run)."""
        for r in self.recs:
            if (r["program"], r["size"] if r["program"] == "llm" else None, r["lib"],
                    r["condition"]) == (program, size, lib, cond):
                if r["status"] != "ok":
                    return r["status"]
                return r["phases"].get(phase, {}).get("rate")
        return None

    def phases(self, program):
        return ("prefill", "decode") if program == "llm" else ("step",)


def _num(v):
    return v if isinstance(v, float) else None


def print_tables(res, rows, libs, conds):
    w0 = 22
    for cond in conds:
        head = f"{'program (' + cond + ')':<{w0}}" + "".join(f"{lib:>11}" for lib in libs)
        head += f"{'bz/mlx':>9}"
        if "torch" in libs or "torch.c" in libs:
            head += f"{'bz/torch*':>10}"
        print(head)
        for program, size in rows:
            for ph in res.phases(program):
                cells = {lib: res.cell(program, size, lib, cond, ph) for lib in libs}
                line = f"{row_name(program, size, ph):<{w0}}"
                line += "".join(f"{fmt_rate(cells[lib]):>11}" for lib in libs)
                bz, ml = _num(cells.get("braze")), _num(cells.get("mlx"))
                line += f"{fmt_ratio(bz / ml if bz and ml else None):>9}"
                if "torch" in libs or "torch.c" in libs:
                    tb = [_num(cells.get(k)) for k in ("torch", "torch.c")]
                    tb = max([t for t in tb if t] or [0.0])
                    line += f"{fmt_ratio(bz / tb if bz and tb else None):>10}"
                print(line)
        print()


def targets(res, rows, conds):
    """Issue 15's targets on this run: lines of text and the list of misses."""
    out, misses = [], []
    for program, size in rows:
        for ph in res.phases(program):
            name = row_name(program, size, ph)
            got = {c: (_num(res.cell(program, size, "braze", c, ph)),
                       _num(res.cell(program, size, "mlx", c, ph))) for c in conds}
            parts = []
            if "warm" in got and all(got["warm"]):
                r = got["warm"][0] / got["warm"][1]
                parts.append(f"warm {r:.2f}× MLX (≥ 2)" + ("" if r >= 2 else " MISS"))
                if r < 2:
                    misses.append(f"{name}: warm {r:.2f}× MLX, target 2×")
            if "cold" in got and all(got["cold"]):
                r = got["cold"][0] / got["cold"][1]
                parts.append(f"cold {r:.2f}× MLX (≥ 1)" + ("" if r >= 1 else " MISS"))
                if r < 1:
                    misses.append(f"{name}: cold {r:.2f}× MLX cold, target 1×")
            if "busy" in got and "warm" in got and got["busy"][0] and got["warm"][0]:
                s = got["warm"][0] / got["busy"][0]
                parts.append(f"busy slowdown {s:.2f} (≤ 1.3)" + ("" if s <= 1.3 else " MISS"))
                if s > 1.3:
                    misses.append(f"{name}: busy {s:.2f}× its quiet time, target 1.3×")
            if parts:
                out.append(f"  {name:<22}" + "; ".join(parts))
    return out, misses


def plot(res, rows, conds, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    names, ratios = [], {c: [] for c in conds}
    for program, size in rows:
        for ph in res.phases(program):
            names.append(row_name(program, size, ph))
            for c in conds:
                bz = _num(res.cell(program, size, "braze", c, ph))
                ml = _num(res.cell(program, size, "mlx", c, ph))
                ratios[c].append(bz / ml if bz and ml else 0.0)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(names)), 4))
    width = 0.8 / max(1, len(conds))
    for i, c in enumerate(conds):
        xs = [j + (i - (len(conds) - 1) / 2) * width for j in range(len(names))]
        ax.bar(xs, ratios[c], width, label=c)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(2.0, color="g", lw=0.8, ls="--", label="target (warm)")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_ylabel("braze ÷ MLX (rate)")
    ax.set_yscale("log")
    ax.set_title("benchmarks/programs.py")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--sizes", default=",".join(SIZES), help="LLM sizes: tiny,small")
    ap.add_argument("--libs", default=",".join(LIBS))
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--dtype", default="float32", help="LLM dtype (float32 or float16)")
    ap.add_argument("--quick", action="store_true", help="short runs (16 decode tokens)")
    ap.add_argument("--min-time", type=float, default=None,
                    help="seconds of timed units per warm/busy cell (default 3, quick 0.3)")
    ap.add_argument("--cold-steps", type=int, default=None,
                    help="training steps timed cold (default 10, quick 3)")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="cap BLAS threads via threadpoolctl (0: each library's default)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per child process")
    ap.add_argument("--json", help="append JSON lines to this file")
    ap.add_argument("--plot", help="write a PNG of the braze/MLX ratios")
    ap.add_argument("--report", metavar="JSONL",
                    help="run nothing: print the tables (and --plot) of the result records in "
                         "these JSON lines (files of several runs merge; the last record wins)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    def items(text, known, what):
        got = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in got if t not in known]
        if bad:
            ap.error(f"unknown {what}: {', '.join(bad)} (known: {', '.join(known)})")
        return got

    if args.worker is None:
        args.programs = items(args.programs, PROGRAMS, "program")
        args.sizes = items(args.sizes, SIZES, "size")
        args.libs = items(args.libs, LIBS, "library")
        args.conditions = items(args.conditions, CONDITIONS, "condition")
    if args.min_time is None:
        args.min_time = 0.3 if args.quick else 3.0
    if args.cold_steps is None:
        args.cold_steps = 3 if args.quick else 10
    return args


def _load():
    return [round(v, 2) for v in os.getloadavg()]


def _byte_compile_braze() -> None:
    """Byte-compile the braze the cells import, as `pip install` does: where
    PYTHONDONTWRITEBYTECODE is set (as on the development machines) an editable checkout
    never gets .pyc files, and every cold cell then compiled braze's whole source (about
    0.3 s of its first step: an install cost, not a run's)."""
    import compileall
    import importlib.util

    env_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    saved = sys.path[:]
    sys.path[:0] = env_path + [ROOT]
    try:
        spec = importlib.util.find_spec("braze")
    finally:
        sys.path[:] = saved
    if spec is not None and spec.submodule_search_locations:
        for d in spec.submodule_search_locations:
            compileall.compile_dir(d, quiet=1)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        return _worker_main(args.worker)
    if args.report:
        return report(args)
    libs, missing = available_libs(args.libs)
    if missing:
        print(f"not installed, columns left out: {', '.join(missing)}", file=sys.stderr)
    rows = rows_of(args.programs, args.sizes)
    if any(lib.startswith("braze") for lib in libs):
        _byte_compile_braze()
    load0 = _load()
    meta = {"bench": "programs", "kind": "meta",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": platform.machine(), "cores": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "libs": libs, "quick": args.quick,
            "load_start": load0, "blas_threads": args.blas_threads}
    print(f"programs  cores: {meta['cores']}  libs: {', '.join(libs)}  "
          f"load average at start: {load0}" + ("  (quick)" if args.quick else ""))
    res = Results()
    jobs = [(p, s, lib, c) for p, s in rows for lib in libs for c in args.conditions]
    # per (program, lib): cold first (it must not find kernels the others built), then warm, busy
    order = {"cold": 0, "warm": 1, "busy": 2}
    jobs.sort(key=lambda j: (rows.index((j[0], j[1])), libs.index(j[2]), order[j[3]]))
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="braze-programs-") as tmp:
        for i, (p, s, lib, c) in enumerate(jobs):
            job = {"bench": "programs", "program": p, "size": s or "", "dtype": args.dtype,
                   "lib": lib, "condition": c, "quick": args.quick, "min_time": args.min_time,
                   "cold_steps": args.cold_steps, "blas_threads": args.blas_threads}
            rec = run_cell(job, args.timeout, tmp)
            rec["load"] = _load()
            res.add(rec)
            if rec["status"] == "ok":
                what = ", ".join(f"{ph} {fmt_rate(v['rate'])}/s"
                                 for ph, v in rec["phases"].items())
            else:
                what = rec.get("error", rec["status"])
            print(f"[{i + 1}/{len(jobs)} {time.perf_counter() - t_start:5.0f}s] "
                  f"{row_name(p, s, 'step')} {lib} {c}: {what}  (load {rec['load'][0]})",
                  file=sys.stderr, flush=True)
    print()
    errors = summary(res, rows, libs, args.conditions)
    load1 = _load()
    print(f"\nload average at end: {load1}  (start: {load0}); "
          f"{time.perf_counter() - t_start:.0f}s in all")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(dict(meta, load_end=load1)) + "\n")
            for r in res.recs:
                f.write(json.dumps(r) + "\n")
    if args.plot:
        if plot(res, rows, sorted(args.conditions, key=CONDITIONS.index), args.plot):
            print(f"plot: {args.plot}")
    return 0 if not errors else 1


def summary(res, rows, libs, conditions):
    """Print the tables, the targets and the problems; return the failed records."""
    print_tables(res, rows, libs, sorted(conditions, key=CONDITIONS.index))
    lines, misses = targets(res, rows, conditions)
    if lines:
        print("targets (issue 15): braze ≥ 2× MLX warm, ≥ MLX cold, busy ≤ 1.3× its quiet time")
        print("\n".join(lines))
        print(f"  {len(misses)} missed" if misses else "  all met")
    errors = [r for r in res.recs if r["status"] != "ok"]
    if errors:
        print("\nproblems:")
        for r in errors:
            print(f"  {row_name(r['program'], r['size'] or None, 'step')} {r['lib']} "
                  f"{r['condition']}: {r.get('error', r['status'])}")
    return errors


def report(args):
    """Tables from stored records (several runs merge; later records replace earlier ones)."""
    res, metas, seen = Results(), [], {}
    for path in args.report.split(","):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("bench") != "programs":
                    continue
                if r["kind"] == "meta":
                    metas.append(r)
                elif r["kind"] == "result":
                    seen[(r["program"], r["size"], r["lib"], r["condition"], r["dtype"])] = r
    res.recs = list(seen.values())[::-1]  # `cell` returns the first match: newest first
    for m in metas:
        print(f"run {m['date']}: libs {', '.join(m['libs'])}; load average at start "
              f"{m['load_start']}, at end {m.get('load_end')}" + ("  (quick)" if m["quick"]
                                                                    else ""))
    present = {(r["program"], r["size"] or None) for r in res.recs}
    rows = [r for r in rows_of(PROGRAMS, SIZES) if r in present]
    libs = [lib for lib in LIBS if any(r["lib"] == lib for r in res.recs)]
    conds = [c for c in CONDITIONS if any(r["condition"] == c for r in res.recs)]
    print()
    summary(res, rows, libs, conds)
    if args.plot and plot(res, rows, conds, args.plot):
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
