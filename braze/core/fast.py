"""`mx.fast`: MLX's fast namespace (re-exported from braze._src.ops.fast).

layer_norm, rms_norm, rope and scaled_dot_product_attention are primitives with native kernels
(braze/_src/prims/fast.py); they differentiate, vmap and compile like any other op.
"""
from braze._src.ops.custom_kernel import cuda_kernel, metal_kernel  # noqa: F401
from braze._src.ops.fast import (  # noqa: F401
    layer_norm,
    rms_norm,
    rope,
    scaled_dot_product_attention,
)

__all__ = ["layer_norm", "rms_norm", "rope", "scaled_dot_product_attention", "metal_kernel",
           "cuda_kernel"]

