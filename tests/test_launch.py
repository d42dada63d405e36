"""The cpu backend's launcher: dynamic chunk claiming, cost-based splitting, interrupts."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

pytest.importorskip("numba")

from braze._src import threads  # noqa: E402

# A loop of large split launches (a 10-op chain on 2**24 elements) interrupted by the parent,
# each time followed by a new compiled function on a new 2**20 input, checked element by
# element: a worker of the interrupted launch must not write into (or lose) a later launch.
CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import braze.core as mx

    def chain(v):
        for k in range(10):
            v = v * 1.0001 + 0.5 if k % 2 else v - 0.25
        return v

    f = mx.compile(chain)
    g = mx.compile(lambda v: v * 2.0 + 1.0)
    x = mx.array(np.ones(1 << 24, np.float32))
    y = np.arange(1 << 20, dtype=np.float32)
    mx.eval(f(x), g(mx.array(y)))  # both kernels built: the check runs right after the interrupt
    for r in range(12):
        ys = [mx.array(y + k) for k in range(4)]
        print("looping", flush=True)
        try:
            while True:
                mx.eval(f(x))
        except KeyboardInterrupt:
            pass
        bad = [np.flatnonzero(np.asarray(g(v)) != (y + k) * 2.0 + 1.0) for k, v in enumerate(ys)]
        print(f"round {r}: {sum(b.size for b in bad)} wrong, first {bad[0][:1].tolist()}",
              flush=True)
    print("done", flush=True)
""")


def test_interrupt_never_corrupts_a_later_result():
    # more threads than cores: some workers still run (or wait to) when the caller is done
    env = dict(os.environ, BRAZE_NUM_THREADS="8", BRAZE_BACKEND="cpu")
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    got = threading.Event()

    def read():
        for line in p.stdout:
            lines.append(line.strip())
            got.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 240
    try:
        seen, sent = 0, 0.0
        while reader.is_alive() and time.monotonic() < deadline:
            got.wait(1.0)
            got.clear()
            if len(lines) > seen and lines[-1].startswith("looping"):
                seen = len(lines)
                time.sleep(0.05 + 0.01 * (len(lines) % 7))  # inside the loop, at varied phases
                p.send_signal(signal.SIGINT)
                sent = time.monotonic()
            elif len(lines) == seen and sent and time.monotonic() - sent > 15:
                # a SIGINT that lands in a finalizer is printed and dropped by Python itself
                # (as a user's Ctrl-C would be): press it again
                p.send_signal(signal.SIGINT)
                sent = time.monotonic()
            else:
                seen = len(lines)
        p.wait(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 0, p.stderr.read()
    rounds = [ln for ln in lines if ln.startswith("round")]
    assert len(rounds) == 12 and all(" 0 wrong" in ln for ln in rounds), lines


def _kernel_args(n):
    x = np.arange(n, dtype=np.float64)
    return x, np.zeros(n)


def _double(start, stop, x, out):
    out[start:stop] = x[start:stop] * 2


def test_split_launch_covers_every_element_once():
    x, out = _kernel_args(100_003)
    prev = threads.set_split_cost(0)
    try:
        with _threads(3):
            n = threads.POOL.launches
            threads.POOL.run(_double, x.size, (x, out))
            assert threads.POOL.launches == n + 1
    finally:
        threads.set_split_cost(prev)
    np.testing.assert_array_equal(out, x * 2)


def test_cheap_launches_stay_on_the_calling_thread():
    """Split only where the measured cost gains: a cheap kernel is timed, then run alone."""
    x, out = _kernel_args(1 << 14)
    fn = lambda start, stop, x, out: _double(start, stop, x, out)  # noqa: E731 - a new kernel
    prev = threads.set_split_cost(1.0)  # a second of work before a thread pays
    try:
        n = threads.POOL.launches
        for _ in range(3):
            assert threads.POOL.run(fn, x.size, (x, out)) == 1
        assert threads.POOL.launches == n and fn in threads._COST
    finally:
        threads.set_split_cost(prev)


def test_launches_far_below_the_split_point_run_unmeasured():
    """A launch that could not split even at several times its measured cost is not timed
    (a compiled step's mid-size kernels: the timing cost as much as the kernel); one within
    reach of the split point still is, so the estimate follows the kernel."""
    calls = []

    def kernel(start, stop):
        calls.append((start, stop))

    split = threads.set_split_cost(1e-3)
    try:
        threads._COST[kernel] = 1e-3 / threads.FAR_BELOW / 2 / 10_000  # far below at 10,000
        assert threads.POOL.run(kernel, 10_000, ()) == 1
        assert calls == [(0, 10_000)]
        assert threads._COST[kernel] == 1e-3 / threads.FAR_BELOW / 2 / 10_000  # untouched
        threads._COST[kernel] = 1e-3 / 2 / 10_000  # half the split point: measured
        with _threads(2):
            assert threads.POOL.run(kernel, 10_000, ()) == 1
        assert calls[-1] == (0, 10_000)
        assert threads._COST[kernel] < 1e-3 / 2 / 10_000  # an empty kernel: lowered
    finally:
        threads.set_split_cost(split)


def test_a_worker_that_never_runs_costs_the_caller_nothing():
    """The caller claims every chunk when no worker does: it never waits for one."""
    x, out = _kernel_args(1 << 16)
    pool = threads.Pool()
    pool._workers = [_NeverServed()]  # a worker that is never scheduled
    prev = threads.set_split_cost(0)
    try:
        with _threads(2):
            t0 = time.perf_counter()
            assert pool.run(_double, x.size, (x, out)) == 2
            assert time.perf_counter() - t0 < 1.0
    finally:
        threads.set_split_cost(prev)
    np.testing.assert_array_equal(out, x * 2)


def test_a_split_that_does_not_gain_backs_off():
    """Measured, not assumed: when the workers do not help (here: never scheduled), the
    kernel's next launches run on the calling thread alone."""
    def kernel(start, stop):
        time.sleep((stop - start) * 1e-7)

    pool = threads.Pool()
    pool._workers = [_NeverServed()]
    threads._COST[kernel] = 1e-7  # 2 ms for the launch below: worth a split
    with _threads(2):
        assert pool.run(kernel, 20_000, ()) == 2
        assert pool.run(kernel, 20_000, ()) == 1
    assert threads._BACKOFF[kernel][0] >= 1


def test_a_first_call_overestimate_is_corrected_by_its_splits():
    """A kernel whose probe was slow (a Numba dispatcher compiles or loads on its first
    call) looks costly; its splits, far faster than that estimate, lower it until the kernel
    runs alone. (At decode size, sdpa stayed split for good: 70-110 us a call against 30.)"""
    calls = []

    def kernel(start, stop):
        calls.append(1)

    pool = threads.Pool()  # its own worker: the shared one may still hold the last launch
    threads._COST[kernel] = 1e-3  # as a probe that included a 60 ms build measures 1 ms/item
    with _threads(2):
        for _ in range(60):
            pool.run(kernel, 1 << 13, ())
        assert pool.run(kernel, 1 << 13, ()) == 1
    assert threads._COST[kernel] < 1e-6


def test_interrupted_launch_waits_for_the_chunk_in_flight():
    """An interrupt while a worker runs a chunk: the launch returns (raising) only after the
    worker has finished writing, and claims no further chunk."""
    started, release = threading.Event(), threading.Event()
    ran = []

    def kernel(start, stop):
        ran.append((start, stop))
        if threading.current_thread() is not threading.main_thread():
            started.set()
            release.wait(5)
            ran.append("worker done")
        else:
            started.wait(5)
            threading.Timer(0.05, release.set).start()
            raise KeyboardInterrupt  # what Ctrl-C raises once the caller's chunk returns

    threads._COST[kernel] = 1.0  # known to be costly: split at once
    with _threads(2), pytest.raises(KeyboardInterrupt):
        threads.POOL.run(kernel, 1 << 13, ())
    assert ran[-1] == "worker done" and len(ran) == 3


def test_split_threefry_gives_numpy_bits():
    """Threefry split across threads at chunk boundaries inside key rows: the same bits."""
    from braze._src.backends.cpu.threefry import threefry2x32
    from braze._src.prims import random as R
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 2**32, (5, 2), dtype=np.uint64).astype(np.uint32)
    x0, x1 = (rng.integers(0, 2**32, (5, 20001), dtype=np.uint64).astype(np.uint32)
              for _ in range(2))
    a0, a1, b0, b1 = x0.copy(), x1.copy(), x0.copy(), x1.copy()
    R.threefry2x32(keys[:, :1], keys[:, 1:], a0, a1)
    prev = threads.set_split_cost(0)
    try:
        with _threads(3):
            n = threads.POOL.launches
            threefry2x32(keys[:, :1], keys[:, 1:], b0, b1)
            assert threads.POOL.launches == n + 1
    finally:
        threads.set_split_cost(prev)
    np.testing.assert_array_equal(b0, a0)
    np.testing.assert_array_equal(b1, a1)


class _NeverServed:
    def post(self, launch):
        pass


class _threads:
    def __init__(self, n):
        from braze._src import config
        self.cm = config.override(num_threads=n)

    def __enter__(self):
        self.cm.__enter__()

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc)
