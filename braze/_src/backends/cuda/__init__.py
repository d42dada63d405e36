"""The `cuda` backend: fused regions rendered as CUDA C++ (render.py, body.py, spell.py,
prelude.py) and compiled to CUBIN by NVRTC (compiler.py). See docs/cuda.md.

What is here runs without a GPU: rendering and compiling (the `cuda` extra: cuda-bindings,
nvidia-cuda-nvrtc, nvidia-cuda-runtime for the fp16/bf16 headers). Loading and launching the
kernels (`cuModuleLoadData` / `cuLaunchKernel`), device buffers and the `mx.gpu` device model
are not written yet: they need a GPU to be tested. Until they are, `available()` is False
everywhere, so `BRAZE_BACKEND=cuda` falls back to `cpu` with the registry's warning
(backends/base.py `get`), and nothing of CUDA is imported by braze unless this package's
compiler is used directly.
"""
from __future__ import annotations

from ..base import Backend
from ..spelling import Unsupported
from .render import CudaVariant, kernel_name, render_kernel, vector_width

#: whether the launch layer exists (it needs a GPU to be written and tested: docs/cuda.md)
LAUNCH = False


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self):
        self._compiler = None
        self._kernels: dict = {}

    def available(self) -> bool:
        """A GPU this process can launch on; False until the launch layer exists."""
        return LAUNCH and _device_count() > 0

    @property
    def compiler(self):
        if self._compiler is None:
            from .compiler import NvrtcCompiler
            self._compiler = NvrtcCompiler()
        return self._compiler

    @staticmethod
    def default_variant(ir) -> CudaVariant:
        """The variant a launch on dense, aligned arrays of fewer than 2**31 elements takes."""
        run = [k for k in range(ir.n_inputs) if not ir.inputs[k].const]
        return CudaVariant("contiguous", 0, "V" * len(run), vector=vector_width(ir))

    def kernel(self, ir, variant: CudaVariant | None = None) -> tuple:
        """(source, cubin) of `ir`'s kernel for `variant` (default: `default_variant`),
        compiled once per process and cached on disk. Raises `Unsupported` for a region this
        backend does not render."""
        variant = variant or self.default_variant(ir)
        key = (ir.key, variant)
        hit = self._kernels.get(key)
        if hit is None:
            source = render_kernel(ir, variant)
            cubin, _ = self.compiler.compile(source, kernel_name(ir, variant))
            hit = self._kernels[key] = (source, cubin)
        return hit

    def run_compiled(self, ir, inputs, out_shape=None, donatable=None) -> list:
        raise NotImplementedError("[cuda] launching kernels is not written yet (docs/cuda.md)")


def _device_count() -> int:
    try:
        from cuda.bindings import driver
    except ImportError:
        return 0
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return 0
        err, n = driver.cuDeviceGetCount()
        return n if err == driver.CUresult.CUDA_SUCCESS else 0
    except Exception:  # no driver library on this machine
        return 0


__all__ = ["CudaBackend", "CudaVariant", "Unsupported", "kernel_name", "render_kernel",
           "vector_width"]
