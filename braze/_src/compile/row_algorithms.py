"""Row-kernel algorithms as named passes over the row regions' KernelIR.

A row kernel normally reads a row once per reduction level: softmax's sum of exp(x - max)
needs the max first. Two sums can instead be accumulated in the pass that computes what they
depend on, by algorithms that the passes below mark on the sum's `IROp.fold` (shown in the IR
dumps, `BRAZE_DEBUG=3`):

- `online_softmax`: sum(exp(v - broadcast(max v))) is accumulated together with the max, the
  running sum rescaled as the max grows (`fold = ("online", v, max)`);
- `chan_variance`: sum(square(v - broadcast(mu))) is accumulated as the mean and M2 of v by
  Chan et al.'s parallel update, M2 + C * (mean - mu)^2 once mu is known
  (`fold = ("chan", v, mu)`).

A mark says the algorithm applies to the region's structure; the row renderer uses it when
the launch's layout allows (rows too long to keep in a stash buffer, v read per element).
"""
from __future__ import annotations

import dataclasses

from .compiled import Compiled
from .tape import Tape


def online_softmax(tape: Tape) -> Tape:
    return _mark(tape, _online)


def chan_variance(tape: Tape) -> Tape:
    return _mark(tape, _chan)


def _mark(tape: Tape, find) -> Tape:
    """Every row region's IR with the sums `find` recognises marked (same nodes, new
    primitive objects: the IR is immutable)."""
    for a in tape.nodes:
        prim = a._prim
        if not isinstance(prim, Compiled) or not prim.ir.reduce_ndim or a._idx:
            continue
        ir = prim.ir
        ops = list(ir.ops)
        for i, op in enumerate(ops):
            fold = None if op.fold else find(ir, op)
            if fold:
                ops[i] = dataclasses.replace(op, fold=fold)
        if ops != list(ir.ops):
            new = Compiled(dataclasses.replace(ir, ops=tuple(ops)))
            for s in a._siblings if a._siblings is not None else (a,):
                s._prim = new
    return tape


def _op(ir, ref, kernel_op):
    """The op computing `ref` if its primitive is `kernel_op`, else None."""
    n = ir.n_inputs
    if ref < n:
        return None
    op = ir.ops[ref - n]
    return op if op.prim.kernel_op == kernel_op else None


def _shifted(ir, op, inner_op):
    """(v, row) when `op` is a float sum of inner_op(v - broadcast(row)), all one dtype."""
    if not (op.row and op.prim.reduction and op.prim.reduce_type == "sum"
            and op.dtype.name in ("float32", "float64")):
        return None
    inner = _op(ir, op.args[0], inner_op)
    sub = inner and _op(ir, inner.args[0], "subtract")
    bc = sub and _op(ir, sub.args[1], "broadcast")
    if not bc or any(ir.dtype_of(a) != op.dtype
                     for a in (op.args[0], inner.args[0], sub.args[0], sub.args[1])):
        return None
    return sub.args[0], bc.args[0]


def _online(ir, op):
    found = _shifted(ir, op, "exp")
    if found is None:
        return None
    v, m = found
    mx = ir.ops[m - ir.n_inputs] if m >= ir.n_inputs else None
    if mx is None or not mx.prim.reduction or mx.prim.reduce_type != "max" or mx.args[0] != v:
        return None
    return ("online", v, m)


def _chan(ir, op):
    found = _shifted(ir, op, "square")
    return ("chan",) + found if found else None
