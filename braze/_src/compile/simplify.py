"""The simplify passes, each a named function Tape -> Tape (MLX's `compile_simplify`).

1. `merge_scalar_constants`: equal 0-d constants (same dtype, same bits) become one array.
2. `remove_noops`: nodes whose primitive is a `noop` (Copy, StopGradient) are bypassed
   (gradients were traced already).
3. `square_powers`: a float `x ** 2` becomes `Square(x)` (the same correctly rounded x * x,
   without a call to pow, which costs ~20x a multiply and vectorizes worse), and `x ** 1`
   becomes x. The exponent may be computed from constants: the vjp of `x ** 2` is
   `2 * x ** (2 - 1)`, in every compiled step with a squared error or an L2 penalty.
4. `cse`: nodes with equal primitives (dataclass equality, so parameters such as Log's base or
   Equal's equal_nan count) and identical inputs are merged; the earlier one survives; a
   function output is never merged away; multi-output nodes merge sibling by sibling.
5. `transposed_products`: a matrix product that is only read transposed, `(a @ b)^T`, becomes
   `b^T @ a^T`: the same products, written row-major. A Linear's weight gradient is one; its
   optimizer update then reads gradient and parameter in one order, a flat loop instead of a
   strided one (and no strided reads of a large gradient). A transpose of a transpose is read
   as the array it transposes twice.
6. `fold_constants`: a node computed from constants alone (a foldable primitive, a small
   output) is computed once, at trace time, and becomes a constant: a gradient's scaling by
   the constant seed, an index built with `arange`, a transposed constant matrix. A broadcast
   of one element is left to fusion, which reads it as a scalar.
7. `dce`: nodes no output depends on are dropped.

Passes own the tape's nodes (Tape.copy was taken after tracing), so they rewrite inputs in
place, through tape.py's edits.
"""
from __future__ import annotations

import numpy as np

from ..array import array, node
from ..np_errors import ignoring
from ..prims.shape import Transpose
from ..prims.unary import SQUARE
from .tape import Tape, consumers, rewire, set_inputs


def merge_scalar_constants(tape: Tape) -> Tape:
    """Merge 0-d constants with equal dtype and bit pattern (NaNs with equal bits merge;
    0.0 and -0.0 do not)."""
    ph = {id(p) for p in tape.inputs}
    first, subst = {}, {}
    for a in tape.nodes:
        for x in a._inputs:
            if x._prim is not None or x._data is None or x._shape != () or id(x) in ph:
                continue
            if id(x) in subst:
                continue
            key = (x._dtype, x._data.tobytes())
            keep = first.setdefault(key, x)
            if keep is not x:
                subst[id(x)] = keep
    outs = list(tape.outputs)
    rewire(tape, subst)
    tape.outputs = outs  # outputs keep their own objects
    return tape


def remove_noops(tape: Tape) -> Tape:
    """Bypass no-op nodes: consumers (and outputs) read the no-op's input."""
    subst = {}
    kept = []
    for a in tape.nodes:
        if a._prim is not None and a._prim.noop and a._siblings is None:
            subst[id(a)] = a._inputs[0]
        else:
            kept.append(a)
    if subst:
        rewire(tape, subst)
        tape.nodes = kept
    return tape


def square_powers(tape: Tape) -> Tape:
    """`Power(x, 2)` on floats, the exponent a scalar constant (often broadcast, or folded
    from constants), becomes `Square(x)`, and `Power(x, 1)` is bypassed for x (C's pow(x, 1)
    is x, NaN and -0 included) where x has its dtype and shape and the power is not a
    function output (which must stay an array of its own); the exponent's nodes are left to
    dce."""
    subst = {}
    outs = {id(o) for o in tape.outputs}
    for a in tape.nodes:
        prim = a._prim
        if prim is None or prim.kernel_op != "power" or a._dtype.kind != "f":
            continue
        e = _scalar_value(a._inputs[1])
        if e == 2.0:
            set_inputs(a, a._inputs[:1])
            a._prim = SQUARE
        elif e == 1.0 and id(a) not in outs:  # an output stays a new array, not x itself
            x = a._inputs[0]
            if x._dtype is a._dtype and x._shape == a._shape:
                subst[id(a)] = x
    if subst:
        rewire(tape, subst)
        tape.nodes = [a for a in tape.nodes if id(a) not in subst]
    return tape


#: the largest output (bytes) `fold_constants` keeps as a constant: the tape holds it for good
FOLD_MAX_BYTES = 1 << 16


def fold_constants(tape: Tape) -> Tape:
    """Nodes whose inputs are constants (or nodes folded already) and whose primitive is
    `foldable` are evaluated now with their NumPy kernels, the values the run would compute;
    those read by the rest of the tape (or outputs) become constants, the others are left to
    dce. Multi-output nodes and outputs over `FOLD_MAX_BYTES` stay nodes."""
    ph = {id(p) for p in tape.inputs}
    vals = {}  # id(node) -> its value, for the folded nodes
    for a in tape.nodes:
        prim = a._prim
        if a._siblings is not None or not prim.foldable:
            continue
        if a._dtype.np_dtype.itemsize * a.size > FOLD_MAX_BYTES:
            continue
        ins = [vals.get(id(x), x._data if x._prim is None and id(x) not in ph else None)
               for x in a._inputs]
        if any(v is None for v in ins):
            continue
        try:
            with ignoring():
                out = prim.eval_cpu(*ins)[0]
        except Exception:  # the run raises it, with its error message
            continue
        if isinstance(out, np.generic):  # NumPy's 0-d results are scalars
            out = np.asarray(out)
        if type(out) is np.ndarray and out.shape == a._shape and out.dtype == a._dtype.np_dtype:
            vals[id(a)] = out
    if not vals:
        return tape
    subst = {}
    for a in tape.nodes:
        if id(a) not in vals:
            for x in a._inputs:
                _fold_read(x, vals, subst)
    outs = list(tape.outputs)
    for o in outs:
        _fold_read(o, vals, subst)
    rewire(tape, subst)
    kept = []
    for a in tape.nodes:
        if id(a) in subst:
            set_inputs(a, ())  # a folded node no longer holds its inputs (consumer counts)
        else:
            kept.append(a)
    tape.nodes = kept
    return tape


def _fold_read(x, vals, subst) -> None:
    """Make the folded node `x`, read outside the folded part, a constant in `subst`; a
    broadcast of one element stays (fusion reads it as a scalar) and its input is made one."""
    if id(x) not in vals or id(x) in subst:
        return
    if x._prim.kernel_op == "broadcast" and x._inputs[0].size == 1:
        _fold_read(x._inputs[0], vals, subst)
        return
    subst[id(x)] = array._from_data(vals[id(x)])


def transposed_products(tape: Tape) -> Tape:
    """`Transpose(a @ b)` over the last two axes, where the product is read by that transpose
    alone and is not an output, becomes `b^T @ a^T`; an operand that is itself a matrix
    transpose is read untransposed, and so is a matrix transpose of one (not an output).
    The orphaned nodes are left to dce."""
    outs = {id(o) for o in tape.outputs}
    readers = None
    nodes = []
    twice = {}  # a matrix transpose of a matrix transpose (the vjp of `x @ w.T`): w itself
    for a in tape.nodes:
        prim = a._prim
        if prim.swaps_matrix_axes and a._siblings is None:
            m = a._inputs[0]
            if (m._prim is not None and m._prim.swaps_matrix_axes and id(a) not in outs
                    and m._inputs[0]._dtype is a._dtype):
                twice[id(a)] = (a, m._inputs[0])
                continue
            if m._prim is not None and m._prim.matrix_product and id(m) not in outs:
                if readers is None:
                    readers = consumers(tape.nodes, slots=False)
                x, y = m._inputs
                if len(readers.get(id(m), ())) == 1 and x._dtype is y._dtype:
                    ins = (_matrix_transposed(y, prim, a, nodes),
                           _matrix_transposed(x, prim, a, nodes))
                    set_inputs(a, ins)
                    a._prim = m._prim
        nodes.append(a)
    tape.nodes = nodes
    if twice:
        rewire(tape, {k: x for k, (_, x) in twice.items()})
        for a, _ in twice.values():
            set_inputs(a, ())  # dropped: it no longer holds its input (consumer counts)
    return tape


def _matrix_transposed(x, swap, like, nodes):
    """x with its last two axes swapped: the input of a matrix transpose `x` is, else a new
    Transpose node (primitive `swap`, tracer flag as `like`'s), appended to `nodes`."""
    if x._prim is not None and x._prim.swaps_matrix_axes:
        return x._inputs[0]
    s = x._shape
    t = node((*s[:-2], s[-1], s[-2]), x._dtype, swap if len(s) == len(swap.axes)
             else Transpose((*range(len(s) - 2), len(s) - 1, len(s) - 2)), (x,))
    t._tracer = like._tracer
    nodes.append(t)
    return t


#: the scalar arithmetic `_scalar_value` folds (an exponent the vjp computes from constants)
_FOLD = {"add": float.__add__, "subtract": float.__sub__, "multiply": float.__mul__}


def _scalar_value(x, depth=4):
    """The value of a one-element constant, looking through broadcasts and folding a few
    additions, subtractions and multiplications of such constants; None otherwise. Values
    are compared with small integers only, so float64 folding decides as the kernel's
    rounding would (an exact 1.0 or 2.0 either way)."""
    while x._prim is not None and x._prim.kernel_op == "broadcast":
        x = x._inputs[0]
    if x._prim is not None:
        fold = _FOLD.get(x._prim.kernel_op)
        if fold is None or depth == 0 or len(x._inputs) != 2 or x._dtype.kind != "f":
            return None
        a, b = (_scalar_value(y, depth - 1) for y in x._inputs)
        return None if a is None or b is None else fold(float(a), float(b))
    if x._data is None or x.size != 1:
        return None
    return x._data.reshape(-1)[0].item()


def _same_prim(p, q) -> bool:
    if p is q:
        return True
    if type(p) is not type(q):
        return False
    try:
        return bool(p == q)
    except Exception:  # a parameter without a usable equality (e.g. an ndarray)
        return False


def cse(tape: Tape) -> Tape:
    """Common-subexpression elimination in one forward sweep (inputs are already merged when a
    node is reached, so chains of duplicates collapse too)."""
    outs = {id(o) for o in tape.outputs}
    table = {}
    subst = {}
    kept = []
    seen_groups = set()

    def find(x):
        while id(x) in subst:
            x = subst[id(x)]
        return x

    for a in tape.nodes:
        group = a._siblings if a._siblings is not None else (a,)
        gkey = id(group) if a._siblings is not None else id(a)
        if gkey in seen_groups:
            continue  # siblings were handled with the first of their group
        seen_groups.add(gkey)
        ins = tuple(find(x) for x in a._inputs)
        if any(i is not x for i, x in zip(ins, a._inputs)):
            set_inputs(a, ins)
        try:
            hkey = (type(a._prim), tuple(id(x) for x in ins), len(group), hash(a._prim))
        except TypeError:
            hkey = (type(a._prim), tuple(id(x) for x in ins), len(group), None)
        merged = False
        if not any(id(s) in outs for s in group):
            for cand in table.get(hkey, ()):
                if _same_prim(cand[0]._prim, a._prim) and all(
                        c._shape == s._shape and c._dtype == s._dtype
                        for c, s in zip(cand, group)):
                    for c, s in zip(cand, group):
                        subst[id(s)] = c
                    merged = True
                    break
        if not merged:
            table.setdefault(hkey, []).append(group)
            kept.extend(group)
    tape.nodes = kept
    tape.outputs = [find(o) for o in tape.outputs]
    return tape


def dce(tape: Tape) -> Tape:
    """Drop nodes whose whole sibling group feeds no output."""
    live = set()
    stack = [o for o in tape.outputs]
    while stack:
        a = stack.pop()
        group = a._siblings if a._siblings is not None else (a,)
        for s in group:
            if id(s) in live:
                continue
            live.add(id(s))
            stack.extend(s._inputs)
    dead = [a for a in tape.nodes if id(a) not in live]
    if dead:
        for a in dead:  # release their hold on inputs (consumer counts)
            set_inputs(a, ())
        tape.nodes = [a for a in tape.nodes if id(a) in live]
    return tape


