"""Public ops of `mx.linalg`: norm, inv, tri_inv, pinv, cholesky, cholesky_inv, qr, svd, eigh,
eigvalsh, eig, eigvals, lu, lu_factor, solve, solve_triangular, cross, det, slogdet.

These names live only in `mx.linalg` (braze/core/linalg.py), not in `mx`: `__all__` here is
that namespace's list, and `ops/__init__.py` does not add it to the top-level one.

Checks, dtypes and messages follow MLX (mlx/linalg.cpp): the decompositions take float32 and
float64 (svd, eigh, eigvalsh, eig and eigvals also complex64); composites are MLX's graphs
(solve = lu + two triangular solves through tri_inv, det of n <= 3 by its formula, of larger n
through lu_factor), so they give MLX's dtypes and errors. MLX refuses a GPU stream for most of
these; braze's only device is the CPU, so `stream=` is checked like everywhere else.
"""
from __future__ import annotations

import math
from typing import Sequence, Tuple, Union

import numpy as np

from .. import dtypes as D
from ..array import array
from ..device import to_stream
from ..prims.base import bind
from ..prims.linalg_decomp import LUF, QRF, SVD, Cholesky, Eig, Eigh, Inverse, LinalgError
from . import creation as C
from . import elementwise as E
from . import indexing as I
from . import reduction as R
from . import shape as S
from . import sorting as O
from ._helpers import AxisError, as_array, broadcast_shapes, normalize_axis
from ._typing import ArrayLike, StreamOrDevice
from .linalg import matmul

__all__ = ["norm", "inv", "tri_inv", "pinv", "cholesky", "cholesky_inv", "qr", "svd", "eigh",
           "eigvalsh", "eig", "eigvals", "lu", "lu_factor", "solve", "solve_triangular",
           "cross", "det", "slogdet"]

_ = LinalgError  # raised by the kernels at evaluation; importable from here


# -- checks -----------------------------------------------------------------------------------
def _arr(a, op, stream):
    to_stream(stream, op)
    return a if type(a) is array else as_array(a, op)


def _check_float(a, op, complex_ok=False):
    ok = (D.float32, D.float64, D.complex64) if complex_ok else (D.float32, D.float64)
    if a.dtype not in ok:
        kinds = "float32, float64 or complex64" if complex_ok else "float32 or float64"
        raise ValueError(f"[{op}] Arrays must have type {kinds}. Received array with type "
                         f"{a.dtype.name}.")


def _check_matrix(a, op, what="Arrays"):
    if a.ndim < 2:
        raise ValueError(f"[{op}] {what} must have >= 2 dimensions. Received array with "
                         f"{a.ndim} dimensions.")


def _check_square(a, msg):
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(msg)


def _shape_str(shape):
    """A shape as MLX prints it in messages: (2,3)."""
    return "(" + ",".join(str(d) for d in shape) + ")"


def _at_least_float(dt):
    return dt if dt.kind in "fc" else D.promote_types(dt, D.float32)


def _const(value, dtype):
    return array(value, dtype=dtype)


def _swap(x):
    return S.swapaxes(x, -1, -2)


# -- inverses ---------------------------------------------------------------------------------
def _inv(a, tri, upper, stream):
    op = "linalg::inv"
    a = _arr(a, op, stream)
    _check_float(a, op)
    _check_matrix(a, op)
    _check_square(a, f"[{op}] Inverses are only defined for square matrices.")
    return bind(Inverse(tri, bool(upper)), (a,))


def inv(a: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """The inverse of each square matrix in the last two axes."""
    return _inv(a, False, False, stream)


def tri_inv(a: ArrayLike, upper: bool = False, *, stream: StreamOrDevice = None) -> array:
    """The inverse of the lower (or `upper`) triangle of each square matrix; the other triangle
    of the result is zero."""
    return _inv(a, True, upper, stream)


def pinv(a: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """Moore-Penrose pseudo-inverse through the SVD (MLX's cutoff: 10 * max(m, n) * eps times
    the largest singular value)."""
    op = "linalg::pinv"
    a = _arr(a, op, stream)
    _check_float(a, op)
    _check_matrix(a, op)
    m, n = a.shape[-2:]
    if a.size == 0:
        return C.zeros(a.shape[:-2] + (n, m), dtype=a.dtype)
    k = min(m, n)
    u, s, vt = svd(a)
    u = _swap(u[..., :, :k])
    v = _swap(vt[..., :k, :])
    s = S.expand_dims(s, -2)
    rcond = 10.0 * max(m, n) * float(np.finfo(a.dtype.np_dtype).eps)
    cutoff = E.multiply(_const(rcond, a.dtype), R.max(s, axis=-1, keepdims=True))
    rs = E.where(E.greater(s, cutoff), E.reciprocal(s), _const(0.0, a.dtype))
    return matmul(E.multiply(v, rs), u)


def cholesky(a: ArrayLike, upper: bool = False, *, stream: StreamOrDevice = None) -> array:
    """L (lower, L @ L.T = a) or U (`upper`, U.T @ U = a) of each symmetric positive-definite
    matrix; only that triangle of `a` is read."""
    op = "linalg::cholesky"
    a = _arr(a, op, stream)
    _check_float(a, op)
    _check_matrix(a, op)
    _check_square(a, f"[{op}] Cholesky decomposition is only defined for square matrices.")
    return bind(Cholesky(bool(upper)), (a,))


def cholesky_inv(a: ArrayLike, upper: bool = False, *, stream: StreamOrDevice = None) -> array:
    """The inverse of the matrix whose Cholesky factor (lower, or `upper`) is `a`."""
    op = "linalg::cholesky_inv"
    a = _arr(a, op, stream)
    _check_float(a, op)
    _check_matrix(a, op)
    _check_square(a, f"[{op}] Cholesky inverse is only defined for square matrices.")
    linv = tri_inv(a, upper=upper)
    return matmul(linv, _swap(linv)) if upper else matmul(_swap(linv), linv)


# -- factorisations ---------------------------------------------------------------------------
def qr(a: ArrayLike, *, stream: StreamOrDevice = None) -> Tuple[array, array]:
    """Reduced QR of each matrix: (Q, R) with Q (m, k) orthonormal columns, R (k, n) upper
    triangular, k = min(m, n)."""
    op = "linalg::qr"
    a = _arr(a, op, stream)
    _check_float(a, op)
    _check_matrix(a, op)
    return tuple(bind(QRF(), (a,)))


def svd(a: ArrayLike, compute_uv: bool = True, *,
        stream: StreamOrDevice = None) -> Union[Tuple[array, array, array], array]:
    """Singular value decomposition: (U, S, Vt) with a = U[:, :k] @ diag(S) @ Vt[:k], U (m, m)
    and Vt (n, n); `compute_uv=False` gives S alone (an array)."""
    op = "linalg::svd"
    a = _arr(a, op, stream)
    _check_float(a, op, complex_ok=True)
    if a.ndim < 2:
        raise ValueError(f"[{op}] Input array must have >= 2 dimensions. Received array with "
                         f"{a.ndim} dimensions.")
    out = bind(SVD(bool(compute_uv)), (a,))
    return tuple(out) if compute_uv else out


def _check_eig(a, op):
    _check_float(a, op, complex_ok=True)
    _check_matrix(a, op)
    _check_square(a, f"[{op}] Only defined for square matrices.")


def _uplo(uplo, op):
    if not isinstance(uplo, str):
        raise TypeError(f"[{op}] UPLO must be a string, got {type(uplo).__name__}.")
    return "L" if uplo[:1] == "L" else "U"  # MLX reads the first character only


def eigh(a: ArrayLike, UPLO: str = "L", *,  # noqa: N803  (MLX's argument name)
         stream: StreamOrDevice = None) -> Tuple[array, array]:
    """Eigenvalues (ascending) and eigenvectors (columns) of each symmetric/Hermitian matrix,
    read from its lower ("L") or upper ("U") triangle."""
    op = "linalg::eigh"
    a = _arr(a, op, stream)
    _check_eig(a, op)
    return tuple(bind(Eigh(_uplo(UPLO, op), True), (a,)))


def eigvalsh(a: ArrayLike, UPLO: str = "L", *,  # noqa: N803
             stream: StreamOrDevice = None) -> array:
    """The eigenvalues (ascending) of each symmetric/Hermitian matrix."""
    op = "linalg::eigvalsh"
    a = _arr(a, op, stream)
    _check_eig(a, op)
    return bind(Eigh(_uplo(UPLO, op), False), (a,))


def eig(a: ArrayLike, *, stream: StreamOrDevice = None) -> Tuple[array, array]:
    """Eigenvalues and right eigenvectors (columns) of each square matrix, complex64."""
    op = "linalg::eig"
    a = _arr(a, op, stream)
    _check_eig(a, op)
    return tuple(bind(Eig(True), (a,)))


def eigvals(a: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """The eigenvalues of each square matrix, complex64."""
    op = "linalg::eigvals"
    a = _arr(a, op, stream)
    _check_eig(a, op)
    return bind(Eig(False), (a,))


def _luf(a, op, stream):
    a = _arr(a, op, stream)
    _check_float(a, op)
    _check_matrix(a, op)
    return bind(LUF(), (a,))


def lu(a: ArrayLike, *, stream: StreamOrDevice = None) -> Tuple[array, array, array]:
    """(P, L, U) with L[P] @ U = a: P (uint32) the row of L @ U each row of `a` is, L (m, k)
    unit lower triangular, U (k, n) upper triangular, k = min(m, n)."""
    lu_, _, rows = _luf(a, "linalg::lu", stream)
    m, n = lu_.shape[-2:]
    k = min(m, n)
    low, up = C.tril(lu_, -1), C.triu(lu_)
    if n != k:
        low = low[..., :k]
    elif m != k:
        up = up[..., :k, :]
    return rows, E.add(low, C.eye(m, k, dtype=lu_.dtype)), up


def lu_factor(a: ArrayLike, *, stream: StreamOrDevice = None) -> Tuple[array, array]:
    """(LU, pivots): L (unit diagonal implicit) and U packed in one matrix, and LAPACK's
    0-based row interchanges (uint32)."""
    lu_, piv, _ = _luf(a, "linalg::lu_factor", stream)
    return lu_, piv


# -- solves -----------------------------------------------------------------------------------
def _check_solve(a, b, op):
    if a.ndim < 2:
        raise ValueError(f"[{op}] First input must have >= 2 dimensions. Received array with "
                         f"{a.ndim} dimensions.")
    if b.ndim < 1:
        raise ValueError(f"[{op}] Second input must have >= 1 dimensions. Received array with "
                         f"{b.ndim} dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"[{op}] First input must be a square matrix. Received array with "
                         f"shape {_shape_str(a.shape)}.")
    last = -2 if b.ndim > 1 else -1
    if a.shape[-1] != b.shape[last]:
        raise ValueError(f"[{op}] Last dimension of first input with shape "
                         f"{_shape_str(a.shape)} must match second to last dimension of second "
                         f"input with shape {_shape_str(b.shape)}.")
    dt = D.promote_types(a.dtype, b.dtype)
    if dt not in (D.float32, D.float64):
        raise ValueError(f"[{op}] Input arrays must promote to float32 or float64.  Received "
                         f"arrays with type {a.dtype.name} and {b.dtype.name}.")


def _solve_args(a, b, op, stream):
    to_stream(stream, op)
    a, b = _arr(a, op, None), _arr(b, op, None)
    _check_solve(a, b, op)
    return a, b


def solve_triangular(a: ArrayLike, b: ArrayLike, *, upper: bool = False,
                     stream: StreamOrDevice = None) -> array:
    """x with a @ x = b for a lower (or `upper`) triangular `a` (MLX's graph: tri_inv(a) @ b)."""
    a, b = _solve_args(a, b, "linalg::solve_triangular", stream)
    return matmul(tri_inv(a, upper=upper), b)


def _broadcast_batch(a, b):
    """a (..., n, n) and b (..., n, r) with their batch axes broadcast (MLX's take_along_axis
    refuses most batch mismatches; braze solves them as NumPy does)."""
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], op="linalg::solve")
    return S.broadcast_to(a, batch + a.shape[-2:]), S.broadcast_to(b, batch + b.shape[-2:])


def solve(a: ArrayLike, b: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """x with a @ x = b for each square `a`; b is a vector (1-D) or a batch of matrices."""
    op = "linalg::solve"
    a, b = _solve_args(a, b, op, stream)
    if b.ndim == 1:  # a vector: solved as one column (broadcast against a's batch)
        return solve(a, S.expand_dims(b, -1))[..., 0]
    a, b = _broadcast_batch(a, b)
    rows, low, up = lu(a)
    perm = E.stop_gradient(S.expand_dims(O.argsort(rows, axis=-1), -1))  # indices: no gradient
    pb = I.take_along_axis(b, perm, axis=-2)
    y = solve_triangular(low, pb, upper=False)
    return solve_triangular(up, y, upper=True)


# -- determinants -----------------------------------------------------------------------------
def _check_det(a, op):
    if a.dtype.kind == "c":
        raise ValueError(f"[{op}] Complex inputs are not supported.")
    _check_matrix(a, op)
    _check_square(a, f"[{op}] Only defined for square matrices.")


def _det_small(a):
    """The determinant of n <= 3 matrices by its formula (differentiable, no LU)."""
    n = a.shape[-1]
    if n == 0:
        return S.broadcast_to(_const(1.0, a.dtype), a.shape[:-2])
    e = [[a[..., i, j] for j in range(n)] for i in range(n)]
    if n == 1:
        return e[0][0]
    if n == 2:
        return e[0][0] * e[1][1] - e[0][1] * e[1][0]
    return (e[0][0] * (e[1][1] * e[2][2] - e[1][2] * e[2][1])
            - e[0][1] * (e[1][0] * e[2][2] - e[1][2] * e[2][0])
            + e[0][2] * (e[1][0] * e[2][1] - e[1][1] * e[2][0]))


def _slogdet_lu(a):
    """(sign, log|det|) through lu_factor: the sign from the row swaps and U's negative
    diagonal, -inf and 0 for an exactly singular U."""
    lu_, piv = lu_factor(a)
    diag = S.diagonal(lu_, 0, -2, -1)
    k = piv.shape[-1]
    swaps = R.sum(E.not_equal(piv, C.arange(0, k, dtype=D.uint32)), axis=-1).astype(D.int32)
    neg = R.sum(E.less(diag, _const(0.0, a.dtype)), axis=-1).astype(D.int32)
    sign = (1 - 2 * E.remainder(swaps + neg, 2)).astype(a.dtype)
    logabs = R.sum(E.log(E.abs(diag)), axis=-1)
    zero = R.any(E.equal(diag, _const(0.0, a.dtype)), axis=-1)
    sign = E.where(zero, _const(0.0, a.dtype), sign)
    logabs = E.where(zero, _const(-math.inf, a.dtype), logabs)
    return sign, logabs


def _det_input(a, op, stream):
    a = _arr(a, op, stream)
    _check_det(a, op)
    dt = _at_least_float(a.dtype)
    return a if a.dtype is dt else a.astype(dt)


def slogdet(a: ArrayLike, *, stream: StreamOrDevice = None) -> Tuple[array, array]:
    """(sign, log|det|) of each square matrix (integers promote to float32)."""
    a = _det_input(a, "linalg::slogdet", stream)
    if a.shape[-1] <= 3:
        raw = _det_small(a)
        return E.sign(raw), E.log(E.abs(raw))
    return _slogdet_lu(a)


def det(a: ArrayLike, *, stream: StreamOrDevice = None) -> array:
    """The determinant of each square matrix (integers promote to float32)."""
    a = _det_input(a, "linalg::det", stream)
    if a.shape[-1] <= 3:
        return _det_small(a)
    sign, logabs = _slogdet_lu(a)
    return E.multiply(sign, E.exp(logabs))


# -- cross ------------------------------------------------------------------------------------
def cross(a: ArrayLike, b: ArrayLike, axis: int = -1, *, stream: StreamOrDevice = None) -> array:
    """The cross product of 3-vectors (a 2-vector has a zero third component) along `axis`."""
    op = "linalg::cross"
    to_stream(stream, op)
    a, b = _arr(a, op, None), _arr(b, op, None)
    for x in (a, b):
        if not -x.ndim <= axis < x.ndim:
            raise AxisError(f"[{op}] Axis {axis} is out of bounds for array with {x.ndim} "
                            "dimensions.")
        if x.shape[axis] not in (2, 3):
            raise ValueError(f"[{op}] The specified axis must have size 2 or 3.")
    a2, b2 = a.shape[axis] == 2, b.shape[axis] == 2
    dt = D.promote_types(a.dtype, b.dtype)
    sa, sb = list(a.shape), list(b.shape)
    sa[axis], sb[axis] = 3, 3
    out = list(broadcast_shapes(tuple(sa), tuple(sb), op=op))
    ax = axis % len(out)
    out[ax] = 2 if a2 else 3
    xa = S.split(S.broadcast_to(a.astype(dt), tuple(out)), out[ax], axis=ax)
    out[ax] = 2 if b2 else 3
    xb = S.split(S.broadcast_to(b.astype(dt), tuple(out)), out[ax], axis=ax)
    return S.concatenate(_cross_parts(xa, xb, a2, b2), axis=ax)


def _cross_parts(a, b, a2, b2):
    if a2 and b2:
        z = C.zeros_like(a[0])
        first = [z, z]
    elif b2:
        first = [-(a[2] * b[1]), a[2] * b[0]]
    elif a2:
        first = [a[1] * b[2], -(a[0] * b[2])]
    else:
        first = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2]]
    return first + [a[0] * b[1] - a[1] * b[0]]


# -- norm -------------------------------------------------------------------------------------
def _l2(a, axes, keepdims):
    sq = E.square(E.abs(a)) if a.dtype.kind == "c" else E.square(a)
    return E.sqrt(R.sum(sq, axis=axes, keepdims=keepdims))


def _vector_norm(a, ord, axes, keepdims):  # noqa: A002
    dt = _at_least_float(a.dtype)
    if ord == 0.0:
        return R.sum(E.not_equal(a, 0), axis=axes, keepdims=keepdims).astype(dt)
    if ord == 1.0:
        return R.sum(E.abs(a), axis=axes, keepdims=keepdims).astype(dt)
    if ord == 2.0:
        return _l2(a, axes, keepdims)
    if ord == math.inf:
        return R.max(E.abs(a), axis=axes, keepdims=keepdims).astype(dt)
    if ord == -math.inf:
        return R.min(E.abs(a), axis=axes, keepdims=keepdims).astype(dt)
    total = R.sum(E.power(E.abs(a), _const(ord, dt)), axis=axes, keepdims=keepdims)
    return E.power(total, _const(1.0 / ord, dt))


def _fmt(x):
    """A double as C++'s ostream prints it (3 -> "3", 0.5 -> "0.5")."""
    return f"{x:g}"


def _matrix_axes(a, axes):
    return [x + a.ndim if x < 0 else x for x in axes]


def _as_matrices(a, row, col):
    """Move the (row, col) axes to the last two places, in that order."""
    if row > col:
        return S.moveaxis(S.moveaxis(a, row, -1), col, -1)
    return S.moveaxis(S.moveaxis(a, col, -1), row, -2)


def _singular_reduce(a, row, col, keepdims, reduce):
    s = svd(_as_matrices(a, row, col), compute_uv=False)
    out = reduce(s, axis=-1)
    if keepdims:
        out = S.expand_dims(out, sorted((row, col)))
    return out


def _matrix_norm(a, ord, axes, keepdims):  # noqa: A002
    dt = _at_least_float(a.dtype)
    row, col = _matrix_axes(a, axes)
    if ord in (1.0, -1.0):
        red = R.max if ord == 1.0 else R.min
        col -= int(not keepdims and col > row and col > 0)
        inner = R.sum(E.abs(a), axis=row, keepdims=keepdims)
        return red(inner, axis=col, keepdims=keepdims).astype(dt)
    if ord in (math.inf, -math.inf):
        red = R.max if ord == math.inf else R.min
        row -= int(not keepdims and row > col and row > 0)
        inner = R.sum(E.abs(a), axis=col, keepdims=keepdims)
        return red(inner, axis=row, keepdims=keepdims).astype(dt)
    if ord in (2.0, -2.0):
        red = R.max if ord == 2.0 else R.min
        return _singular_reduce(a, row, col, keepdims, red).astype(dt)
    raise ValueError(f"[linalg::norm] Invalid ord {_fmt(ord)} for matrix norm.")


def _string_norm(a, ord, axes, keepdims):  # noqa: A002
    if len(axes) != 2:
        raise ValueError(f"[linalg::norm] Norm '{ord}' only supported for matrices, but "
                         f"received {len(axes)} axis/axes.")
    if ord in ("f", "fro"):
        return _l2(a, axes, keepdims)
    if ord == "nuc":
        row, col = _matrix_axes(a, axes)
        return _singular_reduce(a, row, col, keepdims, R.sum)
    raise ValueError(f"[linalg::norm] Invalid ord value '{ord}' for matrix norm.")


def _norm_axes(axis, ndim, op):
    if axis is None:
        return None
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        axis = [axis]
    if not isinstance(axis, (list, tuple)):
        raise TypeError(f"[{op}] axis must be None, an int or a list of ints, got "
                        f"{type(axis).__name__}.")
    axes = [normalize_axis(x, ndim, op) for x in axis]
    if len(set(axes)) != len(axes):  # checked here: the reduction would name itself
        raise ValueError(f"[{op}] Received duplicate axes {tuple(axis)}.")
    return [int(x) for x in axis]


def norm(a: ArrayLike, /, ord: Union[int, float, str, None] = None,  # noqa: A002
         axis: Union[int, Sequence[int], None] = None, keepdims: bool = False, *,
         stream: StreamOrDevice = None) -> array:
    """Vector or matrix norm (MLX's table of orders: None, 'fro', 'nuc', inf, -inf, 0, 1, -1,
    2, -2, any other p for vectors)."""
    op = "linalg::norm"
    a = _arr(a, op, stream)
    axes = _norm_axes(axis, a.ndim, op)
    if ord is None:
        if axes is None:
            out = _l2(S.flatten(a), [0], keepdims)
            return S.reshape(out, (1,) * a.ndim) if keepdims else out
        if len(axes) > 2:
            raise ValueError(f"[{op}] Received too many axes for norm.")
        return _l2(a, axes, keepdims)
    if axes is None:
        axes = list(range(a.ndim))
    if isinstance(ord, str):
        return _string_norm(a, ord, axes, keepdims)
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise TypeError(f"[{op}] ord must be None, a number or a string, got "
                        f"{type(ord).__name__}.")
    if len(axes) == 1:
        return _vector_norm(a, float(ord), axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(a, float(ord), axes, keepdims)
    raise ValueError(f"[{op}] Received too many axes for norm.")
