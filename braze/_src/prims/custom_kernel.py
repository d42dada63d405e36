"""The primitive of `mx.fast.metal_kernel` / `mx.fast.cuda_kernel` calls: user-written GPU
source with declared output shapes and dtypes.

braze has no Metal back-end (nor, yet, a CUDA one), so, as MLX on such a machine, the node can
be built inside a trace (compiled or exported functions carry it) and fails when evaluated.
"""
from __future__ import annotations

from .base import Primitive, lazy_dataclass


@lazy_dataclass
class CustomKernel(Primitive):
    backend: str  # "metal" or "cuda"
    kernel_name: str
    source: str
    header: str
    input_names: tuple
    output_names: tuple
    output_shapes: tuple
    output_dtypes: tuple
    grid: tuple
    threadgroup: tuple
    template: tuple  # ((name, value), ...)
    init_value: float | None
    ensure_row_contiguous: bool
    atomic_outputs: bool
    compile_options: tuple  # ((key, value), ...)

    differentiable = False

    def abstract_eval(self, *inputs):
        return list(zip(self.output_shapes, self.output_dtypes))

    def _unavailable(self):
        label = "Metal" if self.backend == "metal" else "CUDA"
        return RuntimeError(f"[{self.backend}_kernel] No {label} back-end.")

    def eval_cpu(self, *xs):
        raise self._unavailable()

    def vmap(self, inputs, axes):
        raise ValueError(f"[{self.backend}_kernel] vmap is not supported for custom kernels.")
