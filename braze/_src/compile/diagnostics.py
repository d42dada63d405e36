"""Compile diagnostics: why a call missed the cache, debug printing and dumps.

BRAZE_DEBUG=1 prints one line per cache miss naming the function, its definition, the call
site and what changed against the closest cached entry (arguments by parameter name); 2 adds
the traced tape; 3 the tape after each pass. BRAZE_DUMP_DIR writes the same texts to files.

Also here: the per-function `Record` (trace counts and times, outliving the function), the
compile-in-a-loop warning, the BRAZE_COMPILE_REPORT exit summary, `CompileStats` /
`CacheEntryInfo` (f.stats(), f.cache_info()), the comparison behind check=True and `Lowered`
(f.lower(): the fusion decisions and kernels).
"""
from __future__ import annotations

import atexit
import collections
import dataclasses
import importlib
import os
import re
import struct
import sys
import warnings
from collections.abc import Mapping

import numpy as np

from .. import config
from .. import tree as T
from .fuse import MAX_ARRAYS, MAX_DEPTH
from .tape import consumers
from .trace import _internal, stacklevel


def describe_leaf(k) -> str:
    """A readable form of one key component (see api._leaf_key)."""
    tag = k[0]
    if tag == "A":
        dt, shp = k[1], k[2]
        if isinstance(shp, int):
            return f"array(ndim={shp}, {dt.name})"
        return f"array{tuple(shp)} {dt.name}"
    if tag == "f":
        return repr(struct.unpack("<d", k[1])[0])
    if tag in ("i", "b", "s"):
        return repr(k[1])
    if tag == "N":
        return "None"
    return repr(k)


def _leaf_change(old, new) -> tuple:
    """(reason, text) for two differing leaf keys at the same path."""
    if old[0] == "A" and new[0] == "A":
        if old[1] != new[1]:
            return "dtype", f"dtype {old[1].name} -> {new[1].name}"
        o, n = old[2], new[2]
        if isinstance(o, int) or isinstance(n, int):
            return "ndim", f"ndim {o} -> {n}"
        if len(o) != len(n):
            return "ndim", f"ndim {len(o)} -> {len(n)} (shape {tuple(o)} -> {tuple(n)})"
        return "shape", f"shape {tuple(o)} -> {tuple(n)}"
    if old[0] != new[0]:
        return "type", f"{describe_leaf(old)} -> {describe_leaf(new)}"
    return "value", f"value {describe_leaf(old)} -> {describe_leaf(new)}"


def explain_miss(new, entries) -> tuple:
    """(reason category, text) for a miss: compares `new` (a Signature) with the closest of
    `entries` (Signatures of the cached traces)."""
    if not entries:
        return "first call", "first call"
    best = None
    for old in entries:
        diffs = []
        if old.treedef != new.treedef:
            diffs.append(("structure", f"argument structure {old.treedef!r} -> {new.treedef!r}"))
        else:
            for path, o, n in zip(new.paths, old.leaf_keys, new.leaf_keys):
                if o != n:
                    r, t = _leaf_change(o, n)
                    diffs.append((r, f"{path}: {t}"))
        if len(old.cap_keys) != len(new.cap_keys):
            diffs.append(("captured", f"captured inputs: {len(old.cap_keys)} -> "
                                      f"{len(new.cap_keys)} arrays"))
        else:
            for i, (o, n) in enumerate(zip(old.cap_keys, new.cap_keys)):
                if o != n:
                    r, t = _leaf_change(o, n)
                    diffs.append((r, f"inputs=[{i}]: {t}"))
        if old.extra != new.extra:
            diffs.append(("device", f"default stream {old.extra} -> {new.extra}"))
        if best is None or len(diffs) < len(best):
            best = diffs
    if not best:
        return "cleared", "cache entry was erased"
    reason = best[0][0]
    text = "; ".join(t for _, t in best[:4])
    if len(best) > 4:
        text += f"; and {len(best) - 4} more"
    return reason, text


def emit(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def dump(name: str, trace_no: int, stage: str, text: str) -> None:
    d = config.get().dump_dir
    if not d:
        return
    os.makedirs(d, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    path = os.path.join(d, f"{safe}.trace{trace_no}.{stage}.txt")
    with open(path, "w") as f:
        f.write(text + "\n")


def show_tape(name: str, trace_no: int, stage: str, tape, level: int) -> None:
    """Print the tape at debug level >= `level`, and dump it when BRAZE_DUMP_DIR is set."""
    cfg = config.get()
    if cfg.debug < level and not cfg.dump_dir:
        return
    text = tape.text()
    if cfg.debug >= level:
        emit(f"[compile] {name} trace #{trace_no}, tape {stage}:\n{text}")
    if cfg.dump_dir:
        dump(name, trace_no, stage, text)


def show_unchanged(name: str, trace_no: int, pass_name: str) -> None:
    """At debug level 3: pass `pass_name` left the tape as it was."""
    if config.get().debug >= 3:
        emit(f"[compile] {name} trace #{trace_no}, tape after {pass_name}: unchanged")


# -- per-function records, the compile-in-a-loop warning, the process-wide report -----------
class Record:
    """What outlives a compiled function: its name and code, trace counts and times (read by
    its `stats()`, the loop warning and the exit report)."""

    __slots__ = ("name", "code", "traces", "trace_seconds", "pass_seconds", "evictions",
                 "eager_calls")

    def __init__(self, name, code):
        self.name, self.code = name, code
        self.traces = self.evictions = self.eager_calls = 0
        self.trace_seconds = self.pass_seconds = 0.0

    def add_trace(self, trace_seconds: float, pass_seconds: float) -> None:
        self.traces += 1
        self.trace_seconds += trace_seconds
        self.pass_seconds += pass_seconds
        total = _TOTALS[self.name]
        total[0] += 1
        total[1] += trace_seconds + pass_seconds


#: function name -> [traces, seconds tracing and in passes], for BRAZE_COMPILE_REPORT
_TOTALS: dict = collections.defaultdict(lambda: [0, 0.0])
_WRAPPED = [0]  # compiled functions made in this process
#: code object -> compiled functions of it that traced and died (a loop re-wrapping it)
_RETIRED: dict = {}
_LOOP_WARNED: set = set()

#: wrappers of one code object that traced and died before a new one warns
LOOP_LIMIT = 4


def note_wrapped(record: Record) -> None:
    """A compiled function was made: warn (once per code object) when earlier wrappers of
    the same code traced and died, since each new one starts with an empty cache."""
    _WRAPPED[0] += 1
    code = record.code
    if code is None or _RETIRED.get(code, 0) < LOOP_LIMIT or code in _LOOP_WARNED:
        return
    if _internal(code):  # braze's own wrappers (grad, vmap): their user's code is not known
        return
    _LOOP_WARNED.add(code)
    warnings.warn(
        f"[compile] mx.compile wraps `{record.name}` (defined at {code.co_filename}:"
        f"{code.co_firstlineno}) again: {_RETIRED[code]} compiled functions with the same code "
        "were traced and discarded, so the cache never hits and every call traces. Compile "
        "once, outside the loop, and reuse the compiled function (pass what changes as "
        "arguments).", RuntimeWarning, stacklevel=stacklevel())


def note_retired(record: Record) -> None:
    """A compiled function died (see note_wrapped)."""
    if record.traces and record.code is not None:
        _RETIRED[record.code] = _RETIRED.get(record.code, 0) + 1


def report() -> str:
    """The process-wide summary BRAZE_COMPILE_REPORT=1 prints at exit."""
    # by name, as compiled.backend() finds the backends: they sit above compile
    k = importlib.import_module("braze._src.backends.kernel_cache").stats()
    traces = sum(t for t, _ in _TOTALS.values())
    seconds = sum(s for _, s in _TOTALS.values())
    lines = [f"[compile] report: {_WRAPPED[0]} compiled functions, {traces} traces "
             f"({seconds:.3f} s tracing and in passes); kernels: {k['builds']} built "
             f"({k['build_seconds']:.3f} s building and loading), {k['disk_loads']} loaded "
             "from the disk cache"]
    top = sorted(_TOTALS.items(), key=lambda kv: -kv[1][1])[:10]
    lines += [f"  {name}: {t} traces, {s:.3f} s" for name, (t, s) in top]
    return "\n".join(lines)


def _report_at_exit() -> None:
    if config.get().compile_report and _WRAPPED[0]:
        emit(report())


atexit.register(_report_at_exit)


# -- f.stats() and f.cache_info() ---------------------------------------------------------
class _Fields(Mapping):
    """Dict-style reading of a dataclass's fields (`stats()["hits"]`, `dict(stats)`), so the
    records stay compatible with code written when they were dicts."""

    def __getitem__(self, key):
        if key not in self._keys():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self._keys())

    def __len__(self):
        return len(self._keys())

    def _keys(self) -> tuple:
        return tuple(f.name for f in dataclasses.fields(self))


@dataclasses.dataclass(eq=False)
class CompileStats(_Fields):
    """What `f.stats()` returns: the function's cache activity (all threads) and, for the
    entries cached in the calling thread, what the traces became. Read as attributes or as a
    dict (`stats["hits"]`). Times are in seconds."""

    #: calls served by a cached trace
    hits: int
    #: traces by reason ("first call", "shape", "dtype", "ndim", "value", "type",
    #: "structure", "captured", ...)
    misses: dict
    traces: int
    #: one text per trace naming what changed, by parameter name
    miss_reasons: list
    #: entries dropped by the cache bound (BRAZE_COMPILE_CACHE_SIZE)
    evictions: int
    #: calls run uncompiled past the retrace limit (on_limit="eager")
    eager_calls: int
    #: time running the Python function on placeholders, and in the compile passes
    trace_seconds: float
    pass_seconds: float
    #: the calling thread's entries and their fused kernels (row kernels hold reductions)
    cached_entries: int
    fused_kernels: int
    row_kernels: int
    fused_reductions: int
    primitives_before_fusion: int
    primitives_after_fusion: int
    primitive_counts_before_fusion: dict
    primitive_counts_after_fusion: dict
    #: the backend's programs for those kernels: built, loaded from the disk cache, seconds
    kernel_builds: int
    disk_loads: int
    kernel_build_seconds: float
    #: mean microseconds per call (the call itself, not the evaluation) over the last calls,
    #: measured only under BRAZE_COMPILE_REPORT=1 (None otherwise: the call path stays bare)
    call_overhead_us: float | None


@dataclasses.dataclass(eq=False)
class CacheEntryInfo(_Fields):
    """One cache entry of `f.cache_info()`."""

    #: readable signature: each argument by name with its shape and dtype or value
    signature: str
    hits: int
    trace_seconds: float
    pass_seconds: float
    fused_kernels: int


def describe_signature(sig) -> str:
    """`x: array(2, 3) float32, scale: 2.0; captured: 4 arrays` for a Signature (captured:
    the `inputs=` arrays and implicit state such as the random key)."""
    parts = [f"{p}: {describe_leaf(k)}" for p, k in zip(sig.paths, sig.leaf_keys)]
    text = ", ".join(parts) or "()"
    if sig.cap_keys:
        text += f"; captured: {len(sig.cap_keys)} arrays"
    return text


# -- check=True: compiled against uncompiled ----------------------------------------------
def output_paths(tree) -> list:
    """(path, array) for each array of a function's result, e.g. "['y']", "[0]"."""
    out = []
    _output_paths(tree, "", out)
    return out


def _output_paths(tree, path, out):
    for name, x in T.leaf_paths(tree, path):
        if hasattr(x, "_prim"):
            out.append((name or "(the result)", x))


#: (rtol, atol) by float dtype name; other dtypes compare exactly
TOLERANCE = {"float16": (1e-2, 1e-3), "bfloat16": (2e-2, 1e-2), "float32": (1e-5, 1e-6),
             "float64": (1e-10, 1e-12)}


def compare_outputs(got, expected) -> str:
    """The first difference between compiled outputs `got` [(path, array, producing
    primitive)] and uncompiled `expected` [(path, array)], as text; "" when they agree."""
    if len(got) != len(expected):
        return f"{len(got)} arrays against {len(expected)}"
    for (path, a, prim), (_, b) in zip(got, expected):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            return f"output {path}: shape {x.shape} against {y.shape}"
        rtol, atol = TOLERANCE.get(a.dtype.name, (0, 0))
        close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
        if close.all():
            continue
        idx = tuple(int(i) for i in np.argwhere(~close)[0])
        return (f"output {path} at index {idx}: compiled {x[idx]!r}, uncompiled {y[idx]!r} "
                f"({int((~close).sum())} of {x.size} elements differ); produced by "
                f"{_producer(prim)}")
    return ""


def _producer(prim) -> str:
    if prim is None:
        return "no primitive (an input or a constant)"
    ir = getattr(prim, "ir", None)
    if ir is None:
        return prim.name
    return f"kernel {prim.name} (key {ir.key}):\n{ir}"


# -- f.lower(): the tape, the fusion decisions, the kernels ---------------------------------
class Lowered:
    """What `f.lower(*args)` returns: one trace of `f`, not cached and not run. `str()` shows
    the traced tape, the tape after the passes, the fusion decisions and the kernel sources;
    `fusion` is the decisions' text; `kernels` lists `(source, compiled artefact)` per fused
    kernel, built on first access (the cpu backend's artefact is the Numba dispatcher; a
    backend that interprets regions, numpy, has the region's IR as source and None)."""

    def __init__(self, name, traced, tape, input_names, backend):
        self.name, self.traced, self.tape, self.backend = name, traced, tape, backend
        self.fusion = fusion_text(tape, input_names)
        self._kernels = None

    @property
    def irs(self) -> list:
        """The fused regions (KernelIRs), in tape order."""
        return [a._prim.ir for a in self.tape.nodes
                if getattr(a._prim, "ir", None) is not None and not a._idx]

    @property
    def kernels(self) -> list:
        if self._kernels is None:
            self._kernels = [_kernel(self.backend, ir) for ir in self.irs]
        return self._kernels

    def __str__(self):
        sources = "\n\n".join(src for src, _ in self.kernels) or "(no fused kernels)"
        return (f"== {self.name}: traced ==\n{self.traced}\n== tape ==\n{self.tape.text()}\n"
                f"== fusion ==\n{self.fusion}\n== kernels ({self.backend.name}) ==\n{sources}")

    __repr__ = __str__


def _kernel(backend, ir) -> tuple:
    """(source, artefact) of `ir`'s kernel on a backend that renders and builds programs
    (entry/program, as the cpu backend), else (the IR's text, None)."""
    if hasattr(backend, "program") and hasattr(backend, "entry"):
        e = backend.entry(ir)
        if not e.fallback:
            p = backend.program(ir, e.default_variant())
            return p.source, p.fn
    return str(ir), None


def fusion_text(tape, input_names) -> str:
    """Which ops went into which kernel, what each kernel reads and why each read is a
    boundary, and why the nodes left unfused are."""
    names = {id(x): n for x, n in zip(tape.inputs, input_names)}
    uses = consumers(tape.nodes)
    outs = {id(o) for o in tape.outputs}
    lines, k = [], 0
    for a in tape.nodes:
        ir = getattr(a._prim, "ir", None)
        if ir is None:
            lines.append(f"{_label(a)}: not fused: {_alone(a)}")
            continue
        if a._idx:
            continue
        k += 1
        ops = ", ".join(op.prim.name for op in ir.ops)
        lines.append(f"kernel {k}: {ir.name} (key {ir.key}): {len(ir.ops)} ops ({ops}), "
                     f"{len(a._inputs)} inputs, {len(ir.outputs)} outputs")
        for slot, x in enumerate(a._inputs):
            if id(x) in names:
                lines.append(f"  in{slot} <- argument {names[id(x)]}")
                continue
            why = ("baked into the kernel" if ir.inputs[slot].const
                   else _boundary(x, a, ir, uses, outs))
            lines.append(f"  in{slot} <- {_source(x)}: {why}")
    return "\n".join(lines)


def _label(a) -> str:
    return f"{a._prim.name}{list(a.shape)}"


def _source(x) -> str:
    if x._prim is None:
        return "a constant" if x.size != 1 else f"the constant {x._data.reshape(-1)[0].item()!r}"
    return f"{_label(x)}"


def _alone(a) -> str:
    prim = a._prim
    if prim.reduction:
        return "a reduction not over the trailing axes (only those fuse, with their neighbours)"
    if prim.kernel_op is None:
        return f"{prim.name} is not fusable (no kernel_op)"
    if prim.kernel_op == "broadcast":
        return "a broadcast is never a region's root (it would be materialised)"
    return "a region of one primitive is not fused"


def _boundary(x, c, ir, uses, outs) -> str:
    """Why the read of `x` by kernel node `c` is a kernel input and not part of the kernel
    (MLX's fusion rules, docs in fuse.py; the depth limit is the remaining reason)."""
    if x._prim is None:
        return "a constant array"
    xir = getattr(x._prim, "ir", None)
    if xir is None and x._prim.kernel_op is None:
        return f"{x._prim.name}'s output (not fused)"
    if id(x) in outs and tuple(x.shape) != tuple(c.shape):
        return f"a function output of another shape ({list(x.shape)} vs {list(c.shape)})"
    if xir is not None and xir.reduce_ndim:
        return "an output of a row kernel (reductions fuse first, in their own regions)"
    if tuple(x.shape) != tuple(c.shape):
        return f"a shape change ({list(x.shape)} -> {list(c.shape)}) between regions"
    readers = {id(r) for r, _ in uses.get(id(x), ())} - {id(s) for s in c._siblings or (c,)}
    if readers or id(x) in outs:
        return "also read elsewhere" + (" and returned" if id(x) in outs else "") + \
            " (fusing it would compute it twice)"
    if len(ir.inputs) + len(ir.outputs) >= MAX_ARRAYS:
        return f"the kernel has MAX_ARRAYS ({MAX_ARRAYS}) inputs and outputs"
    return f"the region reached MAX_DEPTH ({MAX_DEPTH})"
