"""A one-line notice on a terminal when kernel builds hold a program up for more than a second.

A user's first run pays Numba builds of 0.1-0.6 s per kernel, one after another; without a
word the program looks hung. Builds less than `IDLE` seconds apart form one burst; once a burst
has lasted `AFTER` seconds it prints one line naming the compiled functions whose kernels it
builds (`Compiled.origin`, set when a function's trace is fused) and how far it has got. Only on
a terminal (stderr a tty) and not at BRAZE_DEBUG >= 1, which prints every build anyway.
"""
from __future__ import annotations

import sys
import threading
import time

from .. import config

AFTER = 1.0  # seconds of building before the notice
IDLE = 2.0  # seconds without a build that end a burst
stream = None  # where the notice goes (None: sys.stderr at the time)

_current = threading.local()  # the compiled function whose kernel this thread evaluates


def evaluating(origin: str) -> None:
    """The kernels this thread builds next belong to compiled function `origin`."""
    _current.origin = origin


class _Burst:
    def __init__(self, now, seconds):
        self.start, self.last, self.built, self.seconds = now - seconds, now, 0, 0.0
        self.origins, self.shown = [], False


_burst = None
_lock = threading.Lock()


def kernel_built(seconds: float, built: bool) -> None:
    """Count one kernel build (`built`) or disk load that took `seconds`."""
    global _burst
    now = time.perf_counter()
    with _lock:
        if _burst is None or now - _burst.last > IDLE:
            _burst = _Burst(now, seconds)
        b = _burst
        b.last, b.built, b.seconds = now, b.built + built, b.seconds + seconds
        origin = getattr(_current, "origin", "")
        if origin and origin not in b.origins:
            b.origins.append(origin)
        if b.shown or now - b.start < AFTER or not b.built:
            return
        b.shown = True
    _print(b)


def _print(b: _Burst) -> None:
    out = stream or sys.stderr
    if config.get().debug or not getattr(out, "isatty", lambda: False)():
        return
    names = ", ".join(b.origins[:3]) + (" ..." if len(b.origins) > 3 else "")
    print(f"[braze] compiling kernels{f' for {names}' if names else ''}: {b.built} built in "
          f"{b.seconds:.1f} s so far (kept in the kernel cache for later runs)...",
          file=out, flush=True)
