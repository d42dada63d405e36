"""`mx.metal` and `mx.cuda` as MLX has them on a machine without either backend.

braze runs on the CPU only, so `metal.is_available()` and `cuda.is_available()` are False, as
they are for MLX on Linux. The rest of `mx.metal` is what MLX keeps there for old code:

* the memory functions are deprecated aliases of the top-level ones (`mx.get_active_memory`,
  `mx.set_memory_limit`, ...). Like MLX, the first call of each prints one line to stderr
  naming its replacement, then behaves exactly as the top-level function;
* `device_info()` describes the Metal device, so it is `{}` here (MLX's value without Metal;
  `mx.device_info()` describes the CPU);
* `start_capture(path)` / `stop_capture()` record a Metal GPU trace; with no Metal device
  there is nothing to record and, as in MLX without Metal, they do nothing.
"""
from __future__ import annotations

import sys

from . import device as _device
from . import memory as _memory

_warned: set = set()


def _deprecated(name: str) -> None:
    if name not in _warned:
        _warned.add(name)
        print(f"mx.metal.{name} is deprecated and will be removed in a future version. "
              f"Use mx.{name} instead.", file=sys.stderr)


def metal_is_available() -> bool:
    """Check if the Metal back-end is available (never, in braze)."""
    return False


def cuda_is_available() -> bool:
    """Check if the CUDA back-end is available (never, in braze)."""
    return False


def get_active_memory() -> int:
    """Deprecated alias of `mx.get_active_memory` (prints a notice on first use)."""
    _deprecated("get_active_memory")
    return _memory.get_active_memory()


def get_peak_memory() -> int:
    """Deprecated alias of `mx.get_peak_memory` (prints a notice on first use)."""
    _deprecated("get_peak_memory")
    return _memory.get_peak_memory()


def reset_peak_memory() -> None:
    """Deprecated alias of `mx.reset_peak_memory` (prints a notice on first use)."""
    _deprecated("reset_peak_memory")
    _memory.reset_peak_memory()


def get_cache_memory() -> int:
    """Deprecated alias of `mx.get_cache_memory` (prints a notice on first use)."""
    _deprecated("get_cache_memory")
    return _memory.get_cache_memory()


def set_memory_limit(limit: int) -> int:
    """Deprecated alias of `mx.set_memory_limit` (prints a notice on first use)."""
    _deprecated("set_memory_limit")
    return _memory.set_memory_limit(limit)


def set_cache_limit(limit: int) -> int:
    """Deprecated alias of `mx.set_cache_limit` (prints a notice on first use)."""
    _deprecated("set_cache_limit")
    return _memory.set_cache_limit(limit)


def set_wired_limit(limit: int) -> int:
    """Deprecated alias of `mx.set_wired_limit` (prints a notice on first use)."""
    _deprecated("set_wired_limit")
    return _memory.set_wired_limit(limit)


def clear_cache() -> None:
    """Deprecated alias of `mx.clear_cache` (prints a notice on first use)."""
    _deprecated("clear_cache")
    _memory.clear_cache()


def device_info() -> dict:
    """Information about the Metal device: `{}` here, as there is none (deprecated, like
    MLX's; `mx.device_info()` describes the CPU)."""
    _deprecated("device_info")
    return _device.device_info(_device.Device(_device.gpu, 0))


def start_capture(path: str) -> None:
    """Start a Metal capture into `path` (a `.gputrace`); nothing to capture without Metal."""
    if not isinstance(path, str):
        raise TypeError(f"start_capture(): path must be a str, got {type(path).__name__}.")


def stop_capture() -> None:
    """Stop a Metal capture (nothing to stop without Metal)."""
