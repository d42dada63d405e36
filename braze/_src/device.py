"""Devices and streams, with MLX's names, reprs and errors.

braze runs everything on the CPU, synchronously, so streams only carry identity: ops accept a
`stream=` argument (checked by `to_stream`) and `synchronize` has nothing to wait for. The GPU
device type exists, as in MLX without a GPU backend: it can be named, never used.
"""
from __future__ import annotations

import enum
import gc
import os
import platform
import threading
from typing import Optional, Union

__all__ = ["DeviceType", "Device", "Stream", "cpu", "gpu", "is_available", "default_device",
           "set_default_device", "default_stream", "new_stream", "set_default_stream",
           "stream", "StreamContext", "synchronize", "clear_streams", "device_count",
           "device_info", "ThreadLocalStream", "new_thread_local_stream",
           "new_thread_unsafe_stream"]


class DeviceType(enum.Enum):
    """The kind of a device: `cpu` or `gpu` (braze runs on the CPU only)."""

    cpu = 0
    gpu = 1

    def __repr__(self):
        return f"DeviceType.{self.name}"

    __str__ = __repr__

    def __hash__(self):  # equal to Device(self, 0), so hash alike
        return hash((self.value, 0))

    def __eq__(self, other):
        if isinstance(other, DeviceType):
            return self is other
        return NotImplemented


cpu = DeviceType.cpu
gpu = DeviceType.gpu


class Device:
    """A device: a DeviceType and an index (`Device(cpu, 0)`)."""

    __slots__ = ("type", "_index")

    def __init__(self, type: DeviceType, index: int = 0):  # noqa: A002 - MLX's argument name
        if not isinstance(type, DeviceType):
            raise TypeError(f"Device(): expected a DeviceType, got {type!r}.")
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"Device(): expected an int index, got {index!r}.")
        self.type = type
        self._index = index

    def __repr__(self):
        return f"Device({self.type.name}, {self._index})"

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, DeviceType):
            other = Device(other)
        if not isinstance(other, Device):
            return NotImplemented
        return self.type is other.type and self._index == other._index

    def __hash__(self):
        return hash((self.type.value, self._index))


class Stream:
    """A stream on a device (`Stream(Device(cpu, 0), 0)`); index 0 is the default stream.

    A stream from `new_stream` belongs to the thread that made it (`_thread`), as in MLX:
    another thread cannot run work on it. Default streams and `new_thread_unsafe_stream`'s
    may be used anywhere (`_thread` None).
    """

    __slots__ = ("device", "_index", "_thread")

    def __init__(self, device: Union[Device, DeviceType], index: int = 0):
        self.device = to_device(device, "Stream")
        self._index = index
        self._thread = None

    def __repr__(self):
        return f"Stream({self.device!r}, {self._index})"

    __str__ = __repr__

    def __eq__(self, other):
        if not isinstance(other, Stream):
            return NotImplemented
        return self.device == other.device and self._index == other._index

    def __hash__(self):
        return hash((hash(self.device), self._index))


class ThreadLocalStream:
    """A stream that is a different `Stream` in every thread that uses it (each thread gets its
    own, made on first use), so one object can be shared by worker threads."""

    __slots__ = ("device", "_index")

    def __init__(self, device: Device, index: int):
        self.device = device
        self._index = index

    def __repr__(self):
        return f"ThreadLocalStream({self.device!r}, {self._index})"

    __str__ = __repr__

    def __eq__(self, other):
        if not isinstance(other, ThreadLocalStream):
            return NotImplemented
        return self.device == other.device and self._index == other._index

    def __hash__(self):
        return hash(("tls", hash(self.device), self._index))


# -- state ----------------------------------------------------------------------------------
def to_device(d, op: str) -> Device:
    """A Device from a Device or DeviceType; TypeError naming `op` otherwise."""
    if isinstance(d, Device):
        return d
    if isinstance(d, DeviceType):
        return Device(d)
    raise TypeError(f"[{op}] Expected a Device or DeviceType, got {type(d).__name__}: {d!r}.")


_CPU = Device(cpu, 0)
_state = {"device": _CPU, "next_index": 1, "next_tls": 0}
_lock = threading.Lock()


class _PerThread(threading.local):
    """Each thread's default streams (MLX keeps them per thread) and the streams its
    ThreadLocalStreams stand for."""

    def __init__(self):
        self.streams = {_CPU: Stream(_CPU, 0)}
        self.tls = {}
        self.error = None  # the failure of an async_eval, raised by the next synchronize


_local = _PerThread()


def _next_index(key: str) -> int:
    with _lock:
        i = _state[key]
        _state[key] = i + 1
    return i


def is_available(device: Union[Device, DeviceType]) -> bool:
    """Whether braze can run on `device`: the CPU yes, the GPU no."""
    return to_device(device, "is_available").type is cpu


def _check_available(d: Device, message: str) -> None:
    if d.type is not cpu:
        raise ValueError(message)


def default_device() -> Device:
    """The device ops run on by default (the CPU unless changed)."""
    return _state["device"]


def set_default_device(device: Union[Device, DeviceType]) -> None:
    """Make `device` the default device; ValueError for the GPU (braze has no GPU
    back-end).
    """
    d = to_device(device, "set_default_device")
    _check_available(d, "[set_default_device] Cannot set gpu device without gpu backend.")
    _state["device"] = d


def default_stream(device: Union[Device, DeviceType]) -> Stream:
    """The calling thread's default stream of `device`; ValueError for the GPU."""
    d = to_device(device, "default_stream")
    _check_available(d, "[default_stream] Cannot get gpu stream without gpu backend.")
    s = _local.streams.get(d)
    if s is None:
        s = _local.streams[d] = Stream(d, 0)
    return s


def new_stream(device: Union[Device, DeviceType]) -> Stream:
    """A new stream, usable only in the calling thread (as in MLX)."""
    s = new_thread_unsafe_stream(device, "new_stream")
    s._thread = threading.get_ident()
    return s


def new_thread_unsafe_stream(device: Union[Device, DeviceType],
                             op: str = "new_thread_unsafe_stream") -> Stream:
    """A new stream any thread may use."""
    d = to_device(device, op)
    _check_available(d, f"[{op}] Cannot make gpu stream without gpu backend.")
    return Stream(d, _next_index("next_index"))


def new_thread_local_stream(device: Union[Device, DeviceType]) -> ThreadLocalStream:
    """A stream object every thread may use: each thread runs on its own stream behind it."""
    d = to_device(device, "new_thread_local_stream")
    _check_available(d, "[new_thread_local_stream] Cannot make gpu stream without gpu "
                        "backend.")
    return ThreadLocalStream(d, _next_index("next_tls"))


def _resolve(s, op: str) -> Stream:
    """The Stream `s` stands for in this thread; RuntimeError for another thread's stream."""
    if isinstance(s, ThreadLocalStream):
        r = _local.tls.get(s)
        if r is None:
            r = _local.tls[s] = new_stream(s.device)
        return r
    if s._thread is not None and s._thread != threading.get_ident():
        raise RuntimeError(f"[{op}] There is no {s} in the current thread: a stream from "
                           f"new_stream belongs to the thread that made it (share a "
                           f"new_thread_local_stream instead).")
    return s


def set_default_stream(stream: Stream) -> None:
    """Make `stream` the default of its device (the default device does not change)."""
    if not isinstance(stream, Stream):
        raise TypeError(f"[set_default_stream] Expected a Stream, got {stream!r}.")
    _local.streams[stream.device] = _resolve(stream, "set_default_stream")


#: callbacks `clear_streams` runs (registered by higher layers: compile adds its per-thread
#: cache clear; this layer may not import them)
_CLEAR_HOOKS: list = []


def register_clear_hook(fn) -> None:
    """Have `clear_streams()` also call `fn()` (once per registration of the same function)."""
    if fn not in _CLEAR_HOOKS:
        _CLEAR_HOOKS.append(fn)


def clear_streams() -> None:
    """Forget the calling thread's streams: every device's default stream is its stream 0
    again, and its ThreadLocalStreams get new streams. (New streams keep counting up, as in
    MLX.) Also clears the calling thread's compile cache, as MLX does (through the hooks
    higher layers register)."""
    _local.streams = {_CPU: Stream(_CPU, 0)}
    _local.tls = {}
    for fn in list(_CLEAR_HOOKS):
        fn()


def to_stream(s, op: str = "stream") -> Stream:
    """The stream an op runs on, from its `stream=` argument (None, Stream, Device or
    DeviceType); ValueError for the GPU, TypeError for anything else."""
    if s is None:
        return default_stream(_state["device"])
    if isinstance(s, (Stream, ThreadLocalStream)):
        _check_available(s.device, f"[{op}] Cannot use a gpu stream without gpu backend.")
        return _resolve(s, op)
    if isinstance(s, (Device, DeviceType)):
        return default_stream(s)
    raise TypeError(f"[{op}] Expected a Stream, Device or DeviceType for stream=, got "
                    f"{type(s).__name__}: {s!r}.")


class StreamContext:
    """The context manager `stream(s)` returns: inside it, `s` is the default device and (for a
    Stream) that device's default stream."""

    def __init__(self, s: Union[Stream, ThreadLocalStream, Device, DeviceType]):
        if not isinstance(s, (Stream, ThreadLocalStream, Device, DeviceType)):
            raise TypeError(f"[stream] Expected a Stream, Device or DeviceType, got {s!r}.")
        self._target = s
        self._saved = None

    def __enter__(self):
        s = self._target
        is_stream = isinstance(s, (Stream, ThreadLocalStream))
        d = s.device if is_stream else to_device(s, "stream")
        _check_available(d, "[default_stream] Cannot get gpu stream without gpu backend.")
        if is_stream:
            s = _resolve(s, "stream")
        streams = _local.streams
        self._saved = (_state["device"], d, streams.get(d), streams)
        _state["device"] = d
        if is_stream:
            streams[d] = s
        return None

    def __exit__(self, *exc):
        device, d, prev, streams = self._saved
        _state["device"] = device
        if prev is None:
            streams.pop(d, None)
        else:
            streams[d] = prev
        return False


def stream(s: Union[Stream, ThreadLocalStream, Device, DeviceType]) -> StreamContext:
    """`with mx.stream(s): ...` runs the block with `s` (a Stream, Device or DeviceType) as the
    default."""
    return StreamContext(s)


def synchronize(
        stream: Optional[Union[Stream, ThreadLocalStream, Device, DeviceType]] = None) -> None:
    """Wait for the work queued on `stream`. braze evaluates synchronously: nothing to wait for.

    It does collect young reference cycles (cheap: generations 0 and 1). The outputs of a
    multi-output node point at each other, so siblings dropped unevaluated (`b, c = divmod(a,
    a); del b, c`) keep their inputs' buffers until the cycle collector runs, where MLX frees
    them with the last handle; by a synchronize they are gone in braze too. An earlier
    `async_eval` that failed raises here (a RuntimeError), as in MLX.
    """
    to_stream(stream, "synchronize")
    gc.collect(1)
    e, _local.error = _local.error, None
    if e is not None:
        if isinstance(e, RuntimeError):
            raise e
        raise RuntimeError(str(e)) from e


def defer_error(e: Exception) -> None:
    """Keep the failure of asynchronous work for the next `synchronize` (MLX's async_eval
    reports kernel errors there)."""
    _local.error = e


def device_count(device_type: Union[Device, DeviceType]) -> int:
    """How many devices of this type braze can use: 1 CPU, 0 GPUs."""
    d = to_device(device_type, "device_count")
    return 1 if d.type is cpu else 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_info(d: Optional[Union[Device, DeviceType]] = None) -> dict:
    """Properties of a device (the default device if None); {} for an unavailable device."""
    dev = default_device() if d is None else to_device(d, "device_info")
    if dev.type is not cpu:
        return {}
    info = {"architecture": platform.machine(), "device_name": _cpu_name()}
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_size"] = int(pages) * int(page_size)
    except (ValueError, OSError, AttributeError):
        pass
    return info
