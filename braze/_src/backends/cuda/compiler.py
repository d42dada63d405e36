"""The `cuda` compiler: kernel source -> CUBIN (SASS for one architecture) through NVRTC, with
a disk cache. No driver and no GPU are needed: NVRTC is a library (the `nvidia-cuda-nvrtc`
wheel, called through `cuda-bindings`), and `cuda_fp16.h` / `cuda_bf16.h` come from the
`nvidia-cuda-runtime` wheel's include directory (the `cuda` extra installs all three).

Options: `--gpu-architecture=sm_XX` (default `sm_90a`, the H100/H200's; `BRAZE_CUDA_ARCH` or
the `arch` argument change it), `-std=c++17`, `-default-device`, `--fmad=false` (`a * b + c`
stays two correctly rounded operations, as in the cpu kernels, so arithmetic matches the cpu
backend bit for bit; the kernels are memory-bound), no fast math (NaN/Inf and the math
library's accuracy are part of the semantics).

The disk cache: `${BRAZE_CACHE_DIR:-~/.cache/braze}/<braze version>/cuda/c_<hash>.cubin`,
`<hash>` the SHA-256 of the source, the prelude, the architecture, the options and NVRTC's
version (`identity`), beside a manifest `c_<hash>.json` with the SHA-256 of the source and of
the CUBIN. Directories 0700, files 0600 written atomically, an entry whose files do not match
its manifest deleted and rebuilt: the rules of kernel_cache.py, which this module uses.
"""
from __future__ import annotations

import os
import time

from .. import kernel_cache as KC
from ..base import Compiler
from . import prelude

DEFAULT_ARCH = "sm_90a"


class NvrtcError(RuntimeError):
    """NVRTC rejected a kernel (the message holds its log)."""


def _nvrtc():
    from cuda.bindings import nvrtc  # the `cuda` extra; imported only when compiling
    return nvrtc


def _check(result, what: str):
    """The values of a cuda-bindings call (its first element is the status)."""
    nvrtc = _nvrtc()
    status, *values = result
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(status)
        raise NvrtcError(f"[cuda] {what}: {msg.decode() if isinstance(msg, bytes) else msg}")
    return values[0] if len(values) == 1 else values


def include_dir() -> str | None:
    """The directory holding `cuda_fp16.h` (the nvidia-cuda-runtime wheel's, or a CUDA
    toolkit's: `CUDA_HOME`/`CUDA_PATH`), or None."""
    cands = []
    try:
        import nvidia
        for base in nvidia.__path__:
            cands += [os.path.join(base, sub, "include")
                      for sub in ("cu13", "cu12", "cuda_runtime")]
    except ImportError:
        pass
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands.append(os.path.join(os.environ[env], "include"))
    cands.append("/usr/local/cuda/include")
    for d in cands:
        if os.path.isfile(os.path.join(d, "cuda_fp16.h")):
            return d
    return None


def available() -> bool:
    """Whether kernels can be compiled here (the `cuda` extra is installed)."""
    try:
        _nvrtc()
    except ImportError:
        return False
    return include_dir() is not None


def nvrtc_version() -> str:
    major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return f"{major}.{minor}"


class NvrtcCompiler(Compiler):
    """Source -> CUBIN bytes for `arch`; `compile` returns (cubin, how), how in {"built",
    "disk"}."""

    def __init__(self, arch: str | None = None):
        from braze import __version__
        self.arch = arch or os.environ.get("BRAZE_CUDA_ARCH") or DEFAULT_ARCH
        self.include = include_dir()
        if self.include is None:
            raise NvrtcError("[cuda] cuda_fp16.h not found: install the `cuda` extra "
                             "(nvidia-cuda-runtime) or set CUDA_HOME.")
        self.options = [f"--gpu-architecture={self.arch}", "-std=c++17", "-default-device",
                        "--fmad=false", f"--include-path={self.include}"]
        self.identity = (f"braze {__version__}; nvrtc {nvrtc_version()}; arch {self.arch}; "
                         f"prelude {KC.sha256(''.join(prelude.HEADERS.values()))[:16]}; options "
                         + " ".join(self.options[:4]))

    # -- NVRTC -------------------------------------------------------------------------------
    def build(self, source: str, name: str = "kernel", fast: bool = False) -> bytes:
        """Compile `source` (one translation unit) to a CUBIN, nothing cached. `fast`:
        `--Ofast-compile=max` (NVRTC's quickest build: the whole front end and code generation,
        little optimisation), for tests that only prove a kernel compiles."""
        nvrtc = _nvrtc()
        names = list(prelude.HEADERS)
        prog = _check(nvrtc.nvrtcCreateProgram(
            source.encode(), f"{name}.cu".encode(), len(names),
            [prelude.HEADERS[n].encode() for n in names], [n.encode() for n in names]),
            "nvrtcCreateProgram")
        try:
            opts = [o.encode() for o in self.options + (["--Ofast-compile=max"] if fast else [])]
            (status,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
            if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise NvrtcError(f"[cuda] NVRTC could not compile {name}:\n{self._log(prog)}")
            size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            cubin = b" " * size
            _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
            return cubin
        finally:
            nvrtc.nvrtcDestroyProgram(prog)

    def build_batch(self, sources, fast: bool = False) -> bytes:
        """One CUBIN holding the kernels of every translation unit in `sources` (distinct
        kernel names), compiled as one NVRTC program: each unit goes in a namespace of its
        own, so their element functions do not clash. NVRTC's cost is mostly per program
        (the fp16/bf16 headers), so this is how the tests compile hundreds of kernels."""
        units = [f'#include "{n}"' for n in prelude.HEADERS]  # before any namespace
        for n, src in enumerate(sources):
            units += [f"namespace unit{n} {{", src, f"}}  // namespace unit{n}"]
        return self.build("\n".join(units) + "\n", "batch", fast)

    @staticmethod
    def _log(prog) -> str:
        nvrtc = _nvrtc()
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        return log.rstrip(b"\0 ").decode(errors="replace")

    # -- the cache ---------------------------------------------------------------------------
    def entry_name(self, source: str) -> str:
        return "c_" + KC.sha256(source + "\n" + self.identity)[:24]

    def compile(self, source: str, name: str = "kernel"):
        """The CUBIN of `source`, from the disk cache when an intact entry is there."""
        d = KC.backend_dir("cuda")
        if d is not None:
            base = os.path.join(d, self.entry_name(source))
            cubin = self._load(base, source)
            if cubin is not None:
                KC.Stats.disk_loads += 1
                return cubin, "disk"
        t0 = time.perf_counter()
        cubin = self.build(source, name)
        KC.Stats.builds += 1
        KC.Stats.build_seconds += time.perf_counter() - t0
        if d is not None:
            with KC._LOCK:
                KC.atomic_write(base + ".cubin", cubin)
                KC.write_manifest(base + ".json", KC.sha256(source), [base + ".cubin"])
        return cubin, "built"

    @staticmethod
    def _load(base: str, source: str) -> bytes | None:
        cub, manifest = base + ".cubin", base + ".json"
        if not os.path.exists(manifest) and not os.path.exists(cub):
            return None
        with KC._LOCK:
            ok = (all(KC.private_file(f) for f in (cub, manifest))
                  and KC.check_manifest(manifest, KC.sha256(source), os.path.dirname(cub),
                                        [os.path.basename(cub)]))
            if ok:
                data = KC.read_bytes(cub)
                if data:
                    return data
            KC.Stats.corrupt += 1
            for f in (cub, manifest):
                try:
                    os.unlink(f)
                except OSError:
                    pass
        return None
