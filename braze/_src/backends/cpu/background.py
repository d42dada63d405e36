"""Kernel builds off the calling thread (`BRAZE_BACKGROUND_BUILDS`, on by default).

A Numba build costs 0.1-0.9 s per kernel, and a training step's first call needs tens of
them: built one after another in the call, they were 95 % of a cold program's first steps
(benchmarks/programs.py: transformer, 43 kernels, 11.6 s). With this knob on, a launch whose
kernel is neither in memory nor in the disk cache queues it here and runs on the numpy
reference backend (each primitive's NumPy kernel, as the uncompiled program would), so the
first calls cost about what uncompiled calls cost; one builder process (prebuild.py's worker)
builds the queued kernels in order into the disk cache, and the first launch after a build
finishes loads it from there (milliseconds) and runs it.

A process, not a thread: about 70 % of a Numba build is Python holding the GIL, so a builder
thread made the calling thread's own Python work about 3x slower while it built (llm-tiny
decode: 1.07 -> 3.35 ms a token), for the whole cold phase of a program. Without a usable disk
cache nothing built elsewhere can be loaded, so there one builder thread builds in this process.

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

from ... import config, memory
from ...compile import notice
from . import prebuild
from .render import render_kernel

_jobs: SimpleQueue = SimpleQueue()
_pending: set = set()  # (IR key, variant) of the kernels queued or being built
_failed: set = set()  # those whose background build raised
_lock = threading.Lock()
_thread = None
_workers = None  # the builder process's prebuild.Pool, once started
_to_disk = False  # whether the last queued kernel goes into a disk cache (see `_finish`)


def defer(backend, ir, variant) -> bool:
    """Whether the kernel of (`ir`, `variant`) is being built in the background (queued now
    if it was not): the caller runs this launch on the reference backend. False: the caller
    loads or builds it itself (it is in the disk cache, or its background build failed)."""
    key = (ir.key, variant)
    if key in _pending:
        return True
    if key in _failed:
        return False
    global _to_disk
    _to_disk = backend.compiler.directory() is not None
    if not _to_disk:
        return _to_thread(backend, ir, variant, key)
    source = render_kernel(ir, variant)
    if backend.on_disk(ir, variant, source):
        return False
    return _to_process(key, source, f"{ir.name}{variant.suffix}")


def _to_process(key, source, name) -> bool:
    """Queue the kernel for the builder process (started on the first call)."""
    global _workers
    origin = getattr(notice._current, "origin", "")  # named by the build notice

    def done(job):
        _workers.jobs.pop(key, None)
        if job.state == "done":
            notice.evaluating(origin)
            notice.kernel_built(job.seconds, True)
        else:  # the calling thread builds it, and reports what goes wrong
            _failed.add(key)
        _pending.discard(key)

    with _lock:
        if key in _pending:
            return True
        if _workers is None:
            _workers = prebuild.Pool(fifo=True)
            atexit.register(_finish)  # after the pool's own close: runs before it
        _pending.add(key)
    if _workers.submit(key, source, name, 1, config.get().cache_dir, done) is None:
        _pending.discard(key)
        return False
    return key in _pending  # False where it failed at once (no worker could start)


def _to_thread(backend, ir, variant, key) -> bool:
    """Queue the kernel for the builder thread (started on the first call)."""
    global _thread
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
    if _workers is not None:
        _workers.close()


def _after_fork() -> None:
    """A forked child has no builder thread nor process: it starts its own, with nothing
    queued (the parent's queued kernels would otherwise look pending in the child forever)."""
    global _jobs, _lock, _thread, _workers
    _jobs, _lock, _thread, _workers = SimpleQueue(), threading.Lock(), None, None
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
