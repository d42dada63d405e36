"""eval / async_eval: run the unevaluated part of the graph in topological order.

As each node runs it drops its inputs, and the tape drops the node, so an intermediate's buffer
is freed as soon as its last consumer has run and no Python reference holds it.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from . import memory
from .array import TraceState, _set_data
from .graph import toposort
from .np_errors import restore, silence


class CompileTraces:
    """The compile traces in progress (innermost last), for error messages and dynamic ops.

    `stack` holds (function name, shapeless, trace depth at start) records pushed by
    `compile`; `dynamic` is True while the outermost trace is a shapeless compile (MLX's
    `in_dynamic_tracing`), which makes ops keep the graph re-inferable (shape-dependent
    values stay nodes, so a replay at new shapes recomputes them).
    """

    stack: list = []
    dynamic = False


_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../braze

# What a user-facing entry point reads from an array, by the braze function that asked.
_OPERATIONS = {
    "item": "`.item()`", "tolist": "`.tolist()`", "__bool__": "`bool(x)` (e.g. `if x:`)",
    "__int__": "`int(x)`", "__float__": "`float(x)`", "__complex__": "`complex(x)`",
    "__index__": "using the array as an index", "__format__": "formatting (f-string)",
    "__repr__": "`print(x)` / `repr(x)`", "__array__": "NumPy conversion (`np.array(x)`)",
    "__getstate__": "pickling", "__deepcopy__": "`copy.deepcopy`",
    "eval": "`mx.eval`", "async_eval": "`mx.async_eval`",
}


def user_frame(skip_internal=True):
    """(filename, lineno, source line, innermost braze function name) of the user's code that
    called into braze; walks up from the caller."""
    import linecache
    f = sys._getframe(1)
    last_internal = None
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if fn.startswith(_PKG_DIR + os.sep):
            last_internal = f.f_code.co_name
            f = f.f_back
            continue
        line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
        return f.f_code.co_filename, f.f_lineno, line, last_internal
    return None, None, "", last_internal


def _placeholder_error():
    fname, lineno, line, op = user_frame()
    what = _OPERATIONS.get(op, f"`{op}`" if op else "evaluation")
    if CompileTraces.stack:
        name = CompileTraces.stack[-1][0]
        ctx = f"while `mx.compile` traces `{name}`"
    else:
        ctx = "inside a function transformation (vmap)"
    where = f"\n  at {fname}:{lineno}: {line}" if fname else ""
    return ValueError(
        "[eval] Attempting to eval an array during function transformations like compile or "
        f"vmap is not allowed: {what} needs the value of an array that depends on the "
        f"function's inputs, {ctx}, but those inputs are placeholders without values.{where}\n"
        "  Fixes: compute both branches and choose with `mx.where(cond, a, b)` instead of "
        "branching on a value; pass the value as a Python scalar argument (each value then "
        "gets its own trace); branch on `x.shape`/`x.dtype` (concrete during a trace, and use "
        "`shapeless=False` if the branch depends on sizes); or call the function uncompiled "
        "(`mx.disable_compile()`) to debug with prints.")


def _check_output(out, a):
    """Make a kernel's result an ndarray of the exact dtype and shape the graph promised."""
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    npd = a._dtype.np_dtype
    if out.dtype is not npd and out.dtype != npd:
        out = out.astype(npd)
    if out.shape != a._shape:
        raise RuntimeError(
            f"[eval] {a._prim.name} produced shape {out.shape}, expected {a._shape}.")
    return out


def _run(a):
    prim = a._prim
    if prim is None:
        if a._tracer and TraceState.depth:
            raise _placeholder_error()
        raise RuntimeError(
            "[eval] Attempting to eval an array without a primitive. If you are compiling a "
            "function, make sure all the inputs and outputs are captured: an array built from "
            "a compiled function's placeholder inputs escaped the trace (for example "
            "`state.append(z)` in a function compiled without `outputs=state`). Declare such "
            "state with `mx.compile(fun, inputs=state, outputs=state)`; see docs/compile.md.")
    ins = a._inputs
    if prim.node_eval:
        outs = prim.eval_node(a)
    else:
        outs = prim.eval_cpu(*[x._data for x in ins])
    # a tracer keeps its graph while a transform is active, so the transform can walk it
    keep = a._tracer and TraceState.depth
    sibs = a._siblings
    if sibs is None:
        out = outs[0]
        if type(out) is not np.ndarray or out.dtype is not a._dtype.np_dtype:
            out = _check_output(out, a)
        elif out.shape != a._shape:
            _check_output(out, a)
        _set_data(a, out)
        if not keep:
            for x in ins:
                x._nc -= 1
            a._prim = None
            a._inputs = ()
        return
    shared = True  # the siblings' one inputs tuple (unless an update re-pointed one's)
    for s in sibs:
        if s._inputs is not ins:
            shared = False
            break
    for s, out in zip(sibs, outs):
        if type(out) is not np.ndarray or out.dtype is not s._dtype.np_dtype \
                or out.shape != s._shape:
            out = _check_output(out, s)
        _set_data(s, out)
        if not keep:
            if not shared:  # the node lets go of its inputs (a compiled step's outputs)
                for x in s._inputs:
                    x._nc -= 1
            s._prim = None
            s._inputs = ()
            s._siblings = None
    if shared and not keep:
        k = len(sibs)
        for x in ins:
            x._nc -= k


#: buffers below this size are not worth the reference checks of a donation
DONATE_MIN_BYTES = 4096
_getrefcount = sys.getrefcount


def _refcounts_exact() -> bool:
    """Whether `sys.getrefcount` counts every reference the way `_donate` expects. Builds
    without the GIL defer counts, and newer interpreters may borrow references to locals
    (3.14 can report one fewer): there, a count of 3 could hide a user's reference, so
    donation stays off rather than risk writing into an array someone can still read."""
    if getattr(sys, "_is_gil_enabled", lambda: True)() is False:
        return False

    class _Probe:
        pass

    def probe(ins):
        x = ins[0]
        d = x.slot
        return _getrefcount(x), _getrefcount(d)

    ins = (_Probe(),)
    ins[0].slot = _Probe()
    return probe(ins) == (3, 3)  # as in _donate: the tuple (or slot), `x` (`d`), the argument


DONATION = _refcounts_exact()
_UFUNC: dict = {}  # primitive class -> its ufunc if its eval_cpu is just `fn(*inputs)`, or None


def _ufunc_of(prim):
    t = type(prim)
    fn = _UFUNC.get(t, False)
    if fn is False:
        fn = getattr(prim, "fn", None)
        plain = getattr(getattr(t, "eval_cpu", None), "__qualname__", "").startswith("_make_eval.")
        fn = _UFUNC[t] = fn if type(fn) is np.ufunc and plain else None
    return fn


def _donated(prim, a, ins) -> bool:
    """Run node `a`'s ufunc (one or two inputs, all of a's dtype) in place in the buffer of an
    input nothing else can see (MLX donates such buffers), so a chain of elementwise ops and
    views holds one buffer. Returns whether it did (then `a` has its value)."""
    fn = _ufunc_of(prim) if DONATION else None
    if fn is None or any(x._dtype is not a._dtype for x in ins):
        return False
    for k in range(len(ins)):
        if ins[k]._nc == 1:
            d = _free_buffer(ins, k, a._shape)
            if d is not None:
                fn(*[y._data for y in ins], out=d)
                _take_count(a, ins[k], d)
                _set_data(a, d)
                return True
    return False


def _free_buffer(ins, k, shape):
    """The buffer of input k of a node (`ins`: its inputs) if the node may write its output
    there, else None.

    Only a C-contiguous, writeable buffer of `shape` qualifies (the same loop as a fresh
    output, so the same bits), and only when the input is referenced by this node alone and
    the buffer by that input alone: its `_data` itself, or the only view of an ndarray that
    owns its memory. The caller must hold no reference to the input besides `ins`.
    """
    x = ins[k]
    d = x._data
    if (d.nbytes < DONATE_MIN_BYTES or d.shape != shape or not d.flags.c_contiguous
            or not d.flags.writeable):
        return None
    # references: the tuple `ins`, `x`, getrefcount's argument; then the slot x._data, `d`,
    # the argument
    if _getrefcount(x) != 3 or _getrefcount(d) != 3:
        return None
    b = d.base
    if b is not None and (type(b) is not np.ndarray or b.base is not None
                          or _getrefcount(b) != 3):  # d.base, `b`, the argument
        return None
    return d


def _take_count(a, x, d):
    """Node `a` takes input x's donated buffer `d`: x stops counting it, and `a` counts the
    owner of a view (whose counter is gone); `_set_data` counts an owned buffer."""
    c = memory.Counters
    c.active -= x._mem
    x._mem = 0
    if d.base is not None:
        a._mem = d.base.nbytes
        c.active += a._mem
        if c.active > c.peak:
            c.peak = c.active


def eval_update(prim, a) -> list:
    """Evaluate node `a` of an update primitive (its output is its first input with some
    elements rewritten by `prim.write(buffer, *other inputs)`) in that input's buffer when
    nothing else can see it, as MLX donates it: a KV-cache step costs the new tokens, not
    the cache. While a transform keeps the graph (its vjp may read the input) it copies."""
    ins = a._inputs
    d = None
    if DONATION and ins[0]._nc == 1 and not (a._tracer and TraceState.depth):
        d = _free_buffer(ins, 0, a._shape)
    if d is None:
        return prim.eval_cpu(*[x._data for x in ins])
    prim.write(d, *[x._data for x in ins[1:]])
    _take_count(a, ins[0], d)
    return [d]


def _memory_error(a, e):
    """Node `a` ran out of memory. NumPy's MemoryError names neither the op nor the array:
    the ValueError of an output that can never fit, else a MemoryError naming both (the op
    is an elementwise primitive's public name, else the primitive's)."""
    op = getattr(a._prim, "kernel_op", None) or a._prim.name
    for s in a._siblings or (a,):
        err = memory.allocation_error(op, s._shape, s._dtype)
        if err is not None:
            return err
    return MemoryError(f"[{op}] Out of memory computing an array of shape {a._shape} and "
                       f"dtype {a._dtype.name} ({e}).")


def eval_arrays(arrays) -> None:
    """Evaluate a flat iterable of arrays."""
    order = toposort(arrays)
    tok = silence()  # kernels return IEEE inf/nan without NumPy's warnings
    # once the buffer cache runs (the cpu backend starts it), NumPy allocations made while
    # the graph runs go through it: large buffers are reused (memory.py, "the buffer cache")
    pool = memory._pool["state"]
    prev = pool["set"](pool["capsule"]) if pool else None
    try:
        tracing = TraceState.depth
        counters = memory.Counters
        for i in range(len(order)):
            a = order[i]
            order[i] = None  # the tape must not keep intermediates alive
            prim = a._prim
            if (prim is None or prim.node_eval or a._siblings is not None
                    or (tracing and a._tracer)):
                ins = None  # a stale reference would keep an update from taking its input
                _run(a)
                continue
            # the common case, inlined: one output, a NumPy kernel, no graph to keep
            ins = a._inputs
            n = len(ins)
            if 0 < n <= 2 and ((ins[0]._nc == 1 and ins[0]._data.nbytes >= DONATE_MIN_BYTES)
                               or (ins[-1]._nc == 1 and ins[-1]._data.nbytes >= DONATE_MIN_BYTES)) \
                    and _donated(prim, a, ins):
                for x in ins:
                    x._nc -= 1
                a._prim = None
                a._inputs = ()
                x = None
                continue
            if n == 2:
                out = prim.eval_cpu(ins[0]._data, ins[1]._data)[0]
            elif prim.pure_reshape:
                out = ins[0]._data.reshape(a._shape)
            elif n == 1:
                out = prim.eval_cpu(ins[0]._data)[0]
            else:
                out = prim.eval_cpu(*[x._data for x in ins])[0]
            if (type(out) is not np.ndarray or out.dtype is not a._dtype.np_dtype
                    or out.shape != a._shape):
                out = _check_output(out, a)
            a._data = out
            if out.base is None and out.nbytes:  # _set_data, inlined
                a._mem = out.nbytes
                counters.active += a._mem
                if counters.active > counters.peak:
                    counters.peak = counters.active
            for x in ins:
                x._nc -= 1
            a._prim = None
            a._inputs = ()
            out = x = None  # no lingering references: donation counts them (`_donate`)
    except MemoryError as e:
        raise _memory_error(a, e) from None
    finally:
        if pool:
            pool["set"](prev)
        restore(tok)
