"""The op table: one entry per (op, variant), driving forward, grad, vmap and compile tests.

Each family module defines `CASES: list[OpCase]`; this package concatenates them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

FLOATS = ("float16", "bfloat16", "float32", "float64")
SINTS = ("int8", "int16", "int32", "int64")
UINTS = ("uint8", "uint16", "uint32", "uint64")
INTS = SINTS + UINTS
ALL_REAL = ("bool",) + INTS + FLOATS


@dataclass
class OpCase:
    """One op variant.

    mx_fn(*arrays) -> array or list of arrays (braze).
    np_fn(*ndarrays) -> ndarray or list (NumPy reference; float inputs arrive as float64 when
        `ref_float64` so the reference is more accurate than the op under test).
    inputs(rng, dtype_name) -> tuple of NumPy arrays in that dtype (the sample inputs).
    out_dtype(dtype_name) -> the expected result dtype name (default: same as the input).
    """

    name: str
    mx_fn: Callable
    np_fn: Callable
    inputs: Callable
    dtypes: tuple = ("float32",)
    rtol: float = 1e-5
    atol: float = 1e-6
    differentiable: bool = True
    out_dtype: Callable | None = None
    ref_float64: bool = True
    variant: str = ""
    exact: bool = False  # compare bit-for-bit (integer results, shape ops)
    grad_inputs: tuple = field(default=None)  # which inputs are differentiable (default: floats)

    @property
    def id(self):
        return self.name + (f"[{self.variant}]" if self.variant else "")


def all_cases():
    from . import (
        conv,
        creation,
        elementwise,
        fft,
        indexing,
        linalg,
        linalg_decomp,
        quantized,
        reduction,
        shape,
        sorting,
    )
    out = []
    for m in (creation, elementwise, reduction, shape, indexing, linalg, sorting, conv, quantized,
              fft, linalg_decomp):
        out.extend(m.CASES)
    return out
