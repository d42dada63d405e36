"""`mx.compile`, `mx.disable_compile`, `mx.enable_compile`: the user-facing wrapper.

A call: flatten the arguments and the captured `inputs=` state; if compile is disabled, or
any input is a tracer (we are inside grad/vmap/another compile trace), call the function
directly; otherwise look the signature up in the thread-local cache, trace on a miss
(placeholders -> Tape -> simplify -> fuse), replay the stored tape onto the real inputs, and
write the captured `outputs=` back. See docs/compile.md.

One call path: every call reads the captured state, finds its cache entry and runs the entry's
`ReplayPlan`. Finding the entry is quick for a call made only of positional arrays (keywords
that continue them are moved in first): it is checked against the last call's record (`_Memo`:
thread cache and its generation, each input's shape and dtype) before any flattening or
signature hashing. `clear_cache` and the death of a compiled function bump the thread cache's
generation, which retires the records. Entries are keyed by the function's id (a bound
method's: its function's and instance's), at most BRAZE_COMPILE_CACHE_SIZE per function.

Diagnostics that must not slow the call path live in subclasses an instance takes only while
they apply: `_TimedCompiledFunction` (BRAZE_COMPILE_REPORT) and `_CheckedCompiledFunction`
(check=True, left after the checked calls).
"""
from __future__ import annotations

import collections
import contextlib
import functools
import gc
import inspect
import itertools
import struct
import threading
import time
import warnings
import weakref
from typing import Any, Callable

import numpy as np

from .. import config
from .. import device as _device
from .. import tree as T
from ..array import TraceState, array
from ..scheduler import user_frame
from . import diagnostics as diag
from . import pipeline, replay
from .compiled import backend_named, prefetch, programs
from .replay import ReplayPlan
from .trace import (
    SiteRecorder,
    capture,
    compile_trace,
    placeholder,
    stacklevel,
    watch_overwrites,
)

__all__ = ["compile", "disable_compile", "enable_compile", "register_implicit_state",
           "CompiledFunction", "no_retrace", "RetraceError", "CompileCheckError"]

#: a warning is issued when one compiled function has been traced more than this many times
#: (env BRAZE_COMPILE_RETRACE_LIMIT; 0 disables the warning)
RETRACE_LIMIT = config.get().compile_retrace_limit

#: what `mx.compile(..., on_limit=)` does once a function has been traced RETRACE_LIMIT times
ON_LIMIT = ("warn", "error", "eager")


class RetraceError(RuntimeError):
    """A compiled function would trace again where retracing is not allowed (`on_limit=
    "error"` past the retrace limit, or inside `mx.no_retrace()`)."""


@contextlib.contextmanager
def no_retrace() -> contextlib.AbstractContextManager:
    """Inside the block, a compiled function that has already been traced and misses the
    cache raises `RetraceError` instead of tracing again (BRAZE_COMPILE_NO_RETRACE=1 for the
    whole process). For tests that say "this must not recompile"."""
    with config.override(compile_no_retrace=True):
        yield


# -- compile on/off -------------------------------------------------------------------------
def disable_compile() -> None:
    """Make every compiled function call its Python function directly (checked per call)."""
    config.set(disable_compile=True)


def enable_compile() -> None:
    """Undo `disable_compile` (also overrides BRAZE_DISABLE_COMPILE / MLX_DISABLE_COMPILE)."""
    config.set(disable_compile=False)


# -- captured state: containers and sentinels ------------------------------------------------
# A captured tree's leaf may be an object implementing the capture protocol:
#     obj.__braze_capture__()        -> the array it stands for now (or None: nothing captured)
#     obj.__braze_update__(value)    <- store a new array
# `mx.random.state` implements it for the thread's random key. An object whose array always
# has one shape and dtype says so with `__braze_fixed_aval__ = True`: a call whose entry
# neither reads nor changes it then skips reading it (`_Memo.pad`). Objects registered with
# `register_implicit_state` are captured as inputs *and* outputs of every compiled function
# without being declared (how undeclared random use advances the key).
_IMPLICIT: list = []


def register_implicit_state(obj) -> None:
    """Capture `obj` (capture protocol) in every compiled function, as input and output."""
    if not (hasattr(obj, "__braze_capture__") and hasattr(obj, "__braze_update__")):
        raise TypeError("[compile] register_implicit_state expects an object with "
                        "__braze_capture__() and __braze_update__(value).")
    if all(o is not obj for o in _IMPLICIT):
        _IMPLICIT.append(obj)


_SENTINEL_TYPES: dict = {}  # type -> whether it follows the capture protocol


def _is_sentinel(x) -> bool:
    t = type(x)
    r = _SENTINEL_TYPES.get(t)
    if r is None:  # hasattr of a missing attribute raises inside: ~0.3 us a call
        if len(_SENTINEL_TYPES) > 256:
            _SENTINEL_TYPES.clear()
        r = _SENTINEL_TYPES[t] = hasattr(t, "__braze_capture__")
    return r


# The captured trees are handled as MLX's compile handles them (python/src/transforms.cpp,
# trees.cpp): flattened (non-array leaves ignored) before the call; the placeholders filled in;
# the *outputs* tree flattened again after the function ran, so state the function created,
# moved or re-wrapped is what gets captured; then the originals put back wherever the
# placeholders still are (by identity, not at their old positions: the function may have
# deleted a key, shrunk a list or moved an input); after the replay the outputs tree, as it is
# then, is filled with the new values. Lists and dicts (and dict subclasses such as
# `nn.Module`) are updated in place; a tuple is rebuilt and stored in its parent (an array
# directly inside a top-level tuple, or a bare array, cannot be replaced).
def _flatten_state(tree, out) -> list:
    """The arrays of a captured tree, in flatten order (dict values in insertion order)."""
    t = type(tree)
    if t is dict or t is list or t is tuple:  # plain containers, the common case, first
        for v in tree.values() if t is dict else tree:
            if type(v) is array:
                out.append(v)
            else:
                _flatten_state(v, out)
    elif _is_sentinel(tree):
        v = tree.__braze_capture__()
        if isinstance(v, array):
            out.append(v)
    elif isinstance(tree, array):
        out.append(tree)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            _flatten_state(v, out)
    elif isinstance(tree, dict):
        for v in tree.values():
            _flatten_state(v, out)
    return out


def _update_state(tree, fn):
    """Replace every array leaf `a` of a captured tree by `fn(a)` (called in flatten order);
    returns the tree (a new object only for a tuple that changed, or for a bare array)."""
    t = type(tree)
    if t is list or t is dict:  # plain containers first; a value set for a key it has
        for k, old in enumerate(tree) if t is list else tree.items():  # resizes nothing
            new = fn(old) if type(old) is array else _update_state(old, fn)
            if new is not old:
                tree[k] = new
        return tree
    if _is_sentinel(tree):
        v = tree.__braze_capture__()
        if isinstance(v, array):
            n = fn(v)
            if n is not v:
                tree.__braze_update__(n)
        return tree
    if isinstance(tree, array):
        return fn(tree)
    if isinstance(tree, list):
        for i in range(len(tree)):
            old = tree[i]
            new = _update_state(old, fn)
            if new is not old:
                tree[i] = new
        return tree
    if isinstance(tree, tuple):
        items = [_update_state(v, fn) for v in tree]
        if all(a is b for a, b in zip(items, tree)):
            return tree
        t = type(tree)
        if t is tuple:
            return tuple(items)
        return t(*items) if hasattr(t, "_fields") else t(items)
    if isinstance(tree, dict):
        for k, old in list(tree.items()):
            new = _update_state(old, fn)
            if new is not old:
                tree[k] = new
        return tree
    return tree


def _state_paths(tree, path, out) -> list:
    """(path, array) for each array of a captured tree, in flatten order; `path` names the
    tree, e.g. "inputs" gives "inputs['layers'][0]['weight']"."""
    for p, v in T.leaf_paths(tree, path, is_leaf=_is_sentinel, nodes=False):
        v = v.__braze_capture__() if _is_sentinel(v) else v
        if isinstance(v, array):
            out.append((p, v))
    return out


def _dropped_updates(declared, before, placeholders, written, sites) -> list:
    """What a trace changed in the `inputs=` tree `declared` that is not among the arrays
    `written` back: a placeholder updated in place (`sites`: id -> the user's line), or a
    position that now holds an array of the trace. `before`: (path, array) before the call,
    in the order of `placeholders`."""
    kept = {id(x) for x in written}
    out = []
    for (path, _), p in zip(before, placeholders):
        if (p._prim is not None or p._data is not None) and id(p) not in kept:
            site = sites.get(id(p))
            out.append(f"{path} updated in place" + (f" at {site}" if site else ""))
    old = {path for path, _ in before}
    phs = {id(p) for p in placeholders}
    for path, a in _state_paths(declared, "inputs", []):
        if a._tracer and id(a) not in phs and id(a) not in kept:
            out.append(f"{path} {'replaced' if path in old else 'created'} in the function")
    return out


def _read_state(declared, implicit) -> tuple:
    """The captured arrays (the declared tree's, then the implicit objects'), and (object,
    array) for each implicit object that holds one (capture-protocol objects, as
    register_implicit_state checks)."""
    arrays = _flatten_state(declared, []) if declared is not None else []
    held = []
    for obj in implicit:
        v = obj.__braze_capture__()
        if isinstance(v, array):
            arrays.append(v)
            held.append((obj, v))
    return arrays, held


def _fill_state(declared, held, values, start=0) -> None:
    """Write `values[start:]` into the captured trees, in flatten order (MLX's tree_fill): the
    declared tree, then the implicit objects `held` [(object, its array now)]; positions past
    the end of the values keep what they hold."""
    it = itertools.islice(values, start, None)
    if declared is not None:
        _update_state(declared, lambda a: next(it, a))
    for obj, old in held:
        new = next(it, old)
        if new is not old:
            obj.__braze_update__(new)


def _replace_state(declared, implicit, mapping) -> None:
    """Replace the arrays whose id is in `mapping` wherever they are in the captured trees
    (MLX's tree_replace)."""
    def swap(a):
        return mapping.get(id(a), a)

    if declared is not None:
        _update_state(declared, swap)
    for obj in implicit:
        _update_state(obj, swap)


def _positions(tree, out) -> list:
    """(container, key, array) for each array directly in a list or dict (or behind a capture
    protocol object, key `_SENTINEL`) of a captured tree: where to restore the caller's arrays
    after a trace that raised."""
    if _is_sentinel(tree):
        v = tree.__braze_capture__()
        if isinstance(v, array):
            out.append((tree, _SENTINEL, v))
        return out
    if isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    elif isinstance(tree, dict):
        items = list(tree.items())
    else:
        return out
    settable = not isinstance(tree, tuple)
    for k, v in items:
        if isinstance(v, array):
            if settable:
                out.append((tree, k, v))
        elif _is_sentinel(v) or isinstance(v, (list, tuple, dict)):
            _positions(v, out)
    return out


def _restore_positions(positions) -> None:
    """After a failed trace: put each caller's array back where it was if that position still
    exists and now holds an array of the trace."""
    for c, k, orig in positions:
        if k is _SENTINEL:
            cur = c.__braze_capture__()
            if cur is not orig and isinstance(cur, array) and cur._tracer:
                c.__braze_update__(orig)
            continue
        if isinstance(c, dict):
            if k not in c:
                continue
        elif not 0 <= k < len(c):
            continue
        cur = c[k]
        if cur is not orig and isinstance(cur, array) and cur._tracer:
            c[k] = orig


_SENTINEL = object()


# -- the signature ---------------------------------------------------------------------------
def _bad_arg(x):
    return ValueError(
        "[compile] Function arguments must be trees of arrays or constants (floats, ints, "
        f"strings, or None), but received type {type(x).__module__}.{type(x).__qualname__}.")


def _leaf_key(x, shapeless):
    t = type(x)
    if t is array or isinstance(x, array):
        return ("A", x._dtype, len(x._shape) if shapeless else x._shape)
    if t is bool:
        return ("b", x)
    if t is int or (isinstance(x, int) and not isinstance(x, bool)):
        return ("i", int(x))
    if isinstance(x, bool):
        return ("b", bool(x))
    if t is float or isinstance(x, float):
        return ("f", struct.pack("<d", x))
    if t is str or isinstance(x, str):
        return ("s", str(x))
    if x is None:
        return ("N",)
    raise _bad_arg(x)


class Signature:
    """What a cache entry is keyed on (the argument tree, each leaf's shape and dtype or a
    constant's value, the captured state), plus paths for diagnostics (`names`: the
    function's positional parameter names and *args name, see _param_names)."""

    __slots__ = ("treedef", "leaf_keys", "cap_keys", "extra", "key", "_paths", "_tree",
                 "_names")

    def __init__(self, treedef, leaf_keys, cap_keys, extra, tree, names):
        self.treedef = treedef
        self.leaf_keys = leaf_keys
        self.cap_keys = cap_keys
        self.extra = extra
        self.key = (treedef, leaf_keys, cap_keys, extra)
        self._paths = None
        self._tree = tree
        self._names = names

    @property
    def paths(self):
        """Each flat leaf's path, by parameter name (`x`, `batch["tokens"]`, `rest[0]`)."""
        if self._paths is None:
            args, kwargs = self._tree
            out = []
            for i, v in enumerate(args):
                _paths(v, _arg_name(self._names, i), out)
            for k, v in kwargs.items():
                _paths(v, k, out)
            self._paths = out
        return self._paths


def _arg_name(names, i) -> str:
    """The name of positional argument `i` given the function's (positional parameter
    names, *args name): a position when the signature says nothing."""
    pos, var = names
    if i < len(pos):
        return pos[i]
    return f"{var}[{i - len(pos)}]" if var else f"args[{i}]"


def _paths(tree, prefix, out):
    if isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            _paths(v, f"{prefix}[{i}]", out)
    elif isinstance(tree, dict):
        for k, v in tree.items():
            _paths(v, f'{prefix}["{k}"]' if isinstance(k, str) else f"{prefix}[{k!r}]", out)
    else:
        out.append(prefix)


def _param_names(fun) -> tuple:
    """(positional parameter names, *args name or None, names that a keyword call may pass
    positionally) of `fun`; empty when it has no inspectable signature."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return (), None, ()
    P = inspect.Parameter
    pos = tuple(p.name for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD))
    var = next((p.name for p in params if p.kind is P.VAR_POSITIONAL), None)
    movable = tuple(p.name if p.kind is P.POSITIONAL_OR_KEYWORD else None for p in params
                    if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD))
    return pos, var, movable


def _as_positional(args, kwargs, movable):
    """A keyword call rewritten with the keywords that continue the positional arguments
    moved into them (`f(x, y=b)` -> `f(x, b)`), so both forms share one trace."""
    n = len(args)
    if n >= len(movable) or movable[n] not in kwargs:
        return args, kwargs
    kwargs = dict(kwargs)
    args = list(args)
    while n < len(movable) and movable[n] in kwargs:
        args.append(kwargs.pop(movable[n]))
        n += 1
    return tuple(args), kwargs


def _function_key(fun):
    """What the cache is keyed by: the function's id, or for a bound method (a new object at
    each attribute access) its function's and instance's ids."""
    self_ = getattr(fun, "__self__", None)
    func = getattr(fun, "__func__", None)
    if self_ is not None and func is not None:
        return id(func), id(self_)
    return id(fun)


def _code_of(fun):
    """The code object of `fun` (through bound methods and functools.partial), or None."""
    for _ in range(8):
        code = getattr(fun, "__code__", None)
        if code is not None:
            return code
        fun = getattr(fun, "__func__", None) or getattr(fun, "func", None)
        if fun is None:
            return None
    return None


# -- the thread-local cache -------------------------------------------------------------------
class _ThreadCache:
    """One thread's entries: id(fun) -> {key: Entry}."""

    __slots__ = ("map", "gen", "__weakref__")

    def __init__(self):
        self.map = {}
        self.gen = 0  # bumped by clear_cache: invalidates the functions' hit-path records


_tls = threading.local()


def _thread_cache() -> _ThreadCache:
    c = getattr(_tls, "cache", None)
    if c is None:
        c = _tls.cache = _ThreadCache()
    return c


def clear_cache() -> None:
    """Drop the calling thread's compiled traces (called by mx.clear_streams)."""
    c = _thread_cache()
    c.map.clear()
    c.gen += 1


_device.register_clear_hook(clear_cache)


def _erase(fid, caches, record):
    """The function died: drop its entries from every thread cache it was called in (not only
    the last one: a stale entry under a reused id would be hit by a new function)."""
    diag.note_retired(record)
    for cache in list(caches):
        cache.map.pop(fid, None)
        cache.gen += 1  # hit-path records of other wrappers of the same function go stale


class Entry:
    __slots__ = ("sig", "tape", "n_out", "out_def", "out_template", "sites", "counts",
                 "single", "flat", "hits", "shapeless", "_plan", "_reads")

    def __init__(self, sig, tape, n_out, out_def, out_template, sites, counts,
                 shapeless=False):
        sig.paths  # noqa: B018 -- computed now, so the entry does not keep the call's arrays
        sig._tree = None  # (they would leak and could never be donated)
        self.sig, self.tape, self.n_out = sig, tape, n_out
        self.out_def, self.out_template, self.sites = out_def, out_template, sites
        self.counts = counts
        self.shapeless = shapeless
        self.hits = 0
        # the function returns one bare array: the call returns the replay's first output
        self.single = (n_out == 1 and len(out_template) == 1 and out_template[0] is _OUT
                       and out_def.kind == "leaf")
        # it returns a plain tuple of arrays (an optimizer step's state): no tree to rebuild
        self.flat = (out_def.kind == "tuple" and out_def.type is tuple
                     and all(c.kind == "leaf" for c in out_def.children)
                     and len(out_template) == n_out and all(t is _OUT for t in out_template))
        self._plan = None
        self._reads = None

    @property
    def plan(self) -> ReplayPlan:
        """The replay plan (built on first use)."""
        p = self._plan
        if p is None:
            p = self._plan = ReplayPlan(self.tape, self.sites, self.shapeless, self.n_out)
        return p

    def reads_inputs_from(self, start) -> bool:
        """Whether a node of the tape reads a flat input at position `start` or later (kept:
        a memo is made again whenever calls alternate between signatures)."""
        r = self._reads
        if r is None or r[0] != start:
            late = {id(p) for p in self.tape.inputs[start:]}
            r = self._reads = (start, any(id(x) in late for a in self.tape.nodes
                                          for x in a._inputs))
        return r[1]

    def outputs(self, outs):
        """The function's return value from the replay's outputs."""
        if self.flat:
            return tuple(outs[:self.n_out])
        it = iter(outs[:self.n_out])
        return T.unflatten(self.out_def, [next(it) if t is _OUT else t
                                          for t in self.out_template])


def _prim_counts(tape) -> collections.Counter:
    c = collections.Counter()
    seen = set()
    for a in tape.nodes:
        k = id(a._siblings) if a._siblings is not None else id(a)
        if k not in seen:
            seen.add(k)
            c[a._prim.name] += 1
    return c


def _kernel_counts(tape) -> tuple:
    """(fused kernels, those containing a reduction, reductions inside them)."""
    kernels = rows = reductions = 0
    seen = set()
    for a in tape.nodes:
        ir = getattr(a._prim, "ir", None)
        if ir is None or id(a._prim) in seen:
            continue
        seen.add(id(a._prim))
        kernels += 1
        if ir.reduce_ndim:
            rows += 1
            reductions += sum(1 for op in ir.ops if op.row and op.prim.reduction)
    return kernels, rows, reductions


@contextlib.contextmanager
def _gc_paused():
    """Python's cycle collector off while a trace and its passes run: they allocate tens of
    thousands of objects (nodes, tuples, dicts) and free almost none, so each collection they
    trigger rescans them all and finds nothing (flow's first trace: fuse 270 -> 150 ms)."""
    on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if on:
            gc.enable()


# -- the compiled function ---------------------------------------------------------------------

class CompiledFunction:
    """What `mx.compile(fun)` returns. Calls like `fun`; `stats()` and `cache_info()` report
    the cache, `lower()` / `lower_for()` show what a call would compile to."""

    def __init__(self, fun, inputs=None, outputs=None, shapeless=False, on_limit="warn",
                 check=False):
        if on_limit not in ON_LIMIT:
            raise ValueError(f"[compile] on_limit must be one of {ON_LIMIT}, got {on_limit!r}.")
        self._fun = fun
        self._inputs = inputs
        self._outputs = outputs
        self._shapeless = bool(shapeless)
        self._on_limit = on_limit
        self._fid = _function_key(fun)
        self._names = _param_names(fun)
        self._caches = weakref.WeakSet()  # the thread caches this function has entries in
        self._memo = None  # the last call's record, see _Memo
        self._hits = 0
        self._misses = collections.Counter()
        self._traces = 0
        self._reasons = []
        self._warned = False
        self._state_warned = False
        self._name = getattr(fun, "__qualname__", None) or getattr(fun, "__name__", None) \
            or type(fun).__name__
        self._replay_name = self._name if self._shapeless else None  # see ReplayPlan.run
        self._record = diag.Record(self._name, _code_of(fun))
        self._checks_left = _check_calls(check)
        try:
            functools.update_wrapper(self, fun)
        except (AttributeError, TypeError):
            pass
        weakref.finalize(self, _erase, self._fid, self._caches, self._record)
        diag.note_wrapped(self._record)

    def __getattr__(self, name):  # forward other attribute lookups to the function
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._fun, name)

    def __repr__(self):
        return f"<compiled function {self._name}>"

    # -- the call -------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        memo = self._memo
        if (memo is not None and memo.pad is not None and not kwargs
                and memo.n_implicit == len(_IMPLICIT) and memo.matches(args, len(args))):
            # the entry neither reads nor changes its (implicit) state: not read either
            self._hits += 1
            entry = memo.entry
            entry.hits += 1
            outs = entry.plan.run([*args, *memo.pad], self._replay_name)
            return outs[0] if entry.single else entry.outputs(outs)
        implicit = _IMPLICIT if self._inputs is None else [
            o for o in _IMPLICIT if not _declares(self._inputs, o)]
        cap, held = _read_state(self._inputs, implicit)
        if kwargs:  # keywords that continue the positional arguments share their trace
            args, kwargs = _as_positional(args, kwargs, self._names[2])
        real = [*args, *cap]
        memo = self._memo
        if memo is not None and not kwargs and memo.matches(real, len(args)):
            self._hits += 1
            entry, writes = memo.entry, memo.writes
            entry.hits += 1
        else:
            found = self._lookup(args, kwargs, cap, implicit)
            if found is None:  # compile disabled, or inside a transform
                return self._fun(*args, **kwargs)
            entry, real = found
            writes = True
            held = _read_state(None, implicit)[1]  # as a trace may have left them
        outs = entry.plan.run(real, self._replay_name)
        if writes and entry.n_out < len(outs):  # the outputs trees as they are now
            _fill_state(self._outputs, held, outs, entry.n_out)
        return outs[0] if entry.single else entry.outputs(outs)

    def _lookup(self, args, kwargs, cap, implicit):
        """(cache entry, flat array inputs) of a call that the last call's record did not
        match, tracing it on a miss; None when the function must run uncompiled."""
        leaves, treedef = T.flatten((args, kwargs))
        shapeless = self._shapeless
        arrays = []
        lkeys = []
        for x in leaves:
            if type(x) is array:
                arrays.append(x)
                lkeys.append(("A", x._dtype, len(x._shape) if shapeless else x._shape))
            else:
                k = _leaf_key(x, shapeless)
                if k[0] == "A":
                    arrays.append(x)
                lkeys.append(k)
        if config.compile_disabled():
            return None
        if TraceState.depth and (any(x._tracer for x in arrays) or
                                 any(x._tracer for x in cap)):
            return None  # inside a transform: the function is inlined into its trace
        ckeys = tuple(("A", x._dtype, len(x._shape) if shapeless else x._shape) for x in cap)
        sig = Signature(treedef, tuple(lkeys), ckeys, None, (args, kwargs), self._names[:2])
        cache = _thread_cache()
        self._caches.add(cache)
        entries = cache.map.get(self._fid)
        entry = entries.get(sig.key) if entries else None
        if entry is None:
            if not self._may_trace(sig, entries):
                return None  # on_limit="eager": the new signature runs uncompiled
            entry = self._trace(sig, leaves, treedef, arrays, cap, implicit, entries)
            if entries is None:
                entries = cache.map.setdefault(self._fid, {})
            self._store(entries, sig.key, entry)
        else:
            self._hits += 1
            entry.hits += 1
            if len(entries) > 1:
                self._touch(entries, sig.key)
        real = arrays + cap
        if (not kwargs and not TraceState.depth and len(arrays) == len(leaves) == len(args)
                and all(type(x) is array for x in real)):
            # the next call with these arrays' signature skips all of the above; and if the
            # only state is implicit and comes out unchanged, it skips writing it back too
            n = len(args)
            writes = (self._inputs is not None or self._outputs is not None
                      or entry.plan.outs[entry.n_out:] != list(range(n, n + len(cap))))
            pad = None  # stand-ins only for state whose shape a trace cannot depend on
            if (cap and not writes and all(getattr(o, "__braze_fixed_aval__", False)
                                           for o in implicit)
                    and not entry.reads_inputs_from(n)):
                pad = tuple(_stand_in(x) for x in cap)
            self._memo = _Memo(cache, entry, real, n, shapeless, writes, pad)
        return entry, real

    # -- the cache bound ------------------------------------------------------------------
    def _touch(self, entries, key=None):
        """Mark entries as the most recently used (dicts keep insertion order: the first
        entry is the least recently used): the last call's record's, since the calls it
        serves touch nothing, then `key`'s."""
        memo = self._memo
        for k in (memo.entry.sig.key if memo is not None else None, key):
            if k is not None and k in entries:
                entries[k] = entries.pop(k)

    def _store(self, entries, key, entry):
        """Add a traced entry, dropping the least recently used past the cache bound."""
        self._touch(entries)
        entries[key] = entry
        bound = config.get().compile_cache_size
        while bound and len(entries) > bound:
            del entries[next(iter(entries))]
            self._record.evictions += 1

    # -- a cache miss ---------------------------------------------------------------------
    def _trace(self, sig, leaves, treedef, arrays, cap, implicit, entries):
        self._note_miss(sig, entries)
        entry = self._build(sig, leaves, treedef, arrays, cap, implicit)
        self._record.add_trace(entry.counts["trace_seconds"], entry.counts["pass_seconds"])
        if not self._shapeless and entry.counts["fused_kernels"] > 1:
            prefetch(entry.tape)  # its kernels may start building now (BRAZE_BUILD_WORKERS)
        return entry

    def _build(self, sig, leaves, treedef, arrays, cap, implicit, texts=None):
        """A cache entry for `sig`: trace the function on placeholders, run the passes;
        `texts` (a list) receives the traced tape's text."""
        with _gc_paused():
            return self._build_entry(sig, leaves, treedef, arrays, cap, implicit, texts)

    def _build_entry(self, sig, leaves, treedef, arrays, cap, implicit, texts):
        name = self._name
        t0 = time.perf_counter()
        real = arrays + cap
        phs = [placeholder(x) for x in real]
        ph_tags = [p._idx for p in phs]
        it = iter(phs)
        targs = [next(it) if isinstance(x, array) else x for x in leaves]
        args2, kwargs2 = T.unflatten(treedef, targs)
        recorder = SiteRecorder() if self._shapeless else None
        with compile_trace(name, self._shapeless), (recorder or contextlib.nullcontext()):
            out_leaves, out_def, cap_outs = self._run_on(args2, kwargs2, cap,
                                                         phs[len(arrays):], implicit)
        fun_outs = [x for x in out_leaves if isinstance(x, array)]
        template = [_OUT if isinstance(x, array) else x for x in out_leaves]
        traced = capture(phs, fun_outs + cap_outs, real, name, ph_tags)
        tape = traced.copy()
        if texts is not None:
            texts.append(tape.text())
        sites = None
        if recorder is not None and recorder.sites:
            sites = {id(c): recorder.sites[id(o)] for o, c in zip(traced.nodes, tape.nodes)
                     if id(o) in recorder.sites}
        del traced
        n = self._traces
        t1 = time.perf_counter()
        diag.show_tape(name, n, "traced", tape, 2)
        before = _prim_counts(tape)
        tape = pipeline.run(tape, ("simplify",), name, n)
        simplified = _prim_counts(tape)
        tape = pipeline.run(tape, ("rows", "fuse"), name, n)
        if sites:
            live = {id(a) for a in tape.nodes}
            sites = {k: v for k, v in sites.items() if k in live} or None
        kernels, rows, reductions = _kernel_counts(tape)
        counts = {"traced": before, "before_fusion": simplified,
                  "after_fusion": _prim_counts(tape), "fused_kernels": kernels,
                  "row_kernels": rows, "fused_reductions": reductions,
                  "trace_seconds": t1 - t0, "pass_seconds": time.perf_counter() - t1}
        return Entry(sig, tape, len(fun_outs), out_def, template, sites, counts,
                     self._shapeless)

    def _may_trace(self, sig, entries) -> bool:
        """Whether a miss may trace: raises under `no_retrace` and past the retrace limit
        with on_limit="error"; False past it with on_limit="eager" (run uncompiled)."""
        if not self._traces:
            return True
        if config.get().compile_no_retrace:
            raise RetraceError(f"[compile] `{self._name}`{self._where()} would be traced again "
                               f"(retracing is switched off by mx.no_retrace or "
                               f"BRAZE_COMPILE_NO_RETRACE): {self._explain(sig, entries)[1]}.")
        if not RETRACE_LIMIT or self._traces < RETRACE_LIMIT or self._on_limit == "warn":
            return True
        if self._on_limit == "error":
            raise RetraceError(f"[compile] `{self._name}`{self._where()} reached its retrace "
                               f"limit ({RETRACE_LIMIT}, on_limit='error'): "
                               f"{self._explain(sig, entries)[1]}.\n{self._reason_summary()}")
        self._record.eager_calls += 1
        if not self._warned:
            self._warned = True
            warnings.warn(f"[compile] `{self._name}`{self._where()} reached its retrace limit "
                          f"({RETRACE_LIMIT}); new signatures now run uncompiled "
                          f"(on_limit='eager').\n{self._reason_summary()}",
                          RuntimeWarning, stacklevel=stacklevel())
        return False

    # -- lowering: a trace to look at, not to run ------------------------------------------
    def lower(self, *args, **kwargs) -> diag.Lowered:
        """Trace the function for these arguments without running it and without caching the
        trace: a `Lowered` that prints the traced tape, the tape after the passes, the fusion
        decisions and the kernel sources; `.kernels` builds each kernel on the active
        backend (`(source, compiled artefact)`)."""
        return self.lower_for(config.get().backend, *args, **kwargs)

    def lower_for(self, backend, /, *args, **kwargs) -> diag.Lowered:
        """`lower` for the backend named `backend` ("cpu", "numpy", later "cuda"); raises
        ValueError when that backend is not available here."""
        be = backend_named(backend)
        if kwargs:
            args, kwargs = _as_positional(args, kwargs, self._names[2])
        implicit = [o for o in _IMPLICIT if not _declares(self._inputs, o)]
        cap = _read_state(self._inputs, implicit)[0]
        leaves, treedef = T.flatten((args, kwargs))
        shapeless = self._shapeless
        keys = tuple(_leaf_key(x, shapeless) for x in leaves)
        ckeys = tuple(_leaf_key(x, shapeless) for x in cap)
        sig = Signature(treedef, keys, ckeys, None, (args, kwargs), self._names[:2])
        arrays = [x for x in leaves if isinstance(x, array)]
        texts = []
        entry = self._build(sig, leaves, treedef, arrays, cap, implicit, texts)
        names = [p for p, x in zip(sig.paths, leaves) if isinstance(x, array)]
        names += [f"captured[{i}]" for i in range(len(cap))]
        return diag.Lowered(self._name, texts[0], entry.tape, names, be)

    def _explain(self, sig, entries):
        return diag.explain_miss(sig, [e.sig for e in entries.values()] if entries else [])

    def _where(self) -> str:
        """ (defined at file:line), or nothing for a function without code."""
        code = self._record.code
        return f" (defined at {code.co_filename}:{code.co_firstlineno})" if code else ""

    def _reason_summary(self) -> str:
        counts = ", ".join(f"{k}: {v}" for k, v in self._misses.most_common())
        recent = "\n  ".join(self._reasons[-5:])
        return f"Reasons: {counts}. Most recent:\n  {recent}"

    def _note_miss(self, sig, entries):
        """Count the miss, print it at BRAZE_DEBUG=1, warn past the retrace limit."""
        reason, text = self._explain(sig, entries)
        self._traces += 1
        self._misses[reason] += 1
        self._reasons.append(text)
        name = self._name
        if config.get().debug >= 1:
            fname, lineno, _, _ = user_frame()
            where = f" at {fname}:{lineno}" if fname else ""
            diag.emit(f"[compile] trace #{self._traces} of {name}{self._where()}{where}: {text}")
        if RETRACE_LIMIT and self._traces > RETRACE_LIMIT and not self._warned:
            self._warned = True
            warnings.warn(
                f"[compile] `{name}`{self._where()} has been traced {self._traces} times (more "
                f"than {RETRACE_LIMIT}); each trace costs a Python run of the function. "
                f"{self._reason_summary()}\nIf shapes change from call to call use "
                "shapeless=True; pass changing Python scalars as arrays; set "
                "BRAZE_DEBUG=1 to see every miss; mx.compile(..., on_limit='error' or "
                "'eager') changes what the limit does.", RuntimeWarning, stacklevel=stacklevel())

    def _run_on(self, args, kwargs, cap, cap_ph, implicit):
        """Call the function on placeholders, with `cap_ph` standing in for the captured
        arrays `cap`; returns its flattened output and the outputs trees' arrays. The
        caller's arrays go back wherever the placeholders still are (the outputs are written
        after the replay); after an error, also where the function reassigned a position
        that still exists."""
        declared = self._inputs
        positions = []
        if declared is not None:
            _positions(declared, positions)
        for obj in implicit:
            _positions(obj, positions)
        before = _state_paths(declared, "inputs", []) if (
            declared is not None and not self._state_warned) else None
        _fill_state(declared, _read_state(declared, implicit)[1], cap_ph)
        ok = False
        try:
            with watch_overwrites({id(p) for p in cap_ph}) as updated:
                out_leaves, out_def = T.flatten(self._fun(*args, **kwargs))
            # the outputs tree after the call: includes state the function created
            cap_outs = _read_state(self._outputs, implicit)[0]
            if before is not None:
                self._warn_dropped(before, cap_ph, cap_outs, updated)
            ok = True
        finally:
            _replace_state(declared, implicit, {id(p): x for p, x in zip(cap_ph, cap)})
            if not ok:
                _restore_positions(positions)
        return out_leaves, out_def, cap_outs

    def _warn_dropped(self, before, cap_ph, cap_outs, updated):
        """Warn (once) about updates to `inputs=` state that no `outputs=` tree writes back:
        after the trace the replay never makes them, so they are lost."""
        lost = _dropped_updates(self._inputs, before, cap_ph, cap_outs, updated)
        if not lost:
            return
        self._state_warned = True
        code = getattr(self._fun, "__code__", None)
        where = f" (defined at {code.co_filename}:{code.co_firstlineno})" if code else ""
        warnings.warn(
            f"[compile] `{self._name}`{where} updates captured state that is not written "
            f"back: {'; '.join(lost)}. Only `outputs=` trees are written back after a call, "
            "so these updates are lost (a replaced position keeps an array of the trace, "
            "which raises when evaluated). Declare the state as outputs too: "
            "`mx.compile(fun, inputs=state, outputs=state)`.",
            RuntimeWarning, stacklevel=stacklevel())

    # -- diagnostics ------------------------------------------------------------------------
    def _entries(self) -> dict:
        return _thread_cache().map.get(self._fid, {})

    def stats(self) -> diag.CompileStats:
        """The cache's activity and what the traces became: a `CompileStats` (attributes, or
        dict-style `stats()["hits"]`); see docs/compile.md, "Diagnostics"."""
        entries = self._entries().values()
        before, after = collections.Counter(), collections.Counter()
        for e in entries:
            before.update(e.counts["before_fusion"])
            after.update(e.counts["after_fusion"])
        progs = [p for ir in _irs(e.tape for e in entries) for p in programs(ir)]
        rec = self._record
        return diag.CompileStats(
            hits=self._hits, misses=dict(self._misses), traces=self._traces,
            miss_reasons=list(self._reasons), evictions=rec.evictions,
            eager_calls=rec.eager_calls, trace_seconds=rec.trace_seconds,
            pass_seconds=rec.pass_seconds, cached_entries=len(entries),
            fused_kernels=sum(e.counts["fused_kernels"] for e in entries),
            row_kernels=sum(e.counts["row_kernels"] for e in entries),
            fused_reductions=sum(e.counts["fused_reductions"] for e in entries),
            primitives_before_fusion=sum(before.values()),
            primitives_after_fusion=sum(after.values()),
            primitive_counts_before_fusion=dict(before),
            primitive_counts_after_fusion=dict(after),
            kernel_builds=sum(p.how == "built" for p in progs),
            disk_loads=sum(p.how == "disk" for p in progs),
            kernel_build_seconds=sum(p.seconds for p in progs),
            call_overhead_us=self._call_overhead())

    def _call_overhead(self):
        return None  # the plain call path is not timed (see _TimedCompiledFunction)

    def cache_info(self) -> list:
        """The calling thread's cache entries, least recently used first: each entry's
        readable signature, hits, trace and pass seconds and fused kernels."""
        return [diag.CacheEntryInfo(diag.describe_signature(e.sig), e.hits,
                                    e.counts["trace_seconds"], e.counts["pass_seconds"],
                                    e.counts["fused_kernels"])
                for e in self._entries().values()]


def _irs(tapes) -> list:
    """The distinct fused regions (KernelIRs) of `tapes`."""
    seen = {}
    for tape in tapes:
        for a in tape.nodes:
            ir = getattr(a._prim, "ir", None)
            if ir is not None:
                seen.setdefault(ir.key, ir)
    return list(seen.values())


class _TimedCompiledFunction(CompiledFunction):
    """A compiled function whose calls are timed (BRAZE_COMPILE_REPORT=1): a class of its own
    so the plain call path pays nothing for it."""

    def __init__(self, *args):
        super().__init__(*args)
        self._times = collections.deque(maxlen=100)

    def __call__(self, *args, **kwargs):
        traces, t0 = self._traces, time.perf_counter()
        out = CompiledFunction.__call__(self, *args, **kwargs)
        if self._traces == traces:  # a trace is not call overhead
            self._times.append(time.perf_counter() - t0)
        return out

    def _call_overhead(self):
        t = self._times
        return sum(t) / len(t) * 1e6 if t else None


#: calls that check=True (or BRAZE_COMPILE_CHECK=1) compares with the uncompiled function
CHECK_CALLS = 3


class CompileCheckError(AssertionError):
    """A compiled call's result differs from the uncompiled function's (check=True)."""


def _check_calls(check) -> int:
    """How many first calls to check: `check` (True: CHECK_CALLS, or a count), or
    CHECK_CALLS under BRAZE_COMPILE_CHECK."""
    if check is True or (check is False and config.get().compile_check):
        return CHECK_CALLS
    if check is False:
        return 0
    if not isinstance(check, int) or check < 0:
        raise ValueError(f"[compile] check must be a bool or a count >= 0, got {check!r}.")
    return check


class _CheckedCompiledFunction(CompiledFunction):
    """A compiled function during its checked calls: each also runs the function uncompiled
    on the same arguments and state and compares outputs and written-back state. After the
    last check the object becomes its plain class again, so later calls pay nothing."""

    def __call__(self, *args, **kwargs):
        if config.compile_disabled() or TraceState.depth:
            return self._plain.__call__(self, *args, **kwargs)
        implicit = [o for o in _IMPLICIT if not _declares(self._inputs, o)]
        before = _read_state(self._outputs, implicit)[0]
        replay.KEEP_LAZY[0] += 1
        try:
            out = self._plain.__call__(self, *args, **kwargs)
        finally:
            replay.KEEP_LAZY[0] -= 1
        after, held = _read_state(self._outputs, implicit)
        if len(after) != len(before):
            # the call created state (an optimizer's first step), which cannot be put back
            # for the uncompiled run: a later call is checked instead
            return out
        self._checks_left -= 1
        if self._checks_left <= 0:
            self.__class__ = self._plain
        got = [(p, x, x._prim) for p, x in diag.output_paths(out)]  # producers before eval
        _fill_state(self._outputs, held, before)
        expected = diag.output_paths(self._fun(*args, **kwargs))
        now, held = _read_state(self._outputs, implicit)
        _fill_state(self._outputs, held, after)
        names = [p for p, _ in _state_paths(self._outputs, "outputs", [])] if (
            self._outputs is not None) else []
        names += [f"implicit state {i}" for i in range(len(after) - len(names))]
        problem = diag.compare_outputs(got, expected) or diag.compare_outputs(
            [(n, x, x._prim) for n, x in zip(names, after)], list(zip(names, now)))
        if problem:
            raise CompileCheckError(f"[compile] check of `{self._name}`{self._where()}: the "
                                    f"compiled call differs from the uncompiled one: {problem}")
        return out


_OUT = object()  # marks an array position in a stored output template


def _stand_in(x) -> array:
    """An evaluated array of x's shape and dtype that holds no memory (a broadcast scalar):
    fills a state input the replay passes through without reading."""
    return array._from_data(np.broadcast_to(np.zeros((), x._dtype.np_dtype), x._shape))


class _Memo:
    """A cache entry and what a call must match to use it without flattening its arguments:
    the thread cache (and its generation) the entry lives in, and the number of positional
    arguments and each flat input's dtype and shape (ndim when shapeless). `writes`: whether
    the entry's state outputs need writing back (not when they are the inputs themselves)."""

    __slots__ = ("cache", "gen", "entry", "n_args", "keys", "shapeless", "writes", "pad",
                 "n_implicit")

    def __init__(self, cache, entry, real, n_args, shapeless, writes, pad=None):
        self.cache = weakref.ref(cache)  # not a strong one: a thread's cache dies with it
        self.gen = cache.gen
        self.entry = entry
        self.writes = writes
        # the state inputs of an entry that neither reads nor writes them (a function using no
        # randomness, with the random key implicit): stand-ins, and the call reads no state
        self.pad = pad
        self.n_implicit = len(_IMPLICIT)
        self.n_args = n_args
        self.shapeless = shapeless
        self.keys = tuple((x._dtype, len(x._shape) if shapeless else x._shape) for x in real)

    def matches(self, real, n_args) -> bool:
        """Whether `real` (the flat inputs: the arguments, then the state, or the arguments
        alone when `pad` stands for the state) fits the entry."""
        cache = getattr(_tls, "cache", None)
        if (n_args != self.n_args or len(real) != (n_args if self.pad is not None
                                                   else len(self.keys)) or cache is None
                or self.cache() is not cache or cache.gen != self.gen or TraceState.depth
                or config._current.disable_compile):
            return False
        if self.shapeless:
            for x, (d, s) in zip(real, self.keys):
                if type(x) is not array or x._dtype is not d or len(x._shape) != s:
                    return False
            return True
        for x, (d, s) in zip(real, self.keys):
            if type(x) is not array or x._dtype is not d or x._shape != s:
                return False
        return True


def _declares(tree, obj) -> bool:
    """Is `obj` somewhere in the declared captured tree?"""
    if tree is None:
        return False
    todo = [tree]
    while todo:
        t = todo.pop()
        if t is obj:
            return True
        if isinstance(t, (list, tuple)):
            todo.extend(t)
        elif isinstance(t, dict):
            todo.extend(t.values())
    return False


def compile(fun: Callable | None = None, inputs: Any = None,  # noqa: A001
            outputs: Any = None, shapeless: bool = False, *, on_limit: str = "warn",
            check: bool | int = False) -> Callable:
    """Return a compiled version of `fun` (MLX's `mx.compile`).

    The first call with a new input signature *traces* `fun`: it runs once on placeholder
    arrays (a shape and a dtype, no values) and the recorded graph is simplified (constant
    merging, no-op removal, CSE, dead-code elimination) and fused into kernels. Every later
    call with the same signature *replays* the stored graph on the new inputs without running
    the Python function. Outputs are lazy, like any braze array.

    Forms: ``mx.compile(f)``, ``@mx.compile``, ``@mx.compile(shapeless=True)``,
    ``@mx.compile(inputs=state, outputs=state)`` and ``functools.partial(mx.compile, ...)``.
    With ``fun=None`` the call returns a decorator. The result keeps ``__name__``,
    ``__doc__``, ``__qualname__`` and the signature of `fun`.

    Args:
        fun: The function to compile. Its arguments and results are trees (lists, tuples,
            dicts, NamedTuples, dataclasses, classes registered with
            `braze.utils.register_pytree_node`) of arrays, Python scalars, strings and None.
        inputs: A tree of captured state (arrays, `nn.Module` parameters, optimizer state,
            `mx.random.state`, ...) that `fun` reads without receiving it as an argument.
            It is flattened again on every call, so updates made outside are seen.
        outputs: A tree of captured state that `fun` updates; after every call the new arrays
            are written back into it (arrays the function created in the tree, such as an
            optimizer's first state, included). Updates to `inputs=` state that no `outputs=`
            tree covers happen only during the trace: a `RuntimeWarning` says so, once.
        shapeless: When True, array shapes are not part of the cache key (only dtype and
            ndim are): one trace serves every size and each node's shape is re-inferred per
            call. Ops whose output shape is baked from trace-time sizes cannot replay on a new
            size and raise (see below).
        on_limit: Keyword-only (braze's extension): what happens once the function has been
            traced ``BRAZE_COMPILE_RETRACE_LIMIT`` (16) times: ``"warn"`` (warn once, keep
            tracing), ``"error"`` (raise `RetraceError` instead of the next trace) or
            ``"eager"`` (warn once; new signatures run `fun` uncompiled).
        check: Keyword-only (braze's extension): ``True`` (or a count) runs `fun` uncompiled
            too for the first 3 (or that many) calls, on the same arguments and state, and
            compares the results and written-back state (``BRAZE_COMPILE_CHECK=1`` for every
            function); a difference raises `CompileCheckError` naming the output, the first
            differing index and the kernel that produced it. `fun` must not modify its
            arguments in place, since it runs twice.

    Returns:
        A `CompiledFunction` that calls like `fun` (or, for ``fun=None``, a decorator that
        makes one).

    Cache key. Entries are per thread and per function object (two ``mx.compile(f)`` of the
    same `f` share them, and so do two of one bound method); a call retraces unless all of
    these match a cached entry: the argument tree structure (container types, dict keys and
    their order, keyword order; keywords that continue the positional arguments count as
    positional); each array argument's dtype, ndim and shape (not the shape when shapeless);
    the value of every Python scalar, string and None argument (floats bit for bit); the
    number, dtypes and shapes of the captured `inputs=` arrays. Array *values*, closure
    variables and globals are not in the key: a closure array that is not declared in
    `inputs=` is a constant baked in at the first trace. Pass changing Python scalars as
    arrays to avoid a retrace per value. A trace that raises leaves no entry; entries are
    freed when the compiled function is garbage-collected, and past
    ``BRAZE_COMPILE_CACHE_SIZE`` (64) entries the least recently used is dropped.
    `mx.random.state` is captured implicitly, so undeclared random draws advance the key as
    they would uncompiled (MLX bakes the key).

    Calling the compiled function inside `grad`, `vjp`, `jvp`, `vmap` or another compiled
    function runs `fun` itself (it is inlined into the outer trace); compile the transform
    (``mx.compile(mx.grad(f))``) to compile the whole computation.

    ``f.stats()`` returns a `CompileStats` (attributes, or dict-style ``st["hits"]``):
    ``hits``; ``misses`` (a dict from reason, e.g. ``"first call"``, ``"shape"``, ``"dtype"``,
    ``"ndim"``, ``"value"``, ``"type"``, ``"structure"``, ``"captured"``, to a count);
    ``traces``; ``miss_reasons`` (one text per trace naming what changed, by parameter name);
    ``evictions``; ``eager_calls``; ``trace_seconds`` and ``pass_seconds``; summed over the
    entries cached in the calling thread, ``cached_entries``, ``fused_kernels``,
    ``row_kernels`` (kernels with fused reductions), ``fused_reductions``,
    ``primitives_before_fusion``/``primitives_after_fusion`` and their per-primitive
    ``primitive_counts_before_fusion``/``primitive_counts_after_fusion``; the backend's
    ``kernel_builds``, ``disk_loads`` and ``kernel_build_seconds`` for those kernels; and
    ``call_overhead_us`` (under ``BRAZE_COMPILE_REPORT=1``). ``f.cache_info()`` lists each
    entry's readable signature and hits. ``f.lower(*args, **kwargs)`` traces without running
    or caching and shows the tape, the fusion decisions and the kernels (``f.lower_for(
    "numpy", *args)`` for another backend).

    Raises:
        TypeError: At compile time, if `fun` is not callable.
        CompileCheckError: At call time, with `check`, when the compiled result differs.
        RetraceError: At call time, past the retrace limit with ``on_limit="error"``, or for
            any retrace inside `no_retrace()` (``BRAZE_COMPILE_NO_RETRACE=1``).
        ValueError: At compile time, for an unknown `on_limit`. At call time, if an argument
            is not a tree of arrays and constants; if
            the trace reads a value (``.item()``, ``bool(x)``, ``print(x)``, NumPy
            conversion, ``mx.eval`` of a traced array); if `fun` uses an array of another
            trace (a leaked tracer) or reads from a closure an array that it also gets as an
            argument; and, with ``shapeless=True``, if an op cannot re-infer its shape for
            the new input sizes (the message names the op and the line that made it).

    Warns:
        RuntimeWarning: once, when one function is traced more than 16 times
        (``BRAZE_COMPILE_RETRACE_LIMIT``), listing the reasons; once, when `fun`
        updates `inputs=` state that no `outputs=` tree writes back; and once per code
        object, when `mx.compile` keeps wrapping new functions of one code (compile inside a
        loop: the cache never hits).

    Debugging: `mx.disable_compile()` (or ``BRAZE_DISABLE_COMPILE=1``/``MLX_DISABLE_COMPILE``)
    makes compiled functions call `fun` directly, so ``print`` and breakpoints work;
    `mx.enable_compile()` switches back. ``BRAZE_DEBUG=1`` prints a line per trace saying what
    changed, ``BRAZE_DEBUG=2``/``3`` print the tape (after every pass at 3), and
    ``BRAZE_DUMP_DIR`` writes them to files. See docs/compile.md and docs/env_vars.md.

    Example:
        >>> @mx.compile
        ... def gelu(x):
        ...     return x * (1 + mx.erf(x / 2 ** 0.5)) / 2
        >>> y = gelu(mx.array([1.0, 2.0]))   # traced
        >>> y = gelu(mx.array([3.0, 4.0]))   # replayed
        >>> gelu.stats()["traces"], gelu.stats()["hits"]
        (1, 1)
    """
    if fun is None:
        return functools.partial(compile, inputs=inputs, outputs=outputs, shapeless=shapeless,
                                 on_limit=on_limit, check=check)
    if not callable(fun):
        raise TypeError(f"[compile] Expected a callable, got {type(fun).__name__}: {fun!r}.")
    cls = _TimedCompiledFunction if config.get().compile_report else CompiledFunction
    cf = cls(fun, inputs, outputs, shapeless, on_limit, check)
    if cf._checks_left:  # checked calls take a class of their own, left after the last one
        cf._plain = cls
        cf.__class__ = _CheckedCompiledFunction
    return cf
