"""Op table: linear algebra products (matmul, addmm, inner, outer, tensordot, einsum, kron,
vecdot). References are NumPy on float64 inputs."""
import ml_dtypes
import numpy as np

import braze.core as mx

from . import FLOATS, INTS, OpCase

# the driver builds inputs with mx.array(ndarray), which reads float64 as float32 (MLX's rule)
A_FLOATS = tuple(d for d in FLOATS if d != "float64")
INT_SAMPLE = ("int8", "int32", "uint8", "int64")


def _np_dtype(dt):
    return ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype("bool" if dt == "bool" else dt)


def gen(rng, shape, dt):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in INTS:
        lo = 0 if dt.startswith("u") else -3
        return rng.integers(lo, 4, size=shape).astype(dt)
    return rng.standard_normal(shape).astype(_np_dtype(dt))


def _ins(*shapes):
    return lambda rng, dt: tuple(gen(rng, s, dt) for s in shapes)


def _sum_out(dt):
    if dt in ("bool", "int8", "int16"):
        return "int32"
    if dt in ("uint8", "uint16"):
        return "uint32"
    return dt


CASES = []


def _case(name, mx_fn, np_fn, inputs, dtypes=A_FLOATS, **kw):
    kw.setdefault("rtol", 1e-4)
    kw.setdefault("atol", 1e-5)
    CASES.append(OpCase(name, mx_fn, np_fn, inputs, dtypes, **kw))


# -- matmul -----------------------------------------------------------------------------------
_MATMUL_SHAPES = {
    "2d": ((3, 4), (4, 5)),
    "vec_vec": ((4,), (4,)),
    "vec_mat": ((4,), (4, 3)),
    "mat_vec": ((3, 4), (4,)),
    "batched": ((2, 3, 4), (2, 4, 5)),
    "batch_broadcast": ((2, 1, 3, 4), (5, 4, 2)),
    "batch_vec": ((2, 3, 4), (4,)),
    "vec_batch": ((4,), (2, 4, 3)),
    "empty_rows": ((0, 4), (4, 3)),
    "empty_inner": ((3, 0), (0, 2)),
    "empty_batch": ((0, 2, 3), (3, 2)),
}
for _v, (_sa, _sb) in _MATMUL_SHAPES.items():
    _case("matmul", lambda a, b: mx.matmul(a, b), np.matmul, _ins(_sa, _sb), variant=_v,
          dtypes=A_FLOATS + ("complex64",) if _v == "2d" else A_FLOATS)
_case("matmul", lambda a, b: a @ b, np.matmul, _ins((2, 3, 4), (4, 2)), variant="operator")
_case("matmul", mx.matmul, np.matmul,
      lambda rng, dt: (gen(rng, (3, 4), dt), gen(rng, (4, 2), "float32")),
      dtypes=("int32", "float16", "bool"), out_dtype=lambda dt: "float32",
      variant="mixed_dtypes", grad_inputs=(1,))

# -- addmm ------------------------------------------------------------------------------------
for _v, (_sc, _sa, _sb, _al, _be) in {
        "2d": ((3, 5), (3, 4), (4, 5), 1.0, 1.0),
        "alpha_beta": ((3, 5), (3, 4), (4, 5), 0.5, -2.0),
        "c_row": ((5,), (3, 4), (4, 5), 2.0, 1.0),
        "c_scalar": ((), (3, 4), (4, 5), 1.0, 0.5),
        "vec": ((5,), (4,), (4, 5), 1.0, 1.0),
        "batched": ((2, 1, 5), (2, 3, 4), (4, 5), 1.5, 0.25),
        "beta0": ((3, 5), (3, 4), (4, 5), 1.0, 0.0)}.items():
    _case("addmm", lambda c, a, b, al=_al, be=_be: mx.addmm(c, a, b, alpha=al, beta=be),
          lambda c, a, b, al=_al, be=_be: al * np.matmul(a, b) + be * c,
          _ins(_sc, _sa, _sb), variant=_v)

# -- inner / outer / kron / vecdot ------------------------------------------------------------
_case("inner", mx.inner, np.inner, _ins((4,), (4,)), variant="1d")
_case("inner", mx.inner, np.inner, _ins((2, 3), (4, 3)), variant="2d")
_case("inner", mx.inner, np.inner, _ins((2, 2, 3), (3,)), variant="3d_1d")
_case("inner", mx.inner, np.inner, _ins((), (2, 3)), variant="scalar")
_case("inner", mx.inner, lambda a, b: np.inner(a, b).astype(_np_dtype(_sum_out(str(a.dtype)))),
      _ins((2, 3), (4, 3)), dtypes=INT_SAMPLE, out_dtype=_sum_out, variant="int")
_case("outer", mx.outer, np.outer, _ins((3,), (4,)), variant="1d")
_case("outer", mx.outer, np.outer, _ins((3, 2), (2,)), variant="flattens")
_case("outer", mx.outer, np.outer, _ins((3,), (4,)), dtypes=INT_SAMPLE + ("bool",),
      variant="int", exact=True)
_case("outer", mx.outer, np.outer, _ins((0,), (4,)), variant="empty")
_case("kron", mx.kron, np.kron, _ins((2, 3), (4, 2)), variant="2d")
_case("kron", mx.kron, np.kron, _ins((3,), (2, 2)), variant="1d_2d")
_case("kron", mx.kron, np.kron, _ins((2, 2), (2,)), dtypes=INT_SAMPLE, variant="int",
      exact=True)
_case("kron", mx.kron, np.kron, _ins((), (3,)), variant="scalar")
_case("vecdot", mx.vecdot, lambda a, b: np.sum(a * b, axis=-1), _ins((2, 3), (2, 3)),
      variant="2d")
_case("vecdot", lambda a, b: mx.vecdot(a, b, axis=0), lambda a, b: np.sum(a * b, axis=0),
      _ins((4, 3), (4, 3)), variant="axis0")
_case("vecdot", mx.vecdot, lambda a, b: np.sum(a * b, axis=-1), _ins((2, 3), (3,)),
      variant="broadcast")
_case("vecdot", mx.vecdot, lambda a, b: np.sum(np.conj(a) * b, axis=-1),
      lambda rng, dt: tuple((rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3)))
                            .astype(np.complex64) for _ in range(2)),
      dtypes=("complex64",), variant="complex", differentiable=False)

# -- tensordot --------------------------------------------------------------------------------
for _v, (_sa, _sb, _ax) in {
        "default": ((2, 3, 4), (3, 4, 5), 2),
        "axes1": ((2, 3, 4), (4, 5), 1),
        "axes0": ((2, 3), (4,), 0),
        "pairs": ((2, 3, 4), (4, 3, 5), ([1, 2], [1, 0])),
        "pairs_neg": ((2, 3, 4), (4, 3, 5), ([-1], [0])),
        "all": ((3, 4), (3, 4), 2),
        "empty": ((2, 0), (0, 3), 1)}.items():
    _case("tensordot", lambda a, b, ax=_ax: mx.tensordot(a, b, axes=ax),
          lambda a, b, ax=_ax: np.tensordot(a, b, axes=ax), _ins(_sa, _sb), variant=_v)
_case("tensordot", lambda a, b: mx.tensordot(a, b, axes=1),
      lambda a, b: np.tensordot(a.astype(np.int64), b, axes=1).astype(
          _np_dtype(_sum_out(str(a.dtype)))),
      _ins((2, 3), (3, 2)), dtypes=INT_SAMPLE, out_dtype=_sum_out, variant="int")

# -- einsum -----------------------------------------------------------------------------------
_EINSUM = {
    "matmul": ("ij,jk->ik", (3, 4), (4, 5)),
    "implicit": ("ij,jk", (3, 4), (4, 5)),
    "batch_matmul": ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    "ellipsis_matmul": ("...ij,...jk->...ik", (2, 3, 4), (4, 5)),
    "trace": ("ii->", (4, 4)),
    "diagonal": ("ii->i", (4, 4)),
    "transpose": ("ij->ji", (3, 4)),
    "sum_all": ("ijk->", (2, 3, 4)),
    "sum_axis": ("ijk->ik", (2, 3, 4)),
    "outer": ("i,j->ij", (3,), (4,)),
    "dot": ("i,i->", (5,), (5,)),
    "hadamard": ("ij,ij->ij", (3, 4), (3, 4)),
    "bilinear": ("i,ij,j->", (3,), (3, 4), (4,)),
    "three_operands": ("ab,bc,cd->ad", (2, 3), (3, 4), (4, 2)),
    "ellipsis_sum": ("i...->...", (3, 2, 4)),
    "permute": ("abc->cab", (2, 3, 4)),
    "upper_case": ("Ab,bC->AC", (2, 3), (3, 4)),
    "empty": ("ij,jk->ik", (2, 0), (0, 3)),
    "scalar": (",ij->ij", (), (2, 3)),
}
for _v, (_s, *_shapes) in _EINSUM.items():
    _case("einsum", lambda *xs, s=_s: mx.einsum(s, *xs),
          lambda *xs, s=_s: np.einsum(s, *xs), _ins(*_shapes), variant=_v,
          differentiable=_v not in ("trace", "diagonal"))
_case("einsum", lambda a: mx.einsum("ij->i", a),
      lambda a: np.einsum("ij->i", a.astype(np.int64)).astype(_np_dtype(_sum_out(str(a.dtype)))),
      _ins((3, 4)), dtypes=("bool", "int8", "uint8", "int32", "uint32", "int64"),
      out_dtype=_sum_out, variant="int_reduce")
_case("einsum", lambda a, b: mx.einsum("ij,ij->ij", a, b), lambda a, b: a * b,
      _ins((3, 4), (3, 4)), dtypes=("bool", "int8", "int32"), variant="int_elementwise")
_case("einsum", lambda a, b: mx.einsum("ij,jk->ik", a, b),
      lambda a, b: np.matmul(np.broadcast_to(a, (3, 4)), b), _ins((3, 1), (4, 2)),
      variant="broadcast_size1")


# -- hadamard_transform (issue 13): H_m (x) Sylvester's H_2^k, m in (1, 12, 20, 28) ----------
def _np_h_m(m):
    """MLX's orders 12, 20, 28 entry by entry: Paley II over GF(5) for 12, Williamson's array of
    symmetric circulants (2I - J, and +1 on the diagonal and the +-k-th diagonals) for 20, 28."""
    if m == 12:
        def conf(i, j):  # conference matrix: border 1, Legendre symbol of j - i mod 5 inside
            return 1 if i == 0 or j == 0 or (j - i) % 5 in (1, 4) else -1

        def entry(r, c):
            (i, a), (j, b) = divmod(r, 2), divmod(c, 2)
            if i == j:
                return 1 if a == b == 0 else -1
            return conf(i, j) * (-1 if a == b == 1 else 1)
        return np.array([[entry(r, c) for c in range(12)] for r in range(12)])
    n = m // 4
    t = (n - 1) // 2
    ks = [0] * (4 - t) + list(range(1, t + 1))  # 0 marks 2I - J

    def circ(q, i, j):
        d = (j - i) % n
        return 1 if d == 0 or (ks[q] and d in (ks[q], n - ks[q])) else -1
    signs = [[1, 1, 1, 1], [-1, 1, -1, 1], [-1, 1, 1, -1], [-1, -1, 1, 1]]
    blocks = [[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]
    return np.array([[signs[r // n][c // n] * circ(blocks[r // n][c // n], r % n, c % n)
                      for c in range(m)] for r in range(m)])


def _np_hadamard(x, scale):
    n = x.shape[-1]
    m = next(k for k in (28, 20, 12, 1) if n % k == 0)
    h = np.ones((1, 1))
    while h.shape[0] < n // m:
        h = np.block([[h, h], [h, -h]])
    if m > 1:
        h = np.kron(_np_h_m(m), h)
    return (x @ h.T) * (1 / np.sqrt(n) if scale is None else scale)


_case("hadamard_transform", mx.hadamard_transform, lambda x: _np_hadamard(x, None),
      _ins((3, 8)), dtypes=("float32", "float16"))
_case("hadamard_transform", lambda x: mx.hadamard_transform(x, scale=0.5),
      lambda x: _np_hadamard(x, 0.5), _ins((2, 4)), dtypes=("float32", "int32"),
      out_dtype=lambda dt: "float32", variant="scale")
for _m, _shape in ((12, (3, 24)), (20, (2, 20)), (28, (2, 56))):
    _case("hadamard_transform", mx.hadamard_transform, lambda x: _np_hadamard(x, None),
          _ins(_shape), dtypes=("float32", "float16"), variant=f"m{_m}")


# -- block_masked_mm (issue 13): block masks expanded by index arithmetic --------------------
def _np_block_expand(mask, bs, rows, cols):
    m = np.asarray(mask, np.float64)
    return m[..., np.arange(rows) // bs, :][..., np.arange(cols) // bs]


def ref_block_masked_mm(a, b, bs, o=None, lm=None, rm=None):
    a2 = a[None] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if o is not None:  # a 1-D operand's axis is added to the out mask too
        o = o[..., None, :] if a.ndim == 1 else o
        o = o[..., None] if b.ndim == 1 else o
    if lm is not None:
        lm = lm[..., None, :] if a.ndim == 1 else lm
        a2 = a2 * _np_block_expand(lm, bs, *a2.shape[-2:])
    if rm is not None:
        rm = rm[..., None] if b.ndim == 1 else rm
        b2 = b2 * _np_block_expand(rm, bs, *b2.shape[-2:])
    out = a2 @ b2
    if o is not None:
        out = out * _np_block_expand(o, bs, *out.shape[-2:])
    if b.ndim == 1:
        out = out[..., 0]
    if a.ndim == 1:
        out = out[..., 0, :] if b.ndim != 1 else out[..., 0]
    return out


def _bmm_ins(sa, sb, masks, kind="float"):
    def f(rng, dt):
        mk = (lambda s: gen(rng, s, "bool")) if kind == "bool" else (lambda s: gen(rng, s, dt))
        return (gen(rng, sa, dt), gen(rng, sb, dt)) + tuple(mk(s) for s in masks)
    return f


_case("block_masked_mm", lambda a, b, o, lm, rm: mx.block_masked_mm(a, b, 32, o, lm, rm),
      lambda a, b, o, lm, rm: ref_block_masked_mm(a, b, 32, o, lm, rm),
      _bmm_ins((40, 50), (50, 33), [(2, 2), (2, 2), (2, 2)]), dtypes=("float32",),
      variant="float_masks")
_case("block_masked_mm", lambda a, b, o, lm, rm: mx.block_masked_mm(a, b, 32, o, lm, rm),
      lambda a, b, o, lm, rm: ref_block_masked_mm(a, b, 32, o, lm, rm),
      _bmm_ins((2, 40, 50), (50, 33), [(2, 2), (2, 2, 2), (2, 2)], "bool"), dtypes=("float32",),
      variant="bool_masks_batched")
_case("block_masked_mm", lambda a, b, o: mx.block_masked_mm(a, b, 64, mask_out=o),
      lambda a, b, o: ref_block_masked_mm(a, b, 64, o),
      _bmm_ins((2, 1, 70, 20), (3, 20, 65), [(2, 3, 2, 2)]), dtypes=("float32",),
      variant="out_mask_broadcast")
_case("block_masked_mm", lambda a, b, lm: mx.block_masked_mm(a, b, 32, mask_lhs=lm),
      lambda a, b, lm: ref_block_masked_mm(a, b, 32, None, lm),
      _bmm_ins((33, 40), (40, 5), [(2, 2)]), dtypes=("float32",), variant="lhs_mask_only")
_case("block_masked_mm", lambda a, b, o, lm: mx.block_masked_mm(a, b, 32, o, lm),
      lambda a, b, o, lm: ref_block_masked_mm(a, b, 32, o, lm),
      _bmm_ins((40,), (40, 35), [(2,), (2,)]), dtypes=("float32",), variant="vector_lhs")


# -- segmented_mm (issue 13): a loop over the segments ----------------------------------------
def ref_segmented_mm(a, b, seg):
    flat = seg.reshape(-1, 2)
    out = np.zeros((len(flat), a.shape[0], b.shape[1]))
    for i, (k0, k1) in enumerate(flat):
        for k in range(max(int(k0), 0), min(int(k1), a.shape[1])):
            out[i] += np.outer(a[:, k], b[k])
    return out.reshape(seg.shape[:-1] + out.shape[1:])


def _seg_ins(m, k, n, seg):
    return lambda rng, dt: (gen(rng, (m, k), dt), gen(rng, (k, n), dt),
                            np.array(seg, np.uint32))


_case("segmented_mm", mx.segmented_mm, ref_segmented_mm,
      _seg_ins(3, 10, 4, [[0, 3], [3, 3], [3, 10], [2, 8]]), dtypes=("float32", "float64"),
      variant="segments")
_case("segmented_mm", mx.segmented_mm, ref_segmented_mm,
      _seg_ins(2, 6, 5, [[[0, 2], [4, 1]], [[1, 6], [0, 6]]]), dtypes=("float32", "float16"),
      variant="nested_segments")
