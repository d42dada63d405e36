"""Tracing a function on placeholder arrays, and capturing its graph as a Tape.

A placeholder is `array._node(shape, dtype, None, ())` with the tracer flag: it has no
primitive and no data, so evaluating anything that depends on it raises (scheduler.py).
"""
from __future__ import annotations

import contextlib
import os
import sys

from ..array import TraceState, array
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
    p = array._node(x._shape, x._dtype, None, ())
    p._tracer = True
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


# -- source sites of nodes (recorded during shapeless traces, for call-time errors) -----------
class SiteRecorder:
    """While active, remember where user code created each node whose primitive is in `kinds`
    (by id of the output array). Uses sys.setprofile, so only shapeless traces pay for it."""

    def __init__(self, kinds):
        from ..prims import base
        self.kinds = kinds
        self.code = base.bind.__code__
        self.sites = {}
        self.keep = []
        self._old = None

    def _profile(self, frame, event, arg):
        if event != "return" or frame.f_code is not self.code or arg is None:
            return
        outs = arg if isinstance(arg, list) else [arg]
        if not outs or not isinstance(outs[0], array) or outs[0]._prim is None:
            return
        if type(outs[0]._prim).__name__ not in self.kinds:
            return
        f = frame.f_back
        while f is not None and os.path.abspath(f.f_code.co_filename).startswith(
                _PKG_DIR + os.sep):
            f = f.f_back
        if f is not None:
            import linecache
            line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
            site = f"{f.f_code.co_filename}:{f.f_lineno}: {line}"
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
