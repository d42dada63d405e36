"""The cuda renderer without NVRTC: golden sources (tests/cuda_golden/*.cu; rewrite them with
BRAZE_UPDATE_GOLDEN=1 after an intended change and read the diff), exact constants, an op table
as complete as the cpu backend's, and nothing of CUDA imported to render. Compiling is
tests/test_cuda_compile.py; the semantics are the cpu backend's tests (same IR, same rules)."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from braze._src import dtypes as D
from braze._src.backends.cpu import spell as cpu_spell
from braze._src.backends.cpu.lib import math as cpu_math
from braze._src.backends.cuda import CudaBackend, CudaVariant, Unsupported, render_kernel, spell
from braze._src.compile.kernel_ir import IRInput, IROp, KernelIR
from braze._src.prims.binary import (
    ADD,
    FLOOR_DIVIDE,
    LEFT_SHIFT,
    MAXIMUM,
    MULTIPLY,
    POWER,
    REMAINDER,
    RIGHT_SHIFT,
    SUBTRACT,
)
from braze._src.prims.core import AsType
from braze._src.prims.unary import ERF, EXP

GOLDEN = pathlib.Path(__file__).parent / "cuda_golden"


def _const(v, np_dtype):
    return IRInput.constant(np.array(v, dtype=np_dtype))


def _nan(bits: int):
    return IRInput.constant(np.array([bits], np.uint32).view(np.float32))


F16, BF16, F32, I8, I32, I64, U32, U64 = (D.float16, D.bfloat16, D.float32, D.int8, D.int32,
                                          D.int64, D.uint32, D.uint64)


def _gelu_f32():
    # x * 0.5 * (1 + erf(x * c)): the constants that are not integral are scalar inputs
    ins = (IRInput(F32), IRInput(F32), _const(1.0, np.float32), IRInput(F32))
    ops = (IROp(MULTIPLY, (0, 1), F32), IROp(ERF, (4,), F32), IROp(ADD, (5, 2), F32),
           IROp(MULTIPLY, (0, 3), F32), IROp(MULTIPLY, (7, 6), F32))
    return KernelIR(ins, ops, (8,))


def _half_nan_inf():
    ins = (IRInput(F16), IRInput(F16), _const(np.inf, np.float16), _nan(0x7FC00123))
    ops = (IROp(EXP, (0,), F16), IROp(MULTIPLY, (4, 1), F16), IROp(MAXIMUM, (5, 2), F16),
           IROp(AsType(F32), (6,), F32), IROp(ADD, (7, 3), F32), IROp(AsType(I8), (8,), I8))
    return KernelIR(ins, ops, (6, 9))


def _bf16_mixed():
    ins = (IRInput(BF16), IRInput(F32), _const(-np.inf, np.float64))
    ops = (IROp(AsType(F32), (0,), F32), IROp(SUBTRACT, (3, 1), F32),
           IROp(AsType(BF16), (4,), BF16), IROp(AsType(D.float64), (1,), D.float64),
           IROp(MAXIMUM, (6, 2), D.float64))
    return KernelIR(ins, ops, (5, 7))


def _integers():
    ins = (IRInput(I32), IRInput(I32), IRInput(D.float64), _const(-2**63, np.int64))
    ops = (IROp(FLOOR_DIVIDE, (0, 1), I32), IROp(REMAINDER, (0, 1), I32),
           IROp(LEFT_SHIFT, (4, 1), I32), IROp(RIGHT_SHIFT, (5, 1), I32),
           IROp(POWER, (6, 7), I32), IROp(AsType(U64), (2,), U64), IROp(AsType(U32), (2,), U32),
           IROp(AsType(I64), (2,), I64), IROp(SUBTRACT, (11, 3), I64))
    return KernelIR(ins, ops, (8, 9, 10, 12))


CASES = {
    "gelu_f32_contiguous": (_gelu_f32, CudaVariant("contiguous", 0, "VSS", vector=4)),
    "gelu_f32_strided_2": (_gelu_f32, CudaVariant("strided", 2, "VSS", index=64)),
    "half_nan_inf_donated": (_half_nan_inf,
                             CudaVariant("contiguous", 0, "VV", vector=8, alias=((0, 0),))),
    "bf16_mixed_strided_3": (_bf16_mixed, CudaVariant("strided", 3, "VS")),
    "integers_contiguous_scalar": (_integers, CudaVariant("contiguous", 0, "VSV", index=64)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_source(name):
    make, variant = CASES[name]
    src = render_kernel(make(), variant)
    path = GOLDEN / f"{name}.cu"
    if os.environ.get("BRAZE_UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(src)
    assert _code(src) == _code(path.read_text()), f"{name}: rendered source differs from {path}"


def _code(src: str) -> str:
    """The source from its `#include` on, with the IR key digits in the kernel name replaced:
    the leading comment (the IR's printout) and the key belong to KernelIR, not the renderer."""
    code = src[src.index("#include"):]
    return re.sub(r"_[0-9a-f]{8}_(contiguous|strided)", r"_KEY_\1", code)


def test_constants_are_exact():
    cases = [
        (_nan(0x7FC00123), "__uint_as_float(0x7fc00123u)"),
        (_nan(0xFFA00001), "__uint_as_float(0xffa00001u)"),
        (_const(np.inf, np.float32), "__uint_as_float(0x7f800000u)"),
        (_const(-np.inf, np.float16), "__uint_as_float(0xff800000u)"),
        (_const(-0.0, np.float32), "-0.0f"),
        (_const(3.0, np.float32), "3.0f"),
        (_const(2.0**70, np.float64), "1.1805916207174113e+21"),
        (_const(-np.inf, np.float64), "__longlong_as_double(0xfff0000000000000ll)"),
        (IRInput.constant(np.array([0x7FF8000000000ABC], np.uint64).view(np.float64)),
         "__longlong_as_double(0x7ff8000000000abcll)"),
        (_const(-2**63, np.int64), "int64_t(0x8000000000000000ull)"),
        (_const(2**64 - 1, np.uint64), "uint64_t(18446744073709551615ull)"),
        (_const(-128, np.int8), "int8_t(-128ll)"),
        (_const(True, np.bool_), "true"),
    ]
    for inp, text in cases:
        assert spell.literal(inp) == text, (inp, spell.literal(inp))
    # the bfloat16 value is its exact float32 widening
    bf = IRInput.constant(np.array(3.0, dtype=BF16.np_dtype))
    assert spell.literal(bf) == "3.0f"


def test_every_op_the_cpu_backend_spells_has_a_cuda_spelling():
    cpu_ops = set(cpu_spell.SPELL) | {n[:-4] for n in cpu_math.FUNCTIONS if n.endswith("_f32")}
    missing = sorted(op for op in cpu_ops if op not in spell.SPELL and op not in spell.MATH)
    assert not missing


def test_variants_name_their_index_type_and_vector():
    ir = _gelu_f32()
    v = CudaBackend.default_variant(ir)
    assert v == CudaVariant("contiguous", 0, "VVV", vector=4, index=32)
    src = render_kernel(ir, CudaVariant("contiguous", 0, "VVV", vector=1, index=64))
    assert "_contiguous_VVV_v1_i64(" in src and "const int64_t size" in src
    assert "load_vec" not in src
    assert CudaBackend.default_variant(_half_nan_inf()).vector == 8  # 16 bytes of float16
    assert CudaBackend.default_variant(_integers()).vector == 2  # float64 / int64 / uint64


def test_complex_and_row_regions_are_unsupported():
    c64 = D.complex64
    ir = KernelIR((IRInput(c64),), (IROp(EXP, (0,), c64),), (1,))
    with pytest.raises(Unsupported):
        render_kernel(ir, CudaVariant("contiguous", 0, "V"))
    rows = KernelIR((IRInput(F32),), (IROp(EXP, (0,), F32),), (1,), reduce_ndim=1)
    with pytest.raises(Unsupported):
        render_kernel(rows, CudaVariant("contiguous", 0, "V"))


def test_rendering_imports_nothing_of_cuda_and_the_backend_falls_back():
    code = ("import sys, warnings, braze.core as mx\n"
            "from braze._src.backends import get\n"
            "from braze._src.backends.cuda import CudaBackend, render_kernel\n"
            "x = mx.ones((4,))\n"
            "ir = mx.compile(lambda x: mx.exp(x) + 1).lower_for('numpy', x).irs[0]\n"
            "render_kernel(ir, CudaBackend.default_variant(ir))\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    assert get('cuda').name == 'cpu'\n"
            "assert any('cuda' in str(m.message) for m in w)\n"
            "assert not [m for m in sys.modules if m == 'cuda' or m.startswith('cuda.')]\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# -- launch planning (host side, no GPU) ----------------------------------------------------------
def _buf(shape, strides=None, address=0x10000, itemsize=4):
    from braze._src.backends.cuda.plan import Buffer, row_major
    return Buffer(tuple(shape), tuple(strides or row_major(shape)), address, itemsize)


def test_launch_plan_picks_mlx_variants():
    from braze._src.backends.cuda.plan import collapse, plan
    ir = KernelIR((IRInput(F32), IRInput(F32)), (IROp(MULTIPLY, (0, 1), F32),), (2,))
    out = [_buf((8, 16))]
    # dense, aligned: contiguous, 4 float32 per thread, 32-bit indices
    p = plan(ir, [_buf((8, 16)), _buf((8, 16))], out, (8, 16))
    assert p.variant == CudaVariant("contiguous", 0, "VV", vector=4) and p.blocks == 1
    # a misaligned buffer: no vector accesses; a scalar input: "S"
    p = plan(ir, [_buf((8, 16), address=0x10004), _buf((1,))], out, (8, 16))
    assert p.variant == CudaVariant("contiguous", 0, "VS", vector=1)
    # a broadcast row: strided rank 2 with stride 0 on the broadcast axis
    p = plan(ir, [_buf((8, 16)), _buf((16,))], out, (8, 16))
    assert p.variant == CudaVariant("strided", 2, "VV") and p.shape == (8, 16)
    assert p.strides == ((16, 1), (0, 1))
    assert p.dims_bytes(p.shape) == np.array([8, 16], np.int32).tobytes()
    # (2, 3, 4) reversed on axis 0 collapses to rank 2; a transpose stays rank 2
    p = plan(ir, [_buf((2, 3, 4), (-12, 4, 1)), _buf((2, 3, 4))], [_buf((2, 3, 4))], (2, 3, 4))
    assert p.variant.ndim == 2 and p.shape == (2, 12) and p.strides == ((-12, 1), (12, 1))
    assert collapse((4, 1, 5), [(5, 5, 1)]) == ((20,), [(1,)])
    # sizes past int32: 64-bit indices
    big = (2**16, 2**15 + 1)
    p = plan(ir, [_buf(big), _buf(big)], [_buf(big)], big)
    assert p.variant.index == 64 and p.variant.kind == "contiguous"
