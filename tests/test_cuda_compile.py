"""The cuda backend's kernels compile with NVRTC to CUBINs (no GPU needed), and its disk cache
follows the kernel cache's rules. Skipped without the `cuda` extra (cuda-bindings,
nvidia-cuda-nvrtc, nvidia-cuda-runtime). Tests marked `gpu` load and run kernels and need an
NVIDIA GPU; they are skipped everywhere else (benchmarks/gpu_check.sh runs them on one)."""
import os
import stat

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.nvrtc")

from cuda_corpus import corpus  # noqa: E402

from braze._src import config  # noqa: E402
from braze._src.backends import kernel_cache as KC  # noqa: E402
from braze._src.backends.cuda import CudaBackend, CudaVariant, Unsupported  # noqa: E402
from braze._src.backends.cuda import compiler as CC  # noqa: E402
from braze._src.backends.cuda.render import kernel_name, render_kernel  # noqa: E402

if not CC.available():
    pytest.skip("cuda_fp16.h not found (nvidia-cuda-runtime)", allow_module_level=True)


@pytest.fixture(scope="module")
def nvrtc():
    return CC.NvrtcCompiler()


def _run(ir):
    return [k for k in range(ir.n_inputs) if not ir.inputs[k].const]


def _variants(ir):
    """The variants the corpus compiles: vectorised contiguous (32-bit indices), contiguous
    with the last input a scalar and 64-bit indices, strided rank 3 (64-bit), donated."""
    n = len(_run(ir))
    be = CudaBackend()
    out = [be.default_variant(ir), CudaVariant("strided", 3, "V" * n, index=64)]
    if n > 1:
        out.append(CudaVariant("contiguous", 0, "V" * (n - 1) + "S", vector=1, index=64))
    dts = {ir.inputs[k].dtype for k in _run(ir)}
    if n and ir.dtype_of(ir.outputs[0]) in dts:
        k = next(k for k in _run(ir) if ir.inputs[k].dtype == ir.dtype_of(ir.outputs[0]))
        out.append(CudaVariant("strided", 1, "V" * n, alias=((0, k),)))
    return out


def _sources():
    srcs, unsupported = [], []
    for ir in corpus():
        try:
            srcs += [(kernel_name(ir, v), render_kernel(ir, v)) for v in _variants(ir)]
        except Unsupported as e:
            unsupported.append((ir, str(e)))
    return srcs, unsupported


def test_every_kernel_of_the_corpus_compiles_to_a_cubin(nvrtc):
    srcs, unsupported = _sources()
    # what is not rendered: complex regions and (for now) row regions, nothing else
    assert all(ir.reduce_ndim or any(ir.dtype_of(r).kind == "c"
                                     for r in range(ir.n_inputs + len(ir.ops)))
               for ir, _ in unsupported), [str(ir) for ir, _ in unsupported][:3]
    assert len(srcs) > 1500
    step = 400  # NVRTC's cost is per program: a few large ones
    for s in range(0, len(srcs), step):
        chunk = srcs[s:s + step]
        cubin = nvrtc.build_batch([src for _, src in chunk], fast=True)
        assert cubin[:4] == b"\x7fELF"
        missing = [name for name, _ in chunk if name.encode() not in cubin]
        assert not missing, missing[:5]


@pytest.mark.parametrize("which", ["gelu", "adam", "float16", "bfloat16", "int8", "uint64"])
def test_kernels_build_at_full_optimisation(which, tmp_path):
    irs = [ir for ir in corpus() if not ir.reduce_ndim]
    if which in ("gelu", "adam"):
        ops = {"gelu": {"erf"}, "adam": {"sqrt", "divide"}}[which]
        irs = [ir for ir in irs if ops <= {op.prim.kernel_op for op in ir.ops}
               and ir.dtype_of(ir.outputs[0]).name == "float32"]
    else:
        irs = [ir for ir in irs if all(i.dtype.name == which for i in ir.inputs)
               and len(ir.ops) >= 2]
    assert irs
    be = CudaBackend()
    with config.override(cache_dir=str(tmp_path)):
        for ir in irs[:2]:
            src, cubin = be.kernel(ir)
            assert cubin[:4] == b"\x7fELF" and kernel_name(ir, be.default_variant(ir)) in src


def test_disk_cache_is_private_atomic_and_checked(nvrtc, tmp_path):
    ir = next(ir for ir in corpus() if not ir.reduce_ndim and len(ir.ops) > 2)
    src = render_kernel(ir, CudaBackend.default_variant(ir))
    with config.override(cache_dir=str(tmp_path)):
        KC.Stats.reset()
        cubin, how = nvrtc.compile(src)
        assert how == "built" and cubin[:4] == b"\x7fELF"
        d = KC.backend_dir("cuda")
        files = sorted(os.listdir(d))
        assert [f.rsplit(".", 1)[1] for f in files] == ["cubin", "json"]
        for f in files:
            assert stat.S_IMODE(os.stat(os.path.join(d, f)).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
        again, how = CC.NvrtcCompiler().compile(src)  # a new compiler: from disk
        assert how == "disk" and again == cubin and KC.stats()["disk_loads"] == 1
        # a corrupt CUBIN is deleted and rebuilt, never returned
        path = os.path.join(d, next(f for f in files if f.endswith(".cubin")))
        with open(path, "r+b") as fh:
            fh.write(b"junk")
        rebuilt, how = nvrtc.compile(src)
        assert how == "built" and rebuilt == cubin and KC.stats()["corrupt"] == 1
        # the key names the architecture: another one builds its own entry
        other = CC.NvrtcCompiler(arch="sm_80")
        assert other.entry_name(src) != nvrtc.entry_name(src)
        assert other.compile(src)[1] == "built"


def test_nvrtc_errors_carry_the_log(nvrtc):
    with pytest.raises(CC.NvrtcError, match="undefined"):
        nvrtc.build('extern "C" __global__ void k() { undefined_thing(); }\n')


def test_compile_time_of_a_new_kernel(nvrtc):
    """The issue's target is 0.2 s on the GPU machine; a loaded 2-core CI machine gets 3x."""
    import time
    ir = next(ir for ir in corpus() if {"erf"} <= {op.prim.kernel_op for op in ir.ops}
              and not ir.reduce_ndim)
    src = render_kernel(ir, CudaBackend.default_variant(ir))
    nvrtc.build(src)  # NVRTC's first program in a process loads its builtins
    t0 = time.perf_counter()
    nvrtc.build(src)
    assert time.perf_counter() - t0 < 0.6


# -- on a GPU ---------------------------------------------------------------------------------
def _gpu_count() -> int:
    from braze._src.backends.cuda import _device_count
    return _device_count()


gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif("not _gpu_count()", reason="no NVIDIA GPU here")


@gpu
@needs_gpu
def test_gpu_cubins_load_and_run(nvrtc):
    """Load a few corpus kernels with the driver API and compare them with the numpy backend
    (contiguous float32 regions; the launch layer proper is not written yet)."""
    from gpu_launch import run_contiguous

    from braze._src.backends.numpy import NumpyBackend
    arch = _gpu_arch()
    comp = CC.NvrtcCompiler(arch=arch)
    be = CudaBackend()
    be._compiler = comp
    rng = np.random.default_rng(0)
    irs = [ir for ir in corpus() if not ir.reduce_ndim and len(ir.outputs) == 1
           and all(i.dtype.name == "float32" for i in ir.inputs) and len(ir.ops) > 1][:10]
    assert irs
    for ir in irs:
        v = be.default_variant(ir)
        src, cubin = be.kernel(ir, v)
        xs = [rng.standard_normal(1000).astype(np.float32) if not i.const else i.array()
              for i in ir.inputs]
        got = run_contiguous(cubin, kernel_name(ir, v), ir, v, xs)
        want = NumpyBackend().run_compiled(ir, xs, (1000,))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, equal_nan=True)


def _gpu_arch() -> str:
    from cuda.bindings import driver
    driver.cuInit(0)
    _, dev = driver.cuDeviceGet(0)
    A = driver.CUdevice_attribute
    _, major = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def test_golden_sources_compile(nvrtc):
    import pathlib
    golden = sorted((pathlib.Path(__file__).parent / "cuda_golden").glob("*.cu"))
    assert golden
    cubin = nvrtc.build_batch([p.read_text() for p in golden])
    assert cubin[:4] == b"\x7fELF"
