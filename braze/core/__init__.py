"""The `mx` namespace: MLX's names, re-exported from braze._src."""
import math as _math
import sys as _sys

from braze import __version__  # noqa: F401  (braze's version; MLX's mx.__version__ is MLX's)
from braze._src.array import ARRAY_API as _ARRAY_API
from braze._src.array import PrintOptions, array, get_printoptions, printoptions, set_printoptions  # noqa: F401
from braze._src.compile.api import (  # noqa: F401,A004
    CompileCheckError,
    RetraceError,
    compile,
    disable_compile,
    enable_compile,
    no_retrace,
)
from braze._src.compile.export import (  # noqa: F401
    FunctionExporter,
    export_function,
    exporter,
    import_function,
)
from braze._src.device import (  # noqa: F401
    Device,
    DeviceType,
    Stream,
    StreamContext,
    ThreadLocalStream,
    clear_streams,
    cpu,
    default_device,
    default_stream,
    device_count,
    device_info,
    gpu,
    is_available,
    new_stream,
    new_thread_local_stream,
    new_thread_unsafe_stream,
    set_default_device,
    set_default_stream,
    stream,
    synchronize,
)
from braze._src.dtypes import (  # noqa: F401
    Dtype,
    DtypeCategory,
    bfloat16,
    bool_,
    complex64,
    finfo,
    float16,
    float32,
    float64,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from braze._src.io import load, save, save_gguf, save_safetensors, savez, savez_compressed  # noqa: F401
from braze._src.memory import (  # noqa: F401
    clear_cache,
    get_active_memory,
    get_cache_memory,
    get_memory_limit,
    get_peak_memory,
    reset_peak_memory,
    set_cache_limit,
    set_memory_limit,
    set_wired_limit,
)
from braze._src.ops import *  # noqa: F401,F403  (eval, result_type, can_cast, ... from ops.misc)
from braze._src.transforms.autodiff import grad, jvp, value_and_grad, vjp  # noqa: F401
from braze._src.transforms.custom import checkpoint, custom_function  # noqa: F401
from braze._src.transforms.vmap import vmap  # noqa: F401

from . import cuda, distributed, fast, fft, linalg, metal, random  # noqa: F401  (the mx.* namespaces)

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

_ARRAY_API.namespace = _sys.modules[__name__]  # a.__array_namespace__() is this module
