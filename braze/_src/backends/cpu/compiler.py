"""The `cpu` compiler: kernel source -> a Numba dispatcher, through the kernel cache.

With a usable disk cache, the source is written (atomically) to
`<cache>/<version>/cpu/k_<hash>.py`, where `<hash>` covers the source and `identity` (braze,
Numba, llvmlite versions, the CPU and the kernel-side library and renderer sources), and
executed as a module whose kernel is decorated with `cache=True`: Numba's own cache (in
`__pycache__` beside it) then stores the machine code, and a second process loads it instead
of compiling. A manifest (`k_<hash>.json`) records the SHA-256 of the source and of Numba's
cache files; an entry whose files do not match it is deleted and rebuilt before Numba reads
anything.

Without a disk cache (refused directory, read-only home), the source is compiled in memory.

Kernels are compiled with their pointer arguments marked `noalias` (`kernel_njit`, which the
rendered module imports as its `njit`; the module is compiled exactly as rendered). Without it
LLVM guards every vectorized loop with a runtime overlap check between the output and input
buffers, and a donated output (written into its input's buffer, `Backend.assign_donors`)
always fails that check: the loop then ran its scalar fallback, 4-5x slower (Adam at 16 Mi:
96 ms instead of 18 ms). The promise must be true, or LLVM may move a load of an input element
after a store that overwrites it (issue 20: a second output read a donated input after the
first output was stored over it). So an
output written into a donated input is never a separate argument: the kernel variant names
the (output, input) pairs (`CpuVariant.alias`, `RowVariant.alias`) and the kernel stores
through the input's own array (`body.alias_lines`); distinct arguments never share memory.
"""
from __future__ import annotations

import glob
import os
import sys
import time
import types as _pytypes

import numba
from numba.core.caching import _CacheLocator
from numba.core.compiler import Compiler as _NumbaPipeline

from ... import jit
from .. import kernel_cache as KC
from ..base import Compiler
from . import body, render, render_rows, spell
from .lib import math, rows, scalar


def _cpu_identity() -> str:
    try:
        from llvmlite import binding as ll
        name = ll.get_host_cpu_name()
        feats = ll.get_host_cpu_features().flatten()
    except Exception:  # pragma: no cover
        import platform
        name, feats = platform.machine(), ""
    return f"{name} {KC.sha256(feats)[:12]}"


def _source_files_hash() -> str:
    h = []
    # this file too: `kernel_njit`'s pipeline flags shape the machine code Numba caches
    for path in [m.__file__ for m in (scalar, math, rows, body, spell, render, render_rows)] + [
            __file__]:
        data = KC.read_bytes(path) or b""
        h.append(KC.sha256(data))
    return KC.sha256("".join(h))[:16]


class _KernelPipeline(_NumbaPipeline):
    """Numba's standard pipeline, with the compiled function's pointer arguments (the array
    data of the kernel's inputs and outputs) marked `noalias` (see the module docstring) and
    no C-callable wrapper (kernels are only called through their dispatcher, never as
    first-class functions; building the wrapper was ~15 % of a kernel's compile time)."""

    def __init__(self, typingctx, targetctx, library, args, return_type, flags, locals):
        flags.noalias = True  # a fresh Flags object per compilation
        flags.no_cfunc_wrapper = True
        super().__init__(typingctx, targetctx, library, args, return_type, flags, locals)


def kernel_njit(signature, **kwargs):
    """`numba.njit(signature)` for generated kernels: no-alias pointer arguments, no cfunc
    wrapper, and a cached kernel loaded without Numba's registry start (`_src/jit.py`)."""
    kwargs.setdefault("pipeline_class", _KernelPipeline)
    return jit.njit(signature=signature, **kwargs)


class NumbaCompiler(Compiler):
    def __init__(self):
        import llvmlite

        from braze import __version__
        self.identity = (f"braze {__version__}; numba {numba.__version__}; "
                         f"llvmlite {llvmlite.__version__}; cpu {_cpu_identity()}; "
                         f"sources {_source_files_hash()}")

    # -- disk --------------------------------------------------------------------------------
    def directory(self):
        """The checked disk-cache directory, or None when it or Numba's cache directory for
        it cannot be used safely (checked at each kernel build: a few stat calls)."""
        d = KC.backend_dir("cpu")
        if d is None or KC.secure_dir(self._numba_dir(d)) is None:
            return None
        return d

    @staticmethod
    def _numba_dir(d: str) -> str:
        """Where Numba caches the kernels of the modules in `d` (its own locators' rule)."""
        if numba.config.CACHE_DIR:
            sub = _CacheLocator.get_suitable_cache_subpath(os.path.join(d, "k.py"))
            return os.path.join(numba.config.CACHE_DIR, sub)
        return os.path.join(d, "__pycache__")

    def module_name(self, source: str) -> str:
        return "k_" + KC.sha256(source + "\n" + self.identity)[:24]

    def compile(self, source: str, name: str):
        """Load or build the kernel of module `source` (from the disk cache when it is on).
        Returns (dispatcher, how) with how in {"built", "disk"}."""
        d = self.directory()
        if d is None:
            return self._compile_memory(source, name)
        try:
            return self._compile_disk(d, source, name)
        except Exception as e:  # an unusable entry must never break a kernel
            KC.Stats.corrupt += 1
            KC._warn_once(f"[kernel cache] disk entry for {name} unusable ({e!r}); "
                          "compiling in memory.")
            return self._compile_memory(source, name)

    def _compile_memory(self, source: str, name: str):
        t0 = time.perf_counter()
        scalar.prepare(body.math_functions(source))
        mod = _pytypes.ModuleType(f"braze_kernel_{name}")
        code = compile(source, f"<braze kernel {name}>", "exec")
        exec(code, mod.__dict__)
        KC.Stats.builds += 1
        KC.Stats.build_seconds += time.perf_counter() - t0
        return mod.kernel, "built"

    def _numba_files(self, d: str, modname: str) -> list:
        pattern = glob.escape(modname) + ".kernel-*"
        return sorted(glob.glob(os.path.join(self._numba_dir(d), pattern)))

    def _listed_files(self, d: str, manifest: str) -> list:
        """Numba's files of an entry as its manifest names them ([] without a readable one):
        loading never lists the directory, whose glob cost milliseconds per kernel in a
        cache of ten thousand files. Nothing unlisted is read: Numba opens the index the
        manifest checks, and the index names the machine-code files it lists."""
        names = KC.manifest_files(manifest)
        return [os.path.join(self._numba_dir(d), n) for n in names]

    @staticmethod
    def _entry_ok(path, manifest, files, source, src_hash) -> bool:
        """Whether the entry on disk is this source's, intact, and writable by this user
        alone (Numba loads its files as they are when they pass)."""
        if not files or not all(KC.private_file(f) for f in [path, manifest, *files]):
            return False
        return KC.read_bytes(path) == source.encode() and KC.check_manifest(
            manifest, src_hash, os.path.dirname(files[0]), [os.path.basename(f) for f in files])

    @staticmethod
    def _discard(paths) -> None:
        for f in paths:
            try:
                os.unlink(f)
            except OSError:
                pass

    def _compile_disk(self, d: str, source: str, name: str):
        modname = self.module_name(source)
        path = os.path.join(d, modname + ".py")
        manifest = os.path.join(d, modname + ".json")
        src_hash = KC.sha256(source)
        with KC._LOCK:
            files = self._listed_files(d, manifest)
            ok = self._entry_ok(path, manifest, files, source, src_hash)
            if not ok:
                if os.path.exists(manifest):
                    KC.Stats.corrupt += 1
                self._discard(self._numba_files(d, modname) + [manifest])
                KC.atomic_write(path, source)
            t0 = time.perf_counter()
            if not ok:
                scalar.prepare(body.math_functions(source))
            mod = _pytypes.ModuleType(modname)
            mod.__file__ = path
            code = compile(source, path, "exec")
            sys.modules[modname] = mod
            try:
                exec(code, mod.__dict__)
            finally:
                sys.modules.pop(modname, None)
            k = mod.kernel
            dt = time.perf_counter() - t0
            hits = sum(k.stats.cache_hits.values()) if hasattr(k, "stats") else 0
            if ok and hits:
                KC.Stats.disk_loads += 1
                return k, "disk"
            KC.Stats.builds += 1
            KC.Stats.build_seconds += dt
            files = self._numba_files(d, modname)
            for f in files:  # Numba writes with the umask's modes, inside our 0700 directory
                os.chmod(f, 0o600)
            if files:
                KC.write_manifest(manifest, src_hash, files)
            return k, "built"
