"""eval / async_eval: run the unevaluated part of the graph in topological order.

As each node runs it drops its inputs, and the tape drops the node, so an intermediate's buffer
is freed as soon as its last consumer has run and no Python reference holds it.
"""
from __future__ import annotations

import numpy as np

from .array import TraceState, _set_data
from .graph import toposort


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
            raise ValueError(
                "[eval] Attempting to eval an array during function transformations like "
                "compile or vmap is not allowed.")
        raise RuntimeError(
            "[eval] Attempting to eval an array without a primitive. If you are compiling a "
            "function, make sure all the inputs and outputs are captured.")
    ins = a._inputs
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
    for s, out in zip(sibs, outs):
        _set_data(s, _check_output(out, s))
        if not keep:
            _drop_inputs(s)
    if not keep:
        for s in sibs:
            s._siblings = None


def _drop_inputs(a):
    for x in a._inputs:
        x._nc -= 1
    a._prim = None
    a._inputs = ()


def eval_arrays(arrays) -> None:
    """Evaluate a flat iterable of arrays."""
    order = toposort(arrays)
    for i in range(len(order)):
        a = order[i]
        order[i] = None  # the tape must not keep intermediates alive
        _run(a)
