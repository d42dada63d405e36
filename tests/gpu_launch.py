"""A minimal driver-API launcher for the `gpu` tests (UNTESTED: written without a GPU; the
backend's own launch layer does not exist yet). Loads a CUBIN, copies host inputs to device
buffers, launches a contiguous kernel over `n` elements and copies the outputs back."""
from __future__ import annotations

import ctypes

import numpy as np


def _ok(result):
    from cuda.bindings import driver
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {err}")
    return values[0] if len(values) == 1 else values


def run_contiguous(cubin: bytes, name: str, ir, variant, inputs, threads: int = 256) -> list:
    """Launch `name` (a contiguous variant of `ir`) on `inputs` (NumPy arrays in IR order,
    baked constants included and ignored; scalars are one-element arrays); NumPy outputs."""
    from cuda.bindings import driver
    _ok(driver.cuInit(0))
    dev = _ok(driver.cuDeviceGet(0))
    ctx = _ok(driver.cuDevicePrimaryCtxRetain(dev))
    _ok(driver.cuCtxSetCurrent(ctx))
    module = _ok(driver.cuModuleLoadData(cubin))
    fn = _ok(driver.cuModuleGetFunction(module, name.encode()))
    run = [k for k in range(ir.n_inputs) if not ir.inputs[k].const]
    n = max(np.asarray(inputs[k]).size for k in run)
    bufs, args = [], []
    try:
        for k in run:
            x = np.ascontiguousarray(inputs[k])
            ptr = _ok(driver.cuMemAlloc(max(x.nbytes, 1)))
            bufs.append(ptr)
            _ok(driver.cuMemcpyHtoD(ptr, x.ctypes.data, x.nbytes))
            args.append(ctypes.c_uint64(int(ptr)))
        outs = [np.empty(n, dtype=dt.np_dtype) for dt in ir.output_dtypes]
        for o in outs:
            ptr = _ok(driver.cuMemAlloc(max(o.nbytes, 1)))
            bufs.append(ptr)
            args.append(ctypes.c_uint64(int(ptr)))
        args.append(ctypes.c_int32(n) if variant.index == 32 else ctypes.c_int64(n))
        arg_ptrs = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        per_block = threads * variant.vector
        blocks = (n + per_block - 1) // per_block
        _ok(driver.cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, 0,
                                  ctypes.addressof(arg_ptrs), 0))
        _ok(driver.cuCtxSynchronize())
        for o, ptr in zip(outs, bufs[len(run):]):
            _ok(driver.cuMemcpyDtoH(o.ctypes.data, ptr, o.nbytes))
        return outs
    finally:
        for ptr in bufs:
            driver.cuMemFree(ptr)
        driver.cuModuleUnload(module)
