"""Every op of the op table on braze (cpu backend) and on MLX, with the same inputs.

Each (case, dtype) runs on the table's sample inputs (which carry NaN, +-Inf and -0.0 for the
elementwise ops, broadcasting for the binary ones) and on two derived inputs: every array made
0-d, and the first highest-rank array emptied along its first axis. Where MLX raises, braze must
raise a matching error. The elementwise rows also run compiled on braze (the op between two
fusable selects, so it is rendered inside a Numba kernel) against the same program eager on MLX.
"""
import functools
import inspect
import os

import numpy as np
import pytest

mlx = pytest.importorskip("mlx.core")

from mlx_oracle import braze_input, compare, mlx_input, run, to_mlx  # noqa: E402

import braze.core as mx  # noqa: E402

from op_table import all_cases  # noqa: E402
from op_table import elementwise as _elementwise  # noqa: E402

CASES = [c for c in all_cases() if "smooth" not in c.variant]  # smooth: the same minus edges
ELEMENTWISE = {id(c) for c in _elementwise.CASES}
NO_ZERO_SIGN = {"maximum", "minimum", "logaddexp"}

# MLX 0.32's CPU kernels end the process on these inputs (SIGFPE: an integer division by zero
# in the empty gathered/quantized matmuls), so they cannot be run; braze is checked on them by
# tests/test_quantized.py and tests/test_linalg.py
MLX_CRASHES = {
    ("gather_mm[both_indices]", "float32"), ("gather_mm[lhs_only_2d_b]", "float32"),
    ("gather_mm[vector_a]", "float32"), ("gather_mm[vector_b]", "float32"),
    ("gather_mm[duplicates]", "float32"), ("gather_mm[mixed_dtypes]", "float16"),
    ("gather_mm[mixed_dtypes]", "float32"), ("quantized_matmul[t_g32_b4]", "float32"),
    ("quantized_matmul[t_g32_b3]", "float32"), ("quantized_matmul[nt_g32_b4]", "float32"),
    ("quantized_matmul[vector]", "float32"), ("gather_qmm[experts]", "float32"),
    ("gather_qmm[moe_topk]", "float32"), ("gather_qmm[no_transpose]", "float32"),
    *{(f"quantized_matmul[{m}{t}]", "float32") for m in ("mxfp4", "nvfp4", "mxfp8")
      for t in ("", "_nt")}, ("gather_qmm[mxfp8]", "float32"),
    *{("segmented_mm[segments]", d) for d in ("float32", "float64")},
    *{("segmented_mm[nested_segments]", d) for d in ("float32", "float16")},
}


# Known differences, as strict xfails: (reason, [(inputs, dtypes, case ids)]), where inputs is
# table, 0d, empty or compiled. Each is an MLX bug (braze agrees with NumPy and the op table's
# reference), an MLX limitation that braze deliberately goes beyond (the op table checks
# braze's result against NumPy), a place where braze checks what MLX leaves undefined, or a
# braze bug. BRAZE_DIFF_IGNORE_KNOWN=1 runs them all as ordinary tests.
KNOWN = [
    ("MLX bug: erf(+0.0) is -0.0 (braze: +0.0, as C's erf)",
     [
        ('0d', 'bool',
         'erf'),
        ('compiled', 'bool float16 float32 float64 int16 int32 int64 int8 uint16 uint32 uint64 '
         'uint8',
         'erf'),
        ('table', 'bool float16 float32 float64 int16 int32 int64 int8 uint16 uint32 uint64 '
         'uint8',
         'erf'),
    ]),
    ('MLX bug: sin(-0.0) is +0.0',
     [
        ('compiled', 'float16 float32 float64',
         'sin'),
        ('table', 'float16 float32 float64',
         'sin'),
    ]),
    ('MLX bug: mx.full ignores `dtype` for some (value, dtype) pairs (full((2, 3), 3, '
     'bool_) is int32)',
     [
        ('0d', 'bool float16 int32',
         'full[array_astype]'),
        ('table', 'bool',
         'full[scalar]'),
        ('table', 'bool float16 int32',
         'full[array_astype]'),
        ('table', 'int32',
         'full[float_scalar]'),
    ]),
    ('MLX bug: softmax of an integer/bool array keeps the integer dtype (over a non-last '
     'axis, or when empty)',
     [
        ('0d', 'bool int16 int32 int64 int8 uint16 uint32 uint64 uint8',
         'softmax[all]'),
        ('empty', 'bool int16 int32 int64 int8 uint16 uint32 uint64 uint8',
         'softmax[all] softmax[ax-1] softmax[ax0] softmax[tuple]'),
        ('table', 'bool int16 int32 int64 int8 uint16 uint32 uint64 uint8',
         'softmax[all] softmax[ax0] softmax[tuple]'),
    ]),
    ('MLX bug: logsumexp of bool/unsigned arrays subtracts the maximum in the unsigned '
     'type (wraps around)',
     [
        ('table', 'bool uint16 uint32 uint64 uint8',
         'logsumexp[all-keep] logsumexp[all] logsumexp[ax0] logsumexp[ax1] logsumexp[keep]'
         ' logsumexp[list] logsumexp[tuple-keep] logsumexp[tuple]'),
    ]),
    ("MLX bug: median(axis=()) raises '[flatten] start_axis must be less than or equal to "
     "end_axis'",
     [
        ('empty', 'bfloat16 float16 float32 float64 int16 int32 int64 int8 uint16 uint32 uint64'
         ' uint8',
         'median[empty-tuple]'),
        ('table', 'bfloat16 float16 float32 float64 int16 int32 int64 int8 uint16 uint32 uint64'
         ' uint8',
         'median[empty-tuple]'),
    ]),
    ("MLX bug: argmax/argmin(axis=None, keepdims=True) of a 0-d array raises 'cannot "
     "create std::vector larger than max_size()'",
     [
        ('0d', 'bfloat16 bool float16 float32 float64 int16 int32 int64 int8 uint16 uint32 '
         'uint64 uint8',
         'argmax[all-keep] argmin[all-keep]'),
    ]),
    ('MLX bug: atleast_1d of a 0-d bool/complex array raises std::bad_cast',
     [
        ('table', 'bool complex64',
         'atleast_1d'),
    ]),
    ("MLX bug: vecdot((2, 3), (3,)) raises 'axis is out of bounds' instead of broadcasting",
     [
        ('empty', 'bfloat16 float16 float32',
         'vecdot[broadcast]'),
        ('table', 'bfloat16 float16 float32',
         'vecdot[broadcast]'),
    ]),
    ('MLX accumulates a long bfloat16 scan in bfloat16 (braze in float32, rounding once)',
     [
        ('table', 'bfloat16',
         'cumsum[flat-rev-excl] cumsum[flat] logcumsumexp[flat-rev-excl]'),
    ]),
    ('MLX limitation: no float64 CPU kernel (refused, or computed in float32)',
     [
        ('0d', 'float64',
         'nan_to_num[float64]'),
        ('compiled', 'float64',
         'nan_to_num[float64]'),
        ('empty', 'float64',
         'conv1d[dilation] conv2d[dilation_groups] conv_general[input_dilation] '
         'conv_general[lo_hi_flip] conv_transpose1d[output_padding] '
         'conv_transpose1d[stride] conv_transpose2d[stride_pad] dequantize[round_trip] '
         'gather_mm[both_indices] '
         'gather_mm[duplicates] gather_mm[lhs_only_2d_b] gather_mm[vector_a] '
         'gather_mm[vector_b] gather_qmm[experts] gather_qmm[moe_topk] '
         'gather_qmm[no_transpose] nan_to_num[float64] quantize[g128_b8_biases] '
         'quantize[g128_b8_q] quantize[g128_b8_scales] quantize[g32_b1_biases] '
         'quantize[g32_b1_q] quantize[g32_b1_scales] quantize[g32_b3_biases] '
         'quantize[g32_b3_q] quantize[g32_b3_scales] quantize[g32_b4_biases] '
         'quantize[g32_b4_q] quantize[g32_b4_scales] quantize[g32_b5_biases] '
         'quantize[g32_b5_q] quantize[g32_b5_scales] quantize[g64_b2_biases] '
         'quantize[g64_b2_q] quantize[g64_b2_scales] quantize[g64_b6_biases] '
         'quantize[g64_b6_q] quantize[g64_b6_scales] quantized_matmul[nt_g32_b4] '
         'quantized_matmul[t_g32_b3] quantized_matmul[t_g32_b4] quantized_matmul[t_g64_b8]'),
        ('table', 'float64',
         'conv1d[basic] conv1d[dilation] conv1d[stride_pad] conv2d[dilation_groups] '
         'conv2d[stride_pad] conv3d[basic] conv_general[input_dilation] '
         'conv_general[lo_hi_flip] conv_transpose1d[output_padding] '
         'conv_transpose1d[stride] conv_transpose2d[stride_pad] dequantize[round_trip] '
         'fast.layer_norm[affine] fast.layer_norm[plain] fast.layer_norm[weight_only] '
         'fast.rope[batch_offsets] fast.rope[freqs_3d] '
         'fast.scaled_dot_product_attention[additive_mask] '
         'fast.scaled_dot_product_attention[causal] '
         'fast.scaled_dot_product_attention[causal_mha] '
         'fast.scaled_dot_product_attention[gqa] fast.scaled_dot_product_attention[sinks] '
         'gather_mm[both_indices] gather_mm[duplicates] gather_mm[lhs_only_2d_b] '
         'gather_mm[rhs_only] gather_mm[vector_a] gather_mm[vector_b] gather_qmm[experts] '
         'gather_qmm[moe_topk] gather_qmm[no_transpose] nan_to_num[float64] '
         'quantize[g128_b8_biases] quantize[g128_b8_q] quantize[g128_b8_scales] '
         'quantize[g32_b1_biases] quantize[g32_b1_q] quantize[g32_b1_scales] '
         'quantize[g32_b3_biases] quantize[g32_b3_q] quantize[g32_b3_scales] '
         'quantize[g32_b4_biases] quantize[g32_b4_q] quantize[g32_b4_scales] '
         'quantize[g32_b5_biases] quantize[g32_b5_q] quantize[g32_b5_scales] '
         'quantize[g64_b2_biases] quantize[g64_b2_q] quantize[g64_b2_scales] '
         'quantize[g64_b6_biases] quantize[g64_b6_q] quantize[g64_b6_scales] '
         'quantized_matmul[batched_w] quantized_matmul[nt_g32_b4] '
         'quantized_matmul[t_g32_b3] quantized_matmul[t_g32_b4] quantized_matmul[t_g64_b8]'
         ' quantized_matmul[vector]'),
    ]),
    ('MLX limitation: fp-mode quantize of an empty array raises (argmin/reshape of nothing)',
     [
        ('empty', 'float32',
         'quantize[mxfp4_q] quantize[mxfp4_scales] quantize[mxfp8_q] quantize[mxfp8_scales] '
         'quantize[nvfp4_q] quantize[nvfp4_scales]'),
    ]),
    ('MLX limitation: GatherMM supports float32 only',
     [
        ('empty', 'bfloat16 float16',
         'gather_mm[both_indices] gather_mm[duplicates] gather_mm[lhs_only_2d_b] '
         'gather_mm[vector_a] gather_mm[vector_b]'),
        ('table', 'bfloat16 float16',
         'gather_mm[both_indices] gather_mm[duplicates] gather_mm[lhs_only_2d_b] '
         'gather_mm[rhs_only] gather_mm[vector_a] gather_mm[vector_b]'),
    ]),
    ("MLX limitation: integer matmul is refused; braze computes it exactly (NumPy's "
     'result)',
     [
        ('empty', 'int32 int64 int8 uint8',
         'inner[int] tensordot[int]'),
        ('table', 'int32 int64 int8 uint8',
         'inner[int] tensordot[int]'),
    ]),
    ('MLX limitation: quantize cannot reshape an empty array; braze quantizes zero rows',
     [
        ('empty', 'bfloat16 float16 float32',
         'dequantize[round_trip]'),
    ]),
    ('braze bug: dequantize(dtype=float32) with float16/bfloat16 scales computes in '
     "float32; MLX dequantizes in the scales' dtype, then casts",
     [
        ('table', 'bfloat16 float16',
         'dequantize[dtype]'),
    ]),
    ('braze checks bounds: as_strided reading outside its (0-d or emptied) input raises; '
     'MLX reads out of bounds',
     [
        ('0d', 'float32 int32', 'as_strided'),
        ('empty', 'float32 int32', 'as_strided'),
        ('0d', 'float32', 'as_strided[reversed]'),
        ('empty', 'float32', 'as_strided[reversed]'),
    ]),
    ('braze checks bounds: take(index 5) of a size-1 array raises (MLX reads out of '
     'bounds)',
     [
        ('0d', 'bfloat16 bool complex64 float16 float32 float64 int32 int64 int8 uint16',
         'take[flat]'),
    ]),
    ('braze raises for edge-padding an empty axis (as NumPy); MLX returns values read from'
     ' an empty array',
     [
        ('empty', 'bfloat16 bool complex64 float16 float32 float64 int32 int64 int8 uint16',
         'pad[edge]'),
    ]),
    ('braze checks that indices (2, 1) broadcast against a (0, 3) array (as NumPy); MLX '
     'ignores the mismatch',
     [
        ('empty', 'bool complex64 float32 float64 int32',
         'put_along_axis'),
    ]),
    ('MLX bug: float16 segmented_mm gets the rows after the first wrong (its float32 result '
     'and braze agree with NumPy)',
     [
        ('table', 'float16',
         'segmented_mm[nested_segments]'),
    ]),
]
_KNOWN = {}
for _reason, _rows in KNOWN:
    for _variant, _dts, _cids in _rows:
        for _cid in _cids.split():
            for _dt in _dts.split():
                _KNOWN[(_cid, _dt, _variant)] = _reason


def _xfail_reason(cid, dt, variant):
    if os.environ.get("BRAZE_DIFF_IGNORE_KNOWN"):
        return None
    return _KNOWN.get((cid, dt, variant))
    key = f"{cid}-{dt}-{variant}"
    for pat, reason in _KNOWN:
        if pat.search(key):
            return reason
    return None


def derived_inputs(ins):
    """(name, inputs): the table's, all arrays 0-d, the first highest-rank array emptied."""
    yield "table", ins
    arrays = [x for x in ins if isinstance(x, np.ndarray)]
    if not arrays or max(x.ndim for x in arrays) == 0:
        return
    yield "0d", tuple(x.reshape(-1)[:1].reshape(()) if isinstance(x, np.ndarray) and x.size
                      else x for x in ins)
    # only the first of them: MLX's CPU matmul/conv hand BLAS an illegal leading dimension
    # when both operands are empty (OpenBLAS then ends the process)
    top = max(x.ndim for x in arrays)
    first = next(i for i, x in enumerate(ins) if isinstance(x, np.ndarray) and x.ndim == top)
    yield "empty", tuple(x[:0] if i == first else x for i, x in enumerate(ins))


VARIANTS = ("table", "0d", "empty")


def _has_arrays(case, dt):
    return any(isinstance(x, np.ndarray) and x.ndim > 0
               for x in case.inputs(np.random.default_rng(0), dt))


def _params():
    for c in CASES:
        for dt in c.dtypes:
            for v in VARIANTS if _has_arrays(c, dt) else ("table",):
                marks = []
                if v == "empty" and (c.id, dt) in MLX_CRASHES:
                    marks.append(pytest.mark.skip(reason="MLX's CPU kernel crashes (SIGFPE)"))
                reason = _xfail_reason(c.id, dt, v)
                if reason:
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
                yield pytest.param(c, dt, v, id=f"{c.id}-{dt}-{v}", marks=marks)


def source_of(fn) -> str:
    """Readable source of a table function (a lambda's line, a partial's arguments)."""
    if isinstance(fn, functools.partial):
        args = [repr(a) for a in fn.args] + [f"{k}={v!r}" for k, v in fn.keywords.items()]
        return f"functools.partial({source_of(fn.func).strip()}, {', '.join(args)})"
    if getattr(fn, "__module__", "").startswith("braze."):
        return f"mx.{fn.__name__}"
    try:
        return inspect.getsource(fn).strip()
    except (OSError, TypeError):
        return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"


_MLX_FNS = {}


def _mlx_fn(case):
    if id(case) not in _MLX_FNS:
        _MLX_FNS[id(case)] = to_mlx(case.mx_fn)
    return _MLX_FNS[id(case)]


def check(case, dt, variant, wrap=None):
    rng = np.random.default_rng(0)
    ins = dict(derived_inputs(case.inputs(rng, dt)))[variant]
    fb, fm = case.mx_fn, _mlx_fn(case)
    program = f"op table {case.id}, dtype {dt}, {variant} inputs: {source_of(fb)}"
    if wrap is not None:
        fb, fm, note = wrap(fb, mx), wrap(fm, mlx), wrap.__doc__
        program += f"\n{note}"
    got = run(mx, fb, [braze_input(x) for x in ins])
    want = run(mlx, fm, [mlx_input(x) for x in ins])
    # the sign of a zero result is compared where IEEE 754 defines it (not for max/min ties
    # between -0.0 and +0.0, nor logaddexp's)
    compare(got, want, program=program, inputs=ins,
            zero_sign=id(case) in ELEMENTWISE and case.name not in NO_ZERO_SIGN)


@pytest.mark.parametrize("case,dt,variant", list(_params()))
def test_eager(case, dt, variant):
    check(case, dt, variant)


def compiled(fn, lib):
    """braze: mx.compile(lambda *xs: post(fn(*[pre(x) for x in xs]))), pre = post =
    where(True, v, v) (so the op is fused into a kernel); MLX: the same program, eager"""
    def sel(v):
        return lib.where(True, v, v) if isinstance(v, lib.array) else v

    def program(*xs):
        out = fn(*[sel(x) for x in xs])
        return [sel(o) for o in out] if isinstance(out, (list, tuple)) else sel(out)
    return mx.compile(program) if lib is mx else program


def _compiled_dtypes(i, dtypes) -> list:
    """float32 and one more of the row's dtypes, in rotation over the rows (`i`): every dtype
    is compiled for some ops while the suite builds about 230 kernels instead of 1,200 with an
    empty kernel cache. Every dtype of every row runs eager above, and the cpu kernels equal
    the numpy reference for every dtype in tests/test_cpu_backend.py."""
    others = [d for d in dtypes if d != "float32"]
    out = [d for d in dtypes if d == "float32"]
    if others:
        out.append(others[i % len(others)])
    return out


def _compiled_params():
    rows = [c for c in CASES if id(c) in ELEMENTWISE]
    for i, c in enumerate(rows):
        for dt in _compiled_dtypes(i, c.dtypes):
            marks = []
            reason = _xfail_reason(c.id, dt, "compiled")
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            yield pytest.param(c, dt, id=f"{c.id}-{dt}", marks=marks)


@pytest.mark.parametrize("case,dt", list(_compiled_params()))
def test_compiled_elementwise(case, dt):
    check(case, dt, "table", wrap=compiled)
