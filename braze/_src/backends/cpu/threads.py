"""A persistent pool of worker threads for large kernels.

Kernels are compiled `nogil=True` and take an index range [start, stop), so a launch over n
elements is split into one contiguous chunk per thread: the calling thread runs the first
chunk itself and the workers the others, in parallel (the GIL is released inside the kernel).

Waking a worker and joining it costs 75-90 us round trip on the project's machines, so only
launches of at least `threshold()` elements are split (see docs/kernels.md for the
measurement); smaller ones, and launches made while the pool is busy with another thread's
launch, run on the calling thread. `BRAZE_NUM_THREADS` (0: the number of cores) caps the
threads, the caller included.
"""
from __future__ import annotations

import os
import threading

from ... import config

#: elements below which a launch stays on the calling thread (measured, docs/kernels.md)
DEFAULT_THRESHOLD = 1 << 18
_threshold = [DEFAULT_THRESHOLD]


def threshold() -> int:
    return _threshold[0]


def set_threshold(n: int) -> int:
    prev = _threshold[0]
    _threshold[0] = int(n)
    return prev


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover
        return os.cpu_count() or 1


_CORES = _cores()  # read once: sched_getaffinity is a system call


def num_threads() -> int:
    n = config.get().num_threads
    return max(1, n if n > 0 else _CORES)


class _Worker:
    __slots__ = ("thread", "cv", "task", "done", "error")

    def __init__(self, idx):
        self.cv = threading.Condition(threading.Lock())
        self.task = None
        self.done = True
        self.error = None
        self.thread = threading.Thread(target=self._loop, name=f"braze-kernel-{idx}",
                                       daemon=True)
        self.thread.start()

    def _loop(self):
        cv = self.cv
        while True:
            with cv:
                while self.task is None:
                    cv.wait()
                fn, args = self.task
            try:
                fn(*args)
            except BaseException as e:  # pragma: no cover - kernels do not raise
                self.error = e
            fn = args = None  # drop the buffers: a waiting worker must not keep them alive
            with cv:
                self.task = None
                self.done = True
                cv.notify_all()

    def submit(self, fn, args):
        with self.cv:
            self.done = False
            self.error = None
            self.task = (fn, args)
            self.cv.notify_all()

    def wait(self):
        with self.cv:
            while not self.done:
                self.cv.wait()
        if self.error is not None:  # pragma: no cover
            raise self.error


class Pool:
    def __init__(self):
        self._workers: list = []
        self._busy = threading.Lock()
        self.launches = 0  # launches that used more than one thread (tests read it)

    def _ensure(self, n):
        while len(self._workers) < n:
            self._workers.append(_Worker(len(self._workers)))

    def run(self, fn, n: int, args: tuple, unit: int = 1) -> int:
        """fn(start, stop, *args) over [0, n): split across threads when n is large enough.
        `unit` is the number of elements one index stands for (a row kernel's row length).
        Returns the number of threads used."""
        if n * unit < _threshold[0]:  # small launches never pay for a thread (hot path)
            fn(0, n, *args)
            return 1
        nt = num_threads()
        if nt <= 1 or n < 2 or not self._busy.acquire(blocking=False):
            fn(0, n, *args)
            return 1
        try:
            nt = min(nt, n, max(1, n * unit // max(1, _threshold[0] // 2)))
            self._ensure(nt - 1)
            # element chunks start on multiples of 64 elements (whole cache lines for every
            # dtype); rows are split evenly
            step = -(-n // nt)
            if unit == 1:
                step = -(-step // 64) * 64
            bounds = [min(n, i * step) for i in range(nt + 1)]
            used = []
            for w, i in zip(self._workers, range(1, nt)):
                if bounds[i] < bounds[i + 1]:
                    w.submit(fn, (bounds[i], bounds[i + 1]) + args)
                    used.append(w)
            fn(bounds[0], bounds[1], *args)
            for w in used:
                w.wait()
            self.launches += 1
            return 1 + len(used)
        finally:
            self._busy.release()


POOL = Pool()
