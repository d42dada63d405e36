"""mx.linalg: the namespace, bad inputs (error types and messages as MLX's), batching,
evaluation-time failures and MLX's particular behaviours. Values and gradients of ordinary
inputs are covered by the op table (tests/op_table/linalg_decomp.py)."""
import numpy as np
import pytest

import braze.core as mx

L = mx.linalg
NAMES = ["cholesky", "cholesky_inv", "cross", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv",
         "lu", "lu_factor", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular", "svd",
         "tri_inv"]


def test_namespace_is_mlx_s_and_not_top_level():
    assert sorted(n for n in dir(L) if not n.startswith("_")) == sorted(NAMES)
    for n in ("inv", "cholesky", "qr", "svd", "eigh", "lu", "solve", "det", "pinv"):
        assert not hasattr(mx, n), n


SQUARE_ONLY = [
    (L.inv, "[linalg::inv] Inverses are only defined for square matrices."),
    (L.tri_inv, "[linalg::inv] Inverses are only defined for square matrices."),
    (L.cholesky, "[linalg::cholesky] Cholesky decomposition is only defined for square "
                 "matrices."),
    (L.cholesky_inv, "[linalg::cholesky_inv] Cholesky inverse is only defined for square "
                     "matrices."),
    (L.eigh, "[linalg::eigh] Only defined for square matrices."),
    (L.eigvalsh, "[linalg::eigvalsh] Only defined for square matrices."),
    (L.eig, "[linalg::eig] Only defined for square matrices."),
    (L.eigvals, "[linalg::eigvals] Only defined for square matrices."),
    (L.det, "[linalg::det] Only defined for square matrices."),
    (L.slogdet, "[linalg::slogdet] Only defined for square matrices."),
]


@pytest.mark.parametrize("fn,msg", SQUARE_ONLY, ids=lambda x: getattr(x, "__name__", ""))
def test_non_square(fn, msg):
    with pytest.raises(ValueError) as e:
        fn(mx.zeros((2, 3)))
    assert str(e.value) == msg


@pytest.mark.parametrize("name", ["inv", "tri_inv", "cholesky", "cholesky_inv", "qr", "eigh",
                                  "eigvalsh", "eig", "eigvals", "lu", "lu_factor", "pinv", "det",
                                  "slogdet"])
def test_needs_a_matrix(name):
    op = "inv" if name == "tri_inv" else name
    with pytest.raises(ValueError, match=rf"^\[linalg::{op}\] Arrays must have >= 2 "
                                         r"dimensions\. Received array with 1 dimensions\."):
        getattr(L, name)(mx.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"^\[linalg::svd\] Input array must have >= 2"):
        L.svd(mx.array(1.0))


@pytest.mark.parametrize("name", ["inv", "cholesky", "qr", "lu", "pinv", "cholesky_inv"])
@pytest.mark.parametrize("dt", ["int32", "float16", "bfloat16", "complex64"])
def test_float_only(name, dt):
    with pytest.raises(ValueError, match=rf"^\[linalg::{name}\] Arrays must have type float32 "
                                         rf"or float64\. Received array with type {dt}\."):
        getattr(L, name)(mx.eye(2).astype(getattr(mx, dt)))


@pytest.mark.parametrize("name", ["svd", "eigh", "eigvalsh", "eig", "eigvals"])
def test_float_or_complex(name):
    with pytest.raises(ValueError, match=rf"^\[linalg::{name}\] Arrays must have type float32, "
                                         r"float64 or complex64\. Received array with type "
                                         r"float16\."):
        getattr(L, name)(mx.eye(2, dtype=mx.float16))
    out = getattr(L, name)(mx.eye(2, dtype=mx.complex64))
    mx.eval(out)


def test_complex_dtypes():
    a = mx.array([[2.0, 1j], [-1j, 3.0]], dtype=mx.complex64)
    w, v = L.eigh(a)
    assert (w.dtype, v.dtype) == (mx.float32, mx.complex64)
    np.testing.assert_allclose(np.array(w), np.linalg.eigvalsh(np.array(a)), rtol=1e-5)
    u, s, vt = L.svd(a)
    assert (u.dtype, s.dtype, vt.dtype) == (mx.complex64, mx.float32, mx.complex64)
    w, v = L.eig(mx.array([[1.0, -1.0], [1.0, 1.0]], dtype=mx.float64))
    assert w.dtype == mx.complex64 and v.dtype == mx.complex64  # whatever the input dtype
    assert sorted(np.array(w).tolist(), key=lambda z: z.imag) == [1 - 1j, 1 + 1j]


def test_singular_inverse_raises_at_evaluation():
    a = L.inv(mx.array([[1.0, 2.0], [2.0, 4.0]]))  # lazy: nothing fails yet
    with pytest.raises(ValueError, match=r"^\[Inverse::eval_cpu\] LU factorization failed "
                                         r"with error code 2") as e:
        mx.eval(a)
    assert isinstance(e.value, RuntimeError)  # MLX raises RuntimeError
    with pytest.raises(RuntimeError, match="triangular inversion failed with error code 2"):
        mx.eval(L.tri_inv(mx.array([[1.0, 0.0], [2.0, 0.0]])))


def test_cholesky_reads_one_triangle_and_never_raises():
    a = mx.array([[4.0, 2.0], [100.0, 3.0]])  # not symmetric, not positive definite below
    assert L.cholesky(a, upper=True).tolist() == [[2.0, 1.0], [0.0, pytest.approx(2 ** 0.5)]]
    # MLX returns LAPACK's partial factor: the failing pivot un-rooted, later columns updated
    partial = L.cholesky(mx.array([[4.0, 2.0, 1.0], [2.0, -3.0, 5.0], [1.0, 5.0, 6.0]]))
    assert partial.tolist() == [[2.0, 0.0, 0.0], [1.0, -4.0, 0.0], [0.5, 4.5, 5.75]]


def test_uplo_reads_the_first_character_like_mlx():
    a = mx.array([[1.0, 2.0, 0.0], [3.0, 4.0, 0.0], [5.0, 6.0, 0.0]])
    lower = L.eigvalsh(a).tolist()
    upper = L.eigvalsh(a, UPLO="U").tolist()
    assert lower != upper
    for uplo in ("X", "", "u", "l", "UL"):
        assert L.eigvalsh(a, UPLO=uplo).tolist() == upper
    assert L.eigvalsh(a, UPLO="Lower").tolist() == lower


def test_lu_conventions():
    a = mx.array([[3.0, 1.0, 2.0, 1.0], [1.0, 8.0, 6.0, 2.0], [9.0, 2.0, 5.0, 3.0],
                  [2.0, 11.0, 1.0, 0.0]])
    p, low, up = L.lu(a)
    assert p.dtype == mx.uint32 and p.tolist() == [3, 2, 0, 1]  # MLX 0.32.4's values
    np.testing.assert_allclose(np.array(low[p] @ up), np.array(a), atol=1e-5)
    lu, piv = L.lu_factor(a)
    assert piv.dtype == mx.uint32 and piv.tolist() == [2, 3, 3, 3]  # LAPACK's, 0-based
    p, low, up = L.lu(mx.zeros((2, 2)))  # singular: no error
    assert p.tolist() == [0, 1] and low.tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_solve_checks():
    with pytest.raises(ValueError, match=r"^\[linalg::solve\] Second input must have >= 1"):
        L.solve(mx.eye(2), mx.array(1.0))
    with pytest.raises(ValueError, match=r"First input must be a square matrix\. Received "
                                         r"array with shape \(2,3\)\."):
        L.solve(mx.ones((2, 3)), mx.ones(2))
    with pytest.raises(ValueError, match=r"Last dimension of first input with shape \(2,2\) "
                                         r"must match second to last dimension of second input "
                                         r"with shape \(3,2\)\."):
        L.solve(mx.eye(2), mx.ones((3, 2)))
    with pytest.raises(ValueError, match=r"^\[linalg::solve_triangular\] Input arrays must "
                                         r"promote to float32 or float64\."):
        L.solve_triangular(mx.eye(2, dtype=mx.int32), mx.array([1, 2]))
    with pytest.raises(ValueError, match=r"^\[linalg::lu\] Arrays must have type float32"):
        L.solve(mx.eye(2, dtype=mx.int32), mx.array([1.0, 2.0]))  # b promotes, a does not


def test_solve_broadcasts_batches():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 1, 4, 4)) + 4 * np.eye(4)
    b = rng.standard_normal((2, 4, 5))
    got = L.solve(mx.array(a, dtype=mx.float64), mx.array(b, dtype=mx.float64))
    np.testing.assert_allclose(np.array(got), np.linalg.solve(a, b), rtol=1e-10)
    v = rng.standard_normal(4)  # a vector against a batch of matrices
    got = L.solve(mx.array(a, dtype=mx.float64), mx.array(v, dtype=mx.float64))
    assert got.shape == (3, 1, 4)
    np.testing.assert_allclose(np.array(got), np.linalg.solve(a, v), rtol=1e-10)


def test_det_dtypes_and_paths():
    assert L.det(mx.array([[2, 1], [1, 3]])).dtype == mx.float32  # integers promote
    assert L.det(mx.array([[2, 1], [1, 3]], dtype=mx.float16)).dtype == mx.float16  # formula
    with pytest.raises(ValueError, match=r"^\[linalg::lu_factor\] Arrays must have type"):
        L.det(mx.eye(4, dtype=mx.float16))  # n > 3 goes through lu_factor, as in MLX
    with pytest.raises(ValueError, match=r"^\[linalg::det\] Complex inputs are not supported"):
        L.det(mx.eye(2, dtype=mx.complex64))
    s, logabs = L.slogdet(mx.array(np.ones((5, 5), np.float32)))
    assert (s.item(), logabs.item()) == (0.0, -np.inf)
    assert L.det(mx.zeros((3, 0, 0))).tolist() == [1.0, 1.0, 1.0]


def test_cross_errors():
    with pytest.raises(ValueError, match=r"^\[linalg::cross\] The specified axis must have "
                                         r"size 2 or 3\."):
        L.cross(mx.array([1.0]), mx.array([2.0]))
    with pytest.raises(IndexError, match=r"^\[linalg::cross\] Axis 5 is out of bounds for "
                                         r"array with 2 dimensions\."):
        L.cross(mx.ones((3, 2)), mx.ones((3, 2)), axis=5)
    assert L.cross(mx.array([1, 2, 3]), mx.array([2, 3, 4])).dtype == mx.int32


def test_norm_errors():
    with pytest.raises(ValueError, match=r"^\[linalg::norm\] Received too many axes"):
        L.norm(mx.ones((2, 3, 4)), 1)
    with pytest.raises(ValueError, match=r"^\[linalg::norm\] Norm 'fro' only supported for "
                                         r"matrices, but received 1 axis/axes\."):
        L.norm(mx.ones(3), "fro")
    with pytest.raises(ValueError, match=r"^\[linalg::norm\] Invalid ord 3 for matrix norm\."):
        L.norm(mx.ones((3, 3)), 3)
    with pytest.raises(ValueError, match=r"^\[linalg::norm\] Invalid ord value 'abc'"):
        L.norm(mx.ones((3, 3)), "abc")
    with pytest.raises(IndexError, match=r"^\[linalg::norm\] Invalid axis 3"):
        L.norm(mx.ones((2, 3)), axis=3)
    assert L.norm(mx.array([1, 0, 3]), 0).dtype == mx.float32


def test_empty_inputs():
    for shape in [(0, 4, 4), (3, 0, 0), (5, 0), (0, 5)]:
        a = np.zeros(shape, np.float32)
        u, s, vt = L.svd(mx.array(a))
        nu, ns, nvt = np.linalg.svd(a)
        assert (u.shape, s.shape, vt.shape) == (nu.shape, ns.shape, nvt.shape)
        assert np.array_equal(np.array(u), nu) and np.array_equal(np.array(vt), nvt)
        q, r = L.qr(mx.array(a))
        assert (q.shape, r.shape) == tuple(x.shape for x in np.linalg.qr(a))
        assert L.pinv(mx.array(a)).shape == np.linalg.pinv(a).shape
    assert L.inv(mx.zeros((0, 0))).shape == (0, 0)  # MLX 0.32 ends its process here (SIGFPE)
    assert [x.shape for x in L.lu(mx.zeros((0, 3)))] == [(0,), (0, 0), (0, 3)]


def test_stream_argument():
    a = mx.eye(2)
    assert L.inv(a, stream=mx.cpu).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(ValueError, match="gpu"):
        L.inv(a, stream=mx.gpu)
    with pytest.raises(TypeError):
        L.qr(a, stream="cpu")


def test_gradients_beyond_mlx_and_eig_refuses():
    a = mx.array([[2.0, 1.0], [1.0, 3.0]])
    g = mx.grad(lambda x: L.inv(x).sum())(a)  # MLX: "[Primitive::vjp] Not implemented"
    ai = np.linalg.inv(np.array(a))
    np.testing.assert_allclose(np.array(g), -(ai.T @ np.ones((2, 2)) @ ai.T), rtol=1e-5)
    with pytest.raises(ValueError, match=r"^\[Eig\] vjp is not implemented"):
        mx.grad(lambda x: mx.real(L.eigvals(x)).sum())(a)
    with pytest.raises(ValueError, match=r"^\[QRF\] vjp is only implemented for matrices "
                                         r"with at least as many rows"):
        mx.grad(lambda x: L.qr(x)[1].sum())(mx.ones((2, 3)))


def test_vmap_and_compile():
    rng = np.random.default_rng(1)
    a = mx.array(rng.standard_normal((4, 3, 3)) + 3 * np.eye(3), dtype=mx.float32)
    got = mx.vmap(L.inv, in_axes=2, out_axes=0)(mx.moveaxis(a, 0, 2))
    np.testing.assert_allclose(np.array(got), np.linalg.inv(np.array(a)), rtol=1e-4, atol=1e-5)
    f = mx.compile(lambda x: L.det(x) + L.norm(x, axis=(1, 2)))
    want = np.linalg.det(np.array(a)) + np.linalg.norm(np.array(a), axis=(1, 2))
    np.testing.assert_allclose(np.array(f(a)), want, rtol=1e-4)
