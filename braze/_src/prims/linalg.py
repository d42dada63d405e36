"""Primitives: linear algebra (Matmul, AddMM, Einsum).

Matmul and AddMM take operands of rank >= 2 whose batch axes the op layer has already broadcast
(as MLX does), so their rules never need to sum over broadcast batch axes. float16 and bfloat16
products are computed in float32 and rounded once at the end.
"""
from __future__ import annotations

import math
import os

import numpy as np

from .. import config
from .. import dtypes as D
from ..threads import POOL, num_threads
from .base import Primitive, lazy_dataclass, ops

_HALF = ("float16", "bfloat16")


class _Blas:
    """The BLAS thread policy in force (BRAZE_BLAS_THREADS, see `blas_matmul`): `applied` is
    the knob value it was made for (None: nothing done yet), `split` whether braze splits
    products across its own threads."""

    applied = None
    split = False
    controller = None
    original = None  # the limiter whose restore_original_limits() undoes the first limit


#: the user's own BLAS thread settings, which braze leaves alone
USER_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _limit_blas(n: int) -> bool:
    """Limit BLAS to `n` threads (0: back to its own setting); False where that failed."""
    try:
        if n <= 0:
            if _Blas.original is not None:
                _Blas.original.restore_original_limits()
                _Blas.original = None
            return True
        if _Blas.controller is None:
            from threadpoolctl import ThreadpoolController
            _Blas.controller = ThreadpoolController()
        lim = _Blas.controller.limit(limits=n, user_api="blas")
        if _Blas.original is None:
            _Blas.original = lim
        return True
    except Exception:  # threadpoolctl missing or unable: BLAS keeps its own setting
        return False


def _blas_threads() -> bool:
    """Apply BRAZE_BLAS_THREADS when it changed (one comparison per call); returns whether
    braze splits products itself."""
    n = config._current.blas_threads
    if n == _Blas.applied:
        return _Blas.split
    _Blas.applied = n
    if any(os.environ.get(v) for v in USER_BLAS_VARS):
        _Blas.split = False
    elif n > 0:
        _Blas.split = False
        _limit_blas(n)
    else:
        _Blas.split = _limit_blas(1)
    return _Blas.split


#: multiply-adds from which a product is split (below, one BLAS call costs less than a split)
SPLIT_MACS = 1 << 23
#: the fewest rows / columns a chunk of a split product has (smaller chunks lose BLAS speed:
#: measured on one thread, 64-row chunks of a 1024^3 product cost 30 % more, 128-row 20 %)
CHUNK_ROWS, CHUNK_COLS, CHUNK_DEPTH = 128, 256, 1024


def _row_chunks(lo, hi, a, b, out):
    np.matmul(a[lo:hi], b, out=out[lo:hi])


def _depth_chunks(lo, hi, a, b, parts, step):
    for c in range(lo, hi):
        np.matmul(a[:, c * step:(c + 1) * step], b[c * step:(c + 1) * step], out=parts[c])


def _col_chunks(lo, hi, a, b, out):
    out[:, lo:hi] = a @ b[:, lo:hi]


def blas_matmul(a: np.ndarray, b: np.ndarray, out=None) -> np.ndarray:
    """a @ b for 2-D float operands (into `out` if given), across braze's threads.

    NumPy's OpenBLAS keeps threads of its own, which busy-wait between calls and which a
    product waits for: on a 2-core machine with another process keeping one core busy, a
    256^3 float32 product took 14-48 ms with OpenBLAS's 2 threads against 0.5 ms with one,
    and they compete with braze's kernel threads. So by default (`BRAZE_BLAS_THREADS=0`)
    braze limits BLAS to one thread (threadpoolctl) and splits a large product into chunks of
    rows (or of columns, for few rows; or partial products over the contraction, for few of
    both) that its own pool's threads share (threads.py: the
    caller never waits for a thread that is not running). The chunking depends on the shape
    and the thread count only, never on timing, so a product's rounding is the same every
    call. `BRAZE_BLAS_THREADS=n > 0` leaves BLAS n threads and does not split; nor does
    braze when the user set one of `USER_BLAS_VARS`."""
    m, k = a.shape
    n = b.shape[1]
    split = _blas_threads()  # applies the BLAS limit at the first product
    if m * k * n < SPLIT_MACS or not split or a.dtype.kind not in "fc":
        if out is None:
            # np.dot reaches the same BLAS call with ~0.7 us less dispatch than the matmul
            # gufunc (a decode step's products are that small); halves and integers keep
            # matmul's own loops
            if a.dtype is b.dtype and a.dtype.itemsize >= 4 and a.dtype.kind in "fc":
                return np.dot(a, b)
            return np.matmul(a, b)
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty((m, n), np.result_type(a, b))
    nt = num_threads()
    if nt <= 1:
        return np.matmul(a, b, out=out)
    if m >= 2 * CHUNK_ROWS:
        POOL.run_chunks(_row_chunks, m, (a, b, out), max(CHUNK_ROWS, -(-m // (2 * nt))))
    elif n >= 2 * CHUNK_COLS:
        POOL.run_chunks(_col_chunks, n, (a, b, out), max(CHUNK_COLS, -(-n // (2 * nt))))
    elif k >= 2 * CHUNK_DEPTH:
        # few rows and columns, a long contraction (a convolution's weight gradient): partial
        # products over slices of k, added in order
        step = max(CHUNK_DEPTH, -(-k // (2 * nt)))
        parts = np.empty((-(-k // step), m, n), out.dtype)
        POOL.run_chunks(_depth_chunks, len(parts), (a, b, parts, step), 1)
        np.sum(parts, axis=0, out=out)
    else:
        np.matmul(a, b, out=out)
    return out


def _batch_chunks(lo, hi, index, a, b, out):
    for i in index[lo:hi]:
        np.matmul(a[i], b[i], out=out[i])


def _matmul(a, b):
    """np.matmul of operands of equal rank >= 2 and equal batch axes, across braze's threads
    as `blas_matmul`: a large 2-D product split itself, a batch of smaller ones shared out by
    whole products (whose rounding does not depend on the split)."""
    if a.ndim == 2:
        return blas_matmul(a, b)
    per = a.shape[-2] * a.shape[-1] * b.shape[-1]
    count = math.prod(a.shape[:-2])
    nt = num_threads()
    if not _blas_threads() or nt <= 1 or per * count < SPLIT_MACS:
        return np.matmul(a, b)
    out = np.empty(a.shape[:-1] + b.shape[-1:], np.result_type(a, b))
    index = list(np.ndindex(*a.shape[:-2]))
    if per >= SPLIT_MACS:
        for i in index:
            blas_matmul(a[i], b[i], out[i])
    else:
        POOL.run_chunks(_batch_chunks, count, (index, a, b, out), -(-count // (4 * nt)))
    return out


def _compute(x):
    """Half floats are multiplied in float32."""
    if x.dtype.itemsize > 2:  # neither float16 nor bfloat16 (the common case, at once)
        return x
    return x.astype(np.float32) if D.is_half(x.dtype) else x


def _swap(x):
    """Swap the last two axes of a braze array (transform rules only)."""
    return ops.swapaxes(x, -1, -2)


def matmul_shape(a_shape, b_shape, op="matmul"):
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise ValueError(f"[{op}] Operands must have at least 2 dimensions, got shapes "
                         f"{tuple(a_shape)} and {tuple(b_shape)}.")
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(
            f"[{op}] Last dimension of first input with shape {tuple(a_shape)} must match "
            f"second to last dimension of second input with shape {tuple(b_shape)}.")
    if tuple(a_shape[:-2]) != tuple(b_shape[:-2]):
        raise ValueError(f"[{op}] Batch dimensions of {tuple(a_shape)} and {tuple(b_shape)} "
                         "must be equal (broadcast them first).")
    return tuple(a_shape[:-1]) + (b_shape[-1],)


@lazy_dataclass
class Matmul(Primitive):
    """a @ b over the last two axes; batch axes equal."""

    matrix_product = True

    def abstract_eval(self, a, b):
        return [(matmul_shape(a.shape, b.shape), a.dtype)]

    def eval_cpu(self, a, b):
        out = _matmul(_compute(a), _compute(b))
        return [out.astype(a.dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        a, b = primals
        g = cotangents[0]
        out = []
        for i in argnums:
            out.append(ops.matmul(g, _swap(b)) if i == 0 else ops.matmul(_swap(a), g))
        return out

    def jvp(self, primals, tangents, argnums):
        a, b = primals
        out = None
        for i, t in zip(argnums, tangents):
            term = ops.matmul(t, b) if i == 0 else ops.matmul(a, t)
            out = term if out is None else out + term
        return [out]

    def vmap(self, inputs, axes):
        a, b = inputs
        ax_a, ax_b = axes
        if ax_a is None:
            a = ops.expand_dims(a, 0)  # a batch of one, broadcast by matmul
        else:
            a = ops.moveaxis(a, ax_a, 0)
        if ax_b is None:
            b = ops.expand_dims(b, 0)
        else:
            b = ops.moveaxis(b, ax_b, 0)
        return [ops.matmul(a, b)], [0]


@lazy_dataclass
class RowsMatmul(Primitive):
    """a @ b for `a` of rank > 2 and a matrix `b`: a's leading axes fold into the rows of one
    2-D product. It is the ops layer's Flatten + Matmul + Unflatten (MLX's batching of a
    product by a matrix) as one node, with the same arithmetic; `matmul` makes it outside
    transformations only (an eager decode step's Linear: one node, not three), and its rules
    are those of the three nodes, written with the ops. `tb`: b is given transposed (an
    nn.Linear's weight, `ops.linear`), so a Linear makes no transposed array every call."""

    tb: bool = False

    def abstract_eval(self, a, b):
        return [(tuple(a.shape[:-1]) + (b.shape[0] if self.tb else b.shape[1],), a.dtype)]

    def eval_cpu(self, a, b):
        if self.tb:
            b = b.T  # a view: the same buffer and layout the transposed array had
        if a.dtype is b.dtype and a.dtype.itemsize > 2:  # no half to widen (a Linear's case)
            out = blas_matmul(_as_rows(a), b)
            return [out.reshape(a.shape[:-1] + out.shape[1:])]
        out = _matmul(_compute(_as_rows(a)), _compute(b))
        return [out.reshape(a.shape[:-1] + out.shape[1:]).astype(a.dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        a, b = primals
        b = _untransposed(self, b)
        return [_transposed_back(self, _rows_grad(a, b, cotangents[0], i), i == 1)
                for i in argnums]

    def jvp(self, primals, tangents, argnums):  # linear in each operand: Matmul's terms
        return Matmul.jvp(self, *_untransposed_pair(self, primals, tangents, argnums, 1),
                          argnums)

    def vmap(self, inputs, axes):
        b, ax_b = _untransposed_vmap(self, inputs[1], axes[1])
        return [_rows_vmap(inputs[0], b, axes[0], ax_b)], [0]


def _untransposed(prim, b):
    """The product's right operand of a rows primitive whose b may be given transposed."""
    return _swap(b) if prim.tb else b


def _transposed_back(prim, g, is_b):
    """A cotangent for the right operand, in the layout the primitive was given it."""
    return _swap(g) if prim.tb and is_b else g


def _untransposed_pair(prim, primals, tangents, argnums, k):
    """primals and tangents with input k (the right operand) untransposed."""
    if not prim.tb:
        return primals, tangents
    primals = list(primals)
    primals[k] = _swap(primals[k])
    return primals, [_swap(t) if i == k else t for i, t in zip(argnums, tangents)]


def _untransposed_vmap(prim, b, ax):
    """The right operand (and its batch axis) of a vmapped rows primitive, untransposed:
    with a batch axis, it moves in front of the matrix axes, which swap."""
    if not prim.tb:
        return b, ax
    if ax is None:
        return _swap(b), None
    return _swap(ops.moveaxis(b, ax, 0)), 0


def _scaled(g, factor):
    """g * factor, or g itself for a factor of 1 (no node: a Linear's weight gradient stays
    the product, which the compile pass `transposed_products` may then write row-major)."""
    return g if factor == 1.0 else g * factor


def _as_rows(a):
    """a's leading axes folded into rows (sized explicitly: -1 is ambiguous when empty)."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _rows_grad(a, b, g, i):
    """The gradient of a rows product a @ b for operand i (0: a, 1: b), g the output's."""
    if i == 0:
        return ops.matmul(g, _swap(b))
    return ops.matmul(_swap(ops.flatten(a, 0, -2)), ops.flatten(g, 0, -2))


def _rows_vmap(a, b, ax_a, ax_b):
    """The rows product of a and b vmapped over axes ax_a, ax_b (one may be None), the batch
    axis in front."""
    a = ops.moveaxis(a, ax_a, 0) if ax_a is not None else a
    if ax_b is None:  # a's batch axis is one more leading axis
        return ops.matmul(a, b)
    if ax_a is None:
        a = ops.expand_dims(a, 0)
    # b's batch axis in front of a's leading axes (broadcast over them)
    b = ops.moveaxis(b, ax_b, 0)
    return ops.matmul(a, ops.reshape(b, b.shape[:1] + (1,) * (a.ndim - 3) + b.shape[1:]))


def _addmm(c, a, b, alpha, beta):
    """alpha * (a @ b) + beta * c in the compute dtype (c broadcasts to the product)."""
    out = _matmul(_compute(a), _compute(b))
    if alpha != 1.0:
        out = out * out.dtype.type(alpha)
    if beta != 0.0:  # like BLAS: beta == 0 ignores c (even its NaNs)
        cc = _compute(c)
        out = out + (cc if beta == 1.0 else cc * cc.dtype.type(beta))
    return out


@lazy_dataclass
class RowsAddMM(Primitive):
    """alpha * (a @ b) + beta * c for `a` of rank > 2, a matrix `b` and a bias `c` of at most
    one axis: the ops layer's Flatten + Broadcast + AddMM + Unflatten (`_rows_addmm`) as one
    node with the same arithmetic, made outside transformations only (as `RowsMatmul`)."""

    alpha: float = 1.0
    beta: float = 1.0
    tb: bool = False  # b is given transposed (as RowsMatmul's)

    def abstract_eval(self, c, a, b):
        return [(tuple(a.shape[:-1]) + (b.shape[0] if self.tb else b.shape[1],), a.dtype)]

    def eval_cpu(self, c, a, b):
        if self.tb:
            b = b.T
        rows = _as_rows(a)
        out = _addmm(np.broadcast_to(c, (rows.shape[0], b.shape[1])), rows, b, self.alpha,
                     self.beta)
        return [out.reshape(a.shape[:-1] + out.shape[1:]).astype(a.dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        c, a, b = primals
        b = _untransposed(self, b)
        g = cotangents[0]
        out = []
        for i in argnums:
            if i == 0:  # the bias: summed over the rows (and the columns for one value)
                gc = ops.sum(g, axis=tuple(range(g.ndim - 1)))
                if tuple(gc.shape) != tuple(c.shape):
                    gc = ops.reshape(ops.sum(gc), c.shape)
                out.append(gc * self.beta)
            else:
                out.append(_transposed_back(self, _rows_grad(a, b, g, i - 1), i == 2)
                           * self.alpha)
        return out

    def jvp(self, primals, tangents, argnums):
        primals, tangents = _untransposed_pair(self, primals, tangents, argnums, 2)
        (out,) = AddMM.jvp(self, primals, tangents, argnums)  # c's term may be the bias's shape
        a, b = primals[1:]
        return [ops.broadcast_to(out, tuple(a.shape[:-1]) + tuple(b.shape[1:]))]

    def vmap(self, inputs, axes):
        c, a, b = inputs
        ax_c, ax_a, ax_b = axes
        b, ax_b = _untransposed_vmap(self, b, ax_b)
        p = ops.matmul(a, b) if ax_a is None and ax_b is None else _rows_vmap(a, b, ax_a, ax_b)
        p = p * self.alpha
        if self.beta == 0.0:  # as AddMM: c is ignored (even its NaNs)
            if ax_a is None and ax_b is None:  # only c is batched: one product for each
                p = ops.broadcast_to(p, (c.shape[ax_c],) + tuple(p.shape))
            return [p], [0]
        if ax_c is not None:  # (V,) + c's own axes, in front of the product's axes
            c = ops.moveaxis(c, ax_c, 0)
            rank = a.ndim - (ax_a is not None) + 1
            c = ops.reshape(c, c.shape[:1] + (1,) * (rank - c.ndim) + c.shape[1:])
        return [p + c * self.beta], [0]


@lazy_dataclass
class AddMM(Primitive):
    """alpha * (a @ b) + beta * c, with c already broadcast to the output shape."""

    alpha: float = 1.0
    beta: float = 1.0

    def abstract_eval(self, c, a, b):
        shape = matmul_shape(a.shape, b.shape, "addmm")
        if tuple(c.shape) != shape:
            raise ValueError(f"[addmm] c must have the output shape {shape}, got {c.shape}.")
        return [(shape, a.dtype)]

    def eval_cpu(self, c, a, b):
        return [_addmm(c, a, b, self.alpha, self.beta).astype(a.dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        c, a, b = primals
        g = cotangents[0]
        out = []
        for i in argnums:  # MLX's: the cotangent scaled first, and only by a factor not 1
            if i == 0:
                out.append(_scaled(g, self.beta))
            elif i == 1:
                out.append(ops.matmul(_scaled(g, self.alpha), _swap(b)))
            else:
                out.append(ops.matmul(_swap(a), _scaled(g, self.alpha)))
        return out

    def jvp(self, primals, tangents, argnums):
        c, a, b = primals
        out = None
        for i, t in zip(argnums, tangents):
            if i == 0:
                term = t * self.beta
            elif i == 1:
                term = ops.matmul(t, b) * self.alpha
            else:
                term = ops.matmul(a, t) * self.alpha
            out = term if out is None else out + term
        return [out]

    def vmap(self, inputs, axes):
        moved = []
        for x, ax in zip(inputs, axes):
            moved.append(ops.expand_dims(x, 0) if ax is None else ops.moveaxis(x, ax, 0))
        c, a, b = moved
        return [ops.addmm(c, a, b, alpha=self.alpha, beta=self.beta)], [0]


def einsum_sum_dtype(dtype: D.Dtype) -> D.Dtype:
    """The dtype of a summing einsum: MLX's `sum` widens small integers and bool."""
    if dtype is D.bool_ or dtype in (D.int8, D.int16):
        return D.int32
    if dtype in (D.uint8, D.uint16):
        return D.uint32
    return dtype


@lazy_dataclass
class Einsum(Primitive):
    """np.einsum with explicit subscripts (no ellipsis); operands share one dtype and have the
    exact sizes of their subscripts (size-1 broadcasting is done by the op layer)."""

    subscripts: str

    def _parts(self):
        lhs, out = self.subscripts.split("->")
        return lhs.split(","), out

    def abstract_eval(self, *xs):
        ins, out = self._parts()
        sizes = {}
        for s, x in zip(ins, xs):
            for c, d in zip(s, x.shape):
                sizes[c] = d
        dtype = xs[0].dtype if xs else D.float32
        summed = any(c not in out for s in ins for c in s)
        return [(tuple(sizes[c] for c in out), einsum_sum_dtype(dtype) if summed else dtype)]

    def eval_cpu(self, *xs):
        ins, out = self._parts()
        summed = any(c not in out for s in ins for c in s)
        dt = xs[0].dtype
        bdt = D.from_numpy(dt)
        target = einsum_sum_dtype(bdt) if summed else bdt
        if bdt.name in _HALF:
            xs = [x.astype(np.float32) for x in xs]
        elif target is not bdt:
            xs = [x.astype(target.np_dtype) for x in xs]
        _blas_threads()
        r = np.einsum(self.subscripts, *xs, optimize=len(xs) > 1)
        return [np.asarray(r).astype(target.np_dtype, copy=False)]

    def vjp(self, primals, cotangents, argnums, outputs):
        ins, out = self._parts()
        g = cotangents[0]
        res = []
        for i in argnums:
            si = ins[i]
            if len(set(si)) != len(si):
                raise NotImplementedError(
                    "[Einsum] vjp with a repeated index in one operand is not implemented.")
            others = [(s, x) for j, (s, x) in enumerate(zip(ins, primals)) if j != i]
            present = set(out).union(*[set(s) for s, _ in others]) if others else set(out)
            keep = "".join(c for c in si if c in present)
            subs = ",".join([out] + [s for s, _ in others]) + "->" + keep
            r = ops.einsum(subs, g, *[x for _, x in others])
            if keep != si:  # indices only this operand carries: the cotangent is constant there
                shape = [1] * len(si)
                for ax, c in enumerate(si):
                    if c in present:
                        shape[ax] = primals[i].shape[ax]
                r = ops.broadcast_to(ops.reshape(r, tuple(shape)), primals[i].shape)
            res.append(r)
        return res

    def jvp(self, primals, tangents, argnums):
        out = None
        for i, t in zip(argnums, tangents):
            args = list(primals)
            args[i] = t
            term = ops.einsum(self.subscripts, *args)
            out = term if out is None else out + term
        return [out]

    def vmap(self, inputs, axes):
        ins, out = self._parts()
        used = set(self.subscripts)
        letter = next(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba"
                      if c not in used)
        new_ins, args = [], []
        for s, x, ax in zip(ins, inputs, axes):
            if ax is None:
                new_ins.append(s)
                args.append(x)
            else:
                new_ins.append(letter + s)
                args.append(ops.moveaxis(x, ax, 0))
        return [ops.einsum(",".join(new_ins) + "->" + letter + out, *args)], [0]


# -- BlockMaskedMM ----------------------------------------------------------------------------
def _tiles(n, bs):
    return -(-n // bs)


def _np_expand(mask, bs, rows, cols):
    """A (..., tiles, tiles) block mask as a (..., rows, cols) element mask."""
    return np.repeat(np.repeat(mask, bs, axis=-2), bs, axis=-1)[..., :rows, :cols]


def _np_masked(x, mask, bs):
    """Bool masks keep or zero whole blocks (so NaN in a dropped block is gone, as in MLX);
    float masks scale them."""
    m = _np_expand(mask, bs, x.shape[-2], x.shape[-1])
    return np.where(m, x, 0).astype(x.dtype, copy=False) if m.dtype == np.bool_ else x * m


def _expand(mask, bs, rows, cols):
    """The braze-ops form of `_np_expand` (transform rules only)."""
    lead, ty, tx = tuple(mask.shape[:-2]), mask.shape[-2], mask.shape[-1]
    m = ops.broadcast_to(ops.expand_dims(mask, (-3, -1)), lead + (ty, bs, tx, bs))
    return ops.reshape(m, lead + (ty * bs, tx * bs))[..., :rows, :cols]


def _masked(x, mask, bs):
    if mask is None:
        return x
    m = _expand(mask, bs, x.shape[-2], x.shape[-1])
    return ops.where(m, x, ops.zeros_like(x)) if mask.dtype == D.bool_ else x * m


def _block_sum(x, bs):
    """(..., rows, cols) -> (..., tiles, tiles): the sum over each block (zero-padded)."""
    rows, cols = x.shape[-2], x.shape[-1]
    ty, tx = _tiles(rows, bs), _tiles(cols, bs)
    nd = x.ndim
    x = ops.pad(x, [(0, 0)] * (nd - 2) + [(0, ty * bs - rows), (0, tx * bs - cols)])
    x = ops.reshape(x, tuple(x.shape[:-2]) + (ty, bs, tx, bs))
    return ops.sum(x, axis=(-3, -1))


@lazy_dataclass
class BlockMaskedMM(Primitive):
    """Inputs (a, b[, out_mask][, lhs_mask, rhs_mask]): ((a * L) @ (b * R)) * O with each mask
    given per block_size x block_size block and expanded; a bool mask keeps or zeroes its
    blocks, a float one (a's dtype) scales them. The op layer broadcasts every batch axis and
    casts the masks, as MLX does."""
    reinfers_shape = False  # as in MLX

    block_size: int
    has_out: bool
    has_operand: bool

    def _split(self, xs):
        a, b, rest = xs[0], xs[1], list(xs[2:])
        o = rest.pop(0) if self.has_out else None
        lm, rm = (rest[0], rest[1]) if self.has_operand else (None, None)
        return a, b, o, lm, rm

    def abstract_eval(self, *xs):
        a, b = xs[0], xs[1]
        return [(matmul_shape(a.shape, b.shape, "block_masked_mm"), a.dtype)]

    def eval_cpu(self, *xs):
        a, b, o, lm, rm = self._split(xs)
        bs = self.block_size
        a, b = _compute(a), _compute(b)
        if lm is not None:
            a, b = _np_masked(a, _compute(lm), bs), _np_masked(b, _compute(rm), bs)
        out = _matmul(a, b)
        if o is not None:
            out = _np_masked(out, _compute(o), bs)
        return [out.astype(xs[0].dtype, copy=False)]

    def _index(self, name):
        order = ["a", "b"] + (["out"] if self.has_out else []) + \
            (["lhs", "rhs"] if self.has_operand else [])
        return order.index(name) if name in order else -1

    def vjp(self, primals, cotangents, argnums, outputs):
        a, b, o, lm, rm = self._split(primals)
        bs = self.block_size
        for i in argnums:
            if i in (self._index("lhs"), self._index("rhs")) and primals[i].dtype == D.bool_:
                raise ValueError("[BlockMaskedMM] Cannot calculate VJP with respect to boolean "
                                 "masks. Use stop_gradient on masks to stop gradients from "
                                 "being computed.")
        am, bm = _masked(a, lm, bs), _masked(b, rm, bs)
        dc = _masked(cotangents[0], o, bs)
        grads = {}
        if {0, self._index("lhs")} & set(argnums):
            grads["da"] = ops.matmul(dc, _swap(bm))  # before the lhs mask
        if {1, self._index("rhs")} & set(argnums):
            grads["db"] = ops.matmul(_swap(am), dc)
        out = []
        for i in argnums:
            if i == 0:
                out.append(_masked(grads["da"], lm, bs))
            elif i == 1:
                out.append(_masked(grads["db"], rm, bs))
            elif i == self._index("out"):
                # d/dO of C * O is C, the unmasked product (MLX 0.32.4 uses C * O here)
                out.append(None if o.dtype == D.bool_ else
                           _block_sum(cotangents[0] * ops.matmul(am, bm), bs))
            elif i == self._index("lhs"):
                out.append(_block_sum(a * grads["da"], bs))
            else:
                out.append(_block_sum(b * grads["db"], bs))
        return out

    def jvp(self, primals, tangents, argnums):
        a, b, o, lm, rm = self._split(primals)
        bs = self.block_size
        am, bm = _masked(a, lm, bs), _masked(b, rm, bs)
        total = None
        for i, t in zip(argnums, tangents):
            if primals[i].dtype == D.bool_:
                continue
            if i == 0:
                term = _masked(ops.matmul(_masked(t, lm, bs), bm), o, bs)
            elif i == 1:
                term = _masked(ops.matmul(am, _masked(t, rm, bs)), o, bs)
            elif i == self._index("out"):
                term = ops.matmul(am, bm) * _expand(t, bs, a.shape[-2], b.shape[-1])
            elif i == self._index("lhs"):
                term = _masked(ops.matmul(a * _expand(t, bs, *a.shape[-2:]), bm), o, bs)
            else:
                term = _masked(ops.matmul(am, b * _expand(t, bs, *b.shape[-2:])), o, bs)
            total = term if total is None else total + term
        if total is None:
            total = ops.zeros(tuple(a.shape[:-1]) + (b.shape[-1],), a.dtype)
        return [total]

    def vmap(self, inputs, axes):
        # every input carries the batch axes, so a leading vmapped axis (size 1 where an input
        # is unbatched) is one more batch axis for the op to broadcast
        moved = [ops.expand_dims(x, 0) if ax is None else ops.moveaxis(x, ax, 0)
                 for x, ax in zip(inputs, axes)]
        a, b, o, lm, rm = self._split(moved)
        return [ops.block_masked_mm(a, b, self.block_size, o, lm, rm)], [0]


# -- SegmentedMM ------------------------------------------------------------------------------
def segment_masks(segments, k):
    """(..., 2) segments [start, end) -> (..., k) float masks of the inner indices they cover
    (transform rules only; an empty or reversed segment covers nothing)."""
    idx = ops.arange(k, dtype=D.int64)
    s = ops.astype(segments, D.int64)
    return ops.logical_and(idx >= s[..., 0:1], idx < s[..., 1:2])


@lazy_dataclass
class SegmentedMM(Primitive):
    """Inputs (a (M, K), b (K, N), segments (..., 2) uint32): out[s...] = a[:, k0:k1] @
    b[k0:k1, :] for [k0, k1) = segments[s...]; zeros where k1 <= k0; bounds are clipped to
    [0, K] (MLX reads out of bounds there)."""
    reinfers_shape = False  # as in MLX

    def abstract_eval(self, a, b, seg):
        return [(tuple(seg.shape[:-1]) + (a.shape[0], b.shape[1]), a.dtype)]

    def eval_cpu(self, a, b, seg):
        _blas_threads()
        M, K, N = a.shape[0], a.shape[1], b.shape[1]
        ac, bc = _compute(a), _compute(b)
        flat = np.clip(seg.reshape(-1, 2).astype(np.int64), 0, K)
        out = np.zeros((flat.shape[0], M, N), ac.dtype)
        for i, (k0, k1) in enumerate(flat):
            if k1 > k0:
                out[i] = ac[:, k0:k1] @ bc[k0:k1]
        return [out.reshape(tuple(seg.shape[:-1]) + (M, N)).astype(a.dtype, copy=False)]

    def _masks(self, a, seg):
        m = segment_masks(seg, a.shape[1])
        return ops.astype(m, a.dtype)

    def vjp(self, primals, cotangents, argnums, outputs):
        a, b, seg = primals
        g = cotangents[0]
        m = self._masks(a, seg)  # (S..., K)
        ns = seg.ndim - 1
        out = []
        for i in argnums:
            if i == 0:  # sum_s (g[s] @ b^T) * m[s]
                t = ops.matmul(g, ops.transpose(b)) * ops.expand_dims(m, -2)
                out.append(ops.sum(t, axis=tuple(range(ns))) if ns else t)
            elif i == 1:  # sum_s m[s][:, None] * (a^T @ g[s])
                t = ops.matmul(ops.transpose(a), g) * ops.expand_dims(m, -1)
                out.append(ops.sum(t, axis=tuple(range(ns))) if ns else t)
            else:
                raise ValueError("[SegmentedMM] Cannot calculate VJP with respect to segments. "
                                 "Use stop_gradient on segments to stop gradients from being "
                                 "computed.")
        return out

    def jvp(self, primals, tangents, argnums):
        a, b, seg = primals
        total = None
        for i, t in zip(argnums, tangents):
            if i == 2:
                continue
            term = ops.segmented_mm(t, b, seg) if i == 0 else ops.segmented_mm(a, t, seg)
            total = term if total is None else total + term
        if total is None:
            total = ops.zeros(self.abstract_eval(*primals)[0][0], a.dtype)
        return [total]

    def vmap(self, inputs, axes):
        # masked products, batched along a leading axis: (n, S..., M, N) from a (n|1, M, K),
        # b (n|1, K, N) and the (n|1, S..., K) masks of the segments
        a, b, seg = [ops.expand_dims(x, 0) if ax is None else ops.moveaxis(x, ax, 0)
                     for x, ax in zip(inputs, axes)]
        ns = seg.ndim - 2
        m = ops.expand_dims(ops.astype(segment_masks(seg, a.shape[-1]), a.dtype), -2)
        a = ops.reshape(a, (a.shape[0],) + (1,) * ns + tuple(a.shape[1:]))
        b = ops.reshape(b, (b.shape[0],) + (1,) * ns + tuple(b.shape[1:]))
        return [ops.matmul(a * m, b)], [0]
