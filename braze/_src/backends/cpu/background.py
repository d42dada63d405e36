"""Kernel builds off the calling thread (`BRAZE_BACKGROUND_BUILDS`, on by default).

A Numba build costs 0.1-0.9 s per kernel, and a training step's first call needs tens of
them: built one after another in the call, they were 95 % of a cold program's first steps
(benchmarks/programs.py: transformer, 43 kernels, 11.6 s). With this knob on, a launch whose
kernel is neither in memory nor in the disk cache queues it here and runs on the numpy
reference backend (each primitive's NumPy kernel, as the uncompiled program would), so the
first calls cost about what uncompiled calls cost; one builder thread builds the queued
kernels in order (Numba's LLVM work releases the GIL), and the first launch after a build
finishes uses the native kernel.

So which calls run natively depends on timing: their results can differ from the reference's
in the last bits (kernels and NumPy round transcendental functions and sums differently).
`BRAZE_BACKGROUND_BUILDS=0` builds in the call, as before, for bit-for-bit reproducible runs
(the test suite runs that way so that every compiled call it checks runs a native kernel).

At exit the queued kernels are built before the process ends (`_finish`), so the disk cache
fills even when a program is shorter than its builds.

A background build that fails is not retried here: the next launch builds the kernel in the
calling thread, which raises what went wrong there (or falls back as any build does).
"""
from __future__ import annotations

import atexit
import os
import threading
from queue import SimpleQueue

from ... import memory
from ...compile import notice

_jobs: SimpleQueue = SimpleQueue()
_pending: set = set()  # (IR key, variant) of the kernels queued or being built
_failed: set = set()  # those whose background build raised
_lock = threading.Lock()
_thread = None
_to_disk = False  # whether the last queued kernel goes into a disk cache (see `_finish`)


def defer(backend, ir, variant) -> bool:
    """Whether the kernel of (`ir`, `variant`) is being built in the background (queued now
    if it was not): the caller runs this launch on the reference backend. False: the caller
    loads or builds it itself (it is in the disk cache, or its background build failed)."""
    key = (ir.key, variant)
    if key in _pending:
        return True
    if key in _failed or backend.on_disk(ir, variant):
        return False
    global _thread, _to_disk
    with _lock:
        if key in _pending:
            return True
        _pending.add(key)
        if _thread is None:
            # the buffer cache's Numba functions load before the builder holds Numba's
            # compiler lock (else the first allocation waits for a whole kernel build)
            memory._pool_state()
            _thread = threading.Thread(target=_serve, daemon=True, name="braze-kernel-builder")
            _thread.start()
            atexit.register(_finish)
    _to_disk = backend.compiler.directory() is not None
    origin = getattr(notice._current, "origin", "")  # named by the build notice
    _jobs.put((backend, ir, variant, key, origin))
    return True


def _serve() -> None:
    while True:
        backend, ir, variant, key, origin = _jobs.get()
        notice.evaluating(origin)
        try:
            backend.program(ir, variant)  # stored in the region's entry before it is unqueued
        except BaseException:  # the caller's own build reports it
            _failed.add(key)
        finally:
            _pending.discard(key)
            backend = ir = None


def _finish() -> None:
    """At exit, build what is queued (into the disk cache, for the next run): a program that
    ends before its kernels are built pays no more than building them in the calls would
    have cost, and its next run is warm. Ctrl-C stops the wait (an interrupted entry is
    rebuilt by a later run: the cache writes its manifest last)."""
    if not _to_disk:
        return  # without a usable disk cache nothing built now would outlive the process
    try:
        wait(float("inf"))
    except KeyboardInterrupt:
        pass


def _after_fork() -> None:
    """A forked child has no builder thread: it starts its own, with nothing queued (the
    parent's queued kernels would otherwise look pending in the child forever)."""
    global _jobs, _lock, _thread
    _jobs, _lock, _thread = SimpleQueue(), threading.Lock(), None
    _pending.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def idle() -> bool:
    """Whether no kernel is queued or being built (tests wait on it)."""
    return not _pending


def wait(timeout: float = 60.0) -> bool:
    """Block until the queued kernels are built (or `timeout` seconds pass); True if idle."""
    import time
    end = time.monotonic() + timeout
    while _pending and time.monotonic() < end:
        time.sleep(0.005)
    return not _pending
