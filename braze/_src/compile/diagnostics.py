"""Compile diagnostics: why a call missed the cache, debug printing and dumps.

BRAZE_DEBUG=1 prints one line per cache miss naming the function, the call site and what
changed against the closest cached entry; 2 adds the traced tape; 3 the tape after each pass.
BRAZE_DUMP_DIR writes the same texts to files.
"""
from __future__ import annotations

import os
import re
import struct
import sys

from .. import config


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
