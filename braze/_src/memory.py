"""Byte accounting for array buffers: active, peak and cache memory.

Counts bytes of buffers that arrays own (not views of other arrays' buffers).
"""
from __future__ import annotations

import os

import numpy as np

_state = {"cache_limit": None, "memory_limit": None}


class _Counters:
    """Bytes held by array buffers now and at the peak. One slotted instance: the hot path of
    every evaluated op updates it (instance slots are cheaper to write than class attributes,
    whose writes also invalidate the type's attribute cache)."""

    __slots__ = ("active", "peak")

    def __init__(self):
        self.active = 0
        self.peak = 0


Counters = _Counters()


def add(nbytes: int) -> None:
    Counters.active += nbytes
    if Counters.active > Counters.peak:
        Counters.peak = Counters.active


def sub(nbytes: int) -> None:
    Counters.active -= nbytes


def get_active_memory() -> int:
    """The bytes held by the buffers of live arrays (views of other buffers not counted)."""
    return Counters.active


def get_peak_memory() -> int:
    """The most bytes `get_active_memory` has reported since the start or the last
    `reset_peak_memory`.
    """
    return Counters.peak


def reset_peak_memory() -> None:
    """Start the peak memory count over (from 0, as MLX)."""
    # MLX starts the peak over from 0 (the next allocation raises it to the active bytes)
    Counters.peak = 0


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 0


def largest_buffer() -> int:
    """The most bytes one buffer may have: the machine's physical memory (0: unknown, no
    limit). A larger one can never be held, and NumPy's bare MemoryError names no op."""
    if _state.get("largest") is None:  # read once: ops check every result they allocate
        _state["largest"] = _physical_memory()
    return _state["largest"]


def allocation_error(op: str, shape, dtype) -> ValueError | None:
    """The error naming `op` for an array of `shape` and `dtype` (a braze dtype) larger than
    `largest_buffer()`; None if it may be allocated."""
    limit = largest_buffer()
    n = dtype.size
    for d in shape:
        n *= d
    if not limit or n <= limit:
        return None
    return ValueError(f"[{op}] Cannot allocate an array of shape {tuple(shape)} and dtype "
                      f"{dtype.name}: {n} bytes is more than this machine's memory "
                      f"({limit} bytes).")


def check_allocation(op: str, shape, dtype) -> None:
    """Raise `allocation_error` before allocating an array that cannot fit."""
    err = allocation_error(op, shape, dtype)
    if err is not None:
        raise err


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


def set_wired_limit(limit: int) -> int:
    """Wired memory is a Metal notion; accepted and ignored. Returns the previous value."""
    limit = _check_limit(limit, "set_wired_limit")
    prev = _state.get("wired_limit", 0)
    _state["wired_limit"] = limit
    return prev


# -- the buffer cache ----------------------------------------------------------------------------
# MLX keeps freed buffers and hands them out again for allocations of the same size: a fresh
# 64 MiB buffer costs 4-17 ms of page faults here, more than the kernel that fills it. braze
# does the same for the large buffers its kernels allocate, through NumPy's allocator hook
# (NEP 49, `PyDataMem_SetHandler`): `empty` allocates under a handler whose `free` keeps the
# block (keyed by its exact byte size) in a table instead of returning it to libc, up to the
# cache limit; the next allocation of that size takes it back. The arrays are ordinary NumPy
# arrays that own their data (`base is None`), so donation and byte accounting are unchanged;
# a buffer enters the cache when its last reference dies, exactly like MLX's allocator.
#
# The handler's functions are Numba `cfunc`s (native code: they run inside NumPy's dealloc,
# with the GIL held, on any thread); the table is int64s in calloc'd memory, never freed
# (`_init_pool`: arrays may be freed through the handler to the very end of interpreter exit):
#   [0] cached bytes, [1] limit, [2] entries, [3] hits, [4] misses, [5..7] unused,
#   then (size, pointer) pairs.
# Only blocks of at least `_MIN_CACHED` bytes are cached (smaller ones come from libc's
# arenas without page faults). Without Numba, or if the hook is unavailable, `empty` is
# `np.empty` and the cache stays empty.

_MIN_CACHED = 1 << 16
#: buffers at least this large are worth allocating through `empty` (cached, aligned)
LARGE = _MIN_CACHED
_CAP = 256
_pool = {"state": None, "fresh": 0}  # state None: not started; False: unavailable; a dict
#: large-buffer bytes `empty` allocates before it starts the cache: starting it loads four
#: Numba functions (~25 ms; ~0.3 s more where it is the process's first Numba use), which a
#: short program's few large buffers never pay back (a fresh 64 MiB costs 4-17 ms of faults)
START_BYTES = 64 << 20


# The handler's functions (compiled as Numba cfuncs by `_init_pool`, cached on disk by Numba
# like the rest of braze's own compiled helpers). Globals they use are set by `_init_pool`.
_carray = _as_ptr = _as_int = None
_c_malloc = _c_aligned_alloc = _c_calloc = _c_realloc = _c_free = None


def _h_malloc(ctx, size):
    t = _carray(ctx, (_NSLOTS,), dtype=np.int64)
    if size >= _MIN_CACHED:
        n = t[2]
        for i in range(n):
            if t[8 + 2 * i] == size:
                p = t[9 + 2 * i]
                t[8 + 2 * i] = t[8 + 2 * (n - 1)]
                t[9 + 2 * i] = t[9 + 2 * (n - 1)]
                t[2] = n - 1
                t[0] -= size
                t[3] += 1
                return _as_ptr(p)
        t[4] += 1
        # 64-byte aligned (a cache line): misaligned 512-bit loads/stores cost the Adam kernel
        # a third of its time; free() takes aligned_alloc's blocks
        return _c_aligned_alloc(64, (size + 63) & ~63)
    return _c_malloc(size)


def _h_calloc(ctx, nelem, elsize):
    return _c_calloc(nelem, elsize)


def _h_realloc(ctx, ptr, new_size):
    return _c_realloc(ptr, new_size)


def _h_free(ctx, ptr, size):
    t = _carray(ctx, (_NSLOTS,), dtype=np.int64)
    n = t[2]
    if size >= _MIN_CACHED and n < _CAP and t[0] + size <= t[1]:
        t[8 + 2 * n] = size
        t[9 + 2 * n] = _as_int(ptr)
        t[2] = n + 1
        t[0] += size
        return
    _c_free(ptr)


_NSLOTS = 8 + 2 * _CAP


def _init_pool():
    import ctypes

    from llvmlite import ir as llir
    from numba import carray, types
    from numba.extending import intrinsic

    from .jit import cfunc  # cached, loaded lean

    @intrinsic
    def as_ptr(typingctx, x):
        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], llir.IntType(8).as_pointer())
        return types.voidptr(x), codegen

    @intrinsic
    def as_int(typingctx, p):
        def codegen(context, builder, sig, args):
            return builder.ptrtoint(args[0], llir.IntType(64))
        return types.int64(p), codegen

    g = globals()
    g["_carray"] = carray
    g["_as_ptr"] = as_ptr
    g["_as_int"] = as_int
    g["_c_malloc"] = types.ExternalFunction("malloc", types.voidptr(types.uintp))
    g["_c_aligned_alloc"] = types.ExternalFunction("aligned_alloc",
                                                   types.voidptr(types.uintp, types.uintp))
    g["_c_calloc"] = types.ExternalFunction("calloc", types.voidptr(types.uintp, types.uintp))
    g["_c_realloc"] = types.ExternalFunction("realloc",
                                             types.voidptr(types.voidptr, types.uintp))
    g["_c_free"] = types.ExternalFunction("free", types.void(types.voidptr))
    vp, up = types.voidptr, types.uintp
    h_malloc = cfunc(vp(vp, up), _h_malloc, nopython=True)
    h_calloc = cfunc(vp(vp, up, up), _h_calloc, nopython=True)
    h_realloc = cfunc(vp(vp, vp, up), _h_realloc, nopython=True)
    h_free = cfunc(types.void(vp, vp, up), _h_free, nopython=True)

    libc = ctypes.CDLL(None)
    c_free = libc.free
    c_free.restype = None
    c_free.argtypes = [ctypes.c_void_p]
    calloc = libc.calloc
    calloc.restype = ctypes.c_void_p
    calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    # the table and the handler live in memory no Python object owns, never freed: arrays
    # allocated through the handler are freed through it until the very end of interpreter
    # exit, after this module's objects are gone (a NumPy-owned table was freed first and
    # the handler's writes into it corrupted the heap: "corrupted double-linked list")
    tptr = calloc(_NSLOTS, 8)
    if not tptr:
        raise MemoryError("[buffer cache] cannot allocate its table")
    table = np.ctypeslib.as_array(ctypes.cast(tptr, ctypes.POINTER(ctypes.c_int64)),
                                  shape=(_NSLOTS,))
    lim = _state["cache_limit"]
    table[1] = get_memory_limit() if lim is None else lim

    class _Allocator(ctypes.Structure):
        _fields_ = [("ctx", ctypes.c_void_p), ("malloc", ctypes.c_void_p),
                    ("calloc", ctypes.c_void_p), ("realloc", ctypes.c_void_p),
                    ("free", ctypes.c_void_p)]

    class _Handler(ctypes.Structure):
        _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8),
                    ("allocator", _Allocator)]

    hptr = calloc(1, ctypes.sizeof(_Handler))
    if not hptr:
        raise MemoryError("[buffer cache] cannot allocate its handler")
    handler = _Handler.from_address(hptr)
    handler.name = b"braze_buffer_cache"
    handler.version = 1
    handler.allocator = _Allocator(tptr, h_malloc.address, h_calloc.address,
                                   h_realloc.address, h_free.address)
    api = ctypes.pythonapi
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    label = b"mem_handler\0"  # the capsule's name, read by every array's dealloc: kept too
    nptr = calloc(1, len(label))
    if not nptr:
        raise MemoryError("[buffer cache] cannot allocate its name")
    ctypes.memmove(nptr, label, len(label))
    name = ctypes.c_char_p(label[:-1])
    capsule = api.PyCapsule_New(hptr, ctypes.c_char_p(nptr), None)
    try:
        from numpy._core import _multiarray_umath as mu
    except ImportError:  # pragma: no cover - NumPy 1.x
        from numpy.core import _multiarray_umath as mu
    apitab = api.PyCapsule_GetPointer(mu._ARRAY_API, None)
    slots = ctypes.cast(apitab, ctypes.POINTER(ctypes.c_void_p))
    set_handler = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(slots[304])
    get_handler = ctypes.PYFUNCTYPE(ctypes.py_object)(slots[305])
    # sanity: the slot really is PyDataMem_GetHandler (a "mem_handler" capsule)
    cur = get_handler()
    if type(cur).__name__ != "PyCapsule" or api.PyCapsule_GetPointer(cur, name) is None:
        raise RuntimeError("PyDataMem_GetHandler not found")
    st = {"table": table, "capsule": capsule, "handler": handler, "name": name,
          "funcs": (h_malloc, h_calloc, h_realloc, h_free), "set": set_handler,
          "free": c_free}
    # the compiled functions too must outlive every array allocated through them: kept for
    # as long as the module (the memory they use is never freed, above)
    _KEEP.append(st)
    return st


_KEEP: list = []


def _pool_state():
    st = _pool["state"]
    if st is None:
        try:
            st = _init_pool()
        except Exception:  # pragma: no cover - no Numba / NumPy without NEP 49
            st = False
        _pool["state"] = st
    return st


def empty(shape, dtype, order="C") -> np.ndarray:
    """A new uninitialised buffer for a kernel output, reusing a cached block of the same
    byte size when there is one (see the buffer cache above; it starts once `START_BYTES`
    of large buffers have been allocated)."""
    dt = np.dtype(dtype)
    n = dt.itemsize
    for s in shape:
        n *= s
    if n < _MIN_CACHED:
        return np.empty(shape, dt, order)
    st = _pool["state"]
    if not st:
        _pool["fresh"] += n
        if st is False or _pool["fresh"] < START_BYTES or not _pool_state():
            return np.empty(shape, dt, order)
        st = _pool["state"]
    setter = st["set"]
    old = setter(st["capsule"])
    try:
        return np.empty(shape, dt, order)
    finally:
        setter(old)


def get_cache_memory() -> int:
    """The bytes held by the buffer cache: freed blocks kept for reuse (`clear_cache`
    empties it).
    """
    st = _pool["state"]
    return int(st["table"][0]) if st else 0


def cache_stats() -> dict:
    """Buffer-cache counters: cached bytes and blocks, hits and misses of `empty`."""
    st = _pool["state"]
    if not st:
        return {"bytes": 0, "blocks": 0, "hits": 0, "misses": 0}
    t = st["table"]
    return {"bytes": int(t[0]), "blocks": int(t[2]), "hits": int(t[3]), "misses": int(t[4])}


def _trim(limit: int) -> None:
    st = _pool["state"]
    if not st:
        return
    t = st["table"]
    free = st["free"]
    while t[2] > 0 and t[0] > limit:
        n = int(t[2]) - 1
        size, ptr = int(t[8 + 2 * n]), int(t[9 + 2 * n])
        t[2] = n
        t[0] -= size
        free(ptr)


def set_cache_limit(limit: int) -> int:
    """Set the buffer-cache limit in bytes; returns the previous limit (by default the
    memory limit). Cached buffers above the new limit are released."""
    limit = _check_limit(limit, "set_cache_limit")
    prev = _state["cache_limit"]
    _state["cache_limit"] = limit
    st = _pool["state"]
    if st:
        st["table"][1] = limit
        _trim(limit)
    return get_memory_limit() if prev is None else prev


def clear_cache() -> None:
    """Release every cached buffer."""
    _trim(0)
