"""Numba decorators for braze's own compiled code: cached on disk, loaded without Numba's
registry start.

Numba loads a cached function only after `target_context.refresh()`, which on a process's
first load imports and installs every typing and lowering registry Numba has (numba.np.*,
typed containers, SciPy's BLAS through numba.np.linalg): 0.3-0.5 s of a first kernel, needed
to *compile* a function but not to run machine code read back from the cache. A loaded
function needs only Numba's runtime (NRT: the allocation and reference-count symbols its
code calls), which `_lean_cache`'s loader starts. A function not in the cache compiles as ever:
Numba's compiler refreshes the registries itself.

Numba is imported on the first decoration, never by importing this module.
"""
from __future__ import annotations

_LEAN = []  # the cache class, made on first use (it subclasses Numba's)


def _lean_cache(py_func):
    """Numba's on-disk cache of `py_func`, loading without the registry refresh; raises
    where Numba has no cache location for it (as `enable_caching` does)."""
    if not _LEAN:
        from numba.core.caching import FunctionCache
        from numba.core.runtime import rtsys

        class LeanCache(FunctionCache):
            def load_overload(self, sig, target_context):
                rtsys.initialize(target_context)  # what a loaded function needs of refresh()
                with self._guard_against_spurious_io_errors():
                    return self._load_overload(sig, target_context)

        _LEAN.append(LeanCache)
    return _LEAN[0](py_func)


def _cache_lean(fn, py_func) -> None:
    """Give Numba function `fn` (dispatcher or cfunc) the lean disk cache; where Numba has no
    cache location it stays uncached (compiled per process)."""
    try:
        fn._cache = _lean_cache(py_func)
    except Exception:
        pass


def njit(py_func=None, *, signature=None, cache=True, **options):
    """`numba.njit(signature, cache=cache, **options)`, whose cached machine code loads lean;
    uncached where Numba has no cache location. Usable as `@njit` or `@njit(...)`."""
    if py_func is None:
        return lambda f: njit(f, signature=signature, cache=cache, **options)
    import numba

    disp = numba.njit(**options)(py_func)  # lazy: nothing compiles yet
    if cache:
        _cache_lean(disp, py_func)
    if signature is not None:  # as numba.njit(signature) does: compile now, then no more
        disp.compile(signature)
        disp.disable_compile()
    return disp


def cfunc(signature, py_func, cache=True, **options):
    """`numba.cfunc(signature, cache=cache, **options)(py_func)`, loading lean."""
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    res = CFunc(py_func, sigutils.normalize_signature(signature), locals={}, options=options)
    if cache:
        _cache_lean(res, py_func)
    res.compile()
    return res
