"""The public ops: argument checks, promotion, broadcasting and composites over primitives.

Each family module lists its public names in `__all__`; `braze.core` re-exports them all.
Importing a family module also attaches its array methods and operators.
"""
from ..prims.base import register_ops as _register_ops
from . import (
    _helpers,
    conv,
    creation,
    elementwise,
    fft,  # noqa: F401  (mx.fft: its names stay out of the top-level namespace)
    indexing,
    linalg,
    linalg_decomp,  # noqa: F401  (mx.linalg only: its names are not in __all__)
    misc,
    quantized,
    reduction,
    shape,
    sorting,
)
from .conv import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .misc import *  # noqa: F401,F403
from .quantized import *  # noqa: F401,F403
from .reduction import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403

__all__ = [n for m in (creation, elementwise, reduction, shape, indexing, linalg, sorting, misc,
                       conv, quantized)
           for n in m.__all__]


class _Namespace:
    """Public ops plus the internal helpers transform rules may use (sum_to_shape, ...)."""

    def __getattr__(self, name):
        g = globals()
        if name in g:
            return g[name]
        return getattr(_helpers, name)


_register_ops(_Namespace())
