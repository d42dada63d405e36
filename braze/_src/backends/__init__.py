"""Backends that run fused kernels, registered by name.

`get()` returns the backend the `BRAZE_BACKEND` knob names; `numpy` is the reference and is
always available.
"""
from . import base
from .base import Backend, Compiler, Program, Variant, get, register, registered
from .numpy import NumpyBackend

register("numpy", NumpyBackend)


def _cpu():
    """The Numba backend, built on first use so that importing braze does not import Numba."""
    from .cpu import CpuBackend
    return CpuBackend()


register("cpu", _cpu)


def _cuda():
    """CUDA kernels through NVRTC; not available (falls back to cpu) until it can launch."""
    from .cuda import CudaBackend
    return CudaBackend()


register("cuda", _cuda)

__all__ = ["base", "Backend", "Compiler", "Program", "Variant", "get", "register",
           "registered", "NumpyBackend"]
