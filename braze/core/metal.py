"""`mx.metal`: MLX's Metal namespace, re-exported from braze._src.metal (no Metal in braze:
`is_available()` is False and the rest behaves as MLX's does on a machine without Metal)."""
from braze._src.metal import (  # noqa: F401
    clear_cache,
    device_info,
    get_active_memory,
    get_cache_memory,
    get_peak_memory,
    reset_peak_memory,
    set_cache_limit,
    set_memory_limit,
    set_wired_limit,
    start_capture,
    stop_capture,
)
from braze._src.metal import metal_is_available as is_available  # noqa: F401

__all__ = ["clear_cache", "device_info", "get_active_memory", "get_cache_memory",
           "get_peak_memory", "is_available", "reset_peak_memory", "set_cache_limit",
           "set_memory_limit", "set_wired_limit", "start_capture", "stop_capture"]
