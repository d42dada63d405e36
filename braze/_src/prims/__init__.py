"""The primitive layer: one class per primitive, registered in REGISTRY.

Importing this package imports every family module so the registry is complete.
"""
from .base import REGISTRY, Primitive, bind  # noqa: F401
from . import core  # noqa: F401
from . import unary, binary, reduce, scan, sort, shape, indexing, creation, linalg  # noqa: F401
