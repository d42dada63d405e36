"""The `cpu` backend (the default): fused kernels rendered as Python loops, compiled by Numba.

`CpuBackend` keeps one `Entry` per region (IR key) with its kernels per variant, renders and
builds them (`render.py`, `render_rows.py`, `compiler.py`, through the kernel cache) and hands
every evaluation to `launch.run`, which lays out the buffers, allocates or donates the
outputs and runs the kernel across threads. Regions the renderer does not support (complex
numbers) run on the numpy reference backend. See docs/kernels.md.
"""
from __future__ import annotations

import os
import time

from ... import config
from ...compile import notice
from .. import kernel_cache as KC
from ..base import Backend, Program
from . import background, launch, prebuild
from .render import CpuVariant, render_kernel
from .render_rows import RowVariant, row_read_inputs
from .spell import HALF, Unsupported


class CpuProgram(Program):
    """A built kernel (`fn`, a Numba dispatcher) with its variant, source and build record."""

    __slots__ = ("fn", "variant", "source", "name", "how", "seconds")

    def __init__(self, fn, variant, source, name, how, seconds):
        self.fn, self.variant, self.source = fn, variant, source
        self.name, self.how, self.seconds = name, how, seconds


class Entry:
    """A region's state: its kernels per variant, the launch path's kernel table, the
    dtype facts every launch needs, and the layouts it keeps."""

    __slots__ = ("ir", "run", "fallback", "programs", "fns", "half_in", "half_out", "out_np",
                 "any_half_in", "any_half", "scalars", "row_read", "row_donors", "layouts", "split",
                 "views")

    def __init__(self, ir):
        self.ir = ir
        self.run = tuple(k for k in range(ir.n_inputs) if not ir.inputs[k].const)
        self.programs = {}  # CpuVariant / RowVariant -> CpuProgram
        # launch kind's key -> kernel (hashing a plain tuple is cheaper than a variant)
        self.fns = {}
        self.scalars = "S" * len(self.run)  # every input a scalar (single-element launches)
        self.fallback = any(d.kind == "c" for d in ir.output_dtypes) or any(
            i.dtype.kind == "c" for i in ir.inputs) or any(o.dtype.kind == "c" for o in ir.ops)
        self.half_in = tuple(ir.inputs[k].dtype.name in HALF for k in self.run)
        self.any_half_in = any(self.half_in)
        self.half_out = tuple(d.name in HALF for d in ir.output_dtypes)
        self.out_np = tuple(d.np_dtype for d in ir.output_dtypes)
        self.any_half = self.any_half_in or any(self.half_out)
        # row regions: positions (in `run`) of the inputs per-row ops read
        rr = row_read_inputs(ir) if ir.reduce_ndim else ()
        self.row_read = tuple(pos for pos, k in enumerate(self.run) if k in rr)
        self.row_donors = {}  # stash? -> which outputs may take a donor
        # launch layouts kept: row layouts by (shape, input shapes and strides), the
        # single-element or FLAT layout by its shape
        self.layouts = {}
        self.split = None  # render_rows.split_plan, computed on first need
        # input slot -> (its last single-element buffer, that buffer as 1-D), `launch._one_d`
        self.views = {}

    def default_variant(self):
        """The variant rendered up front to find unsupported regions."""
        if self.ir.reduce_ndim:
            return RowVariant(letters="".join("R" if p in self.row_read else "V"
                                              for p in range(len(self.run))))
        return CpuVariant("contiguous", 0, "V" * len(self.run))


class CpuBackend(Backend):
    name = "cpu"

    def __init__(self):
        from ...prims.random import set_threefry
        from .compiler import NumbaCompiler
        from .threefry import fill_words, threefry2x32
        set_threefry(threefry2x32, fill_words)  # RandomBits in one Numba loop (same bits)
        self.compiler = NumbaCompiler()
        self.identity = self.compiler.identity
        self._entries: dict = {}
        self._numpy = None
        self._prefetched = False  # jobs may be queued in prebuild.POOL

    # -- kernels -------------------------------------------------------------------------------
    def _reference(self):
        if self._numpy is None:
            from ..numpy import NumpyBackend
            self._numpy = NumpyBackend()
        return self._numpy

    def entry(self, ir) -> Entry:
        key = ir.key
        e = self._entries.get(key)
        if e is None:
            e = Entry(ir)
            if not e.fallback:
                try:  # render once up front: an unsupported region runs on numpy
                    render_kernel(ir, e.default_variant())
                except Unsupported as exc:
                    e.fallback = True
                    if config.get().debug >= 1:
                        from ...compile.diagnostics import emit
                        emit(f"[cpu] {ir.name} runs on the numpy backend: {exc}")
            self._entries[key] = e
        return e

    def program(self, ir, variant: CpuVariant, wait: bool = True) -> CpuProgram | None:
        """The kernel for `ir` and `variant` (memory cache, then disk, then build). With
        `wait` False, None while the kernel is built in the background (background.py)."""
        e = self.entry(ir)
        p = e.programs.get(variant)
        if p is not None:
            return p
        if not wait and background.defer(self, ir, variant):
            return None
        if self._prefetched:  # a worker may be building it (prebuild.py): wait, or take it
            prebuild.POOL.claim((ir.key, variant))
            self._prefetched = bool(prebuild.POOL.jobs)
        with KC._LOCK:
            p = e.programs.get(variant)
            if p is not None:
                return p
            p = self._build(ir, variant)
            e.programs[variant] = p
        return p

    def on_disk(self, ir, variant, source=None) -> bool:
        """Whether the disk cache has an entry for this kernel (it loads in milliseconds);
        `source`: its rendered source, if at hand."""
        d = self.compiler.directory()
        if d is None:
            return False
        name = self.compiler.module_name(source or render_kernel(ir, variant))
        return os.path.exists(os.path.join(d, name + ".json"))

    def _build(self, ir, variant) -> CpuProgram:
        cfg = config.get()
        t0 = time.perf_counter()
        name = f"{ir.name}{variant.suffix}"
        source = render_kernel(ir, variant)
        fn, how = self.compiler.compile(source, name)
        dt = time.perf_counter() - t0
        notice.kernel_built(dt, how == "built")
        if cfg.debug >= 1 or cfg.dump_dir:
            from ...compile.diagnostics import emit
            if cfg.debug >= 1:
                verb = "built" if how == "built" else "loaded from the disk cache"
                emit(f"[cpu] kernel {name} (key {ir.key}) {verb} in {dt * 1e3:.1f} ms")
            if cfg.debug >= 4:
                emit(f"[cpu] source of {name}:\n{source}")
            if cfg.dump_dir:
                import os
                os.makedirs(cfg.dump_dir, exist_ok=True)
                with open(os.path.join(cfg.dump_dir, f"kernel_{ir.key}{variant.suffix}.py"),
                          "w") as f:
                    f.write(source)
        return CpuProgram(fn, variant, source, name, how, dt)

    def prefetch(self, regions) -> None:
        """Queue the kernels the first run of a compiled function will build, for worker
        processes to build into the disk cache concurrently (`BRAZE_BUILD_WORKERS`,
        prebuild.py). `regions`: (ir, input shapes, likely donated per input), in run order.
        Nothing is queued without a usable disk cache, for fewer than two new kernels, or
        where the prediction fails (the run then builds as ever)."""
        cfg = config.get()
        if cfg.build_workers <= 0:
            return
        d = self.compiler.directory()
        if d is None:
            return
        jobs, keys = [], set()
        for ir, shapes, likely in regions:
            e = self.entry(ir)
            if e.fallback:
                continue
            try:
                variant = prebuild.predict(self, ir, e, shapes, likely)
                key = (ir.key, variant)
                if variant is None or variant in e.programs or key in keys:
                    continue
                source = render_kernel(ir, variant)
            except Exception:  # a hint: the run decides for itself
                continue
            keys.add(key)
            if os.path.exists(os.path.join(d, self.compiler.module_name(source) + ".json")):
                continue  # in the disk cache already
            jobs.append((key, source, f"{ir.name}{variant.suffix}"))
        if len(jobs) < 2:
            return
        workers = min(cfg.build_workers, len(jobs), os.cpu_count() or 1)
        for key, source, name in jobs:
            prebuild.POOL.submit(key, source, name, workers, cfg.cache_dir)
        self._prefetched = True

    # -- evaluation ----------------------------------------------------------------------------
    def run_compiled(self, ir, inputs, out_shape=None, donatable=None) -> list:
        e = self._entries.get(ir.key)
        if e is None:
            e = self.entry(ir)
        if e.fallback:
            return self._reference().run_compiled(ir, inputs, out_shape, donatable)
        if out_shape is None:
            out_shape = ir.output_shape([x.shape for x in inputs])
        return launch.run(self, ir, e, inputs, out_shape, donatable)
