"""Op table: mx.linalg (decompositions, solves, determinants, norms, cross). References are
NumPy (scipy.linalg for LU, which NumPy lacks) on float64 inputs.

Inputs are well conditioned (a random matrix plus a multiple of the identity, SPD matrices as
M @ M.T + n I) so float32 results agree with the references and with MLX to the suite's
tolerances. Factorisations defined only up to signs return a normalised form: QR with R's
diagonal made positive, singular/eigen vectors with their first row made positive; those are
unique (distinct eigen/singular values), smooth, and what NumPy's factors normalise to as well.
"""
import numpy as np

import braze.core as mx

from . import OpCase

F = ("float32", "float64")
CASES = []


def _case(name, mx_fn, np_fn, inputs, dtypes=F, **kw):
    kw.setdefault("rtol", 1e-4)
    kw.setdefault("atol", 1e-5)
    CASES.append(OpCase(name, mx_fn, np_fn, inputs, dtypes, **kw))


def _square(rng, shape, dt):
    n = shape[-1]
    return (rng.standard_normal(shape) + 3 * np.eye(n)).astype(dt)


def _spd(rng, shape, dt):
    m = rng.standard_normal(shape)
    return (m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dt)


def _lower(rng, shape, dt):
    return np.tril(_square(rng, shape, dt)).astype(dt)


def _normal(rng, shape, dt):
    return rng.standard_normal(shape).astype(dt)


def _ins(*specs):
    """specs: (generator, shape) pairs -> an inputs function."""
    return lambda rng, dt: tuple(g(rng, s, dt) for g, s in specs)


L = mx.linalg

# -- inverses ---------------------------------------------------------------------------------
_case("linalg.inv", L.inv, np.linalg.inv, _ins((_square, (3, 3))), variant="2d")
_case("linalg.inv", L.inv, np.linalg.inv, _ins((_square, (2, 3, 3))), variant="batched")
_case("linalg.tri_inv", L.tri_inv, lambda a: np.linalg.inv(np.tril(a)),
      _ins((_square, (3, 3))), variant="lower")
_case("linalg.tri_inv", lambda a: L.tri_inv(a, upper=True), lambda a: np.linalg.inv(np.triu(a)),
      _ins((_square, (2, 3, 3))), variant="upper")
_case("linalg.pinv", L.pinv, np.linalg.pinv, _ins((_normal, (4, 3))), variant="tall")
_case("linalg.pinv", L.pinv, np.linalg.pinv, _ins((_normal, (2, 3, 4))), variant="wide")

# -- Cholesky ---------------------------------------------------------------------------------
_case("linalg.cholesky", L.cholesky, np.linalg.cholesky, _ins((_spd, (3, 3))), variant="lower")
_case("linalg.cholesky", lambda a: L.cholesky(a, upper=True),
      lambda a: np.swapaxes(np.linalg.cholesky(a), -1, -2), _ins((_spd, (2, 3, 3))),
      variant="upper")
_case("linalg.cholesky_inv", L.cholesky_inv,
      lambda a: np.linalg.inv(np.tril(a) @ np.tril(a).T), _ins((_lower, (3, 3))),
      variant="lower")
_case("linalg.cholesky_inv", lambda a: L.cholesky_inv(a, upper=True),
      lambda a: np.linalg.inv(np.triu(a).T @ np.triu(a)), _ins((_lower, (3, 3))),
      variant="upper_of_lower_input")


# -- QR ---------------------------------------------------------------------------------------
def _qr_pos(lib, qr_fn):
    def f(a):
        q, r = qr_fn(a)
        s = lib.sign(lib.diagonal(r, 0, -2, -1))
        return [q * s[..., None, :], r * s[..., :, None]]
    return f


_case("linalg.qr", _qr_pos(mx, L.qr), _qr_pos(np, np.linalg.qr), _ins((_normal, (4, 3))),
      variant="tall")
_case("linalg.qr", _qr_pos(mx, L.qr), _qr_pos(np, np.linalg.qr), _ins((_normal, (2, 3, 3))),
      variant="batched")
_case("linalg.qr", _qr_pos(mx, L.qr), _qr_pos(np, np.linalg.qr), _ins((_normal, (3, 4))),
      variant="wide", differentiable=False)  # braze's QR rules need m >= n


# -- SVD --------------------------------------------------------------------------------------
def _svd_pos(lib, svd_fn):
    """Thin U, S, thin Vt with U's first row made positive (V's rows follow)."""
    def f(a):
        u, s, vt = svd_fn(a)
        k = s.shape[-1]
        sg = lib.sign(u[..., :1, :k])
        return [u[..., :, :k] * sg, s, vt[..., :k, :] * lib.swapaxes(sg, -1, -2)]
    return f


_case("linalg.svd", lambda a: L.svd(a, compute_uv=False),
      lambda a: np.linalg.svd(a, compute_uv=False), _ins((_normal, (4, 3))), variant="values")
_case("linalg.svd", _svd_pos(mx, L.svd), _svd_pos(np, np.linalg.svd),
      _ins((_normal, (2, 3, 3))), variant="uv_square")
_case("linalg.svd", _svd_pos(mx, L.svd), _svd_pos(np, np.linalg.svd), _ins((_normal, (4, 3))),
      variant="uv_tall")
_case("linalg.svd", _svd_pos(mx, L.svd), _svd_pos(np, np.linalg.svd), _ins((_normal, (3, 4))),
      variant="uv_wide")


# -- eigen ------------------------------------------------------------------------------------
def _eigh_pos(lib, eigh_fn, uplo):
    def f(a):
        w, v = eigh_fn(a, UPLO=uplo)
        return [w, v * lib.sign(v[..., :1, :])]
    return f


_case("linalg.eigh", _eigh_pos(mx, L.eigh, "L"), _eigh_pos(np, np.linalg.eigh, "L"),
      _ins((_normal, (3, 3))), variant="lower")
_case("linalg.eigh", _eigh_pos(mx, L.eigh, "U"), _eigh_pos(np, np.linalg.eigh, "U"),
      _ins((_normal, (2, 3, 3))), variant="upper")
_case("linalg.eigvalsh", L.eigvalsh, np.linalg.eigvalsh, _ins((_normal, (3, 3))),
      variant="lower")
_case("linalg.eigvalsh", lambda a: L.eigvalsh(a, UPLO="U"),
      lambda a: np.linalg.eigvalsh(a, UPLO="U"), _ins((_normal, (2, 3, 3))), variant="upper")


def _real_spectrum(rng, shape, dt):
    """A general (non-symmetric) matrix with eigenvalues 1, 2.5, 4."""
    q = rng.standard_normal(shape) + 3 * np.eye(shape[-1])
    return (q @ np.diag([1.0, 2.5, 4.0]) @ np.linalg.inv(q)).astype(dt)


_case("linalg.eigvals", lambda a: mx.sort(mx.real(L.eigvals(a)), axis=-1),
      lambda a: np.sort(np.real(np.linalg.eigvals(a)), axis=-1),
      _ins((_real_spectrum, (3, 3))), out_dtype=lambda dt: "float32", differentiable=False,
      rtol=1e-3, atol=1e-4)


def _eig_sorted(lib, eig_fn):
    """Real eigenvalues ascending and their (real) eigenvectors, first row positive."""
    def f(a):
        w, v = eig_fn(a)
        w, v = lib.real(w), lib.real(v)
        order = lib.argsort(w, axis=-1)
        v = lib.take_along_axis(v, order[..., None, :], axis=-1)
        return [lib.take_along_axis(w, order, axis=-1), v * lib.sign(v[..., :1, :])]
    return f


_case("linalg.eig", _eig_sorted(mx, L.eig), _eig_sorted(np, np.linalg.eig),
      _ins((_real_spectrum, (2, 3, 3))), out_dtype=lambda dt: "float32",
      differentiable=False, rtol=1e-3, atol=1e-4)


# -- LU ---------------------------------------------------------------------------------------
def _np_lu(a):
    import scipy.linalg
    p, low, up = np.vectorize(scipy.linalg.lu, signature="(m,n)->(m,m),(m,k),(k,n)")(a)
    return [np.argmax(p, axis=-1).astype(np.uint32), low, up]


def _np_lu_factor(a):
    import scipy.linalg
    lu, piv = np.vectorize(scipy.linalg.lu_factor, signature="(n,n)->(n,n),(n)")(a)
    return [lu, piv.astype(np.uint32)]


# batched inputs: an emptied batch is valid in MLX (an emptied 2-D matrix ends its process);
# the integer outputs (P, pivots) have rows of their own, since a row has one result dtype
for _v, _s in (("square", (2, 3, 3)), ("wide", (2, 2, 3)), ("tall", (2, 3, 2))):
    # braze's LU rules need a square matrix
    _case("linalg.lu", lambda a: list(L.lu(a)[1:]), lambda a: _np_lu(a)[1:],
          _ins((_normal, _s)), variant=_v, differentiable=_v == "square")
    _case("linalg.lu", lambda a: L.lu(a)[0], lambda a: _np_lu(a)[0], _ins((_normal, _s)),
          variant=_v + "_P", out_dtype=lambda dt: "uint32", differentiable=False)
_case("linalg.lu_factor", lambda a: L.lu_factor(a)[0], lambda a: _np_lu_factor(a)[0],
      _ins((_normal, (2, 4, 4))))
_case("linalg.lu_factor", lambda a: L.lu_factor(a)[1], lambda a: _np_lu_factor(a)[1],
      _ins((_normal, (2, 4, 4))), variant="pivots", out_dtype=lambda dt: "uint32",
      differentiable=False)

# -- solves -----------------------------------------------------------------------------------
_case("linalg.solve", L.solve, np.linalg.solve, _ins((_square, (3, 3)), (_normal, (3,))),
      variant="vector")
_case("linalg.solve", L.solve, np.linalg.solve, _ins((_square, (3, 3)), (_normal, (3, 2))),
      variant="matrix")
_case("linalg.solve", L.solve, np.linalg.solve,
      _ins((_square, (2, 4, 4)), (_normal, (2, 4, 2))), variant="batched")
_case("linalg.solve_triangular", L.solve_triangular,
      lambda a, b: np.linalg.solve(np.tril(a), b), _ins((_square, (3, 3)), (_normal, (3, 2))),
      variant="lower")
_case("linalg.solve_triangular", lambda a, b: L.solve_triangular(a, b, upper=True),
      lambda a, b: np.linalg.solve(np.triu(a), b), _ins((_square, (3, 3)), (_normal, (3,))),
      variant="upper")

# -- determinants -----------------------------------------------------------------------------
for _n in (1, 2, 3, 5):
    _case("linalg.det", L.det, np.linalg.det, _ins((_normal, (2, _n, _n))), variant=f"{_n}x{_n}")
_case("linalg.det", L.det, np.linalg.det,
      lambda rng, dt: (rng.integers(-3, 4, (3, 3)).astype(dt),), dtypes=("int32",),
      out_dtype=lambda dt: "float32", variant="int")
_case("linalg.slogdet", lambda a: list(L.slogdet(a)), lambda a: list(np.linalg.slogdet(a)),
      _ins((_normal, (2, 3, 3))), variant="3x3")
_case("linalg.slogdet", lambda a: list(L.slogdet(a)), lambda a: list(np.linalg.slogdet(a)),
      _ins((_normal, (2, 4, 4))), variant="4x4")

# -- cross ------------------------------------------------------------------------------------
_case("linalg.cross", L.cross, np.cross, _ins((_normal, (3,)), (_normal, (3,))), variant="3")
_case("linalg.cross", L.cross, lambda a, b: np.cross(np.pad(a, [(0, 0), (0, 1)]), b),
      _ins((_normal, (4, 2)), (_normal, (4, 3))), variant="2_3")
_case("linalg.cross", L.cross, np.cross, _ins((_normal, (2, 1, 3)), (_normal, (4, 3))),
      variant="broadcast")
_case("linalg.cross", lambda a, b: L.cross(a, b, axis=0),
      lambda a, b: np.cross(a, b, axis=0), _ins((_normal, (3, 2)), (_normal, (3, 2))),
      variant="axis0")
_case("linalg.cross", L.cross, np.cross,
      lambda rng, dt: tuple(rng.integers(-3, 4, (2, 3)).astype(dt) for _ in range(2)),
      dtypes=("int32",), variant="int", exact=True)

# -- norm -------------------------------------------------------------------------------------
_NORMS = {
    "default": ((2, 3), {}),
    "vec_axis": ((2, 3), {"axis": 1}),
    "vec_ord3": ((4,), {"ord": 3}),
    "vec_ord_half": ((4,), {"ord": 0.5}),
    "vec_inf": ((4,), {"ord": float("inf")}),
    "vec_neg_inf": ((2, 4), {"ord": -float("inf"), "axis": -1}),
    "vec_ord1_keep": ((2, 4), {"ord": 1, "axis": 0, "keepdims": True}),
    "mat_fro": ((2, 3), {"ord": "fro"}),
    "mat_nuc": ((3, 2), {"ord": "nuc"}),
    "mat_1": ((3, 3), {"ord": 1}),
    "mat_neg1_axes": ((2, 3, 4), {"ord": -1, "axis": (2, 0)}),
    "mat_inf_keep": ((2, 3, 4), {"ord": float("inf"), "axis": (1, 2), "keepdims": True}),
    "mat_2": ((3, 3), {"ord": 2}),
    "mat_neg2": ((2, 3, 3), {"ord": -2, "axis": (-2, -1)}),
    "all_keep": ((2, 3, 2), {"keepdims": True}),
}
for _v, (_s, _kw) in _NORMS.items():
    _case("linalg.norm", lambda a, kw=_kw: L.norm(a, **kw),
          lambda a, kw=_kw: np.linalg.norm(a, **kw),
          _ins((_normal, _s)), variant=_v)
_case("linalg.norm", lambda a: L.norm(a, ord=0), lambda a: np.linalg.norm(a, ord=0),
      lambda rng, dt: (np.array([0.0, 1.5, 0.0, -2.0], dt),), variant="vec_ord0",
      differentiable=False)
_case("linalg.norm", L.norm, lambda a: np.linalg.norm(a.astype(np.float64)),
      lambda rng, dt: (rng.integers(-3, 4, (2, 3)).astype(dt),), dtypes=("int32",),
      out_dtype=lambda dt: "float32", variant="int")
