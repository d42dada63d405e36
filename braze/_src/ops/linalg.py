"""Public ops: linear algebra products (matmul, addmm, inner, outer, tensordot, einsum, kron,
vecdot) and the `@` operators.

matmul and addmm follow MLX: NumPy semantics for 1-D operands, batch axes broadcast, inexact
dtypes only. The other products go through the `Einsum` primitive, so they also accept integer
arrays (MLX rejects those because it routes them through matmul).
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import dtypes as D
from ..array import TraceState, array
from ..memory import check_allocation
from ..prims.base import bind, bind_avals
from ..prims.linalg import AddMM, BlockMaskedMM, Einsum, Matmul, RowsAddMM, RowsMatmul, SegmentedMM
from ..prims.shape import BroadcastAxes, ExpandDims, Flatten, Reshape, Squeeze, Unflatten
from ..prims.unary import STOP_GRADIENT
from ..scheduler import CompileTraces
from ._helpers import (
    AxisError,
    as_array,
    astype,
    attach_methods,
    bind_allocating,
    broadcast_shapes,
    broadcast_to_shape,
    check_dims,
)
from ._typing import ArrayLike, StreamOrDevice

__all__ = ["matmul", "addmm", "block_masked_mm", "segmented_mm", "inner", "outer", "tensordot",
           "einsum", "einsum_path", "kron", "vecdot", "hadamard_transform"]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _arr(x, op):
    return x if type(x) is array else as_array(x, op)


def _reshape(x, shape):
    shape = tuple(shape)
    return x if x.shape == shape else bind(Reshape(shape), (x,))


def _common_dtype(arrays, op):
    dt = D.promote_types(*[a.dtype for a in arrays])
    return [astype(a, dt) for a in arrays], dt


# -- matmul / addmm ---------------------------------------------------------------------------
def _check_inexact(dtypes, dt, op):
    if dt.kind not in "fc":
        given = " and ".join(d.name for d in dtypes) if len(dtypes) == 2 else \
            ", ".join(d.name for d in dtypes[:-1]) + " and " + dtypes[-1].name
        raise ValueError(f"[{op}] Only inexact types are supported but {given} were provided "
                         f"which results in {dt.name}, which is not a floating point type.")


def _matmul_operands(a, b, op):
    """Validate, lift 1-D operands to 2-D and broadcast batch axes.

    Returns (a2, b2, squeeze): a2 @ b2 has shape batch + (M, N); `squeeze` lists the axes of
    that product which 1-D operands added. Only shape-following primitives are used (ExpandDims,
    Squeeze; in a shapeless compile trace BroadcastAxes for the batch axes, MLX's dynamic
    path), so a shapeless replay re-infers every size.
    """
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"[{op}] Got 0 dimension input with shapes {a.shape} and {b.shape}. "
                         "Inputs must have at least one dimension.")
    a2 = bind(ExpandDims((0,)), (a,)) if a.ndim == 1 else a
    b2 = bind(ExpandDims((1,)), (b,)) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(
            f"[{op}] Last dimension of first input with shape {a.shape} must match second to "
            f"last dimension of second input with shape {b.shape}.")
    batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2], op=op)
    if CompileTraces.dynamic and (a2.ndim > 2 or b2.ndim > 2):
        ign = (-2, -1)
        a2, b2 = (bind(BroadcastAxes(ign, batch + x.shape[-2:]),
                       (x, bind(STOP_GRADIENT, (y,)))) for x, y in ((a2, b2), (b2, a2)))
    else:
        a2 = broadcast_to_shape(a2, batch + a2.shape[-2:])
        b2 = broadcast_to_shape(b2, batch + b2.shape[-2:])
    nd = len(batch) + 2
    squeeze = ((nd - 2,) if a.ndim == 1 else ()) + ((nd - 1,) if b.ndim == 1 else ())
    return a2, b2, squeeze


def _squeeze(x, axes):
    return bind(Squeeze(axes), (x,)) if axes else x


def matmul(a: ArrayLike, b: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """Matrix product with NumPy semantics for 1-D operands and broadcast batch axes."""
    return _matmul(a, b, "matmul")


def _matmul(a, b, op: str) -> array:
    a, b = _arr(a, op), _arr(b, op)
    dt = D.promote(a._dtype, b._dtype)
    if dt.kind not in "fc":
        _check_inexact([a.dtype, b.dtype], dt, op)
    a, b = astype(a, dt), astype(b, dt)
    if a.ndim > 2 and b.ndim <= 2 and not CompileTraces.dynamic:
        return _rows_product(a, b, op)
    a2, b2, squeeze = _matmul_operands(a, b, op)
    return _squeeze(bind_allocating(Matmul(), (a2, b2), op), squeeze)


def _rows_product(a, b, op):
    """MLX's batching of a product by a matrix (or vector) b: a's leading axes fold into rows
    of one 2-D product (one BLAS call, no broadcast copies of b), unflattened after. Not in a
    shapeless trace: the unflatten keeps the traced sizes (MLX's rule too)."""
    b2 = bind(ExpandDims((1,)), (b,)) if b.ndim == 1 else b
    if a._shape[-1] != b2._shape[0]:
        raise ValueError(
            f"[{op}] Last dimension of first input with shape {a.shape} must match second to "
            f"last dimension of second input with shape {b.shape}.")
    if not TraceState.depth and b.ndim == 2:  # nothing will transform it: one node
        shape = a._shape[:-1] + b._shape[1:]
        check_allocation(op, shape, a._dtype)
        return bind_avals(RowsMatmul(), (a, b), [(shape, a._dtype)])
    rows = bind(Flatten(0, a.ndim - 2), (a,))
    out = bind(Unflatten(0, a._shape[:-1]), (bind_allocating(Matmul(), (rows, b2), op),))
    return _squeeze(out, (out.ndim - 1,) if b.ndim == 1 else ())


def addmm(c: ArrayLike, a: ArrayLike, b: ArrayLike, alpha: float = 1.0, beta: float = 1.0, *,
          stream: StreamOrDevice = None) -> array:
    """alpha * (a @ b) + beta * c, with c broadcast to the output shape."""
    c, a, b = _arr(c, "addmm"), _arr(a, "addmm"), _arr(b, "addmm")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"[addmm] Expected a real number for {name}, got "
                            f"{type(v).__name__}: {v!r}.")
    dt = D.promote_types(c.dtype, a.dtype, b.dtype)
    _check_inexact([c.dtype, a.dtype, b.dtype], dt, "addmm")
    c, a, b = astype(c, dt), astype(a, dt), astype(b, dt)
    mm = AddMM(float(alpha), float(beta))
    if a.ndim > 2 and b.ndim == 2 and c.ndim <= 1 and not CompileTraces.dynamic:
        return _rows_addmm(mm, c, a, b)
    a2, b2, squeeze = _matmul_operands(a, b, "addmm")
    out2 = a2.shape[:-1] + (b2.shape[-1],)
    final = tuple(s for i, s in enumerate(out2) if i not in squeeze)
    try:
        ok = broadcast_shapes(c.shape, final, op="addmm") == final
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"[addmm] Input c with shape {c.shape} must broadcast to the output "
                         f"shape {final}.")
    # c takes the product's shape: a full-shape c is only given the axes 1-D operands added
    # (so it follows its own sizes at shapeless replay, as in MLX); a smaller c is broadcast
    # to the trace-time shape, which MLX bakes too
    c2 = c if c.shape == final else broadcast_to_shape(c, final)
    c2 = bind(ExpandDims(squeeze), (c2,)) if squeeze else c2
    return _squeeze(bind_allocating(mm, (c2, a2, b2), "addmm"), squeeze)


def _rows_addmm(mm, c, a, b):
    """addmm of a batch `a` by a matrix `b` with a bias-like `c` (at most 1-D) as one 2-D
    product over a's rows, as MLX batches it (see `_rows_product`)."""
    if a._shape[-1] != b._shape[0]:
        raise ValueError(
            f"[addmm] Last dimension of first input with shape {a.shape} must match second to "
            f"last dimension of second input with shape {b.shape}.")
    n = b._shape[1]
    if c.ndim == 1 and c._shape[0] not in (1, n):
        raise ValueError(f"[addmm] Input c with shape {c.shape} must broadcast to the output "
                         f"shape {a._shape[:-1] + (n,)}.")
    if not TraceState.depth:  # nothing will transform it: one node (as `_rows_product`)
        shape = a._shape[:-1] + (n,)
        check_allocation("addmm", shape, a._dtype)
        return bind_avals(RowsAddMM(mm.alpha, mm.beta), (c, a, b), [(shape, a._dtype)])
    rows = bind(Flatten(0, a.ndim - 2), (a,))
    c2 = broadcast_to_shape(c, (rows._shape[0], n))
    out = bind_allocating(mm, (c2, rows, b), "addmm")
    return bind(Unflatten(0, a._shape[:-1]), (out,))


def linear(x: array, w: array, bias: Optional[array] = None) -> array:
    """x @ w.T (+ bias), nn.Linear's product (w of shape (output_dims, input_dims)); not an
    MLX op. A batch of w's float dtype outside transformations is one node that reads w
    where it lies (RowsMatmul / RowsAddMM given b transposed): a Linear makes no transposed
    array every call. Anything else is `matmul` / `addmm` of `w.T`, checks and all."""
    if (type(x) is array and type(w) is array and x._dtype is w._dtype
            and x._dtype.kind == "f" and len(x._shape) > 2 and len(w._shape) == 2
            and x._shape[-1] == w._shape[1] and not TraceState.depth
            and not CompileTraces.dynamic):
        n = w._shape[0]
        shape = x._shape[:-1] + (n,)
        if bias is None:
            check_allocation("matmul", shape, x._dtype)
            return bind_avals(RowsMatmul(tb=True), (x, w), [(shape, x._dtype)])
        if (type(bias) is array and bias._dtype is x._dtype and len(bias._shape) == 1
                and bias._shape[0] == n):
            check_allocation("addmm", shape, x._dtype)
            return bind_avals(RowsAddMM(1.0, 1.0, tb=True), (bias, x, w), [(shape, x._dtype)])
    from .shape import transpose
    wt = transpose(w)
    return matmul(x, wt) if bias is None else addmm(bias, x, wt)


# -- block_masked_mm / segmented_mm -----------------------------------------------------------
def _real_float(a, b, op):
    dt = D.promote(a.dtype, b.dtype)
    if dt.kind != "f":
        raise ValueError(f"[{op}] Only real floating point types are supported but "
                         f"{a.dtype.name} and {b.dtype.name} were provided which results in "
                         f"{dt.name}, which is not a real floating point type.")
    return astype(a, dt), astype(b, dt)


def _block_mask(mask, squeeze_axes, shape, dt, op):
    """A user block mask: 1-D operands' axes added back, cast, broadcast to `shape`."""
    m = _arr(mask, op)
    for ax in squeeze_axes:  # negative: counted from the end of the result
        m = bind(ExpandDims((m.ndim + 1 + ax,)), (m,))
    if broadcast_shapes(m.shape, shape, op=op) != shape:
        raise ValueError(f"[{op}] Cannot broadcast a block mask of shape {m.shape} to the "
                         f"block shape {shape}.")
    return broadcast_to_shape(astype(m, dt), shape)


def block_masked_mm(a: ArrayLike, b: ArrayLike, /, block_size: int = 64,
                    mask_out: Optional[ArrayLike] = None, mask_lhs: Optional[ArrayLike] = None,
                    mask_rhs: Optional[ArrayLike] = None, *,
                    stream: StreamOrDevice = None) -> array:
    """a @ b with block_size x block_size blocks of the output and of either operand masked:
    a bool mask keeps or zeroes a block, a float one scales it (masks have shape
    (..., ceil(rows / block_size), ceil(cols / block_size)) and broadcast like the batch)."""
    op = "block_masked_mm"
    a, b = _arr(a, op), _arr(b, op)
    if mask_out is None and mask_lhs is None and mask_rhs is None:
        return _matmul(a, b, op)
    if isinstance(block_size, bool) or block_size not in (32, 64):
        raise ValueError(f"[{op}] Only block_sizes 32, 64 are supported. Got block size "
                         f"{block_size}.")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"[{op}] Got 0 dimension input. Inputs must have at least one "
                         "dimension.")
    a, b = _real_float(a, b, op)
    a2, b2, squeeze = _matmul_operands(a, b, op)
    batch, bs = a2.shape[:-2], int(block_size)
    (tm, tk), tn = (-(-d // bs) for d in a2.shape[-2:]), -(-b2.shape[-1] // bs)
    inputs = [a2, b2]
    if mask_out is not None:
        m = _arr(mask_out, op)
        dt = D.bool_ if m.dtype == D.bool_ else a2.dtype
        inputs.append(_block_mask(m, [-2] * (a.ndim == 1) + [-1] * (b.ndim == 1),
                                  batch + (tm, tn), dt, op))
    has_operand = mask_lhs is not None or mask_rhs is not None
    if has_operand:
        ml = _arr(True if mask_lhs is None else mask_lhs, op)
        mr = _arr(True if mask_rhs is None else mask_rhs, op)
        dt = D.bool_ if ml.dtype == mr.dtype == D.bool_ else a2.dtype
        inputs.append(_block_mask(ml, [-2] * (a.ndim == 1), batch + (tm, tk), dt, op))
        inputs.append(_block_mask(mr, [-1] * (b.ndim == 1), batch + (tk, tn), dt, op))
    prim = BlockMaskedMM(bs, mask_out is not None, has_operand)
    return _squeeze(bind(prim, tuple(inputs)), squeeze)


def segmented_mm(a: ArrayLike, b: ArrayLike, /, segments: ArrayLike, *,
                 stream: StreamOrDevice = None) -> array:
    """out[s...] = a[:, k0:k1] @ b[k0:k1, :] for each segment [k0, k1) of the inner axis
    (segments of shape (..., 2)); an empty segment gives zeros."""
    op = "segmented_mm"
    a, b, seg = _arr(a, op), _arr(b, op), _arr(segments, op)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"[{op}] Batched matmul not supported: expected 2-D inputs, got "
                         f"shapes {a.shape} and {b.shape}.")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"[{op}] Last dimension of first input with shape {a.shape} must "
                         f"match first dimension of second input with shape {b.shape}.")
    if seg.ndim < 1 or seg.shape[-1] != 2:
        raise ValueError(f"[{op}] The segments should have shape (..., 2) but {seg.shape} was "
                         "provided.")
    a, b = _real_float(a, b, op)
    if seg.dtype.kind not in "ui":
        raise ValueError(f"[{op}] Got segments with invalid dtype {seg.dtype.name}. Segments "
                         "must be integral.")
    return bind(SegmentedMM(), (a, b, astype(seg, D.uint32)))


# -- einsum -----------------------------------------------------------------------------------
def _tokens(sub, op_index, op="einsum"):
    """'ab...c' -> ['a', 'b', '...', 'c']; ValueError on other characters."""
    out, i = [], 0
    while i < len(sub):
        ch = sub[i]
        if ch == ".":
            if sub[i:i + 3] != "...":
                raise ValueError(f"[{op}] Invalid ellipsis in subscript {sub!r} "
                                 f"(input {op_index}).")
            out.append("...")
            i += 3
            continue
        if ch not in _LETTERS:
            raise ValueError(f"[{op}] Invalid character {ch!r} in subscripts; only letters "
                             "a-z, A-Z and '...' are allowed.")
        out.append(ch)
        i += 1
    if out.count("...") > 1:
        raise ValueError(f"[{op}] More than one ellipsis in subscript {sub!r}.")
    return out


def _einsum_plan(subscripts, shapes, op="einsum"):
    """Normalize subscripts for operands of `shapes`: explicit output, ellipsis expanded.

    Returns (input subscripts, output subscript, letter sizes).
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"[{op}] Expected a string of subscripts, got "
                        f"{type(subscripts).__name__}: {subscripts!r}.")
    s = subscripts.replace(" ", "")
    if s.count("->") > 1:
        raise ValueError(f"[{op}] Invalid subscripts {subscripts!r}: more than one '->'.")
    lhs, out = s.split("->") if "->" in s else (s, None)
    subs = lhs.split(",")
    if len(subs) != len(shapes):
        raise ValueError(f"[{op}] Number of operands, {len(shapes)}, does not match number "
                         f"of input subscripts, {len(subs)}, in {subscripts!r}.")
    toks = [_tokens(sub, i, op) for i, sub in enumerate(subs)]
    used = {c for t in toks for c in t if c != "..."}
    if out is not None:
        used |= {c for c in _tokens(out, "output", op) if c != "..."}
    free = [c for c in _LETTERS if c not in used]
    ell_dims = []
    for i, (t, shape) in enumerate(zip(toks, shapes)):
        n = len(t) - ("..." in t)
        if ("..." not in t and n != len(shape)) or n > len(shape):
            raise ValueError(f"[{op}] Invalid number of subscripts {n} for input {i} with "
                             f"{len(shape)} dimensions (shape {tuple(shape)}).")
        ell_dims.append(len(shape) - n if "..." in t else 0)
    n_ell = max(ell_dims, default=0)
    if n_ell > len(free):
        raise ValueError(f"[{op}] Too many dimensions for the available subscript letters.")
    ell = free[:n_ell]
    ins = []
    for t, e in zip(toks, ell_dims):
        r = []
        for c in t:
            r.extend(ell[n_ell - e:] if c == "..." else [c])
        ins.append("".join(r))
    if out is None:
        counts = {}
        for sub in ins:
            for c in sub:
                counts[c] = counts.get(c, 0) + 1
        out_s = "".join(ell) + "".join(sorted(c for c, k in counts.items()
                                               if k == 1 and c not in ell))
    else:
        r = []
        for c in _tokens(out, "output", op):
            r.extend(ell if c == "..." else [c])
        out_s = "".join(r)
        if len(set(out_s)) != len(out_s):
            raise ValueError(f"[{op}] Repeat indices not allowed in output {out!r}.")
        all_in = set("".join(ins))
        for c in out_s:
            if c not in all_in:
                raise ValueError(f"[{op}] Output subscript {c!r} does not appear in any "
                                 "input.")
    # sizes, with size-1 broadcasting; ellipsis axes broadcast like NumPy
    sizes = {}
    for sub, shape in zip(ins, shapes):
        for c, d in zip(sub, shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = d
    for i, (sub, shape) in enumerate(zip(ins, shapes)):
        for ax, (c, d) in enumerate(zip(sub, shape)):
            if d != sizes[c] and d != 1:
                raise ValueError(f"[{op}] Cannot broadcast dimension {ax} of input {i} with "
                                 f"shape {tuple(shape)} to size {sizes[c]}.")
    return ins, out_s, sizes


def einsum(subscripts: str, *operands: ArrayLike, stream: StreamOrDevice = None) -> array:
    """Einstein summation (NumPy's notation: explicit '->', implicit mode, '...')."""
    if not operands:
        raise ValueError("[einsum] At least one operand is required.")
    arrs = [_arr(x, "einsum") for x in operands]
    ins, out, sizes = _einsum_plan(subscripts, [a.shape for a in arrs])
    arrs, _ = _common_dtype(arrs, "einsum")
    arrs = [broadcast_to_shape(a, tuple(sizes[c] for c in sub)) for a, sub in zip(arrs, ins)]
    return bind_allocating(Einsum(",".join(ins) + "->" + out), tuple(arrs), "einsum")


# -- einsum_path: MLX's greedy contraction order (NumPy's and opt_einsum's "greedy") ------------
def _size(letters, sizes):
    return math.prod(sizes[c] for c in letters)


def _flops(letters, inner, n_terms, sizes):
    """MLX's FLOP estimate: the size of the joint index space times the number of operations
    per point (one multiply per extra term, one add when something is summed)."""
    return _size(letters, sizes) * (max(1, n_terms - 1) + inner)


def _naive_cost(terms, out, sizes):
    joint = frozenset().union(*terms)
    return _flops(joint, bool(joint - out), len(terms), sizes), len(joint)


def _pair(terms, p, q, out, sizes, limits):
    """The candidate contraction of terms p and q: [removed size, cost, kept letters, number of
    letters, p, q], or None when over the memory or cost limit."""
    joint = terms[p] | terms[q]
    rest = frozenset().union(*(t for k, t in enumerate(terms) if k not in (p, q)))
    kept = joint & (rest | out)
    new_size = _size(kept, sizes)
    cost = _flops(joint, len(joint) > len(kept), 2, sizes)
    memory, cost_left = limits
    if new_size > memory or cost > cost_left:
        return None
    removed = _size(terms[p], sizes) + _size(terms[q], sizes) - new_size
    return [removed, cost, kept, len(joint), p, q]


def _best(cands):
    """The first candidate removing the most, then costing the least (MLX's min_element)."""
    best = cands[0]
    for c in cands[1:]:
        if c[0] > best[0] or (c[0] == best[0] and c[1] < best[1]):
            best = c
    return best


def _greedy_path(terms, out, sizes, cost_limit, memory_limit):
    """Pairwise contractions, each the best candidate by `_best`; outer products only when no
    pair shares a letter. Candidates found earlier stay in the pool (their kept letters as
    computed then), as in MLX and NumPy. Returns (path, cost, scaling)."""
    terms = list(terms)
    pairs = [(p, q) for p in range(len(terms)) for q in range(p + 1, len(terms))]
    cands, path, cost, scaling = [], [], 0, 0
    for _ in range(len(terms) - 1):
        limits = (memory_limit, cost_limit - cost)
        found = [_pair(terms, p, q, out, sizes, limits) for p, q in pairs if terms[p] & terms[q]]
        cands += [c for c in found if c is not None]
        if not cands:  # then outer products too
            found = [_pair(terms, p, q, out, sizes, limits) for p, q in pairs]
            cands += [c for c in found if c is not None]
        if not cands:  # what remains is contracted in one naive step
            c, sc = _naive_cost(terms, out, sizes)
            path.append(tuple(range(len(terms))))
            return path, cost + c, max(scaling, sc)
        removed, c, kept, dims, x, y = _best(cands)
        path.append((x, y))
        cost, scaling = cost + c, max(scaling, dims)
        terms = [t for k, t in enumerate(terms) if k not in (x, y)] + [kept]
        cands = [[*cd[:4], cd[4] - (cd[4] > x) - (cd[4] > y), cd[5] - (cd[5] > x) - (cd[5] > y)]
                 for cd in cands if not {cd[4], cd[5]} & {x, y}]
        pairs = [(p, len(terms) - 1) for p in range(len(terms) - 1)]
    return path, cost, scaling


def einsum_path(subscripts: str, *operands: ArrayLike) -> Tuple[List[Tuple[int, ...]], str]:
    """The contraction order MLX's einsum picks (greedy, as NumPy's default), as
    (list of tuples of operand positions, a text report), like numpy.einsum_path."""
    if not operands:
        raise ValueError("[einsum_path] At least one operand is required.")
    shapes = [_arr(x, "einsum_path").shape for x in operands]
    ins, out, sizes = _einsum_plan(subscripts, shapes, "einsum_path")
    terms = [frozenset(sub) for sub in ins]
    out_set = frozenset(out)
    naive, naive_scaling = _naive_cost(terms, out_set, sizes)
    if len(terms) <= 2:
        path, cost, scaling = [tuple(range(len(terms)))], naive, naive_scaling
    else:
        memory = max(_size(sub, sizes) for sub in ins + [out])  # repeated letters count twice
        path, cost, scaling = _greedy_path(terms, out_set, sizes, naive, memory)
    report = (f"  Complete contraction:  {subscripts}\n"
              f"         Naive scaling:  {naive_scaling}\n"
              f"     Optimized scaling:  {scaling}\n"
              f"      Naive FLOP count:  {naive}\n"
              f"  Optimized FLOP count:  {cost}\n")
    return path, report


# -- einsum-based products --------------------------------------------------------------------
def _axes_list(ax, ndim, which, op):
    # a pair of ints is refused, as MLX's binding does: (0, 0) reads like axes=0 or like
    # ([0], [0]), and MLX takes neither
    if not isinstance(ax, (list, tuple)) or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in ax):
        raise TypeError(f"[{op}] axes must be an int or a pair of sequences of ints; the axes "
                        f"of {which} are {ax!r}.")
    out = []
    for v in ax:
        if not -ndim <= v < ndim:
            raise AxisError(f"[{op}] Invalid axis {v} for {which} with {ndim} dimensions.")
        out.append(int(v) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"[{op}] Repeated axis in {tuple(ax)} for {which}.")
    return out


def tensordot(a: ArrayLike, b: ArrayLike,
              axes: Union[int, Sequence[int], Sequence[Sequence[int]]] = 2, *,
              stream: StreamOrDevice = None) -> array:
    """Sum products over `axes`: an int n (last n of a with first n of b) or two sequences."""
    a, b = _arr(a, "tensordot"), _arr(b, "tensordot")
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if n < 0:
            raise ValueError(f"[tensordot] axes must be non-negative, got {n}.")
        if n > a.ndim or n > b.ndim:
            raise ValueError(f"[tensordot] axes={n} exceeds the dimensions of a with shape "
                             f"{a.shape} or b with shape {b.shape}.")
        ax_a, ax_b = list(range(a.ndim - n, a.ndim)), list(range(n))
    elif isinstance(axes, (list, tuple)) and len(axes) == 2:
        ax_a = _axes_list(axes[0], a.ndim, "a", "tensordot")
        ax_b = _axes_list(axes[1], b.ndim, "b", "tensordot")
        if len(ax_a) != len(ax_b):
            raise ValueError(f"[tensordot] axes must have the same size, got {axes!r}.")
    else:
        raise TypeError(f"[tensordot] axes must be an int or a pair of sequences of ints, "
                        f"got {axes!r}.")
    for i, j in zip(ax_a, ax_b):
        if a.shape[i] != b.shape[j]:
            raise ValueError(
                f"[tensordot] a and b must have the same shape on the contracted axes, got "
                f"axis {i} of {a.shape} and axis {j} of {b.shape}.")
    if a.ndim + b.ndim - len(ax_a) > len(_LETTERS):
        raise ValueError("[tensordot] Too many dimensions.")
    la = list(_LETTERS[:a.ndim])
    rest = iter(_LETTERS[a.ndim:])
    lb = [None] * b.ndim
    for i, j in zip(ax_a, ax_b):
        lb[j] = la[i]
    lb = [c if c is not None else next(rest) for c in lb]
    out = [c for i, c in enumerate(la) if i not in ax_a] + \
        [c for j, c in enumerate(lb) if j not in ax_b]
    (a, b), _ = _common_dtype([a, b], "tensordot")
    spec = "".join(la) + "," + "".join(lb) + "->" + "".join(out)
    return bind_allocating(Einsum(spec), (a, b), "tensordot")


def inner(a: ArrayLike, b: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """Sum product over the last axes (a product when either input is 0-d)."""
    a, b = _arr(a, "inner"), _arr(b, "inner")
    if a.ndim == 0 or b.ndim == 0:
        sa, sb = _LETTERS[:a.ndim], _LETTERS[a.ndim:a.ndim + b.ndim]
        (a, b), _ = _common_dtype([a, b], "inner")
        return bind_allocating(Einsum(f"{sa},{sb}->{sa}{sb}"), (a, b), "inner")
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"[inner] a and b must have the same last dimension, got shapes "
                         f"{a.shape} and {b.shape}.")
    return tensordot(a, b, ([-1], [-1]))


def outer(a: ArrayLike, b: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """The outer product of the flattened inputs."""
    a, b = _arr(a, "outer"), _arr(b, "outer")
    (a, b), _ = _common_dtype([a, b], "outer")
    a, b = _reshape(a, (a.size,)), _reshape(b, (b.size,))
    return bind_allocating(Einsum("i,j->ij"), (a, b), "outer")


def kron(a: ArrayLike, b: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """The Kronecker product."""
    a, b = _arr(a, "kron"), _arr(b, "kron")
    if a.size == 0 or b.size == 0:
        raise ValueError("[kron] Input arrays cannot be empty.")
    (a, b), _ = _common_dtype([a, b], "kron")
    n = max(a.ndim, b.ndim)
    if 2 * n > len(_LETTERS):
        raise ValueError("[kron] Too many dimensions.")
    a = _reshape(a, (1,) * (n - a.ndim) + a.shape)
    b = _reshape(b, (1,) * (n - b.ndim) + b.shape)
    la, lb = _LETTERS[:n], _LETTERS[n:2 * n]
    spec = f"{la},{lb}->" + "".join(x + y for x, y in zip(la, lb))
    prod = bind_allocating(Einsum(spec), (a, b), "kron")
    return _reshape(prod, check_dims(tuple(x * y for x, y in zip(a.shape, b.shape)), "kron"))


def _paley_ii(q):
    """Paley's second construction, order 2(q + 1) for a prime q = 1 mod 4: the symmetric
    conference matrix C = [[0, 1], [1, Q]] with Q[i, j] the quadratic character of j - i mod q,
    then H = C (x) [[1, 1], [1, -1]] + I (x) [[1, -1], [-1, -1]]."""
    squares = {i * i % q for i in range(1, q)}
    chi = [0] + [1 if d in squares else -1 for d in range(1, q)]
    c = np.zeros((q + 1, q + 1), np.int64)
    c[0, 1:] = c[1:, 0] = 1
    c[1:, 1:] = [[chi[(j - i) % q] for j in range(q)] for i in range(q)]
    eye = np.eye(q + 1, dtype=np.int64)
    return np.kron(c, [[1, 1], [1, -1]]) + np.kron(eye, [[1, -1], [-1, -1]])


def _williamson(n):
    """Williamson's array [[A, B, C, D], [-B, A, -D, C], [-C, D, A, -B], [-D, -C, B, A]], order
    4n for n = 5 or 7, from symmetric circulants with A^2 + B^2 + C^2 + D^2 = 4n I: the first
    4 - t are 2I - J and the others 2(I + P^k + P^-k) - J for k = 1..t, t = (n - 1) / 2 (P the
    cyclic shift; the identity follows from J^2 = nJ and the shifts covering each residue)."""
    t = (n - 1) // 2
    eye, ones = np.eye(n, dtype=np.int64), np.ones((n, n), np.int64)
    near = [eye + np.roll(eye, k, 1) + np.roll(eye, -k, 1) for k in range(1, t + 1)]
    a, b, c, d = [2 * eye - ones] * (4 - t) + [2 * s - ones for s in near]
    return np.block([[a, b, c, d], [-b, a, -d, c], [-c, d, a, -b], [-d, -c, b, a]])


# The orders MLX tabulates, built here: these constructions give MLX's matrices exactly
_HADAMARD_M = {12: lambda: _paley_ii(5), 20: lambda: _williamson(5), 28: lambda: _williamson(7)}


def _hadamard_factor(n):
    """n = m * 2^k -> (m, 2^k) with m in (1, 12, 20, 28) (at most one m fits). MLX takes the
    first m dividing n even when n / m is no power of 2 (then its kernel misbehaves: n = 36
    corrupts the heap); braze rejects those n."""
    if n & (n - 1) == 0:
        return 1, n
    for m in _HADAMARD_M:
        if n % m == 0 and (n // m) & (n // m - 1) == 0:
            return m, n // m
    raise ValueError(f"[hadamard_transform] Only supports n = m*2^k where m in (1, 12, 20, 28), "
                     f"got n = {n}.")


def hadamard_transform(a: ArrayLike, scale: Optional[float] = None,
                       stream: StreamOrDevice = None) -> array:
    """The Walsh-Hadamard transform along the last axis, times `scale` (default 1/sqrt(n)).

    For n = m * 2^k the matrix is H_m (x) H_{2^k}, as in MLX. Sylvester's H_{2^k} is a butterfly
    (a + b, a - b) along each of the k axes of the last axis viewed as (m,) + (2,) * k; H_m (an
    order-12, 20 or 28 matrix built in `_HADAMARD_M`) is a matmul along the m axis. A composite,
    so its transforms come for free.
    """
    from .elementwise import add, multiply, subtract
    from .shape import concatenate, split

    a = _arr(a, "hadamard_transform")
    if a.size == 0:
        raise ValueError("[hadamard_transform] Does not support empty arrays.")
    n = a.shape[-1] if a.ndim else 1
    m, p = _hadamard_factor(n)
    scale = 1.0 / math.sqrt(n) if scale is None else float(scale)
    dt = a.dtype if a.dtype.kind == "f" else D.float32
    x = astype(a, dt)
    k = p.bit_length() - 1
    lead = a.shape[:-1]
    x = _reshape(x, lead + (m,) + (2,) * k)
    # stages in MLX's order (adjacent pairs first), each rounded to dt as MLX's kernel does
    for j in reversed(range(len(lead) + 1, len(lead) + 1 + k)):
        lo, hi = split(x, 2, axis=j)
        x = concatenate([add(lo, hi), subtract(lo, hi)], axis=j)
    if m == 1:  # the scale is a float32 (MLX scales each rounded value in float) ...
        x = _reshape(x, a.shape)
        if scale == 1 or n == 1:  # ... except for n = 1, a multiply by the scale in dt
            return x if scale == 1 else multiply(x, array(scale, dt))
        return astype(multiply(astype(x, D.float32), array(scale, D.float32)), dt)
    # MLX: the H_m stage and the scale in float, rounded once
    x = matmul(array(_HADAMARD_M[m](), D.float32), astype(_reshape(x, lead + (m, p)), D.float32))
    x = x if scale == 1 else multiply(x, array(scale, D.float32))
    return astype(_reshape(x, a.shape), dt)


def vecdot(a: ArrayLike, b: ArrayLike, /, *, axis: int = -1,
           stream: StreamOrDevice = None) -> array:
    """sum(conj(a) * b) over `axis` (inputs broadcast against each other)."""
    a, b = _arr(a, "vecdot"), _arr(b, "vecdot")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"[vecdot] Inputs must be at least 1-D, got shapes {a.shape} and "
                         f"{b.shape}.")
    shape = broadcast_shapes(a.shape, b.shape, op="vecdot")
    nd = len(shape)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"[vecdot] Expected an int axis, got {type(axis).__name__}: {axis!r}.")
    if not -nd <= axis < nd:
        raise AxisError(f"[vecdot] axis {axis} is out of bounds for inputs with shapes "
                        f"{a.shape} and {b.shape}.")
    axis = int(axis) % nd
    sizes = [x.shape[axis - nd + x.ndim] if axis - nd + x.ndim >= 0 else 1 for x in (a, b)]
    if sizes[0] != sizes[1]:  # as MLX: the contracted axis never broadcasts
        raise ValueError(f"[vecdot] a and b must have the same size along axis {axis}, got "
                         f"shapes {a.shape} and {b.shape}.")
    (a, b), dt = _common_dtype([a, b], "vecdot")
    if dt.kind == "c":
        from .elementwise import conjugate
        a = conjugate(a)
    a, b = broadcast_to_shape(a, shape), broadcast_to_shape(b, shape)
    la = _LETTERS[:nd]
    out = la[:axis] + la[axis + 1:]
    return bind(Einsum(f"{la},{la}->{out}"), (a, b))


# -- operators --------------------------------------------------------------------------------
def _matmul_method(self, other):
    return matmul(self, other)


def _rmatmul_method(self, other):
    return matmul(other, self)


def _imatmul_method(self, other):
    """`a @= b` updates every reference to `a`, as in MLX."""
    from ..array import overwrite_descriptor

    overwrite_descriptor(self, matmul(self, other))
    return self


attach_methods({"__matmul__": _matmul_method, "__rmatmul__": _rmatmul_method,
                "__imatmul__": _imatmul_method})
