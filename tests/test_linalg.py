"""Linear algebra products: dtypes, shapes, einsum patterns, tensordot axes forms and errors.

Expected dtypes and error conditions were checked against MLX 0.32.
"""
import numpy as np
import pytest

import braze.core as mx

RNG = np.random.default_rng(0)


def _r(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _np(a):
    return np.asarray(a)


# -- matmul -----------------------------------------------------------------------------------
@pytest.mark.parametrize("da,db,out", [
    ("float32", "float32", "float32"), ("float16", "float16", "float16"),
    ("bfloat16", "bfloat16", "bfloat16"), ("float16", "float32", "float32"),
    ("float16", "bfloat16", "float32"), ("int32", "float32", "float32"),
    ("float64", "float64", "float64"), ("complex64", "complex64", "complex64"),
])
def test_matmul_dtypes(da, db, out):
    a = mx.ones((2, 3), getattr(mx, da))
    b = mx.ones((3, 4), getattr(mx, db))
    c = a @ b
    assert c.dtype == getattr(mx, out) and c.shape == (2, 4)
    assert (_np(c).astype(np.complex128) == 3).all()


@pytest.mark.parametrize("dt", ["int32", "int8", "bool_", "uint8"])
def test_matmul_rejects_integers_like_mlx(dt):
    a = mx.ones((2, 3), getattr(mx, dt))
    with pytest.raises(ValueError, match=rf"^\[matmul\] Only inexact types.*{dt.rstrip('_')}"):
        mx.matmul(a, mx.ones((3, 2), getattr(mx, dt)))


def test_matmul_half_precision_accumulates_in_float32():
    a = np.full((1, 4096), 1.0, np.float16)
    b = np.full((4096, 1), 1.0, np.float16)
    # float16 accumulation would stall at 2048; one rounding at the end gives 4096
    assert (mx.array(a) @ mx.array(b)).item() == 4096.0


@pytest.mark.parametrize("sa,sb,msg", [
    ((2, 3), (4, 5), r"first input with shape \(2, 3\).*second input with shape \(4, 5\)"),
    ((3,), (4,), r"\(3,\).*\(4,\)"),
    ((2, 3), (4,), r"\(2, 3\).*\(4,\)"),
    ((2, 2, 3), (4, 3, 5), r"\(2,\) and \(4,\) cannot be broadcast"),
])
def test_matmul_shape_errors(sa, sb, msg):
    with pytest.raises(ValueError, match=r"^\[matmul\] .*" + msg):
        mx.matmul(mx.zeros(sa), mx.zeros(sb))


def test_matmul_zero_dim_and_bad_types():
    with pytest.raises(ValueError, match=r"^\[matmul\].*0 dimension"):
        mx.matmul(mx.array(1.0), mx.zeros(3))
    with pytest.raises(TypeError, match=r"^\[matmul\]"):
        mx.matmul(mx.zeros((2, 2)), "x")


def test_matmul_operators_and_numpy_interop():
    a, b = _r(2, 3), _r(3, 2)
    A, B = mx.array(a), mx.array(b)
    np.testing.assert_allclose(_np(A @ B), a @ b, rtol=1e-5)
    got = a @ B  # ndarray @ array -> our __rmatmul__ (array priority)
    assert isinstance(got, mx.array)
    np.testing.assert_allclose(_np(got), a @ b, rtol=1e-5)
    C = A
    C @= B  # MLX: in place, every reference sees it
    assert A.shape == (2, 2)
    np.testing.assert_allclose(_np(A), a @ b, rtol=1e-5)


def test_matmul_is_lazy_and_inputs_unchanged():
    a, b = _r(5, 2, 3), _r(3, 4)
    A, B = mx.array(a), mx.array(b)
    c = A @ B
    assert c._data is None
    np.testing.assert_allclose(_np(c), a @ b, rtol=1e-5)
    np.testing.assert_array_equal(_np(A), a)
    np.testing.assert_array_equal(_np(B), b)


# -- addmm ------------------------------------------------------------------------------------
def test_addmm():
    c, a, b = _r(2, 4), _r(2, 3), _r(3, 4)
    got = mx.addmm(mx.array(c), mx.array(a), mx.array(b), alpha=2.0, beta=0.5)
    np.testing.assert_allclose(_np(got), 2 * a @ b + 0.5 * c, rtol=1e-5, atol=1e-6)
    assert mx.addmm(mx.ones(4), mx.ones(3), mx.ones((3, 4))).shape == (4,)
    assert mx.addmm(mx.array(1.0), mx.ones(3), mx.ones(3)).item() == 4.0
    assert mx.addmm(mx.ones((2, 4), mx.float16), mx.ones((2, 3)), mx.ones((3, 4))).dtype \
        == mx.float32
    nan_c = mx.full((2, 4), float("nan"))
    assert not np.isnan(_np(mx.addmm(nan_c, mx.ones((2, 3)), mx.ones((3, 4)), beta=0.0))).any()


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: mx.addmm(mx.ones((3, 2, 4)), mx.ones((2, 3)), mx.ones((3, 4))), ValueError,
     r"c with shape \(3, 2, 4\) must broadcast to the output shape \(2, 4\)"),
    (lambda: mx.addmm(mx.ones(1), mx.ones(3), mx.ones(3)), ValueError, r"\(1,\).*\(\)"),
    (lambda: mx.addmm(mx.ones((2, 4)), mx.ones((2, 3)), mx.ones((5, 4))), ValueError,
     r"\(2, 3\).*\(5, 4\)"),
    (lambda: mx.addmm(*[mx.ones((2, 2), mx.int32)] * 3), ValueError, "Only inexact"),
    (lambda: mx.addmm(mx.ones((2, 2)), mx.ones((2, 2)), mx.ones((2, 2)), alpha="x"),
     TypeError, "alpha"),
])
def test_addmm_errors(call, exc, msg):
    with pytest.raises(exc, match=r"^\[addmm\].*" + msg):
        call()


# -- einsum -----------------------------------------------------------------------------------
EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),
    ("...ij,...jk", [(2, 1, 2, 3), (4, 3, 2)]),
    ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("ij->", [(3, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ji", [(2, 3)]),
    ("i,j->ij", [(2,), (3,)]),
    ("i,i", [(4,), (4,)]),
    ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
    ("i...->...", [(2, 3)]),
    ("...,...->...", [(2, 3), (3,)]),
    ("i...j,j...->i...", [(2, 4, 3), (3, 4)]),
    ("a b , b c -> a c", [(2, 3), (3, 4)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),
    ("bA,Ac", [(2, 3), (3, 4)]),
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),
    ("iij->j", [(2, 2, 3)]),
]


@pytest.mark.parametrize("subs,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_against_numpy(subs, shapes):
    xs = [_r(*s) for s in shapes]
    got = mx.einsum(subs, *[mx.array(x) for x in xs])
    want = np.einsum(subs, *[x.astype(np.float64) for x in xs])
    assert got.shape == want.shape and got.dtype == mx.float32
    np.testing.assert_allclose(_np(got), want, rtol=1e-5, atol=1e-5)


def test_einsum_dtypes():
    i8 = mx.ones((2, 3), mx.int8)
    assert mx.einsum("ij->i", i8).dtype == mx.int32          # summing widens like sum
    assert mx.einsum("ij->i", mx.ones((2, 3), mx.uint8)).dtype == mx.uint32
    assert mx.einsum("ij->i", mx.ones((2, 3), mx.bool_)).tolist() == [3, 3]
    assert mx.einsum("ij,ij->ij", i8, i8).dtype == mx.int8     # no sum: dtype kept
    assert mx.einsum("ij->ji", mx.ones((2, 2), mx.bool_)).dtype == mx.bool_
    assert mx.einsum("i,j->ij", mx.ones(2, mx.int8), mx.ones(2, mx.float16)).dtype == mx.float16
    assert mx.einsum("ij->i", mx.ones((2, 3), mx.float16)).dtype == mx.float16
    # broadcasting of size-1 dimensions, like MLX
    assert mx.einsum("ij,jk->ik", mx.ones((2, 1)), mx.ones((3, 4))).tolist() == [[3.0] * 4] * 2


@pytest.mark.parametrize("call,msg", [
    (lambda: mx.einsum("ij,jk->ik", mx.ones((2, 3)), mx.ones((4, 4))),
     r"Cannot broadcast dimension 0 of input 1 with shape \(4, 4\) to size 3"),
    (lambda: mx.einsum("ij,jk->ik", mx.ones((2, 3))), "Number of operands, 1"),
    (lambda: mx.einsum("ij->ik", mx.ones((2, 3))), "'k'"),
    (lambda: mx.einsum("ijk->ik", mx.ones((2, 3))), "Invalid number of subscripts 3"),
    (lambda: mx.einsum("ij->ii", mx.ones((2, 3))), "Repeat indices"),
    (lambda: mx.einsum("i1->i", mx.ones((2, 3))), "'1'"),
    (lambda: mx.einsum("i..->i", mx.ones((2, 3))), "ellipsis"),
    (lambda: mx.einsum("ij->i->j", mx.ones((2, 3))), "->"),
    (lambda: mx.einsum("ij"), "operand"),
])
def test_einsum_errors(call, msg):
    with pytest.raises(ValueError, match=r"^\[einsum\].*" + msg):
        call()
    with pytest.raises(TypeError, match=r"^\[einsum\]"):
        mx.einsum(3, mx.ones(2))


# -- einsum_path ------------------------------------------------------------------------------
_PATH_SIZES = dict(zip("abcdefghijklmopqABC", [2, 3, 4, 5, 4, 3, 2, 6, 5, 4, 3, 2, 5, 7, 4, 3,
                                               2, 3, 4]))


@pytest.mark.parametrize("subs", ["ij,jk,kl", "eb,cb,fb->cef", "dd,fb,be,cdb->cef",
                                  "bca,cdb,dbf,afc->", "dcc,fce,ea,dbf->ab",
                                  "abc,bcd,cde,def,efg->ag", "ij,jk"])
def test_einsum_path_is_numpys_greedy_path(subs):
    shapes = [tuple(_PATH_SIZES[c] for c in s) for s in subs.split("->")[0].split(",")]
    want = np.einsum_path(subs, *[np.ones(s) for s in shapes], optimize="greedy")[0][1:]
    path, report = mx.einsum_path(subs, *[mx.ones(s) for s in shapes])
    assert path == want
    assert report.startswith(f"  Complete contraction:  {subs}\n         Naive scaling:  ")


def test_einsum_path_report_and_single_steps():
    # MLX's report: scalings are numbers of letters, FLOP counts joint sizes times the operations
    # per point (numbers checked against MLX 0.32.4)
    path, report = mx.einsum_path("ij,jk,kl", mx.zeros((5, 8)), mx.zeros((8, 10)),
                                  mx.zeros((10, 7)))
    assert path == [(1, 2), (0, 1)]
    assert report == ("  Complete contraction:  ij,jk,kl\n         Naive scaling:  4\n"
                      "     Optimized scaling:  3\n      Naive FLOP count:  8400\n"
                      "  Optimized FLOP count:  1680\n")
    assert mx.einsum_path("ii", mx.zeros((5, 5)))[0] == [(0,)]
    assert mx.einsum_path("ij, jk -> ijk", mx.zeros((5, 8)), mx.zeros((8, 3)))[0] == [(0, 1)]
    # only outer products left: MLX still contracts pairwise (NumPy takes all three at once)
    ops = [mx.zeros((2, 3)), mx.zeros((4, 5)), mx.zeros((4, 3))]
    assert mx.einsum_path("ab,cd,ef", *ops)[0] == [(0, 2), (0, 1)]


@pytest.mark.parametrize("args,msg", [
    (("ij,jk", mx.ones((2, 3))), "Number of operands, 1"),
    (("i#", mx.ones(3)), "'#'"),
    (("ij", mx.ones(3)), "Invalid number of subscripts 2"),
    (("ij",), "At least one operand"),
])
def test_einsum_path_errors(args, msg):
    with pytest.raises(ValueError, match=r"^\[einsum_path\].*" + msg):
        mx.einsum_path(*args)


# -- tensordot --------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb,axes", [
    ((2, 3, 4), (3, 4, 5), 2),
    ((2, 3, 4), (4, 5), 1),
    ((2, 3), (4, 5), 0),
    ((2, 3, 4), (4, 3, 5), [[1, 2], [1, 0]]),
    ((2, 3, 4), (4, 3, 5), ((1, 2), (1, 0))),
    ((2, 3, 4), (4, 3, 5), [[2], [0]]),
    ((2, 3, 4), (4, 3, 5), [[-1], [0]]),
    ((3,), (3,), 1),
])
def test_tensordot_axes_forms(sa, sb, axes):
    a, b = _r(*sa), _r(*sb)
    got = mx.tensordot(mx.array(a), mx.array(b), axes=axes)
    want = np.tensordot(a.astype(np.float64), b, axes=axes)
    assert got.shape == want.shape
    np.testing.assert_allclose(_np(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axes,exc,msg", [
    ([[2], [1]], ValueError, "same shape on the contracted axes"),
    ([[2, 1], [0]], ValueError, "same size"),
    (4, ValueError, "exceeds"),
    (-1, ValueError, "non-negative"),
    ([[5], [0]], ValueError, "Invalid axis 5"),
    ("x", TypeError, "'x'"),
    ((2, 0), TypeError, "pair of sequences"),  # NumPy's pair-of-ints form: MLX refuses it
])
def test_tensordot_errors(axes, exc, msg):
    with pytest.raises(exc, match=r"^\[tensordot\].*" + msg):
        mx.tensordot(mx.ones((2, 3, 4)), mx.ones((4, 3, 5)), axes=axes)


# -- inner / outer / kron / vecdot ------------------------------------------------------------
def test_inner_outer_kron_vecdot():
    a, b = _r(2, 3), _r(4, 3)
    np.testing.assert_allclose(_np(mx.inner(mx.array(a), mx.array(b))), np.inner(a, b),
                               rtol=1e-5)
    assert mx.inner(mx.array(2.0), mx.ones((4, 3))).shape == (4, 3)
    with pytest.raises(ValueError, match=r"^\[inner\].*\(2, 3\).*\(4, 2\)"):
        mx.inner(mx.ones((2, 3)), mx.ones((4, 2)))
    assert mx.outer(mx.ones((3, 2)), mx.ones(2)).shape == (6, 2)
    assert mx.outer(mx.ones(3, mx.int32), mx.ones(2, mx.int32)).dtype == mx.int32
    assert mx.outer(mx.array(2), mx.ones(2)).shape == (1, 2)
    assert mx.kron(mx.ones((2, 3)), mx.ones((4, 5))).shape == (8, 15)
    assert mx.kron(mx.ones(3), mx.ones((4, 5))).shape == (4, 15)
    assert mx.kron(mx.array(2.0), mx.ones(4)).tolist() == [2.0] * 4
    x, y = _r(2, 3), _r(2, 3)
    np.testing.assert_allclose(_np(mx.vecdot(mx.array(x), mx.array(y), axis=0)),
                               (x * y).sum(0), rtol=1e-5)
    assert mx.vecdot(mx.ones((2, 3), mx.int32), mx.ones((2, 3), mx.int32)).dtype == mx.int32
    c = mx.vecdot(mx.array([1j]), mx.array([1j]))  # conjugates the first argument
    assert c.item() == 1
    with pytest.raises(IndexError, match=r"^\[vecdot\] axis 5"):
        mx.vecdot(mx.ones((2, 3)), mx.ones(3), axis=5)
    with pytest.raises(ValueError, match=r"^\[vecdot\]"):
        mx.vecdot(mx.ones((2, 3)), mx.ones(4))


def test_linalg_matches_mlx_when_available():
    mlx = pytest.importorskip("mlx.core")
    a, b, c = _r(3, 4), _r(4, 5), _r(3, 5)
    pairs = [
        (lambda m, a, b, c: m.matmul(a, b), None),
        (lambda m, a, b, c: m.addmm(c, a, b, alpha=0.5, beta=2.0), None),
        (lambda m, a, b, c: m.einsum("ij,jk->ki", a, b), None),
        (lambda m, a, b, c: m.tensordot(a, b, axes=1), None),
        (lambda m, a, b, c: m.kron(a, c), None),
        (lambda m, a, b, c: m.outer(a, b), None),
    ]
    for f, _ in pairs:
        got = f(mx, mx.array(a), mx.array(b), mx.array(c))
        want = f(mlx, mlx.array(a), mlx.array(b), mlx.array(c))
        assert got.shape == tuple(want.shape) and got.dtype.name == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(_np(got), np.array(want), rtol=1e-5, atol=1e-5)


# -- issue 13 ----------------------------------------------------------------------------------
def test_kron_errors_as_mlx():
    with pytest.raises(ValueError, match=r"^\[kron\] Input arrays cannot be empty"):
        mx.kron(mx.array([]), mx.array([1, 2]))
    with pytest.raises(OverflowError, match=r"^\[kron\] Shape dimension 4294967296"):
        mx.kron(mx.zeros(2**16), mx.zeros(2**16))


def test_hadamard_transform_errors_and_trivial_sizes():
    with pytest.raises(ValueError, match=r"^\[hadamard_transform\] Does not support empty"):
        mx.hadamard_transform(mx.array([]))
    for n in (3, 36, 240):  # MLX's kernel takes 36 = 12 * 3 (and corrupts memory)
        with pytest.raises(ValueError, match=r"^\[hadamard_transform\] Only supports n = m\*2\^k "
                           r"where m in \(1, 12, 20, 28\), got n = " + str(n)):
            mx.hadamard_transform(mx.zeros((2, n)))
    assert mx.hadamard_transform(mx.array(5.0), scale=0.2).item() == pytest.approx(1.0)
    x = mx.ones((3, 1))
    assert mx.array_equal(mx.hadamard_transform(x), x).item()


@pytest.mark.parametrize("m", [12, 20, 28])
def test_hadamard_orders_12_20_28(m):
    # the matrix (transposed out of the transform of the identity) is a +-1 Hadamard matrix,
    # and it is MLX's own matrix where MLX is installed
    h = np.asarray(mx.hadamard_transform(mx.eye(m), scale=1.0)).T
    assert set(np.unique(h)) == {-1.0, 1.0}
    assert np.array_equal(h @ h.T, m * np.eye(m))
    mlx = pytest.importorskip("mlx.core")
    assert np.array_equal(h, np.asarray(mlx.hadamard_transform(mlx.eye(m), scale=1.0)).T)


# -- block_masked_mm / segmented_mm -----------------------------------------------------------
def test_block_masked_mm_mask_gradients_and_bool_masks():
    a, b = mx.array(_r(40, 50)), mx.array(_r(50, 33))
    lm, rm = mx.array(np.abs(_r(2, 2))), mx.array(np.abs(_r(2, 2)))
    om = mx.array(np.abs(_r(2, 2)))

    def f(lm, rm, om):
        return mx.block_masked_mm(a, b, 32, om, lm, rm).sum()

    def ref(lm, rm, om):  # the same product through expanded masks
        ex = lambda m, r, c: mx.repeat(mx.repeat(m, 32, 0), 32, 1)[:r, :c]  # noqa: E731
        return (((a * ex(lm, 40, 50)) @ (b * ex(rm, 50, 33))) * ex(om, 40, 33)).sum()

    for g, w in zip(mx.grad(f, (0, 1, 2))(lm, rm, om), mx.grad(ref, (0, 1, 2))(lm, rm, om)):
        assert np.allclose(g, w, rtol=1e-4, atol=1e-3)
    # bool masks drop whole blocks, NaN included; their gradient is MLX's error
    x = np.ones((64, 32), np.float32)
    x[:32] = np.nan
    keep = mx.array([[False], [True]])
    out = mx.block_masked_mm(mx.array(x), mx.ones((32, 32)), 32, None, keep, mx.array([[True]]))
    assert np.asarray(out)[::32, 0].tolist() == [0.0, 32.0]
    with pytest.raises(ValueError, match=r"^\[BlockMaskedMM\] Cannot calculate VJP with respect "
                       "to boolean masks"):
        mx.grad(lambda a: mx.block_masked_mm(a, b, 32, None, a[:2, :2] > 0, None).sum())(a)


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: mx.block_masked_mm(mx.ones((4, 4)), mx.ones((4, 4)), 16, mx.ones((1, 1))),
     ValueError, r"Only block_sizes 32, 64 are supported"),
    (lambda: mx.block_masked_mm(mx.ones((4, 4), mx.int32), mx.ones((4, 4), mx.int32), 32,
                                mx.ones((1, 1))), ValueError, "Only real floating point"),
    (lambda: mx.block_masked_mm(mx.array(1.0), mx.ones((4, 4)), 32, mx.ones((1, 1))),
     ValueError, "0 dimension input"),
    (lambda: mx.block_masked_mm(mx.ones((4, 3)), mx.ones((4, 4)), 32, mx.ones((1, 1))),
     ValueError, "Last dimension of first input"),
    (lambda: mx.block_masked_mm(mx.ones((40, 40)), mx.ones((40, 40)), 32, mx.ones((3, 3))),
     ValueError, "broadcast"),
    (lambda: mx.segmented_mm(mx.ones((2, 10, 10)), mx.ones((10, 10)),
                             mx.array([[0, 5]], mx.uint32)), ValueError, "Batched matmul"),
    (lambda: mx.segmented_mm(mx.ones((2, 10)), mx.ones((10, 3)), mx.array([0, 5, 10])),
     ValueError, r"segments should have shape \(\.\.\., 2\)"),
    (lambda: mx.segmented_mm(mx.ones((2, 10)), mx.ones((10, 3)), mx.array([[0.0, 5.0]])),
     ValueError, "Segments must be integral"),
    (lambda: mx.segmented_mm(mx.ones((2, 10), mx.int32), mx.ones((10, 3), mx.int32),
                             mx.array([[0, 5]])), ValueError, "Only real floating point"),
    (lambda: mx.segmented_mm(mx.ones((2, 10)), mx.ones((9, 3)), mx.array([[0, 5]])),
     ValueError, "must match"),
])
def test_block_masked_and_segmented_mm_errors(call, exc, msg):
    with pytest.raises(exc, match=r"^\[(block_masked_mm|segmented_mm|broadcast_shapes)\].*" + msg):
        call()


def test_segmented_mm_gradients_and_bounds():
    a, b = mx.array(_r(3, 10)), mx.array(_r(10, 4))
    seg = mx.array([[0, 3], [3, 3], [6, 2], [2, 30]], mx.uint32)  # empty, reversed, past K
    out = mx.segmented_mm(a, b, seg)
    assert np.allclose(out[3], a[:, 2:] @ b[2:], atol=1e-5)
    assert not np.any(np.asarray(out[1:3]))
    g = mx.grad(lambda a, b: (mx.segmented_mm(a, b, seg) ** 2).sum(), (0, 1))(a, b)
    w = mx.grad(lambda a, b: ((a[:, :3] @ b[:3]) ** 2).sum() + ((a[:, 2:] @ b[2:]) ** 2).sum(),
                (0, 1))(a, b)
    for x, y in zip(g, w):
        assert np.allclose(x, y, atol=1e-4)
    with pytest.raises(ValueError, match=r"^\[SegmentedMM\].*stop_gradient"):
        mx.grad(lambda s: mx.segmented_mm(a, b, mx.astype(s, mx.uint32)).sum())(
            mx.array([[0.0, 3.0]]))


@pytest.mark.parametrize("n", [1, 2, 64, 24, 112])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_hadamard_half_rounding_is_mlx(n, dt):
    # MLX's kernel rounds after every butterfly stage (adjacent pairs first) and once after the
    # H_m stage and the scale; braze follows it, so half results are MLX's bit for bit
    mlx = pytest.importorskip("mlx.core")
    x = _r(3, n)
    for scale in (None, 0.34):
        got = mx.hadamard_transform(mx.array(x).astype(getattr(mx, dt)), scale=scale)
        want = mlx.hadamard_transform(mlx.array(x).astype(getattr(mlx, dt)), scale=scale)
        assert np.array_equal(np.asarray(got.astype(mx.float32)),
                              np.asarray(want.astype(mlx.float32)))


def test_vecdot_checks_as_mlx():
    with pytest.raises(ValueError, match=r"\[vecdot\] Inputs must be at least 1-D"):
        mx.vecdot(mx.array(1), mx.array([1]))
    with pytest.raises(ValueError, match=r"\[vecdot\] a and b must have the same size"):
        mx.vecdot(mx.array([1, 2]), mx.array([1]))
    with pytest.raises(ValueError, match=r"\[vecdot\] axis 1 is out of bounds"):
        mx.vecdot(mx.array([1, 2]), mx.array([1, 2]), axis=1)
    # other axes still broadcast (beyond MLX)
    assert mx.vecdot(mx.ones((2, 3)), mx.ones((3,))).tolist() == [3.0, 3.0]
