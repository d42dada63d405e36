"""The `cpu` backend (the default): fused kernels rendered as Python loops, compiled by Numba.

Per `Compiled` evaluation (`run_compiled`):

1. Look up the region's entry by its IR key (one per region: the run-time inputs, and
   whether the renderer supports it; complex regions run on the numpy reference backend).
2. Pick the variant from the inputs' layouts (MLX's rule for elementwise kernels): *contiguous* when
   every input that is not a single element has the output's shape and all share one dense
   layout (all row-major or all column-major) with no negative stride; otherwise *strided*,
   with the output's dimensions collapsed where every input allows it. Single-element inputs
   (0-d included) are scalars in either variant.
3. Get the kernel for (IR key, variant) from the kernel cache (memory, then disk, then build).
4. Allocate outputs through the buffer cache (`memory.empty`), or write into a donated input
   (`Backend.assign_donors`; a donor must have the layout the kernel writes), and launch over
   [0, size), split across threads when large (`threads.POOL`).

See docs/kernels.md for the generated code, the dtypes and the measurements.
"""
from __future__ import annotations

import time

import numpy as np

from ... import config
from ... import memory as M
from .. import kernel_cache as KC
from ..base import Backend, Program
from .render import CpuVariant, render_kernel
from .render_rows import (
    CHUNK,
    STASH_MAX,
    RowVariant,
    donor_outputs,
    row_read_inputs,
    split_plan,
)
from .spell import HALF, Unsupported
from .threads import POOL
from .threads import _threshold as _THRESHOLD
from .threads import num_threads as _num_threads

_U16 = np.dtype(np.uint16)


class CpuProgram(Program):
    """A compiled kernel: `program(inputs, outputs, shape, strides)`.

    `inputs`/`outputs` are the flat 1-D buffers the kernel reads and writes (run-time inputs
    only; half-precision buffers viewed as uint16); for a strided kernel `shape` is the
    collapsed shape and `strides` a tuple (strides[n_strided, ndim], offsets[n_strided]) of
    int64 arrays; for a contiguous one `shape` is the element count and `strides` is None."""

    __slots__ = ("fn", "variant", "source", "name", "how", "seconds")

    def __init__(self, fn, variant, source, name, how, seconds):
        self.fn = fn
        self.variant = variant
        self.source = source
        self.name = name
        self.how = how
        self.seconds = seconds

    def __call__(self, inputs, outputs, shape, strides=None):
        if strides is None:
            n = int(shape) if np.ndim(shape) == 0 else int(np.prod(shape))
            return POOL.run(self.fn, n, tuple(inputs) + tuple(outputs))
        shp = np.asarray(shape, dtype=np.int64)
        st, off = strides
        n = int(np.prod(shp))
        return POOL.run(self.fn, n, (shp, st, off) + tuple(inputs) + tuple(outputs))


class _Entry:
    __slots__ = ("ir", "run", "fallback", "programs", "fns", "half_in", "half_out", "out_np",
                 "any_half", "scalars", "row_read", "row_donors", "row_layouts", "split")

    def __init__(self, ir):
        self.ir = ir
        self.run = tuple(k for k in range(ir.n_inputs) if not ir.inputs[k].const)
        self.programs = {}  # CpuVariant -> CpuProgram
        self.fns = {}  # (kind, ndim, scalars) -> the program's kernel (the launch path's key)
        self.scalars = "S" * len(self.run)  # every input a scalar (single-element launches)
        self.fallback = any(d.kind == "c" for d in ir.output_dtypes) or any(
            i.dtype.kind == "c" for i in ir.inputs) or any(o.dtype.kind == "c" for o in ir.ops)
        self.half_in = tuple(ir.inputs[k].dtype.name in HALF for k in self.run)
        self.half_out = tuple(d.name in HALF for d in ir.output_dtypes)
        self.out_np = tuple(d.np_dtype for d in ir.output_dtypes)
        self.any_half = any(self.half_in) or any(self.half_out)
        # row regions: positions (in `run`) of the inputs per-row ops read
        rr = row_read_inputs(ir) if ir.reduce_ndim else ()
        self.row_read = tuple(pos for pos, k in enumerate(self.run) if k in rr)
        self.row_donors = None
        self.row_layouts = {}  # (shape, input shapes and strides) -> _RowLayout
        self.split = None  # render_rows.split_plan, computed on first need

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
        from .threefry import threefry2x32
        set_threefry(threefry2x32)  # RandomBits in one Numba loop (same bits)
        self.compiler = NumbaCompiler()
        self.identity = self.compiler.identity
        self._entries: dict = {}
        self._numpy = None

    # -- kernels -------------------------------------------------------------------------------
    def _reference(self):
        if self._numpy is None:
            from ..numpy import NumpyBackend
            self._numpy = NumpyBackend()
        return self._numpy

    def entry(self, ir) -> _Entry:
        key = ir.key
        e = self._entries.get(key)
        if e is None:
            e = _Entry(ir)
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

    def program(self, ir, variant: CpuVariant) -> CpuProgram:
        """The kernel for `ir` and `variant` (memory cache, then disk, then build)."""
        e = self.entry(ir)
        p = e.programs.get(variant)
        if p is not None:
            return p
        with KC._LOCK:
            p = e.programs.get(variant)
            if p is not None:
                return p
            p = self._build(ir, variant)
            e.programs[variant] = p
        return p

    def _build(self, ir, variant) -> CpuProgram:
        cfg = config.get()
        t0 = time.perf_counter()
        name = f"{ir.name}{variant.suffix}"
        source = render_kernel(ir, variant)
        fn, how = self.compiler.compile(source, name)
        dt = time.perf_counter() - t0
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

    # -- evaluation ----------------------------------------------------------------------------
    def _fn(self, ir, e, kind, ndim, scal, alias):
        """The kernel function for a variant (`program`, remembered under a plain tuple key:
        building and hashing a CpuVariant costs a microsecond per launch)."""
        fn = self.program(ir, CpuVariant(kind, ndim, scal, alias)).fn
        e.fns[(kind, ndim, scal, alias)] = fn
        return fn

    def run_compiled(self, ir, inputs, out_shape=None, donatable=None) -> list:
        e = self._entries.get(ir.key)
        if e is None:
            e = self.entry(ir)
        if e.fallback:
            return self._reference().run_compiled(ir, inputs, out_shape, donatable)
        if out_shape is None:
            out_shape = ir.output_shape([x.shape for x in inputs])
        if ir.reduce_ndim:
            return self._run_rows(ir, e, inputs, out_shape, donatable)
        size = 1
        for s in out_shape:
            size *= s
        if size == 1:
            return self._run_one(ir, e, inputs, out_shape, donatable)
        run = e.run
        xs = [inputs[k] for k in run]
        # -- layout: contiguous (C or F) or strided
        order = "C"
        contiguous = True
        if size > 1:
            scal = "".join(["S" if x.size == 1 else "V" for x in xs])
            cs = fs = True
            for x, s in zip(xs, scal):
                if s == "S":
                    continue
                if x.shape != out_shape:
                    cs = fs = False
                    break
                fl = x.flags
                cs = cs and fl.c_contiguous
                fs = fs and fl.f_contiguous
            if not cs:
                if fs:
                    order = "F"
                else:
                    contiguous = False
        else:
            scal = e.scalars
        donors = self.assign_donors(ir, inputs, out_shape, donatable) if donatable else None
        outs = []
        alias = ()  # (output, input) pairs sharing a buffer: the kernel variant knows them
        for j, npd in enumerate(e.out_np):
            d = donors[j] if donors else None
            if d is not None:
                buf = inputs[d]
                ok = buf.flags.c_contiguous if order == "C" else buf.flags.f_contiguous
                if ok:
                    outs.append(buf)
                    alias += ((j, d),)
                    continue
            outs.append(M.empty(out_shape, npd, order))
        if size == 0:
            return outs
        oflat = []
        for o, h in zip(outs, e.half_out):
            f = o.reshape(-1, order=order)
            oflat.append(f.view(_U16) if h else f)
        if contiguous:
            fn = (e.fns.get(("contiguous", 0, scal, alias))
                  or self._fn(ir, e, "contiguous", 0, scal, alias))
            args = []
            for x, h in zip(xs, e.half_in):
                f = x.reshape(-1, order=order)
                args.append(f.view(_U16) if h else f)
            POOL.run(fn, size, tuple(args) + tuple(oflat))
            return outs
        shape, bufs, st, off = _strided_layout(xs, scal, out_shape, e.half_in)
        nd = len(shape)
        fn = e.fns.get(("strided", nd, scal, alias)) or self._fn(ir, e, "strided", nd, scal,
                                                                 alias)
        POOL.run(fn, size, (shape, st, off) + tuple(bufs) + tuple(oflat))
        return outs

    def _run_rows(self, ir, e, inputs, shape, donatable) -> list:
        """A row region over `shape`: R rows of C elements, split by rows across threads."""
        k = ir.reduce_ndim
        nrow = 1
        for s in shape[:len(shape) - k]:
            nrow *= s
        ncol = 1
        for s in shape[len(shape) - k:]:
            ncol *= s
        xs = [inputs[j] for j in e.run]
        lay = None
        if nrow and ncol:
            key = (shape, tuple([(x.shape, x.strides) for x in xs]))
            lay = e.row_layouts.get(key)
            if lay is None:
                lay = _row_layout(xs, shape, k)
                if len(e.row_layouts) > 32:
                    e.row_layouts.clear()
                e.row_layouts[key] = lay
        if lay is None or any(lay.letters[p] in "VG" for p in e.row_read):
            # empty rows (max of nothing raises, as eager) or a shapeless call whose per-row
            # inputs are no longer per row: the reference backend follows the primitives
            return self._reference().run_compiled(ir, inputs, shape, donatable)
        letters = lay.letters
        bufs = lay.buffers(xs, e.half_in)
        if nrow < _num_threads() and nrow * ncol >= _THRESHOLD[0] and ncol >= 2 * CHUNK:
            if e.split is None:
                e.split = split_plan(ir) or ()
            if e.split:
                return self._run_split(ir, e, inputs, shape, lay, bufs, nrow, ncol)
        stash = ncol <= STASH_MAX
        donors = None
        if donatable:
            if e.row_donors is None:
                e.row_donors = {}
            ok = e.row_donors.get(stash)
            if ok is None:
                ok = e.row_donors[stash] = donor_outputs(ir, stash)
            donors = self.assign_donors(ir, inputs, shape, donatable, ok)
        outs, flat = [], []
        alias = ()
        for j, (npd, oshape) in enumerate(zip(e.out_np, ir.output_shapes(shape))):
            d = donors[j] if donors else None
            buf = inputs[d] if d is not None and inputs[d].flags.c_contiguous else None
            if buf is None:
                buf = M.empty(oshape, npd)
            else:
                alias += ((j, d),)
            outs.append(buf)
            f = buf.reshape(-1)
            flat.append(f.view(_U16) if e.half_out[j] else f)
        nd = lay.rshape.shape[0] > 1
        key = ("rows", letters, stash, nd, alias)
        fn = e.fns.get(key)
        if fn is None:
            fn = e.fns[key] = self.program(ir, RowVariant(
                letters=letters, stash=stash, multi_dim_rows=nd, alias=alias)).fn
        POOL.run(fn, nrow, (ncol, lay.rshape, lay.rstrides, lay.cstrides, lay.offsets)
                 + tuple(bufs) + tuple(flat), unit=ncol)
        return outs

    def _run_split(self, ir, e, inputs, shape, lay, bufs, nrow, ncol) -> list:
        """Few long rows (a full reduction): each thread reduces a column segment of every
        row into partial accumulators, combined here; the per-row ops after the reductions
        run on the numpy backend (they are (rows, 1)-sized)."""
        nseg = _num_threads()
        step = -(-ncol // nseg)
        step = -(-step // CHUNK) * CHUNK  # segments on chunk boundaries
        bounds = [(c0, min(ncol, c0 + step)) for c0 in range(0, ncol, step)]
        nd = lay.rshape.shape[0] > 1
        key = ("rows", lay.letters, "partial", nd)
        fn = e.fns.get(key)
        if fn is None:
            fn = e.fns[key] = self.program(
                ir, RowVariant(letters=lay.letters, partial=True, multi_dim_rows=nd)).fn
        parts = [np.empty((len(bounds), nrow), dtype=np.bool_ if acc == "boolean" else acc)
                 for _, _, acc in e.split]
        argsets = []
        for t, (c0, c1) in enumerate(bounds):
            offs = lay.offsets + c0 * lay.cstrides
            argsets.append((0, nrow, c1 - c0, lay.rshape, lay.rstrides, lay.cstrides, offs)
                           + tuple(bufs) + tuple(p[t] for p in parts))
        POOL.run(_segments, len(bounds), (fn, argsets), unit=step)
        known = {}
        row = ir.row_shape(shape)
        for (r, rt, _), p in zip(e.split, parts):
            v = _COMBINE[rt](p, axis=0)
            known[r] = v.astype(ir.dtype_of(r).np_dtype).reshape(row)
        return self._reference().run_known(ir, inputs, shape, known)

    def _run_one(self, ir, e, inputs, out_shape, donatable) -> list:
        """A single-element launch, the lean path of tiny calls: every input is one element,
        so the kernel is the contiguous all-scalars variant, any buffer is contiguous and only
        needs to be 1-D, and outputs are small (`memory.empty` would return a plain
        `np.empty`)."""
        scal = e.scalars
        args = []
        for k in e.run:
            x = inputs[k]
            args.append(x if x.ndim == 1 else x.reshape(1))
        donors = self.assign_donors(ir, inputs, out_shape, donatable) if donatable else None
        outs = []
        alias = ()
        one = len(out_shape) == 1
        for j, npd in enumerate(e.out_np):
            d = donors[j] if donors else None
            if d is not None:
                o = inputs[d]
                args.append(o if o.ndim == 1 else o.reshape(1))
                outs.append(o)
                alias += ((j, d),)
                continue
            o = np.empty(1, npd)
            args.append(o)
            outs.append(o if one else o.reshape(out_shape))
        fn = (e.fns.get(("contiguous", 0, scal, alias))
              or self._fn(ir, e, "contiguous", 0, scal, alias))
        if e.any_half:
            hs = e.half_in + e.half_out
            args = [a.view(_U16) if h else a for a, h in zip(args, hs)]
        if _THRESHOLD[0] > 1:  # POOL.run's test: a one-element launch stays on this thread
            fn(0, 1, *args)
        else:  # pragma: no cover - a test forcing every launch through the pool
            POOL.run(fn, 1, tuple(args))
        return outs


def _segments(start, stop, fn, argsets):
    """Run kernel `fn` on the argument sets [start, stop) (column segments, one thread)."""
    for t in range(start, stop):
        fn(*argsets[t])


# how partial accumulators of column segments combine (np.max/np.min propagate NaN)
_COMBINE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "and": np.all,
            "or": np.any}


class _RowLayout:
    """The geometry of a row kernel's inputs, the same for every call with the same shapes
    and strides (so it is cached per entry): letters, row shape, row strides, column strides,
    offsets, and how each input's 1-D buffer is obtained ("flat", "span" or "copy" with the
    shape to broadcast to)."""

    __slots__ = ("letters", "rshape", "rstrides", "cstrides", "offsets", "how")

    def buffers(self, xs, half_in):
        out = []
        for x, (how, pad), h in zip(xs, self.how, half_in):
            if how == "copy":  # the row is not one stride apart (a transposed input)
                x = np.ascontiguousarray(np.broadcast_to(x, pad))
                how = "flat"
            b = x.reshape(-1) if how == "flat" else _span(x)[0]
            out.append(b.view(_U16) if h else b)
        return out


def _row_layout(xs, shape, k) -> _RowLayout:
    """The `_RowLayout` of the run-time inputs `xs` of a row kernel over `shape` (the last
    k axes are the row)."""
    n = len(shape)
    lead = n - k
    letters, vs, offs, how = [], [], [], []
    for x in xs:
        if x.size == 1:
            letters.append("S")
            how.append(("flat", None))
            continue
        st = _broadcast_strides(x, shape)
        cs = None if st is None else _column_stride(st[lead:], shape[lead:])
        mode = ("flat", None) if x.flags.c_contiguous else ("span", None)
        if cs is None:  # copy the input, broadcast along the row, contiguous
            pad = (1,) * (n - x.ndim) + tuple(x.shape)
            pad = pad[:lead] + tuple(shape[lead:])
            x = np.ascontiguousarray(np.broadcast_to(x, pad))
            st = _broadcast_strides(x, shape)
            cs = _column_stride(st[lead:], shape[lead:])
            mode = ("copy", pad)
        letters.append("R" if cs == 0 else "V" if cs == 1 else "G")
        vs.append((st[:lead], cs))
        offs.append(_span(x)[1])
        how.append(mode)
    cs_, cst_ = _collapse(shape[:lead], [st[:lead] for st, _ in vs])
    lay = _RowLayout()
    lay.letters = "".join(letters)
    lay.rshape = np.array(cs_, dtype=np.int64)
    lay.rstrides = np.array(cst_, dtype=np.int64).reshape(len(vs), len(cs_))
    lay.cstrides = np.array([c for _, c in vs], dtype=np.int64)
    lay.offsets = np.array(offs, dtype=np.int64)
    lay.how = how
    return lay


def _column_stride(st, shape):
    """The single element stride along a row whose dims have strides `st`, or None."""
    cs = None
    inner = 1
    for d in range(len(shape) - 1, -1, -1):
        if shape[d] != 1:
            if cs is None:
                cs = st[d] // inner if inner else 0
                if cs * inner != st[d]:
                    return None
            elif st[d] != cs * inner:
                return None
        inner *= shape[d]
    return 0 if cs is None else cs


def _broadcast_strides(x, out_shape):
    """Element strides of `x` broadcast to `out_shape` (0 where broadcast), or None if a
    stride is not a multiple of the itemsize."""
    nd = len(out_shape)
    lead = nd - x.ndim
    isz = x.itemsize
    st = [0] * nd
    for d in range(x.ndim):
        s = x.strides[d]
        if x.shape[d] == 1:
            continue
        if s % isz:
            return None
        st[lead + d] = s // isz
    return st


def _strided_layout(xs, scal, out_shape, half_in):
    """Collapsed shape, 1-D buffers, strides and offsets for the strided kernel."""
    vs = []
    for x, s in zip(xs, scal):
        if s == "V":
            st = _broadcast_strides(x, out_shape)
            if st is None:  # pragma: no cover - odd views: copy
                x = np.ascontiguousarray(x)
                st = _broadcast_strides(x, out_shape)
            vs.append((x, st))
    cs, cst = _collapse(out_shape, [st for _, st in vs])
    bufs, offs = [], []
    for x, s, h in zip(xs, scal, half_in):
        if s == "V":
            buf, off = _span(x)
            offs.append(off)
        else:
            buf = x.reshape(-1)
        bufs.append(buf.view(_U16) if h else buf)
    shape_a = np.array(cs, dtype=np.int64)
    st_a = np.array(cst, dtype=np.int64).reshape(len(vs), len(cs))
    off_a = np.array(offs, dtype=np.int64)
    return shape_a, bufs, st_a, off_a


def _collapse(shape, strides):
    """Drop size-1 dimensions, then merge neighbouring dimensions every operand's strides
    allow: (collapsed shape, one collapsed stride list per operand); at least one dimension."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    cut = [shape[d] for d in dims]
    sts = [[st[d] for d in dims] for st in strides]
    if not cut:
        return [1], [[0] for _ in strides]
    cs, cst = [cut[0]], [[s[0]] for s in sts]
    for d in range(1, len(cut)):
        n = cut[d]
        if all(c[-1] == s[d] * n for c, s in zip(cst, sts)):
            cs[-1] *= n
            for c, s in zip(cst, sts):
                c[-1] = s[d]
        else:
            cs.append(n)
            for c, s in zip(cst, sts):
                c.append(s[d])
    return cs, cst


def _span(x):
    """(a 1-D array over the memory `x` spans, starting at its lowest address; the element
    offset of x's first element in it)."""
    if x.flags.c_contiguous:
        return x.reshape(-1), 0
    isz = x.itemsize
    lo = hi = 0
    flip = []
    for n, s in zip(x.shape, x.strides):
        if n <= 1:
            flip.append(slice(None))
            continue
        if s < 0:
            lo += s * (n - 1)
            flip.append(slice(None, None, -1))
        else:
            hi += s * (n - 1)
            flip.append(slice(None))
    y = x[tuple(flip)] if lo else x
    span = (hi - lo) // isz + 1
    buf = np.lib.stride_tricks.as_strided(y, shape=(span,), strides=(isz,), writeable=False)
    return buf, -lo // isz
