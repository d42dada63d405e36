"""Silencing NumPy's floating-point warnings cheaply.

Kernels must return IEEE results (inf, nan) without warnings. `np.errstate` costs ~1 us per use;
setting NumPy's error-state context variable directly with a prebuilt "ignore everything" state
costs a fifth of that, and the scheduler does it once per `eval`, not once per op. Falls back to
np.errstate if NumPy's private names move.
"""
from __future__ import annotations

import functools

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar as _CV
    from numpy._core._ufunc_config import _make_extobj

    _IGNORE = _make_extobj(all="ignore")
except Exception:  # pragma: no cover - other NumPy versions
    _CV = None
    _IGNORE = None


if _CV is not None:
    # C callables, no Python frame: the scheduler calls both on every `eval`
    #: silence() starts ignoring floating-point errors; returns the token for `restore`
    silence = functools.partial(_CV.set, _IGNORE)
    #: restore(token) puts the error state back as it was before `silence`
    restore = _CV.reset
else:  # pragma: no cover
    def silence():
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def restore(token) -> None:
        token.__exit__(None, None, None)


class ignoring:
    """`with ignoring():` NumPy floating-point warnings off for the block: np.errstate's
    effect at a third of its cost (the hot NumPy paths of primitives run inside an `eval`,
    which silences already, but may be called outside one)."""

    __slots__ = ("_tok",)

    def __enter__(self):
        self._tok = silence()

    def __exit__(self, *exc):
        restore(self._tok)


def quiet(fn, *xs):
    """fn(*xs) with NumPy floating-point warnings silenced."""
    tok = silence()
    try:
        return fn(*xs)
    finally:
        restore(tok)
