"""Primitives: MLX's matrix decompositions (Inverse, Cholesky, QRF, SVD, Eigh, Eig, LUF).

Each works on the last two axes and batches over the leading ones; the op layer
(`ops/linalg_decomp.py`) has already checked ranks, squareness and dtypes (float32/float64,
complex64 where MLX takes it). Kernels are NumPy's LAPACK in the input dtype, as MLX calls
LAPACK in the input dtype. NumPy exposes no LU factorisation, so LUF is written here with
getrf's partial pivoting (the first largest |a| of each column).

Derivatives go beyond MLX, which has none for these primitives: Inverse, Cholesky, Eigh (real),
SVD (real; through the leading min(m, n) singular vectors), QRF (m >= n) and LUF (square) have
vjp and jvp rules, so det, slogdet, solve, pinv, norm(ord=2) ... differentiate. Eig's rules raise,
as MLX's do: a silent zero gradient would be wrong.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .base import Primitive, bind, lazy_dataclass, ops


class LinalgError(ValueError, RuntimeError):
    """A factorisation failed at evaluation (a singular matrix...): a ValueError as braze
    promises, and a RuntimeError as MLX raises."""


# -- NumPy helpers (kernels) ------------------------------------------------------------------
def _as3(x):
    """(..., m, n) -> (batch, m, n) and the batch shape."""
    return x.reshape((-1,) + x.shape[-2:]), x.shape[:-2]


def _getrf(a):
    """LU with partial pivoting of each (m, n) matrix: (LU, 0-based pivots (batch.., k))."""
    m, n = a.shape[-2:]
    k = min(m, n)
    lu, batch = _as3(a.copy())
    piv = np.zeros((lu.shape[0], k), np.uint32)
    rows = np.arange(lu.shape[0])
    for j in range(k):
        p = j + np.argmax(np.abs(lu[:, j:, j]), axis=1)
        piv[:, j] = p
        top = lu[rows, j].copy()
        lu[rows, j] = lu[rows, p]
        lu[rows, p] = top
        d = lu[:, j, j]
        nz = d != 0  # a zero pivot leaves its column unscaled (getrf reports it in info)
        lu[:, j + 1:, j] = np.where(nz[:, None], lu[:, j + 1:, j] / np.where(nz, d, 1)[:, None],
                                    lu[:, j + 1:, j])
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    return lu.reshape(a.shape), piv.reshape(batch + (k,))


def _row_indices(piv, m):
    """MLX's row_indices: the swaps undone from last to first, so a = (L @ U)[row_indices]."""
    flat = piv.reshape(-1, piv.shape[-1])
    idx = np.tile(np.arange(m, dtype=np.uint32), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1] - 1, -1, -1):
        p = flat[:, j]
        t = idx[rows, p].copy()
        idx[rows, p] = idx[rows, j]
        idx[rows, j] = t
    return idx.reshape(piv.shape[:-1] + (m,))


def _first_zero_pivot(a):
    """1-based index of the first zero pivot of the first singular matrix (getrf's info)."""
    lu, _ = _getrf(a)
    diag = np.diagonal(lu, axis1=-2, axis2=-1).reshape(-1, a.shape[-1])
    for d in diag:
        z = np.flatnonzero(d == 0)
        if z.size:
            return int(z[0]) + 1
    return 0


def _symmetric(a, lower):
    """The symmetric matrix whose `lower` (or upper) triangle is a's."""
    t = np.tril(a) if lower else np.triu(a)
    off = np.tril(a, -1) if lower else np.triu(a, 1)
    return t + np.swapaxes(off, -1, -2)


def _potrf_partial(s):
    """Right-looking Cholesky of each matrix, stopped at the first non-positive pivot; the
    factor so far (the failing pivot and the updated trailing block left in place), as the
    LAPACK MLX links returns it when a matrix is not positive definite."""
    a, _ = _as3(s.copy())
    done = np.zeros(a.shape[0], bool)
    for j in range(a.shape[-1]):
        done |= ~(a[:, j, j] > 0)
        ok = ~done
        r = np.sqrt(a[ok, j, j])
        a[ok, j, j] = r
        a[ok, j + 1:, j] /= r[:, None]
        col = a[ok, j + 1:, j]
        a[ok, j + 1:, j + 1:] -= col[:, :, None] * col[:, None, :]
    return np.tril(a).reshape(s.shape)


# -- rule helpers (braze ops) -----------------------------------------------------------------
def _T(x):
    return ops.swapaxes(x, -1, -2)


def _mm(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = ops.matmul(out, x)
    return out


def _diag_embed(v):
    """(..., k) -> (..., k, k) with v on the diagonal."""
    k = v.shape[-1]
    return ops.expand_dims(v, -1) * ops.eye(k, dtype=v.dtype)


def _diag(x):
    return ops.diagonal(x, 0, -2, -1)


def _tri_inv(x, upper):
    return bind(Inverse(True, upper), (x,))


def _sym_tangent(t, lower):
    """Tangent of the symmetric matrix a primitive reads from one triangle of its input."""
    if lower:
        return ops.tril(t) + _T(ops.tril(t, -1))
    return ops.triu(t) + _T(ops.triu(t, 1))


def _tri_cotangent(m, lower):
    """Cotangent of the input triangle given the cotangent m of the symmetric matrix read."""
    if lower:
        return ops.tril(m) + ops.tril(_T(m), -1)
    return ops.triu(m) + ops.triu(_T(m), 1)


def _inv_gap(w):
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it."""
    n = w.shape[-1]
    eye = ops.eye(n, dtype=D.bool_)
    gap = ops.expand_dims(w, -2) - ops.expand_dims(w, -1)
    return ops.where(eye, 0.0, 1.0 / ops.where(eye, 1.0, gap))


def _real_only(x, prim, rule):
    if x.dtype.kind == "c":
        raise ValueError(f"[{prim}] {rule} of a complex input is not implemented.")


class _Batched(Primitive):
    """A primitive over the last two axes: vmap moves the batch axis to the front."""

    def vmap(self, inputs, axes):
        x = ops.moveaxis(inputs[0], axes[0], 0)
        outs = bind(self, (x,))
        outs = outs if isinstance(outs, list) else [outs]
        return outs, [0] * len(outs)


# -- Inverse ----------------------------------------------------------------------------------
@lazy_dataclass
class Inverse(_Batched):
    """The inverse of each square matrix; `tri`: of its `upper`/lower triangle (MLX's
    tri_inv), with exact zeros in the other triangle."""
    reinfers_shape = False  # as in MLX

    tri: bool = False
    upper: bool = False

    def abstract_eval(self, a):
        return [(a.shape, a.dtype)]

    def _mask(self, a):
        return (np.triu(a) if self.upper else np.tril(a)) if self.tri else a

    def eval_cpu(self, a):
        a = self._mask(a)
        try:
            out = np.linalg.inv(a)
        except np.linalg.LinAlgError:
            raise self._singular(a) from None
        return [self._mask(out).astype(a.dtype, copy=False)]

    def _singular(self, a):
        if self.tri:
            diag = np.diagonal(a, axis1=-2, axis2=-1).reshape(-1, a.shape[-1])
            info = next(int(np.flatnonzero(d == 0)[0]) + 1 for d in diag if np.any(d == 0))
            return LinalgError(f"[Inverse::eval_cpu] triangular inversion failed with error "
                               f"code {info}")
        # MLX hands LAPACK its row-major buffer, i.e. the transpose: getrf's info is a.T's
        return LinalgError(f"[Inverse::eval_cpu] LU factorization failed with error code "
                           f"{_first_zero_pivot(np.swapaxes(a, -1, -2))}")

    def _project(self, t):
        if not self.tri:
            return t
        return ops.triu(t) if self.upper else ops.tril(t)

    def vjp(self, primals, cotangents, argnums, outputs):
        out = outputs[0]
        return [self._project(-_mm(_T(out), cotangents[0], _T(out)))]

    def jvp(self, primals, tangents, argnums):
        out = bind(self, (primals[0],))
        return [-_mm(out, self._project(tangents[0]), out)]


# -- Cholesky ---------------------------------------------------------------------------------
@lazy_dataclass
class Cholesky(_Batched):
    """L with L @ L.T = the symmetric matrix of a's lower triangle (`upper`: U = L.T from the
    upper triangle). A matrix that is not positive definite gives LAPACK's partial factor, as
    in MLX (no error)."""
    reinfers_shape = False  # as in MLX

    upper: bool = False

    def abstract_eval(self, a):
        return [(a.shape, a.dtype)]

    def eval_cpu(self, a):
        s = _symmetric(a, lower=not self.upper)
        try:
            low = np.linalg.cholesky(s)
        except np.linalg.LinAlgError:
            low = _potrf_partial(s)
        out = np.swapaxes(low, -1, -2) if self.upper else low
        return [np.ascontiguousarray(out, dtype=a.dtype)]

    def _factor(self, a):
        c = bind(self, (a,))
        return _T(c) if self.upper else c

    def jvp(self, primals, tangents, argnums):
        low = self._factor(primals[0])
        linv = _tri_inv(low, False)
        x = _mm(linv, _sym_tangent(tangents[0], not self.upper), _T(linv))
        d = _mm(low, ops.tril(x, -1) + 0.5 * _diag_embed(_diag(x)))
        return [_T(d) if self.upper else d]

    def vjp(self, primals, cotangents, argnums, outputs):
        low = _T(outputs[0]) if self.upper else outputs[0]
        g = _T(cotangents[0]) if self.upper else cotangents[0]
        linv = _tri_inv(low, False)
        x = _mm(_T(low), g)
        phi = ops.tril(x, -1) + 0.5 * _diag_embed(_diag(x))
        m = _mm(_T(linv), phi, linv)
        return [_tri_cotangent(m, not self.upper)]


# -- QRF --------------------------------------------------------------------------------------
@lazy_dataclass
class QRF(_Batched):
    """Reduced QR: Q (m, k) and R (k, n), k = min(m, n)."""
    reinfers_shape = False  # as in MLX

    def abstract_eval(self, a):
        m, n = a.shape[-2:]
        k = min(m, n)
        return [(a.shape[:-1] + (k,), a.dtype), (a.shape[:-2] + (k, n), a.dtype)]

    def eval_cpu(self, a):
        m, n = a.shape[-2:]
        k = min(m, n)
        if a.size == 0:
            return [np.zeros(a.shape[:-1] + (k,), a.dtype),
                    np.zeros(a.shape[:-2] + (k, n), a.dtype)]
        q, r = np.linalg.qr(a, mode="reduced")
        return [q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)]

    def _check(self, a, rule):
        _real_only(a, "QRF", rule)
        if a.shape[-2] < a.shape[-1]:
            raise ValueError(f"[QRF] {rule} is only implemented for matrices with at least as "
                             f"many rows as columns, got shape {a.shape}.")

    def jvp(self, primals, tangents, argnums):
        a = primals[0]
        self._check(a, "jvp")
        q, r = bind(self, (a,))
        x = _mm(tangents[0], _tri_inv(r, True))
        y = _mm(_T(q), x)
        low = ops.tril(y, -1)
        omega = low - _T(low)
        return [_mm(q, omega - y) + x, _mm(y - omega, r)]

    def vjp(self, primals, cotangents, argnums, outputs):
        self._check(primals[0], "vjp")
        q, r = outputs
        gq, gr = cotangents
        g = _mm(gr, _T(r)) - _mm(_T(q), gq)
        ybar = g - ops.tril(g - _T(g), -1)
        return [_mm(gq + _mm(q, ybar), _T(_tri_inv(r, True)))]


# -- SVD --------------------------------------------------------------------------------------
def _svd_parts(a):
    """Thin U (m, k), s (k), V (n, k) of a, as braze ops."""
    u, s, vt = bind(SVD(True), (a,))
    k = s.shape[-1]
    return u[..., :k], s, _T(vt[..., :k, :])


@lazy_dataclass
class SVD(_Batched):
    """Singular values (descending); with `compute_uv`, also the full U (m, m) and Vt (n, n):
    outputs [U, S, Vt] (MLX's order) or [S]."""
    reinfers_shape = False  # as in MLX

    compute_uv: bool = True

    def abstract_eval(self, a):
        m, n = a.shape[-2:]
        sdt = D.float32 if a.dtype is D.complex64 else a.dtype
        s = (a.shape[:-2] + (min(m, n),), sdt)
        if not self.compute_uv:
            return [s]
        return [(a.shape[:-2] + (m, m), a.dtype), s, (a.shape[:-2] + (n, n), a.dtype)]

    def eval_cpu(self, a):
        m, n = a.shape[-2:]
        sdt = np.float32 if a.dtype == np.complex64 else a.dtype
        if a.size == 0:  # numpy's svd refuses empty stacks; the factors hold the identity
            s = np.zeros(a.shape[:-2] + (min(m, n),), sdt)
            if not self.compute_uv:
                return [s]
            eye = lambda d: np.broadcast_to(np.eye(d, dtype=a.dtype), a.shape[:-2] + (d, d))  # noqa: E731
            return [eye(m).copy(), s, eye(n).copy()]
        try:
            res = np.linalg.svd(a, full_matrices=True, compute_uv=self.compute_uv)
        except np.linalg.LinAlgError:
            raise LinalgError("[SVD::eval_cpu] The SVD did not converge.") from None
        if not self.compute_uv:
            return [res.astype(sdt, copy=False)]
        u, s, vt = res
        return [u.astype(a.dtype, copy=False), s.astype(sdt, copy=False),
                vt.astype(a.dtype, copy=False)]

    def jvp(self, primals, tangents, argnums):
        a, da = primals[0], tangents[0]
        _real_only(a, "SVD", "jvp")
        u, s, v = _svd_parts(a)
        k_mat = _mm(_T(u), da, v)
        ds = _diag(k_mat)
        if not self.compute_uv:
            return [ds]
        f = _inv_gap(s * s)
        row, col = ops.expand_dims(s, -2), ops.expand_dims(s, -1)
        ks, sk = k_mat * row, col * k_mat
        du = _mm(u, f * (ks + _T(ks)))
        dv = _mm(v, f * (sk + _T(sk)))
        m, n = a.shape[-2:]
        if m > n:
            dav = _mm(da, v)
            du = du + (dav - _mm(u, _T(u), dav)) / row
        if n > m:
            dau = _mm(_T(da), u)
            dv = dv + (dau - _mm(v, _T(v), dau)) / row
        return [self._full(du, m), ds, _T(self._full(dv, n))]

    @staticmethod
    def _full(d, size):
        """A thin (.., size, k) tangent padded with zero columns to (.., size, size): braze
        holds the columns beyond min(m, n) (an arbitrary orthonormal completion) fixed."""
        k = d.shape[-1]
        if k == size:
            return d
        pad = ops.zeros(d.shape[:-1] + (size - k,), dtype=d.dtype)
        return ops.concatenate([d, pad], axis=-1)

    def vjp(self, primals, cotangents, argnums, outputs):
        a = primals[0]
        _real_only(a, "SVD", "vjp")
        if not self.compute_uv:
            u, _, v = _svd_parts(a)
            return [_mm(u * ops.expand_dims(cotangents[0], -2), _T(v))]
        gu, gs, gvt = cotangents
        u, s, v = _svd_parts(a)
        k = s.shape[-1]
        gu, gv = gu[..., :k], _T(gvt[..., :k, :])
        f = _inv_gap(s * s)
        row, col = ops.expand_dims(s, -2), ops.expand_dims(s, -1)
        ju, jv = _mm(_T(u), gu), _mm(_T(v), gv)
        core = (f * (ju - _T(ju))) * row + _diag_embed(gs) + col * (f * (jv - _T(jv)))
        out = _mm(u, core, _T(v))
        m, n = a.shape[-2:]
        if m > n:
            out = out + _mm((gu - _mm(u, ju)) / row, _T(v))
        if n > m:
            out = out + _mm(u / row, _T(gv - _mm(v, jv)))
        return [out]


# -- Eigh -------------------------------------------------------------------------------------
@lazy_dataclass
class Eigh(_Batched):
    """Eigenvalues (ascending) of the symmetric/Hermitian matrix of a's lower triangle
    (`uplo` "L"; anything else: the upper one, as MLX reads only its first character); with
    `compute_eigenvectors`, outputs [w, V] (eigenvectors in V's columns)."""

    uplo: str = "L"
    compute_eigenvectors: bool = True

    def abstract_eval(self, a):
        wdt = D.float32 if a.dtype is D.complex64 else a.dtype
        w = (a.shape[:-1], wdt)
        return [w, (a.shape, a.dtype)] if self.compute_eigenvectors else [w]

    def eval_cpu(self, a):
        wdt = np.float32 if a.dtype == np.complex64 else a.dtype
        uplo = "L" if self.uplo == "L" else "U"
        try:
            if self.compute_eigenvectors:
                w, v = np.linalg.eigh(a, UPLO=uplo)
                return [w.astype(wdt, copy=False), v.astype(a.dtype, copy=False)]
            return [np.linalg.eigvalsh(a, UPLO=uplo).astype(wdt, copy=False)]
        except np.linalg.LinAlgError:
            raise LinalgError("[Eigh::eval_cpu] Eigenvalue decomposition failed.") from None

    def _lower(self):
        return self.uplo == "L"

    def jvp(self, primals, tangents, argnums):
        a = primals[0]
        _real_only(a, "Eigh", "jvp")
        w, v = bind(Eigh(self.uplo, True), (a,))
        x = _mm(_T(v), _sym_tangent(tangents[0], self._lower()), v)
        dw = _diag(x)
        if not self.compute_eigenvectors:
            return [dw]
        return [dw, _mm(v, _inv_gap(w) * x)]

    def vjp(self, primals, cotangents, argnums, outputs):
        a = primals[0]
        _real_only(a, "Eigh", "vjp")
        if self.compute_eigenvectors:
            w, v = outputs
            gw, gv = cotangents
            inner = _diag_embed(gw) + _inv_gap(w) * _mm(_T(v), gv)
        else:
            w, v = bind(Eigh(self.uplo, True), (a,))
            inner = _diag_embed(cotangents[0])
        return [_tri_cotangent(_mm(v, inner, _T(v)), self._lower())]


# -- Eig --------------------------------------------------------------------------------------
@lazy_dataclass
class Eig(_Batched):
    """Eigenvalues (LAPACK geev's order) of a general square matrix, complex64 whatever the
    input dtype (as MLX); with `compute_eigenvectors`, outputs [w, V] (unit columns)."""

    compute_eigenvectors: bool = True

    def abstract_eval(self, a):
        w = (a.shape[:-1], D.complex64)
        return [w, (a.shape, D.complex64)] if self.compute_eigenvectors else [w]

    def eval_cpu(self, a):
        if a.size == 0:
            w = np.zeros(a.shape[:-1], np.complex64)
            return [w, np.zeros(a.shape, np.complex64)] if self.compute_eigenvectors else [w]
        try:
            if self.compute_eigenvectors:
                w, v = np.linalg.eig(a)
                return [w.astype(np.complex64), v.astype(np.complex64)]
            return [np.linalg.eigvals(a).astype(np.complex64)]
        except np.linalg.LinAlgError:
            raise LinalgError("[Eig::eval_cpu] Eigenvalue decomposition failed.") from None

    def vjp(self, primals, cotangents, argnums, outputs):
        raise ValueError("[Eig] vjp is not implemented (MLX has none either).")

    def jvp(self, primals, tangents, argnums):
        raise ValueError("[Eig] jvp is not implemented (MLX has none either).")


# -- LUF --------------------------------------------------------------------------------------
@lazy_dataclass
class LUF(_Batched):
    """getrf of each (m, n) matrix: [LU (L's unit diagonal implicit), pivots (uint32, k: row j
    was swapped with row pivots[j]), row_indices (uint32, m: a = (L @ U)[row_indices])]."""
    reinfers_shape = False  # as in MLX

    def abstract_eval(self, a):
        m, n = a.shape[-2:]
        return [(a.shape, a.dtype), (a.shape[:-2] + (min(m, n),), D.uint32),
                (a.shape[:-1], D.uint32)]

    def eval_cpu(self, a):
        lu, piv = _getrf(a)
        return [lu, piv, _row_indices(piv, a.shape[-2])]

    def _factors(self, lu):
        n = lu.shape[-1]
        low = ops.tril(lu, -1) + ops.eye(n, dtype=lu.dtype)
        return low, ops.triu(lu)

    def _check(self, a, rule):
        if a.shape[-1] != a.shape[-2]:
            raise ValueError(f"[LUF] {rule} is only implemented for square matrices, got "
                             f"shape {a.shape}.")

    def jvp(self, primals, tangents, argnums):
        a = primals[0]
        self._check(a, "jvp")
        lu, _, rows = bind(self, (a,))
        low, up = self._factors(lu)
        perm = ops.stop_gradient(ops.expand_dims(ops.argsort(rows, axis=-1), -1))
        x = ops.take_along_axis(tangents[0], perm, axis=-2)
        y = _mm(_tri_inv(low, False), x, _tri_inv(up, True))
        return [_mm(low, ops.tril(y, -1)) + _mm(ops.triu(y), up), None, None]

    def vjp(self, primals, cotangents, argnums, outputs):
        self._check(primals[0], "vjp")
        lu, _, rows = outputs
        low, up = self._factors(lu)
        g = cotangents[0]
        ybar = ops.tril(_mm(_T(low), ops.tril(g, -1)), -1) + ops.triu(_mm(ops.triu(g), _T(up)))
        z = _mm(_T(_tri_inv(low, False)), ybar, _T(_tri_inv(up, True)))
        rows = ops.stop_gradient(ops.expand_dims(rows, -1).astype(D.int32))  # no gradient
        return [ops.take_along_axis(z, rows, axis=-2)]
