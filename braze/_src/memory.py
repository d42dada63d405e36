"""Byte accounting for array buffers: active, peak and cache memory.

Counts bytes of buffers that arrays own (not views of other arrays' buffers).
"""
from __future__ import annotations

import os

import numpy as np

_state = {"cache": 0, "cache_limit": None, "memory_limit": None}


class Counters:
    """Bytes held by array buffers now and at the peak (class attributes: the hot path of
    every evaluated op updates them, so they are plain ints, not dict entries)."""

    active = 0
    peak = 0


def add(nbytes: int) -> None:
    Counters.active += nbytes
    if Counters.active > Counters.peak:
        Counters.peak = Counters.active


def sub(nbytes: int) -> None:
    Counters.active -= nbytes


def get_active_memory() -> int:
    return Counters.active


def get_peak_memory() -> int:
    return Counters.peak


def reset_peak_memory() -> None:
    Counters.peak = Counters.active


def get_cache_memory() -> int:
    return _state["cache"]


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 0


def _check_limit(limit, op: str) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"[{op}] Expected a non-negative int, got {limit!r}.")
    return limit


def get_memory_limit() -> int:
    """The memory limit in bytes (a guideline; defaults to the machine's physical memory)."""
    lim = _state["memory_limit"]
    return _physical_memory() if lim is None else lim


def set_memory_limit(limit: int) -> int:
    """Set the memory limit in bytes; returns the previous limit."""
    limit = _check_limit(limit, "set_memory_limit")
    prev = get_memory_limit()
    _state["memory_limit"] = limit
    return prev


def set_cache_limit(limit: int) -> int:
    """Set the buffer-cache limit in bytes; returns the previous limit (by default the
    memory limit)."""
    limit = _check_limit(limit, "set_cache_limit")
    prev = _state["cache_limit"]
    _state["cache_limit"] = limit
    return get_memory_limit() if prev is None else prev


def set_wired_limit(limit: int) -> int:
    """Wired memory is a Metal notion; accepted and ignored. Returns the previous value."""
    limit = _check_limit(limit, "set_wired_limit")
    prev = _state.get("wired_limit", 0)
    _state["wired_limit"] = limit
    return prev


def clear_cache() -> None:
    _state["cache"] = 0


def empty(shape, dtype, order="C") -> np.ndarray:
    """A new uninitialised buffer for a kernel output (through the buffer cache)."""
    return np.empty(shape, dtype, order)
