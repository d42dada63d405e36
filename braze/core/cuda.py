"""`mx.cuda`: MLX's CUDA namespace, re-exported from braze._src.metal (no CUDA in braze)."""
from braze._src.metal import cuda_is_available as is_available  # noqa: F401

__all__ = ["is_available"]
