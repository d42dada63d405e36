"""`mx.fast.metal_kernel` and `mx.fast.cuda_kernel`: custom GPU kernels from source strings.

They behave as MLX's do on a machine without that GPU back-end: the kernel object is built and
checked, a call inside a trace (mx.compile, mx.export_function) records a `CustomKernel` node,
and running one raises "No Metal back-end" (or CUDA). Programs that define kernels at import
time therefore load; the CUDA back-end will make `cuda_kernel` run.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

from .. import dtypes as D
from ..array import TraceState, array
from ..device import Device, DeviceType, to_stream
from ..prims.base import bind
from ..prims.custom_kernel import CustomKernel
from ._helpers import as_array

__all__ = ["metal_kernel", "cuda_kernel"]


def _names(v, what, op):
    if isinstance(v, str) or not all(isinstance(n, str) for n in v):
        raise TypeError(f"[{op}] {what} must be a sequence of strings, got {v!r}.")
    return tuple(v)


def _dim3(v, what, op):
    v = tuple(v)
    if len(v) != 3 or not all(isinstance(n, int) and n > 0 for n in v):
        raise ValueError(f"[{op}] {what} must be three positive integers, got {v!r}.")
    return v


def _device_type(stream, op) -> DeviceType:
    """The device a kernel is asked to run on (a GPU may be named: the node is only recorded)."""
    if isinstance(stream, DeviceType):
        return stream
    if isinstance(stream, Device):
        return stream.type
    return to_stream(stream, op).device.type


class _Kernel:
    """What `metal_kernel(...)` returns: call it with inputs and the output specification."""

    def __init__(self, backend, name, input_names, output_names, source, header,
                 ensure_row_contiguous, atomic_outputs, compile_options):
        self._op = f"{backend}_kernel"
        if not isinstance(source, str) or not isinstance(header, str):
            raise TypeError(f"[{self._op}] source and header must be strings.")
        if compile_options is not None and not isinstance(compile_options, dict):
            raise TypeError(f"[{self._op}] compile_options must be a dict, got "
                            f"{type(compile_options).__name__}.")
        self._fixed = dict(
            backend=backend, kernel_name=str(name), source=source, header=header,
            input_names=_names(input_names, "input_names", self._op),
            output_names=_names(output_names, "output_names", self._op),
            ensure_row_contiguous=bool(ensure_row_contiguous),
            atomic_outputs=bool(atomic_outputs),
            compile_options=tuple(sorted((str(k), v) for k, v in (compile_options or {}).items())))

    def __call__(self, *, inputs, output_shapes, output_dtypes, grid, threadgroup,
                 template=None, init_value=None, verbose=False, stream=None):
        op, fixed = self._op, self._fixed
        ins = tuple(as_array(x, op) for x in inputs)
        if len(ins) != len(fixed["input_names"]):
            raise ValueError(f"[{op}] Expected {len(fixed['input_names'])} inputs, got "
                             f"{len(ins)}.")
        shapes = tuple(tuple(int(d) for d in s) for s in output_shapes)
        dtypes = tuple(D.to_dtype(d, op) for d in output_dtypes)
        if not len(shapes) == len(dtypes) == len(fixed["output_names"]):
            raise ValueError(f"[{op}] Expected {len(fixed['output_names'])} output shapes and "
                             f"dtypes, got {len(shapes)} and {len(dtypes)}.")
        prim = CustomKernel(
            output_shapes=shapes, output_dtypes=dtypes, grid=_dim3(grid, "grid", op),
            threadgroup=_dim3(threadgroup, "threadgroup", op),
            template=tuple((str(k), v) for k, v in (template or [])),
            init_value=None if init_value is None else float(init_value), **fixed)
        if not TraceState.depth:  # run now: there is nothing to run it on
            raise prim._unavailable()
        if _device_type(stream, op) is not DeviceType.gpu:
            raise ValueError(f"[{op}] Only supports the GPU.")
        out = bind(prim, ins)
        return [out] if isinstance(out, array) else list(out)


def metal_kernel(name: str, input_names: Sequence[str], output_names: Sequence[str], source: str,
                 header: str = "", ensure_row_contiguous: bool = True, atomic_outputs: bool = False,
                 compile_options: Optional[dict] = None) -> Callable[..., List[array]]:
    """A custom Metal kernel (MLX's signature). braze has no Metal back-end: calls raise
    "No Metal back-end" when run, as MLX without Metal."""
    return _Kernel("metal", name, input_names, output_names, source, header,
                   ensure_row_contiguous, atomic_outputs, compile_options)


def cuda_kernel(name: str, input_names: Sequence[str], output_names: Sequence[str], source: str,
                header: str = "", ensure_row_contiguous: bool = True,
                shared_memory: int = 0) -> Callable[..., List[array]]:
    """A custom CUDA kernel (MLX's signature); not runnable until braze's CUDA back-end."""
    k = _Kernel("cuda", name, input_names, output_names, source, header,
                ensure_row_contiguous, False, None)
    k._fixed["compile_options"] = (("shared_memory", int(shared_memory)),)
    return k
