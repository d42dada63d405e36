"""Work split across threads by dynamic chunk claiming: kernel launches of the cpu backend,
matrix products and mx.fast kernels of the primitives.

Kernels are compiled `nogil=True` and take an index range [start, stop), so a launch can be
cut into chunks that any thread may run. A split launch is posted to the persistent workers
and the calling thread starts on the chunks at once; each thread claims the next unclaimed
chunk when it finishes one. The caller only ever waits for chunks a worker has claimed and is
running, never for a worker that has not started: when another process holds a core, the
worker on it simply claims fewer chunks (or none) and the caller does the rest.

Whether a launch is split is decided from its measured cost: the first launch of a kernel
times a probe chunk on the calling thread, every unsplit launch updates the kernel's time per
element (but one far below the split point, `FAR_BELOW`, which it cannot reach), and a launch
is split when its expected single-thread time is at least
`split_cost()` seconds (the point where a second thread gains, docs/kernels.md) and its last
split gained (`_judge`: on a machine whose other cores are busy a split costs more than it
saves, and the kernel runs alone for a while). Chunks are sized in time too (`_chunk_items`),
so the last chunk a worker holds costs the caller little.

`run_chunks` splits by a fixed chunk size instead, for work whose result depends on the
chunking (the rows of a BLAS product, prims/linalg.py).

An interrupt (Ctrl-C) while a launch runs stops further claims and waits for the chunks in
flight before it propagates: no buffer of the launch is released while a worker writes to it.
`BRAZE_NUM_THREADS` (0: the number of cores) caps the threads, the caller included.
"""
from __future__ import annotations

import os
import threading
import time
from queue import SimpleQueue

from . import config

#: expected single-thread seconds from which a launch is split (measured, docs/kernels.md)
DEFAULT_SPLIT_COST = 150e-6
_split_cost = [DEFAULT_SPLIT_COST]
#: elements below which a launch is neither timed nor split (too short to gain or to measure)
MIN_ITEMS = 1 << 12
#: a launch whose expected time is this many times below the split cost runs unmeasured
FAR_BELOW = 8
#: elements of the timed probe chunk a kernel's first large launch starts with
PROBE_ITEMS = 1 << 16
#: seconds of work per chunk: at least CHUNK_MIN, else an eighth of a thread's share
CHUNK_MIN = 40e-6
CHUNKS_PER_THREAD = 8

#: a split launch must take at most this fraction of its expected single-thread time
GAIN = 0.85
#: launches a kernel runs alone at most after its splits stopped gaining
MAX_BACKOFF = 1024

_COST: dict = {}  # kernel -> measured seconds per element on one thread
_BACKOFF: dict = {}  # kernel -> [unsplit launches left, length of the next backoff]


def split_cost() -> float:
    return _split_cost[0]


def set_split_cost(seconds: float) -> float:
    """Set the split threshold (0: split every launch of at least MIN_ITEMS elements, gain
    or not, which the tests use); returns the previous one."""
    prev = _split_cost[0]
    _split_cost[0] = float(seconds)
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


def _measure(fn, start, stop, args, unit) -> None:
    """Run fn over [start, stop) and fold its time per element into `_COST[fn]`."""
    t0 = time.perf_counter()
    fn(start, stop, *args)
    _record(fn, time.perf_counter() - t0, (stop - start) * unit)


def _record(fn, seconds, elements) -> None:
    """Fold a measured time into `_COST[fn]`: a moving average, where one sample (a thread
    descheduled mid-kernel) raises the estimate by at most 75 %."""
    per = seconds / elements
    old = _COST.get(fn)
    _COST[fn] = per if old is None else 0.75 * old + 0.25 * min(per, 4 * old)


class _Launch:
    """One split launch: fn over [next, n) in chunks of `step` indices, claimed one at a time
    by whichever threads are running. `running` counts claimed chunks not yet finished."""

    __slots__ = ("fn", "args", "n", "step", "next", "running", "cv", "error")

    def __init__(self, fn, args, start, n, step):
        self.fn, self.args, self.n, self.step = fn, args, n, step
        self.next, self.running = start, 0
        self.cv = threading.Condition(threading.Lock())
        self.error = None

    def claim(self) -> int:
        with self.cv:
            lo = self.next
            if lo >= self.n:
                return -1
            self.next = lo + self.step
            self.running += 1
            return lo

    def finish(self) -> None:
        with self.cv:
            self.running -= 1
            if not self.running:
                self.cv.notify_all()

    def work(self) -> None:
        """Claim and run chunks until none is left (fn and args are read only while a claim
        is held: the caller drops them once the launch is over)."""
        while True:
            lo = self.claim()
            if lo < 0:
                return
            try:
                self.fn(lo, min(self.n, lo + self.step), *self.args)
            except Exception as e:  # pragma: no cover - kernels do not raise
                self.error = e
            finally:  # an interrupt of the caller propagates to `Pool.run`, which cancels
                self.finish()

    def join(self) -> None:
        """Wait for the chunks in flight (interruptible: `cancel` handles an interrupt)."""
        with self.cv:
            while self.running:
                self.cv.wait()

    def cancel(self) -> None:
        """Stop further claims and wait for the chunks in flight, through further interrupts
        too: a worker may still be writing into this launch's buffers."""
        with self.cv:
            self.next = self.n
        while True:
            try:
                self.join()
                return
            except KeyboardInterrupt:
                continue


class _Worker:
    """A persistent thread running the chunks of the launches posted to it. A worker that
    has not taken its last launch yet is not running: it is not posted another one, so when
    it is scheduled again it finds at most one finished launch (each costs it the GIL)."""

    __slots__ = ("queue", "posted")

    def __init__(self, idx):
        self.queue = SimpleQueue()
        self.posted = False
        threading.Thread(target=self._serve, daemon=True, name=f"braze-kernel-{idx}").start()

    def post(self, launch) -> None:
        if not self.posted:
            self.posted = True
            self.queue.put(launch)

    def _serve(self) -> None:
        while True:
            launch = self.queue.get()
            self.posted = False
            launch.work()


class Pool:
    def __init__(self):
        self._workers: list = []
        self._lock = threading.Lock()
        self.launches = 0  # launches that were split (tests read it)

    def _ensure(self, n) -> list:
        if len(self._workers) < n:
            with self._lock:
                while len(self._workers) < n:
                    self._workers.append(_Worker(len(self._workers)))
        return self._workers[:n]

    def run(self, fn, n: int, args: tuple, unit: int = 1) -> int:
        """fn(start, stop, *args) over [0, n), split across threads when its expected time
        gains from it. `unit` is the number of elements one index stands for (a row kernel's
        row length). Returns the number of threads offered the work."""
        if n * unit < MIN_ITEMS:  # small launches never pay for a thread (hot path)
            fn(0, n, *args)
            return 1
        start = 0
        cost = _COST.get(fn)
        if cost is None:  # a new kernel: time a probe chunk first
            start = min(n, max(1, PROBE_ITEMS // unit))
            _measure(fn, 0, start, args, unit)
            cost = _COST[fn]
        work = (n - start) * unit * cost
        if work * FAR_BELOW < _split_cost[0]:  # no drift of the estimate could make it split
            fn(start, n, *args)
            return 1
        nt = num_threads()
        if nt <= 1 or n - start < 2 or work < _split_cost[0] or (
                _split_cost[0] and _backing_off(fn)):
            if start < n:
                _measure(fn, start, n, args, unit)
            return 1
        step = _chunk_items(n - start, unit, cost, work, nt)
        nt = min(nt, -(-(n - start) // step))
        t0 = time.perf_counter()
        self._split(fn, args, start, n, step, nt)
        _judge(fn, time.perf_counter() - t0, work, (n - start) * unit, nt)
        return nt

    def run_chunks(self, fn, n: int, args: tuple, step: int) -> None:
        """fn(start, stop, *args) over [0, n) in chunks of `step` indices, whatever the load
        and the thread count (so a result that depends on the chunking, as a BLAS product's
        rounding does, is the same every time); the threads share the chunks."""
        nt = min(num_threads(), -(-n // step))
        if nt <= 1:
            for lo in range(0, n, step):
                fn(lo, min(n, lo + step), *args)
            return
        self._split(fn, args, 0, n, step, nt)

    def _split(self, fn, args, start, n, step, nt) -> None:
        launch = _Launch(fn, args, start, n, step)
        for w in self._ensure(nt - 1):
            w.post(launch)
        self.launches += 1
        try:
            launch.work()
            launch.join()
        except BaseException:
            launch.cancel()
            raise
        finally:
            launch.fn = launch.args = None
        if launch.error is not None:  # pragma: no cover
            raise launch.error


def _backing_off(fn) -> bool:
    """Whether `fn` runs alone this time: its last split did not gain (see `_judge`)."""
    b = _BACKOFF.get(fn)
    if b is None or not b[0]:
        return False
    b[0] -= 1
    return True


def _judge(fn, seconds, work, elements, nt) -> None:
    """After a split launch: when it did not gain (the other cores are busy, or the kernel is
    cheaper than measured), the kernel runs alone for a while, twice as long each time, and
    its unsplit launches re-measure it; a split that gains ends the backoff.

    The split's time times its threads bounds one thread's cost from above, so it lowers an
    estimate that is too high (a probe that included the dispatcher's first-call build), which
    would otherwise look like a gain forever and keep a cheap kernel split."""
    per = seconds * nt / elements
    if per < _COST[fn]:
        _COST[fn] = per
    if seconds <= GAIN * work:
        _BACKOFF.pop(fn, None)
        return
    b = _BACKOFF.setdefault(fn, [0, 2])
    b[0] = b[1]
    b[1] = min(2 * b[1], MAX_BACKOFF)


def _chunk_items(n, unit, cost, work, nt) -> int:
    """Indices per chunk: CHUNKS_PER_THREAD chunks per thread, each at least CHUNK_MIN
    seconds; element ranges start on multiples of 64 (whole cache lines for every dtype)."""
    secs = max(CHUNK_MIN, work / (nt * CHUNKS_PER_THREAD))
    step = max(1, min(n, int(secs / (unit * cost))))
    if unit == 1:
        step = -(-step // 64) * 64
    return step


POOL = Pool()
