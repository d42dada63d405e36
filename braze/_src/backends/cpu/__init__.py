"""The `cpu` backend: fused kernels rendered as Python loops and compiled with Numba.

For now this package only holds the vectorizable math library (`mathlib`) the kernel renderer
will call; see `mathlib.REGISTRY` / `mathlib.function_name`.
"""
from . import mathlib  # noqa: F401
