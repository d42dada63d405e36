"""The primitive layer: one class per primitive, registered in REGISTRY.

Importing this package imports every family module so the registry is complete.
"""
from . import (  # noqa: F401
    binary,
    compile_support,
    conv,
    core,
    creation,
    custom_kernel,
    distributed,
    fast,
    fft,
    indexing,
    io,
    linalg,
    linalg_decomp,
    quantized,
    quantized_fp,
    random,
    reduce,
    scan,
    shape,
    sort,
    unary,
)
from .base import REGISTRY, Primitive, bind  # noqa: F401
