"""Every BRAZE_* knob, in one typed module.

Each knob is read from its environment variable once, at import, and can be changed later with
`set(name=value)` or, for a block of code, `with override(name=value): ...`. Code that depends on
a knob reads it at the moment it needs it (`config.get().debug` or `config.debug()`), so changes
take effect immediately.

    from braze._src import config
    if config.get().debug >= 2: ...
    with config.override(disable_compile=True): ...

`docs/env_vars.md` documents the variables; keep the two in step.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from dataclasses import dataclass

COMPILE_MODES = ("", "no_simplify", "no_fuse", "no_reduce_fusion")
BACKENDS = ("cpu", "numpy", "cuda")


@dataclass
class Config:
    """The knobs. Field names are the variable names without `BRAZE_`, lower-cased."""

    #: 0 quiet; 1 compile cache misses with the reason, kernel builds and times; 2 + traced
    #: tape; 3 + tape after each pass; 4 + kernel source
    debug: int = 0
    #: directory to write debug dumps (tapes, kernel sources) into; None: no dumps
    dump_dir: str | None = None
    #: mx.compile returns the function unchanged (BRAZE_DISABLE_COMPILE or MLX_DISABLE_COMPILE)
    disable_compile: bool = False
    #: "" (all passes), "no_simplify", "no_fuse" or "no_reduce_fusion" (elementwise fusion
    #: only: reductions are not fused with their producers and consumers)
    compile_mode: str = ""
    #: backend that runs compiled kernels: "cpu" (Numba), "numpy" (reference) or "cuda"
    backend: str = "cpu"
    #: root of the on-disk kernel cache
    cache_dir: str = os.path.join(os.path.expanduser("~"), ".cache", "braze")
    #: verify graph invariants after each compile pass
    checks: bool = False
    #: threads a kernel may split across; 0: let the backend decide
    num_threads: int = 0
    #: warn when one compiled function has been traced more than this many times; 0: never
    compile_retrace_limit: int = 16
    #: cache entries (traces) kept per compiled function, least recently used dropped; 0: all
    compile_cache_size: int = 64
    #: a compiled function that has traced once and misses the cache raises (mx.no_retrace)
    compile_no_retrace: bool = False
    #: print a summary of compile activity (functions, traces, kernels, time) at exit
    compile_report: bool = False
    #: every compiled function also runs uncompiled for its first calls and compares (as
    #: mx.compile(check=True))
    compile_check: bool = False
    #: threads BLAS (OpenBLAS/MKL, through threadpoolctl) keeps for itself; 0: one, and braze
    #: splits large products across its own threads (prims/linalg.py `blas_matmul`)
    blas_threads: int = 0
    #: worker processes that build the new kernels of a compiled function concurrently into
    #: the disk cache (cpu backend); 0: every kernel is built in the calling process
    build_workers: int = 0
    #: a kernel not yet built is built by a background thread while its launches run on the
    #: numpy reference (cpu backend, backends/cpu/background.py); off: built in the call
    background_builds: bool = True


_ENV = {f.name: "BRAZE_" + f.name.upper() for f in dataclasses.fields(Config)}
_INT_KNOBS = ("debug", "num_threads", "compile_retrace_limit", "blas_threads",
              "compile_cache_size", "build_workers")
_BOOL_KNOBS = ("disable_compile", "checks", "compile_no_retrace", "compile_report",
               "compile_check", "background_builds")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _parse_bool(var: str, text: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError(f"[config] {var}={text!r}: expected one of 1/0, true/false, yes/no, on/off.")


def _parse_int(var: str, text: str, minimum: int = 0) -> int:
    try:
        v = int(text.strip() or "0")
    except ValueError:
        raise ValueError(f"[config] {var}={text!r}: expected an integer.") from None
    if v < minimum:
        raise ValueError(f"[config] {var}={text!r}: expected an integer >= {minimum}.")
    return v


def _validate(name: str, value):
    """Check and normalise one knob's value; raises TypeError/ValueError naming the knob."""
    var = _ENV[name]
    if name in _INT_KNOBS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"[config] {var} must be an int >= 0, got {value!r}.")
        return value
    if name in _BOOL_KNOBS:
        if not isinstance(value, bool):
            raise TypeError(f"[config] {var} must be a bool, got {value!r}.")
        return value
    if name == "compile_mode":
        value = value or ""
        if value not in COMPILE_MODES:
            raise ValueError(f"[config] {var} must be one of {COMPILE_MODES[1:]} or empty, "
                             f"got {value!r}.")
        return value
    if name == "backend":
        if value not in BACKENDS:
            raise ValueError(f"[config] {var} must be one of {BACKENDS}, got {value!r}.")
        return value
    if name == "dump_dir":
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"[config] {var} must be a path or None, got {value!r}.")
        return None if value in (None, "") else os.fspath(value)
    if name == "cache_dir":
        if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
            raise TypeError(f"[config] {var} must be a non-empty path, got {value!r}.")
        return os.path.expanduser(os.fspath(value))
    raise AssertionError(name)


def from_env(environ=None) -> Config:
    """A Config read from `environ` (default: os.environ). Unset variables keep their
    defaults; a malformed value warns and keeps the default."""
    env = os.environ if environ is None else environ
    c = Config()
    for name, var in _ENV.items():
        text = env.get(var)
        if text is None:
            continue
        try:
            if name in _INT_KNOBS:
                value = _parse_int(var, text)
            elif name in _BOOL_KNOBS:
                value = _parse_bool(var, text)
            elif name in ("compile_mode", "backend"):
                value = text.strip().lower()
            else:
                value = text
            setattr(c, name, _validate(name, value))
        except (TypeError, ValueError) as e:
            # a typo in the environment must not make `import braze` fail
            warnings.warn(f"{e} Using the default, {getattr(c, name)!r}.", stacklevel=2)
    # MLX's switch: its presence disables compile, whatever its value (as in MLX)
    if "MLX_DISABLE_COMPILE" in env:
        c.disable_compile = True
    return c


_current = from_env()


def get() -> Config:
    """The live configuration (do not mutate it directly; use `set` or `override`)."""
    return _current


def set(**knobs) -> None:  # noqa: A001 - the natural name inside `config.`
    """Change knobs for the rest of the process: `config.set(debug=2, backend="numpy")`."""
    for name, value in knobs.items():
        if name not in _ENV:
            raise TypeError(f"[config] Unknown knob {name!r}; known: {sorted(_ENV)}.")
        setattr(_current, name, _validate(name, value))


@contextlib.contextmanager
def override(**knobs):
    """Change knobs inside a `with` block and restore them afterwards (even on error)."""
    saved = dataclasses.replace(_current)
    try:
        set(**knobs)
        yield _current
    finally:
        for f in dataclasses.fields(Config):
            setattr(_current, f.name, getattr(saved, f.name))


def reload(environ=None) -> Config:
    """Re-read the environment (tests use this after changing os.environ)."""
    fresh = from_env(environ)
    for f in dataclasses.fields(Config):
        setattr(_current, f.name, getattr(fresh, f.name))
    return _current


# Short accessors for the hot paths.
def debug() -> int:
    return _current.debug


def compile_disabled() -> bool:
    return _current.disable_compile
