"""`mx.linalg`: MLX's linear algebra namespace (re-exported from braze._src.ops.linalg_decomp).

The decompositions are primitives (`_src/prims/linalg_decomp.py`); norm, pinv, cholesky_inv,
solve, solve_triangular, lu, det, slogdet and cross are composites over them.
"""
from braze._src.ops.linalg_decomp import (  # noqa: F401
    cholesky,
    cholesky_inv,
    cross,
    det,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    inv,
    lu,
    lu_factor,
    norm,
    pinv,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    tri_inv,
)

__all__ = ["cholesky", "cholesky_inv", "cross", "det", "eig", "eigh", "eigvals", "eigvalsh",
           "inv", "lu", "lu_factor", "norm", "pinv", "qr", "slogdet", "solve",
           "solve_triangular", "svd", "tri_inv"]
