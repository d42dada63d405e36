"""Byte accounting for array buffers: active, peak and cache memory.

Counts bytes of buffers that arrays own (not views of other arrays' buffers).
"""
from __future__ import annotations

_state = {"active": 0, "peak": 0, "cache": 0, "cache_limit": None, "memory_limit": None}


def add(nbytes: int) -> None:
    s = _state
    s["active"] += nbytes
    if s["active"] > s["peak"]:
        s["peak"] = s["active"]


def sub(nbytes: int) -> None:
    _state["active"] -= nbytes


def get_active_memory() -> int:
    return _state["active"]


def get_peak_memory() -> int:
    return _state["peak"]


def reset_peak_memory() -> None:
    _state["peak"] = _state["active"]


def get_cache_memory() -> int:
    return _state["cache"]


def set_cache_limit(limit: int) -> int:
    """Set the buffer-cache limit in bytes; returns the previous limit."""
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(f"[set_cache_limit] Expected a non-negative int, got {limit!r}.")
    prev = _state["cache_limit"]
    _state["cache_limit"] = limit
    return prev if prev is not None else 0


def set_memory_limit(limit: int) -> int:
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(f"[set_memory_limit] Expected a non-negative int, got {limit!r}.")
    prev = _state["memory_limit"]
    _state["memory_limit"] = limit
    return prev if prev is not None else 0


def clear_cache() -> None:
    _state["cache"] = 0
