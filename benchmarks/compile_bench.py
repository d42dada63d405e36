"""braze's compiler against its peers: fused elementwise and row-wise workloads, side by side.

    python benchmarks/compile_bench.py [--sizes 1,4Ki,1Mi,16Mi] [--workloads gelu,adam]
        [--variants braze.c,braze,numpy,jax.jit] [--repeat N] [--quick] [--json out.jsonl]

Workloads (float32): gelu (erf form), gelu_tanh, silu, a 10-op elementwise chain on two inputs,
softmax, layernorm and rmsnorm over rows of 4096, one Adam step (p, m, v, g -> p, m, v).
Variants: braze compiled (`braze.c`) and uncompiled (`braze`), NumPy, and when installed
numexpr, MLX (`mlx`, `mlx.c` = mx.compile), JAX (`jax`, `jax.jit`), PyTorch (`torch`,
`torch.c` = torch.compile). A peer that fails to import just loses its columns.

Every implementation is first checked against a float64 NumPy reference (a mismatch is marked
`!` in the table), then warmed up and timed: the median per call of adaptive repetitions, each
call waited for (`eval`, `block_until_ready`); up to 4Ki elements the variants' samples are
taken in turn (a drift of the machine falls on all of them). Per workload and size the table
gives the ratio of braze compiled to the fastest peer and braze compiled's fraction of the
memory roofline:
(bytes that must move) / (copy bandwidth of a NumPy copy of 64 MiB into a preallocated
buffer, measured in the same run) / (measured time). Before the sweep it measures each
compiled variant's first-call latency on a new function (trace + build + one run, minus a
steady call) at 4096 elements; braze's on-disk kernel cache points at an empty temporary
directory for the run unless `--warm-cache` is given. See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# steady-state kernel speed and build latency: kernels are built in the call, not in the
# background while calls run on the numpy reference (BRAZE_BACKGROUND_BUILDS)
os.environ.setdefault("BRAZE_BACKGROUND_BUILDS", "0")
import _peers as P  # noqa: E402

SIZE_NAMES = {"1": 1, "4Ki": 4096, "1Mi": 1 << 20, "16Mi": 1 << 24}
DEFAULT_SIZES = "1,4Ki,1Mi,16Mi"
TOL = 1e-3  # max relative error (see `_max_err`) before a result counts as a mismatch
LATENCY_N = 4096
#: sizes up to this are timed with the variants' samples interleaved (`measure_interleaved`):
#: there the per-call overhead is measured, and a drift of the machine between one variant's
#: samples and the next's would otherwise decide the ratio
INTERLEAVE_MAX = 4096


# -- small helpers ----------------------------------------------------------------------------
def parse_size(text: str) -> int:
    t = text.strip()
    if t in SIZE_NAMES:
        return SIZE_NAMES[t]
    for suffix, mult in (("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)):
        if t.endswith(suffix):
            return int(t[: -len(suffix)]) * mult
    return int(t)


def size_name(n: int) -> str:
    for suffix, mult in (("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def fmt_time(t) -> str:
    if t is None or not math.isfinite(t):
        return "—"
    if t < 1e-3:
        return f"{t * 1e6:.1f}µs" if t < 1e-4 else f"{t * 1e6:.0f}µs"
    if t < 1.0:
        return f"{t * 1e3:.2f}ms" if t < 1e-2 else f"{t * 1e3:.1f}ms"
    return f"{t:.2f}s"


def _max_err(got, ref) -> float:
    """max |got - ref| / max(|ref|, 1e-3 max|ref|): relative error with a floor near zero."""
    got = np.asarray(got, np.float64)
    if got.shape != ref.shape:
        return math.inf
    scale = max(float(np.max(np.abs(ref))), 1e-30) if ref.size else 1.0
    err = np.abs(got - ref) / np.maximum(np.abs(ref), 1e-3 * scale)
    if not np.all(np.isfinite(got) == np.isfinite(ref)):
        return math.inf
    err = err[np.isfinite(err)]
    return float(err.max()) if err.size else 0.0


class Progress:
    """A plain-text progress bar on stderr (one line per step when stderr is not a terminal)."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done, self.enabled = max(total, 1), 0, enabled
        self.tty = sys.stderr.isatty()
        self.t0 = time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
        el = time.perf_counter() - self.t0
        line = f"[{bar}] {self.done:>4}/{self.total} {el:6.0f}s  {label}"
        if self.tty:
            sys.stderr.write("\r" + line[:110].ljust(110))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


# -- timing -----------------------------------------------------------------------------------
class Runner:
    """Calls one built function repeatedly. A `stateful` workload (Adam: p, m, v, g -> p, m, v)
    is driven the way a training loop is written: `p, m, v = step(p, m, v, g)` rebinds the state
    *before* it is waited for (`mx.eval(p, m, v)`), so the previous state is referenced only by
    the pending computation and a lazy library may donate its buffers to the new state (MLX and
    braze do, JAX through `donate_argnums`, PyTorch's step is in place). The runner itself keeps
    no reference to the state while a call runs."""

    def __init__(self, variant, fn, args, stateful):
        self.v, self.fn, self.stateful = variant, fn, stateful
        if stateful:
            self.state, self.g = tuple(args[:-1]), args[-1]
        else:
            self.args = args

    def timed(self, k: int) -> float:
        fn, sync = self.fn, self.v.sync
        if self.stateful:
            g = self.g
            state, self.state = self.state, None
            t0 = time.perf_counter()
            for _ in range(k):
                state = fn(*state, g)  # the old state now lives only in the pending graph
                sync(state)
            t = time.perf_counter() - t0
            self.state = tuple(state)
            del state
        else:
            args = self.args
            t0 = time.perf_counter()
            for _ in range(k):
                out = fn(*args)
                sync(out)
            t = time.perf_counter() - t0
            del out
        return t / k


def _plan(runner: Runner, quick: bool, repeat: int | None):
    """Warm up; (calls per sample, samples) so that a sample lasts ~1 ms (tiny calls are
    batched) and the samples ~1 s."""
    warm = [runner.timed(1) for _ in range(1 if quick else 2)]
    est = max(min(warm), 1e-7)
    per_sample = 2e-4 if quick else 1e-3  # batch tiny calls so each sample lasts this long
    k = max(1, int(math.ceil(per_sample / est)))
    if repeat:
        samples = repeat
    elif quick:
        samples = 3
    else:
        target = 1.0
        samples = int(target / (k * est))
        samples = max(3 if est > 0.1 else 7, min(samples, 100))
    return k, samples


def measure(runner: Runner, quick: bool, repeat: int | None):
    """Warm up, then the median of per-call times over adaptive samples."""
    k, samples = _plan(runner, quick, repeat)
    times = [runner.timed(k) for _ in range(samples)]
    return float(np.median(times)), float(min(times)), samples, k


def measure_interleaved(runners: dict, quick: bool, repeat: int | None) -> dict:
    """`measure` for several runners at once, their samples taken in turn (one of each,
    then the next round), so that a shared machine's drift falls on every variant alike:
    the small sizes' per-call overheads are compared within ~1 ms of each other."""
    plans = {key: _plan(r, quick, repeat) for key, r in runners.items()}
    rounds = max(samples for _, samples in plans.values())
    times = {key: [] for key in runners}
    for _ in range(rounds):
        for key, r in runners.items():
            times[key].append(r.timed(plans[key][0]))
    return {key: (float(np.median(t)), float(min(t)), rounds, plans[key][0])
            for key, t in times.items()}


def copy_bandwidth(quick: bool) -> float:
    """Bytes/s of np.copyto between two preallocated, pre-touched 64 MiB buffers."""
    n = (1 << 24) if not quick else (1 << 20)
    src = np.ones(n, np.float32)
    dst = np.zeros(n, np.float32)
    np.copyto(dst, src)
    ts = []
    for _ in range(5 if quick else 15):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        ts.append(time.perf_counter() - t0)
    return 2 * 4 * n / float(np.median(ts))


# -- the run ----------------------------------------------------------------------------------
def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        return None


def load_variants(keys):
    loaded, missing = {}, {}
    for key in keys:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loaded[key] = P.load(key)
        except ImportError as e:
            missing[key] = str(e)
    return loaded, missing


def run_one(variant, workload, inputs, refs, quick, repeat):
    """Check and time one variant on one workload; returns a result dict."""
    rec, runner = check_one(variant, workload, inputs, refs)
    if runner is not None:
        try:
            med, best, samples, k = measure(runner, quick, repeat)
            rec.update(status="ok", median_s=med, min_s=best, samples=samples,
                       calls_per_sample=k)
        except Exception as e:  # noqa: BLE001 - a failing peer must not stop the run
            rec["status"] = "error"
            rec["error"] = f"{type(e).__name__}: {e}"[:300]
    return rec


def check_one(variant, workload, inputs, refs):
    """Build one variant's workload, check its first result against the reference: (the
    result dict so far, a Runner to time it, or None when unsupported or failed)."""
    rec = {"variant": variant.key}
    fn = variant.build(workload)
    if fn is None:
        rec["status"] = "unsupported"
        return rec, None
    stateful = workload == "adam"
    try:
        args = variant.convert(inputs)
        t0 = time.perf_counter()
        out = fn(*args)
        variant.sync(out)
        rec["first_call_s"] = time.perf_counter() - t0
        got = variant.to_numpy(out)
        err = max((_max_err(g, r) for g, r in zip(got, refs)), default=math.inf)
        if len(got) != len(refs):
            err = math.inf
        rec["max_rel_err"] = err
        rec["ok"] = bool(err <= TOL)
        del out, got
        return rec, Runner(variant, fn, variant.convert(inputs) if stateful else args,
                           stateful)
    except Exception as e:  # noqa: BLE001 - a failing peer must not stop the run
        rec["status"] = "error"
        rec["error"] = f"{type(e).__name__}: {e}"[:300]
    return rec, None


def compile_latency(variants, workloads, quick, progress, emit):
    """First call of a new compiled function at LATENCY_N elements: trace + build + one run,
    minus the steady per-call time. Each library first compiles an unrelated function once so
    its one-time initialisation is reported apart ("init")."""
    rows = {}
    for v in variants.values():
        if not v.compiled:
            continue
        x = P.make_inputs("silu", LATENCY_N, seed=99)
        try:
            t0 = time.perf_counter()
            f = v.build("silu")
            args = v.convert(x)
            v.sync(f(*args))
            rows[(v.key, "init")] = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            rows[(v.key, "init")] = None
            emit({"kind": "compile_latency", "variant": v.key, "workload": "init",
                  "error": f"{type(e).__name__}: {e}"[:300]})
        for wl in workloads:
            progress.step(f"compile latency {wl} {v.key}")
            inputs = P.make_inputs(wl, LATENCY_N, seed=1)
            try:
                fn = v.build(wl)
                if fn is None:
                    continue
                args = v.convert(inputs)
                t0 = time.perf_counter()
                out = fn(*args)
                v.sync(out)
                first = time.perf_counter() - t0
                del out
                r = Runner(v, fn, args if wl != "adam" else v.convert(inputs), wl == "adam")
                steady, _, _, _ = measure(r, True, 5)
                rows[(v.key, wl)] = max(first - steady, 0.0)
                emit({"kind": "compile_latency", "variant": v.key, "workload": wl,
                      "elements": LATENCY_N, "first_call_s": first, "steady_s": steady,
                      "latency_s": rows[(v.key, wl)]})
            except Exception as e:  # noqa: BLE001
                rows[(v.key, wl)] = None
                emit({"kind": "compile_latency", "variant": v.key, "workload": wl,
                      "error": f"{type(e).__name__}: {e}"[:300]})
        if rows.get((v.key, "init")) is not None:
            emit({"kind": "compile_latency", "variant": v.key, "workload": "init",
                  "elements": LATENCY_N, "first_call_s": rows[(v.key, "init")]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=None,
                    help=f"comma list: 1, 4Ki, 1Mi, 16Mi or integers (default {DEFAULT_SIZES};"
                         " --quick: 1,4Ki)")
    ap.add_argument("--workloads", default=",".join(P.WORKLOADS))
    ap.add_argument("--variants", default=",".join(P.VARIANTS),
                    help="comma list of " + ",".join(P.VARIANTS))
    ap.add_argument("--repeat", type=int, default=None,
                    help="timed samples per measurement (default: adaptive)")
    ap.add_argument("--quick", action="store_true",
                    help="few repetitions, small copy buffer, no compile-latency section")
    ap.add_argument("--json", help="append JSON lines to this file")
    ap.add_argument("--no-latency", action="store_true", help="skip the compile-latency section")
    ap.add_argument("--warm-cache", action="store_true",
                    help="keep braze's configured on-disk kernel cache instead of an empty one")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    sizes = [parse_size(s) for s in (args.sizes or ("1,4Ki" if args.quick else DEFAULT_SIZES))
             .split(",") if s.strip()]
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in workloads:
        if w not in P.WORKLOADS:
            ap.error(f"unknown workload {w!r}; known: {', '.join(P.WORKLOADS)}")
    keys = [k.strip() for k in args.variants.split(",") if k.strip()]
    for k in keys:
        if k not in P.VARIANTS:
            ap.error(f"unknown variant {k!r}; known: {', '.join(P.VARIANTS)}")

    from braze._src import backends, config
    tmp = None
    if not args.warm_cache:
        tmp = tempfile.TemporaryDirectory(prefix="braze-bench-cache-")
    try:
        with config.override(**({"cache_dir": tmp.name} if tmp else {})):
            return _run(args, sizes, workloads, keys, backends)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _run(args, sizes, workloads, keys, backends) -> int:
    jf = open(args.json, "a") if args.json else None  # noqa: SIM115

    def emit(rec):
        if jf is not None:
            jf.write(json.dumps({"bench": "compile_bench", **rec}) + "\n")
            jf.flush()

    try:
        variants, missing = load_variants(keys)
        backend = backends.get().name
        date = datetime.datetime.now().isoformat(timespec="seconds")
        bw = copy_bandwidth(args.quick)
        meta = {"kind": "meta", "date": date, "backend": backend, "cores": os.cpu_count(),
                "machine": platform.machine(), "python": platform.python_version(),
                "copy_bandwidth_Bps": bw, "quick": args.quick, "loadavg": _loadavg(),
                "versions": {k: v.version for k, v in variants.items()},
                "missing": missing, "argv": sys.argv[1:]}
        emit(meta)
        vers = {}
        for v in variants.values():
            vers.setdefault(v.lib, v.version)
        print(f"compile_bench  {date}  braze backend: {backend}  cores: {os.cpu_count()}  "
              f"copy bandwidth: {bw / 1e9:.1f} GB/s (np.copyto, "
              f"{'4' if args.quick else '64'} MiB)")
        print(f"load average at start: {_loadavg()} (other processes on the machine skew "
              "small-size timings, threaded peers most)")
        print("libraries: " + ", ".join(f"{k} {v}" for k, v in vers.items())
              + (("; not installed: " + ", ".join(sorted(missing))) if missing else ""))
        sys.stdout.flush()

        do_latency = not (args.quick or args.no_latency)
        n_lat = sum(v.compiled for v in variants.values()) * len(workloads) if do_latency else 0
        progress = Progress(len(workloads) * len(sizes) * len(variants) + n_lat,
                            not args.no_progress)
        latency = compile_latency(variants, workloads, args.quick, progress, emit) \
            if do_latency else {}

        results = {}  # (workload, n) -> {key: rec}
        for wl in workloads:
            for n in sizes:
                inputs = P.make_inputs(wl, n)
                refs = P.reference(wl, inputs)
                row = _time_row(variants, wl, n, inputs, refs, args, progress)
                for rec in row.values():
                    emit({"kind": "time", "workload": wl, "elements": n, "size": size_name(n),
                          "shape": list(P.shape_of(wl, n)), "bytes": P.bytes_moved(wl, n),
                          "backend": backend, **rec})
                results[(wl, n)] = row
                s = summarize(wl, n, row, bw)
                emit({"kind": "summary", "workload": wl, "elements": n, "size": size_name(n),
                      "backend": backend, **s})
                del inputs, refs
        progress.close()
        print_table(results, list(variants), bw)
        if latency:
            print_latency(latency, list(variants), workloads)
        print_overhead(results, list(variants))
        print_targets(results, latency, bw, backend)
        return 0
    finally:
        if jf is not None:
            jf.close()


def _time_row(variants, wl, n, inputs, refs, args, progress) -> dict:
    """{variant key: result dict} of one workload at one size: small sizes with the
    variants' samples interleaved, large ones one variant after the other."""
    row = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if n > INTERLEAVE_MAX:
            for key, v in variants.items():
                progress.step(f"{wl} {size_name(n)} {key}")
                row[key] = run_one(v, wl, inputs, refs, args.quick, args.repeat)
                if n >= 1 << 20:
                    gc.collect()  # free the last variant's big buffers before the next
            return row
        runners = {}
        for key, v in variants.items():
            progress.step(f"{wl} {size_name(n)} {key}")
            row[key], runner = check_one(v, wl, inputs, refs)
            if runner is not None:
                runners[key] = runner
        try:
            timed = measure_interleaved(runners, args.quick, args.repeat)
        except Exception:  # noqa: BLE001 - a peer failed mid-way: time each alone, so only
            timed = {}    # the failing one errs
            for key, r in runners.items():
                try:
                    timed[key] = measure(r, args.quick, args.repeat)
                except Exception as e:  # noqa: BLE001
                    row[key].update(status="error", error=f"{type(e).__name__}: {e}"[:300])
        for key, (med, best, samples, k) in timed.items():
            row[key].update(status="ok", median_s=med, min_s=best, samples=samples,
                            calls_per_sample=k, interleaved=True)
    return row


# -- reporting --------------------------------------------------------------------------------
def _good(rec):
    return rec.get("status") == "ok" and rec.get("ok")


def summarize(wl, n, row, bw):
    bz = row.get("braze.c")
    peers = {k: r["median_s"] for k, r in row.items()
             if not k.startswith("braze") and _good(r)}
    out = {}
    if peers:
        best = min(peers, key=peers.get)
        out.update(best_peer=best, best_peer_s=peers[best])
    if bz is not None and _good(bz):
        out["braze_c_s"] = bz["median_s"]
        if peers:
            out["ratio"] = bz["median_s"] / out["best_peer_s"]
        out["roofline"] = P.bytes_moved(wl, n) / bw / bz["median_s"]
    return out


def _cell(rec):
    if rec is None:
        return ""
    st = rec.get("status")
    if st == "unsupported":
        return "—"
    if st != "ok":
        return "err"
    return fmt_time(rec["median_s"]) + ("" if rec.get("ok") else "!")


def print_table(results, keys, bw):
    w = 9
    head = f"{'workload':<10}{'size':>5} " + "".join(f"{k:>{w}}" for k in keys) \
        + f"  {'fastest peer':>13} {'bz.c/best':>9} {'roofline':>8}"
    print()
    print("median time per call (float32; ! = mismatch against the float64 reference, "
          "— = not supported, err = failed)")
    print(head)
    print("-" * len(head))
    errors = []
    last = None
    for (wl, n), row in results.items():
        if last is not None and wl != last:
            print()
        last = wl
        cells = "".join(f"{_cell(row.get(k)):>{w}}" for k in keys)
        s = summarize(wl, n, row, bw)
        best = f"{s['best_peer']} {fmt_time(s['best_peer_s'])}" if "best_peer" in s else "—"
        ratio = f"{s['ratio']:.2f}" if "ratio" in s else "—"
        roof = f"{100 * s['roofline']:.0f}%" if "roofline" in s else "—"
        print(f"{wl:<10}{size_name(n):>5} {cells}  {best:>13} {ratio:>9} {roof:>8}")
        for k, r in row.items():
            if r.get("status") == "error":
                errors.append(f"  {wl} {size_name(n)} {k}: {r['error']}")
            elif r.get("status") == "ok" and not r.get("ok"):
                errors.append(f"  {wl} {size_name(n)} {k}: max relative error "
                              f"{r['max_rel_err']:.3g} > {TOL:g}")
    print("bz.c/best: braze compiled time / fastest peer time (< 1: braze faster). roofline: "
          f"bytes that must move / {bw / 1e9:.1f} GB/s / braze compiled time.")
    if errors:
        print("problems:")
        print("\n".join(errors))


def print_latency(latency, keys, workloads):
    comp = [k for k in keys if k in P.COMPILED]
    print()
    print(f"first-call compile latency at {LATENCY_N} elements (trace + build; first call minus "
          "a steady call). init = the library's first compile in the process")
    print(f"{'workload':<10}" + "".join(f"{k:>10}" for k in comp))
    for wl in ["init", *workloads]:
        print(f"{wl:<10}" + "".join(f"{fmt_time(latency.get((k, wl))):>10}" for k in comp))


def print_overhead(results, keys):
    one = [(wl, row) for (wl, n), row in results.items() if n == 1]
    if not one:
        return
    print()
    print("per call at 1 element (median over workloads, and the range)")
    for k in keys:
        ts = [r[k]["median_s"] for _, r in one if k in r and r[k].get("status") == "ok"]
        if ts:
            print(f"  {k:<8} {fmt_time(float(np.median(ts))):>9}   "
                  f"({fmt_time(min(ts))} .. {fmt_time(max(ts))})")


def print_targets(results, latency, bw, backend):
    """The goals of issues 5 and 8, judged on this run."""
    lines = []
    big = max((n for _, n in results), default=0)
    if big >= 1 << 24:
        for wl in P.WORKLOADS:
            row = results.get((wl, big))
            if not row or not _good(row.get("braze.c", {})):
                continue
            bz = row["braze.c"]["median_s"]
            rivals = ("jax.jit", "torch.c", "mlx.c") if wl in P.ROWWISE else ("jax.jit",
                                                                               "torch.c")
            rt = {k: row[k]["median_s"] for k in rivals if k in row and _good(row[k])}
            roof = P.bytes_moved(wl, big) / bw / bz
            if rt:
                best = min(rt, key=rt.get)
                ok = bz <= rt[best] and (wl in P.ROWWISE or roof >= 0.5)
                lines.append(f"  {wl} {size_name(big)}: braze.c {fmt_time(bz)} vs {best} "
                             f"{fmt_time(rt[best])} ({bz / rt[best]:.2f}x), roofline "
                             f"{100 * roof:.0f}%  {'met' if ok else 'not met'}")
    one = [row for (wl, n), row in results.items() if n == 1]
    bz1 = [r["braze.c"]["median_s"] for r in one if _good(r.get("braze.c", {}))]
    jx1 = [r["jax.jit"]["median_s"] for r in one if _good(r.get("jax.jit", {}))]
    if bz1 and jx1:
        a, b = float(np.median(bz1)), float(np.median(jx1))
        lines.append(f"  1 element: braze.c {fmt_time(a)} vs 2 x jax.jit {fmt_time(2 * b)}  "
                     + ("met" if a <= 2 * b else "not met"))
    lat = [t for (k, wl), t in latency.items() if k == "braze.c" and wl != "init" and t is not None]
    if lat:
        lines.append(f"  new-kernel compile: braze.c worst {fmt_time(max(lat))} vs 0.3 s  "
                     + ("met" if max(lat) < 0.3 else "not met"))
    if lines:
        print()
        print("targets (issue 5: elementwise + Adam vs min(jax.jit, torch.c) and >= 50% roofline;"
              " issue 8: norms vs min(jax.jit, torch.c, mlx.c))")
        print("\n".join(lines))
        if backend != "cpu":
            print(f"  (braze ran on the {backend!r} backend, not the native 'cpu' one: these "
                  "verdicts say nothing yet about native kernels)")


if __name__ == "__main__":
    sys.exit(main())
