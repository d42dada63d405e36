"""The `mx` namespace: MLX's names, re-exported from braze._src."""
import math as _math

from braze._src.array import array
from braze._src.dtypes import (  # noqa: F401
    Dtype, DtypeCategory, bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64,
    float16, float32, float64, bfloat16, complex64, issubdtype, can_cast)
from braze._src.ops import *  # noqa: F401,F403
from braze._src.memory import (  # noqa: F401
    get_active_memory, get_peak_memory, reset_peak_memory, get_cache_memory, set_cache_limit,
    set_memory_limit, clear_cache)

complexfloating = DtypeCategory.complexfloating
floating = DtypeCategory.floating
inexact = DtypeCategory.inexact
signedinteger = DtypeCategory.signedinteger
unsignedinteger = DtypeCategory.unsignedinteger
integer = DtypeCategory.integer
number = DtypeCategory.number
generic = DtypeCategory.generic

pi = _math.pi
e = _math.e
inf = _math.inf
nan = _math.nan
euler_gamma = 0.5772156649015329
newaxis = None
