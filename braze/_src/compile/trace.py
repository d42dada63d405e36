"""Tracing a function on placeholder arrays, and capturing its graph as a Tape.

A placeholder is `node(shape, dtype, None, ())` with the tracer flag: it has no
primitive and no data, so evaluating anything that depends on it raises (scheduler.py).
"""
from __future__ import annotations

import contextlib
import linecache
import os
import sys

from ..array import TraceState, array, node
from ..scheduler import CompileTraces
from ..transforms.autodiff import trace_scope
from .tape import Tape

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_serial = [0]


def placeholder(x: array) -> array:
    """A placeholder like `x`. Its `_idx` (unused by arrays outside sibling groups) holds a
    negative serial number: if the function overwrites the placeholder in place (`x[2] = v`,
    `state[0] *= 2`), the detached copy that takes over its old value keeps the tag, so
    `capture` can find the real input again."""
    p = node(x._shape, x._dtype, None, (), True)
    _serial[0] += 1
    p._idx = -_serial[0]
    return p


@contextlib.contextmanager
def compile_trace(name: str, shapeless: bool):
    """Push a compile trace: tracers keep their graph, ops see `CompileTraces.dynamic`."""
    outer = not CompileTraces.stack
    depth = TraceState.depth
    CompileTraces.stack.append((name, shapeless, depth))
    saved = CompileTraces.dynamic
    if depth == 0 and outer:
        CompileTraces.dynamic = bool(shapeless)
    try:
        with trace_scope():
            yield
    finally:
        CompileTraces.stack.pop()
        CompileTraces.dynamic = saved


# -- the user's lines: node creation sites, in-place updates, warnings -----------------------
_INTERNAL: dict = {}  # file name -> inside the braze package?


def _internal(code) -> bool:
    name = code.co_filename
    v = _INTERNAL.get(name)
    if v is None:
        v = _INTERNAL[name] = os.path.abspath(name).startswith(_PKG_DIR + os.sep)
    return v


class Site(tuple):
    """(file, line) of user code; prints as 'file:line: source', read only when shown (a
    shapeless trace records one per node)."""

    def __str__(self):
        name, line = self
        return f"{name}:{line}: {linecache.getline(name, line).strip()}"


def user_site(frame) -> Site | None:
    """The site of the first frame at or above `frame` outside braze."""
    while frame is not None and _internal(frame.f_code):
        frame = frame.f_back
    return None if frame is None else Site((frame.f_code.co_filename, frame.f_lineno))


def stacklevel() -> int:
    """The `warnings.warn` stacklevel, for its caller, of the user's frame that called braze."""
    f, level = sys._getframe(1), 1
    while f is not None and _internal(f.f_code):
        f, level = f.f_back, level + 1
    return level


class SiteRecorder:
    """While active, remember where user code created each node (by id of the output array),
    for the errors of a shapeless replay. Uses sys.setprofile, so only shapeless traces pay
    for it."""

    def __init__(self):
        from ..prims import base
        self.code = base.bind.__code__
        self.sites = {}
        self.keep = []
        self._old = None

    def _profile(self, frame, event, arg):
        if event != "return" or frame.f_code is not self.code or arg is None:
            return
        outs = arg if isinstance(arg, list) else [arg]
        if not outs or not isinstance(outs[0], array):
            return
        site = user_site(frame.f_back)
        if site is not None:
            for o in outs:
                self.sites[id(o)] = site
                self.keep.append(o)  # ids stay valid while we hold the arrays

    def __enter__(self):
        self._old = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._old)
        return False


@contextlib.contextmanager
def watch_overwrites(ids):
    """Yield a dict that collects, for each array whose id is in `ids` and that is updated in
    place meanwhile (`a += 1`, `a[i] = v`), the user's line of its first update."""
    sites = {}
    outer = TraceState.overwrite_hook

    def hook(dst):
        if id(dst) in ids and id(dst) not in sites:
            sites[id(dst)] = user_site(sys._getframe(1))
        if outer is not None:
            outer(dst)

    TraceState.overwrite_hook = hook
    try:
        yield sites
    finally:
        TraceState.overwrite_hook = outer


# -- graph capture --------------------------------------------------------------------------
def capture(placeholders, outputs, real_inputs, fun_name: str, ph_tags=None) -> Tape:
    """The Tape between `placeholders` and `outputs`, with MLX's checks:

    * an array that is one of this call's real inputs (a closure or global that is also passed
      as an argument) -> ValueError "uncaptured inputs";
    * a foreign placeholder (from another trace) -> ValueError naming it.
    """
    placeholders = list(placeholders)
    tags = {}
    for k, p in enumerate(placeholders):
        if (p._prim is not None or p._data is not None) and ph_tags:
            tags[ph_tags[k]] = k  # overwritten in place by the function
    ph = {id(p) for p in placeholders if p._prim is None and p._data is None}
    real = {id(x) for x in real_inputs}
    seen = set(ph)
    for root in outputs:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [root]
        while stack:
            a = stack.pop()
            if id(a) in real:
                raise ValueError(
                    "[compile] Attempting to compile a function with uncaptured inputs is not "
                    f"allowed: `{fun_name}` reads an array (shape {a.shape}, {a.dtype.name}) "
                    "from a closure or global that is also passed to it as an argument. Use "
                    "the argument inside the function, or declare captured state with "
                    "`mx.compile(fun, inputs=...)`.")
            if a._prim is None and a._data is None and a._idx in tags:
                k = tags.pop(a._idx)  # the detached old value of an overwritten placeholder
                placeholders[k] = a
                ph.add(id(a))
                continue
            if a._prim is None and a._data is None:
                raise ValueError(
                    f"[compile] `{fun_name}` uses a placeholder array (shape {a.shape}) that "
                    "belongs to another trace (a leaked tracer from an earlier compile, vmap "
                    "or grad); pass the array as an argument instead.")
            for x in a._inputs:
                if id(x) not in seen:
                    seen.add(id(x))
                    stack.append(x)
    for k in tags.values():  # overwritten placeholders whose old value nothing reads
        placeholders[k] = placeholder(placeholders[k])
    return Tape.from_outputs(placeholders, outputs)
