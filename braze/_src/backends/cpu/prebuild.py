"""Building the new kernels of a compiled function ahead of need, in worker processes.

A cold first call of a compiled function builds each of its kernels when the run reaches it,
one after another, in the calling process (Numba: 0.1-0.6 s each). With `BRAZE_BUILD_WORKERS`
= N > 0, `CpuBackend.prefetch` (called by mx.compile right after tracing, with every region of
the tape in order) predicts the variant each region's first launch will ask for (`predict`:
fresh C-contiguous inputs, the donations the tape makes likely), renders those kernels and
queues the ones not yet in the disk cache here. N worker processes (`python -m` this module:
not multiprocessing, which would re-run an unguarded `__main__` script in each) take them
from the back of the queue, once started, and build each into the disk cache exactly as the
calling process would (`NumbaCompiler._compile_disk`: the source file written atomically,
Numba's files, then the manifest). When the run needs one of them, `claim` decides: a job no
worker has taken is taken back and built in-process as ever (the run works from the front);
a job being built is waited for, and the kernel is then loaded from the disk cache (its
checks are those of any disk entry: an entry a dying worker left incomplete has no valid
manifest and is rebuilt). A failed job (a crash, a full disk, a refused directory) falls back
to the in-process build; a worker that dies is not replaced until the next prefetch. A wrong
prediction only costs the worker's time (flow in benchmarks/programs.py: 25 of 32 right).

Off by default: on the 2-core machine it was measured on (shared, load 3-4) the workers slow
the calling process's own builds more than they take off it (flow's first step: 20-31 s
serial, 26-44 s with 2 workers); docs/env_vars.md has the numbers.

Nothing here runs without the knob, nor without a usable disk cache. Workers ignore SIGINT:
Ctrl-C interrupts the calling process (a wait here is interruptible), and the workers finish
the kernel in hand and exit when their input closes.
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from . import launch

#: the worker's command line (tests replace it with one that fails)
WORKER = [sys.executable, "-m", __name__]
#: a region whose inputs would take more than this many bytes of (untouched) stand-in
#: memory is not predicted
_MAX_STAND_IN = 1 << 32


def _alias(backend, ir, e, inputs, shape, donatable, order, allowed=None) -> tuple:
    """The (output, input) pairs `launch._outputs` would donate for these buffers."""
    if not donatable or not any(donatable):
        return ()
    donors = backend.assign_donors(ir, inputs, shape, donatable, allowed)
    alias = ()
    for j, d in enumerate(donors):
        if d is None:
            continue
        f = inputs[d].flags
        if f.c_contiguous if order == "C" else f.f_contiguous:
            alias += ((j, d),)
    return alias


def predict(backend, ir, e, shapes, likely):
    """The variant the first launch of region `ir` (entry `e`) asks for when its inputs have
    `shapes`, are fresh C-contiguous buffers, and those flagged in `likely` are donatable;
    None where that launch builds no kernel (the reference backend runs it, or it is empty).
    The stand-ins are `np.empty` buffers, never touched (no physical memory)."""
    nbytes = sum(int(np.prod(s)) * ir.inputs[k].dtype.size for k, s in enumerate(shapes))
    if nbytes > _MAX_STAND_IN:
        return None
    inputs = [np.empty(s, ir.inputs[k].dtype.np_dtype) for k, s in enumerate(shapes)]
    shape = ir.output_shape(shapes)
    xs = [inputs[k] for k in e.run]
    kind, lay = launch._kind(e, xs, shape)
    if kind is None or lay.items == 0:
        return None
    if kind is launch.SEGMENTS:
        alias = ()
    elif kind is launch.ROWS:
        ok = launch.donor_outputs(ir, lay.ncol <= launch.STASH_MAX)
        alias = _alias(backend, ir, e, inputs, shape, likely, "C", ok)
    else:
        alias = _alias(backend, ir, e, inputs, shape, likely, getattr(lay, "order", "C"))
    return kind.variant(lay, alias)


class Job:
    """One kernel to build: `state` is "queued", "taken" (by a worker), "claimed" (back by
    the calling process), "done" or "failed". `on_done(job)`, if given, is called once it is
    done or failed (on a thread of the pool); `seconds` is then how long a worker took."""

    __slots__ = ("source", "name", "cache_dir", "state", "error", "finished", "on_done",
                 "seconds")

    def __init__(self, source, name, cache_dir, on_done=None):
        self.source, self.name, self.cache_dir = source, name, cache_dir
        self.state, self.error = "queued", None
        self.finished = threading.Event()
        self.on_done, self.seconds = on_done, 0.0

    def finish(self, ok: bool) -> None:
        self.state = "done" if ok else "failed"
        self.finished.set()
        if self.on_done is not None:
            self.on_done(self)


class Pool:
    """Worker processes, each fed by a thread of this process. The calling process needs the
    queued kernels from the front (run order) and takes back those no worker has started;
    the workers take them from the back, so the two meet with little waiting. A worker takes
    nothing before it is ready (its imports take about a second), so a first kernel is not
    held up by a worker's start. With `fifo`, workers take the oldest job first instead (the
    background builds of background.py, which nothing takes back)."""

    def __init__(self, fifo: bool = False):
        self.fifo = fifo
        self._lock = threading.Condition(threading.Lock())
        self._queued: collections.deque = collections.deque()
        self._workers: list = []  # [subprocess.Popen]
        self._closed = False
        self.jobs: dict = {}  # key -> Job, until claimed
        atexit.register(self.close)

    # -- the calling process's side ----------------------------------------------------------
    def submit(self, key, source, name, workers: int, cache_dir: str, on_done=None):
        """Queue a job (None if one is queued for `key` or the pool is closed), starting
        workers up to `workers`; with no worker alive it fails at once."""
        with self._lock:
            if key in self.jobs or self._closed:
                return None
            self.jobs[key] = job = Job(source, name, cache_dir, on_done)
            self._queued.append(job)
            self._workers = [w for w in self._workers if w.poll() is None]
            while len(self._workers) < workers and self._start(cache_dir):
                pass
            self._lock.notify()
        if not self._workers:
            self._fail_queued()
        return job

    def claim(self, key) -> bool:
        """Whether a worker built the kernel of `key` into the disk cache: False when no job
        was queued for it, when this call took the job back (no worker had started it), or
        when the job failed. Waits while a worker builds it."""
        with self._lock:
            job = self.jobs.pop(key, None)
            if job is None:
                return False
            if job.state == "queued":
                job.state = "claimed"
                return False
        job.finished.wait()
        return job.state == "done"

    def _start(self, cache_dir: str) -> bool:
        env = dict(os.environ, BRAZE_CACHE_DIR=cache_dir, BRAZE_BUILD_WORKERS="0")
        try:
            proc = subprocess.Popen(WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
        except OSError:  # no worker: the calling process takes every job back
            return False
        self._workers.append(proc)
        threading.Thread(target=self._feed, args=(proc,), daemon=True,
                         name="braze-prebuild").start()
        return True

    def _next(self):
        """The last queued job (now taken), or None once the pool closes."""
        with self._lock:
            while True:
                while self._queued:
                    job = self._queued.popleft() if self.fifo else self._queued.pop()
                    if job.state == "queued":  # not taken back by the calling process
                        job.state = "taken"
                        return job
                if self._closed:
                    return None
                self._lock.wait()

    def _feed(self, proc) -> None:
        """Hand `proc` jobs one at a time, once it is ready, until it dies or the pool
        closes."""
        try:
            ready = proc.stdout.readline()
        except (OSError, ValueError):
            ready = ""
        if not ready:
            _reap(proc)
            self._fail_queued()
            return
        while True:
            job = self._next()
            if job is None:
                return
            t0 = time.perf_counter()
            reply = ""
            try:
                req = {"source": job.source, "name": job.name, "cache_dir": job.cache_dir}
                proc.stdin.write(json.dumps(req) + "\n")
                proc.stdin.flush()
                reply = proc.stdout.readline()
                ok = bool(reply) and json.loads(reply).get("ok") is True
                job.error = None if ok else (reply.strip() or "the worker exited")
            except (OSError, ValueError) as e:
                ok, job.error = False, repr(e)
            job.seconds = time.perf_counter() - t0
            job.finish(ok)
            if not ok and (not reply or proc.poll() is not None):
                _reap(proc)
                self._fail_queued()  # a dead worker: the calling process builds the rest
                return

    def _fail_queued(self) -> None:
        """Once no worker is alive, every queued job fails (the calling process builds it)."""
        with self._lock:
            if any(w.poll() is None for w in self._workers):
                return
            failed = []
            while self._queued:
                job = self._queued.pop()
                if job.state == "queued":
                    failed.append(job)
        for job in failed:  # outside the lock: a callback may queue the next job
            job.finish(False)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
            workers, self._workers = self._workers, []
        for w in workers:
            try:
                w.stdin.close()
            except OSError:
                pass


def _reap(proc) -> None:
    """Wait for a worker whose output ended (killed if it lingers): until it is reaped,
    `poll()` may still call it alive, and its queued jobs would wait for it forever."""
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


POOL = Pool()


# -- the worker's side -------------------------------------------------------------------------
def _serve() -> None:
    """Read {"source", "name", "cache_dir"} lines from stdin, build each into that disk
    cache, answer {"ok": true, "how": ...} or {"ok": false, "error": ...} per line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from ... import config
    from .compiler import NumbaCompiler
    compiler = NumbaCompiler()
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            with config.override(cache_dir=req["cache_dir"]):
                d = compiler.directory()
                if d is None:
                    raise RuntimeError("the disk cache is not usable here")
                _, how = compiler._compile_disk(d, req["source"], req["name"])
            reply = {"ok": True, "how": how}
        except Exception as e:  # the calling process builds it instead
            reply = {"ok": False, "error": repr(e)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
