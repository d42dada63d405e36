"""Host-side launch of cpu kernels: buffer layouts, outputs and donation, threads.

`run` is the one path of every `Compiled` evaluation on the cpu backend. A *launch kind*
says how a kernel variant lays out its buffers and how its work is split:

- `ONE`: a single-element launch, the lean path of tiny calls (every buffer is one
  element, so any of them is contiguous and only needs to be 1-D);
- `FLAT`: every input is a single element or has the output's shape and one dense layout
  (all row-major or all column-major, MLX's rule): one loop over [0, size); the outputs get
  the same layout;
- `STRIDED`: any other elementwise region: collapsed shape, element strides and offsets per
  input, outputs row-major;
- `ROWS`: a row region (`KernelIR.reduce_ndim`): R rows of C elements, split by rows;
- `SEGMENTS`: a row region with fewer rows than threads whose reductions combine
  (`render_rows.split_plan`): column segments reduced into partial accumulators, combined
  with NumPy, the per-row ops after them on the numpy backend.

Per call: the kind is chosen (`_kind`) and lays out the inputs (`layout`; a single-element
or FLAT layout is kept per shape and only checked on the next call, a FLAT one by
`_Flat.run_kept`, which launches in the same pass; strided and row layouts are kept per input
shapes and strides, and a strided one seen before is found without trying FLAT); `prepare`
allocates or donates the outputs (`_outputs`: a donor must have the layout the kernel writes)
and lists the kernel's arguments; the kernel for (region, the kind's render variant, donation
pattern) comes from the backend, `threads.POOL.run` runs it, split across threads when its
measured cost gains from it, and `results` (where a kind has one) turns what it wrote into the
region's outputs.
"""
from __future__ import annotations

import numpy as np

from ... import config
from ... import memory as M
from ...threads import MIN_ITEMS, POOL, num_threads
from .render import CpuVariant
from .render_rows import CHUNK, STASH_MAX, RowVariant, donor_outputs, split_plan

_U16 = np.dtype(np.uint16)


def run(backend, ir, e, inputs, shape, donatable) -> list:
    """Evaluate the region of entry `e` on `inputs` over `shape` (its full output shape)."""
    lay = e.layouts.get(shape)  # a kept single-element or FLAT layout (see `_Flat.layout`)
    if lay is not None and lay.items == 1:
        if not donatable and not e.any_half:  # the tiny compiled call's path
            outs = ONE.run_plain(e, inputs, shape)
            if outs is not None:
                return outs
        kind, xs = ONE, None
        outs, args, alias = ONE.prepare(backend, ir, e, inputs, xs, shape, donatable, lay)
        fn = e.fns.get(("contiguous", lay.scalars, alias))  # ONE.key, inlined
        if fn is not None:  # built: one element never splits across threads
            fn(0, 1, *args)
            return outs
    else:
        xs = [inputs[k] for k in e.run]
        if lay is not None and not e.any_half:  # a kept FLAT layout: the lean path first
            outs = FLAT.run_kept(e, inputs, xs, shape, donatable, lay)
            if outs is not None:
                return outs
        if lay is not None and FLAT.holds(lay, xs, shape):
            kind = FLAT
        else:
            kind, lay = _kind(e, xs, shape)
        if kind is None:  # the reference backend follows the primitives (see `_kind`)
            return backend._reference().run_compiled(ir, inputs, shape, donatable)
        outs, args, alias = kind.prepare(backend, ir, e, inputs, xs, shape, donatable, lay)
    if lay.items == 0:
        return outs
    key = kind.key(lay, alias)
    fn = e.fns.get(key)
    if fn is None:
        cfg = config._current
        prog = backend.program(ir, kind.variant(lay, alias),
                               wait=not cfg.background_builds or cfg.compile_check)
        if prog is None:  # being built in the background: this launch runs as uncompiled
            return backend._reference().run_compiled(ir, inputs, shape, donatable)
        fn = e.fns[key] = kind.kernel(prog.fn)
    POOL.run(fn, lay.items, args, lay.unit)
    return outs if kind.results is None else kind.results(backend, ir, e, inputs, shape, lay)


def _kind(e, xs, shape):
    """(the launch kind, its layout) for these inputs, or (None, None) where the reference
    backend runs the region: empty rows (a max of nothing raises, as eager) or a shapeless
    call whose per-row inputs are no longer per row."""
    if not e.ir.reduce_ndim:
        key = (shape, tuple([(x.shape, x.strides) for x in xs]))
        lay = e.layouts.get(key)  # these shapes and strides took the strided kind before
        if lay is not None:
            return STRIDED, lay
        lay = FLAT.layout(e, xs, shape)
        return (FLAT, lay) if lay is not None else (STRIDED, STRIDED.layout(e, xs, shape, key))
    lay = ROWS.layout(e, xs, shape)
    if lay is None or any(lay.letters[p] in "VG" for p in e.row_read):
        return None, None
    if lay.nrow < num_threads() and lay.ncol >= 2 * SEGMENTS.SEGMENT:
        if e.split is None:
            e.split = split_plan(e.ir) or ()
        if e.split:
            return SEGMENTS, SEGMENTS.segment(lay)
    return ROWS, lay


def _outputs(backend, ir, e, inputs, shape, shapes, donatable, order, allowed=None):
    """(outputs of `shapes`, their flat 1-D buffers as the kernel sees them, (output, input)
    alias pairs) for a region over `shape`: a donated input's buffer where it has the `order`
    the kernel writes, else a buffer from the buffer cache."""
    donors = backend.assign_donors(ir, inputs, shape, donatable, allowed) \
        if donatable else None
    outs, flat, alias = [], [], ()
    for j, npd in enumerate(e.out_np):
        d = donors[j] if donors else None
        buf = inputs[d] if d is not None else None
        if buf is not None and (buf.flags.c_contiguous if order == "C"
                                else buf.flags.f_contiguous):
            alias += ((j, d),)
        else:
            buf = M.empty(shapes[j], npd, order)
        outs.append(buf)
        f = buf if buf.ndim == 1 else _flat(buf, order)
        flat.append(f.view(_U16) if e.half_out[j] else f)
    return outs, flat, alias


def _keep(e, key, lay) -> None:
    """Keep `lay` in the entry's layouts under `key`; a few dozen at most (a shapeless
    function called on ever new shapes starts over)."""
    if len(e.layouts) > 32:
        e.layouts.clear()
    e.layouts[key] = lay


def _one_d(e, k, x):
    """The single-element input `x` of slot `k` as 1-D, kept in `e.views`: a compiled
    function's captured scalars are the same buffers every call, and a reshape costs ~0.2 us."""
    v = e.views.get(k)
    if v is None or v[0] is not x:
        v = e.views[k] = (x, x.reshape(1))
    return v[1]


def _flat(x, order):
    """The 1-D view of a dense array in its `order` (an order argument costs NumPy ~0.3 us
    even where it changes nothing, so C order goes without one)."""
    return x.reshape(-1) if order == "C" else x.reshape(-1, order=order)


class _Flat:
    """One loop over the flattened output; inputs are whole 1-D buffers (scalars: one
    element)."""

    class Layout:
        __slots__ = ("scalars", "order", "items", "unit", "small", "dense_slots")

    def layout(self, e, xs, shape):
        """The layout, or None when the inputs need the strided kind. A non-empty one is
        kept per shape: the next call with inputs it `holds` for skips this work."""
        lay = _elementwise_layout(self.Layout, shape)
        lay.order = "C"
        if lay.items <= 1:
            lay.scalars = e.scalars
            lay.small = True
            if lay.items:
                e.layouts[shape] = lay
            return lay
        lay.scalars = "".join(["S" if x.size == 1 else "V" for x in xs])
        cs = fs = True
        for x, s in zip(xs, lay.scalars):
            if s == "S":
                continue
            if x.shape != shape:
                return None
            fl = x.flags
            cs = cs and fl.c_contiguous
            fs = fs and fl.f_contiguous
        if not cs:
            if not fs:
                return None
            lay.order = "F"
        # every output below the buffer cache's block size: `prepare` may call np.empty
        lay.small = lay.items * max([d.itemsize for d in e.out_np]) < M.LARGE
        lay.dense_slots = tuple(k for k, s in zip(e.run, lay.scalars) if s == "V")
        _keep(e, shape, lay)
        return lay

    def run_kept(self, e, inputs, xs, shape, donatable, lay):
        """The outputs of a launch with the kept layout `lay` (more than one element, no half
        precision) whose kernel is built, in one pass over the inputs; None where `lay` does
        not hold or the kernel is not built yet (the general path then runs). The same
        checks, donors (`Backend.assign_donors`' order, among the dense inputs: the only ones
        of the output's shape) and kernel as `holds`, `prepare` and `run`."""
        c = lay.order == "C"
        bufs = []
        for k, x, s in zip(e.run, xs, lay.scalars):
            if s == "S":
                if x.size != 1:
                    return None
                bufs.append(x if x.ndim == 1 else _one_d(e, k, x))
            elif x.shape != shape or not (x.flags.c_contiguous if c else x.flags.f_contiguous):
                return None
            else:
                bufs.append(x.reshape(-1) if c else x.reshape(-1, order="F"))
        out_np = e.out_np
        outs, alias = [], ()
        if donatable:
            for k in lay.dense_slots:
                x = inputs[k]
                if donatable[k] and x.base is None and x.flags.writeable:
                    npd = out_np[len(outs)]
                    if x.dtype is npd or x.dtype == npd:
                        alias += ((len(outs), k),)
                        outs.append(x)
                        if len(outs) == len(out_np):
                            break
        fn = e.fns.get(("contiguous", lay.scalars, alias))  # `key`, inlined
        if fn is None:
            return None
        new = np.empty if lay.small else M.empty
        for npd in out_np[len(outs):]:
            outs.append(new(shape, npd, lay.order))
        n = lay.items
        args = bufs + [o.reshape(-1) if c else o.reshape(-1, order="F") for o in outs]
        if n < MIN_ITEMS:  # `POOL.run`'s own first test, without its call
            fn(0, n, *args)
        else:
            POOL.run(fn, n, args, 1)
        return outs

    def holds(self, lay, xs, shape) -> bool:
        """Whether the kept layout `lay` of `shape` (more than one element) is these
        inputs' layout: the same inputs single elements, the others dense in its order."""
        c = lay.order == "C"
        for x, s in zip(xs, lay.scalars):
            if s == "S":
                if x.size != 1:
                    return False
            elif x.shape != shape or not (x.flags.c_contiguous if c
                                          else x.flags.f_contiguous):
                return False
        return True

    #: how the written buffers become the region's outputs (None: they are the outputs)
    results = None

    def prepare(self, backend, ir, e, inputs, xs, shape, donatable, lay):
        """(outputs, the kernel's arguments after (start, stop), (output, input) aliases)."""
        o = lay.order
        bufs = [x if x.ndim == 1 else _one_d(e, k, x) if x.size == 1 else _flat(x, o)
                for k, x in zip(e.run, xs)]
        if e.any_half_in:
            bufs = [b.view(_U16) if h else b for b, h in zip(bufs, e.half_in)]
        if donatable or not lay.small or e.any_half:
            outs, flat, alias = _outputs(backend, ir, e, inputs, shape,
                                         (shape,) * len(e.out_np), donatable, o)
            return outs, bufs + flat, alias
        # the common small launch: new buffers that libc's allocator serves
        outs = [np.empty(shape, d, o) for d in e.out_np]
        return outs, bufs + (outs if len(shape) == 1 else [_flat(b, o) for b in outs]), ()

    def key(self, lay, alias):
        return ("contiguous", lay.scalars, alias)

    def variant(self, lay, alias):
        return CpuVariant("contiguous", 0, lay.scalars, alias)

    def kernel(self, fn):
        return fn


class _One(_Flat):
    """A single element: outputs are plain small arrays, buffers 1-D views."""

    def prepare(self, backend, ir, e, inputs, xs, shape, donatable, lay):
        donors = backend.assign_donors(ir, inputs, shape, donatable) if donatable else None
        args = []
        for k in e.run:
            x = inputs[k]
            args.append(x if x.ndim == 1 else _one_d(e, k, x))
        outs, alias = [], ()
        for j, npd in enumerate(e.out_np):
            d = donors[j] if donors else None
            if d is not None:
                o = inputs[d]
                alias += ((j, d),)
                outs.append(o)
                args.append(o if o.ndim == 1 else o.reshape(1))
            else:
                o = np.empty(1, npd)
                outs.append(o if len(shape) == 1 else o.reshape(shape))
                args.append(o)
        if e.any_half:
            args = [a.view(_U16) if h else a for a, h in zip(args, e.half_in + e.half_out)]
        return outs, args, alias


    def run_plain(self, e, inputs, shape):
        """The outputs of a launch that donates nothing and has no half-precision buffer,
        whose kernel is built; None where it is not (the general path then runs): `prepare`
        and `run` without their donor and half-precision steps."""
        fn = e.fns.get(("contiguous", e.scalars, ()))  # `key` of this layout, no alias
        if fn is None:
            return None
        args = []
        for k in e.run:
            x = inputs[k]
            args.append(x if x.ndim == 1 else _one_d(e, k, x))
        outs = []
        for npd in e.out_np:
            o = np.empty(1, npd)
            args.append(o)
            outs.append(o if len(shape) == 1 else o.reshape(shape))
        fn(0, 1, *args)
        return outs


class _Strided(_Flat):
    """One loop over the collapsed output shape (inner loop: the last dimension); inputs
    are 1-D spans of their memory with element strides (0 where broadcast) and offsets."""

    class Layout:
        __slots__ = ("scalars", "shape", "strides", "offsets", "odd", "items", "unit", "tiled")

    def layout(self, e, xs, shape, key):
        """The geometry of these inputs over `shape`, kept under `key` (shape, input shapes
        and strides) as a row layout is: a vision model's per-channel scale or bias meets the
        same strided kernel every call (`_kind` looks it up before trying FLAT)."""
        lay = e.layouts.get(key)
        if lay is None:
            lay = _elementwise_layout(self.Layout, shape)
            lay.scalars = "".join(["S" if x.size == 1 else "V" for x in xs])
            lay.shape, lay.strides, lay.offsets, lay.odd = _strided_layout(
                xs, lay.scalars, shape)
            lay.tiled = _merge_short_rows(lay)
            _keep(e, key, lay)
        return lay

    def prepare(self, backend, ir, e, inputs, xs, shape, donatable, lay):
        outs, flat, alias = _outputs(backend, ir, e, inputs, shape, (shape,) * len(e.out_np),
                                     donatable, "C")
        bufs = [x.reshape(-1) if s == "S" else _span(x)[0] for x, s in zip(xs, lay.scalars)]
        for p in lay.odd:  # pragma: no cover - a view whose strides are not whole elements
            bufs[p] = np.ascontiguousarray(xs[p]).reshape(-1)
        for p, off, n, k in lay.tiled:  # a row vector, repeated over a merged row
            bufs[p] = np.broadcast_to(bufs[p][off:off + n], (k, n)).reshape(-1)
        if e.any_half_in:
            bufs = [b.view(_U16) if h else b for b, h in zip(bufs, e.half_in)]
        return outs, [lay.shape, lay.strides, lay.offsets] + bufs + flat, alias

    def key(self, lay, alias):
        return ("strided", len(lay.shape), lay.scalars, alias)

    def variant(self, lay, alias):
        return CpuVariant("strided", len(lay.shape), lay.scalars, alias)


class _Rows:
    """A row region: one kernel index per row, `unit` = the row length."""

    results = None

    def layout(self, e, xs, shape):
        """The cached `_RowLayout` of these input shapes and strides, or None (empty rows)."""
        k = e.ir.reduce_ndim
        nrow = ncol = 1
        for s in shape[:len(shape) - k]:
            nrow *= s
        for s in shape[len(shape) - k:]:
            ncol *= s
        if not (nrow and ncol):
            return None
        key = (shape, tuple([(x.shape, x.strides) for x in xs]))
        lay = e.layouts.get(key)
        if lay is None:
            lay = _row_layout(xs, shape, k)
            lay.nrow, lay.ncol = nrow, ncol
            _keep(e, key, lay)
        return lay

    def prepare(self, backend, ir, e, inputs, xs, shape, donatable, lay):
        stash = lay.ncol <= STASH_MAX
        ok = None
        if donatable:
            ok = e.row_donors.get(stash)
            if ok is None:
                ok = e.row_donors[stash] = donor_outputs(ir, stash)
        outs, flat, alias = _outputs(backend, ir, e, inputs, shape, ir.output_shapes(shape),
                                     donatable, "C", ok)
        args = [lay.ncol, lay.rshape, lay.rstrides, lay.cstrides, lay.offsets]
        return outs, args + lay.buffers(xs, e.half_in) + flat, alias

    def key(self, lay, alias):
        return ("rows", lay.letters, lay.ncol <= STASH_MAX, lay.multi_dim, alias)

    def variant(self, lay, alias):
        return RowVariant(letters=lay.letters, stash=lay.ncol <= STASH_MAX,
                          multi_dim_rows=lay.multi_dim, alias=alias)

    def kernel(self, fn):
        return fn


class _Segments:
    """Few long rows: one kernel index per column segment (`SEGMENT` columns or more), each
    reducing its columns of every row into raw accumulators; no outputs are written."""

    #: columns per segment at least (a whole number of CHUNKs); the segment count depends
    #: on the row length only, so results do not depend on the threads or the load
    SEGMENT = 64 * CHUNK

    class Layout:
        __slots__ = ("rows", "step", "parts", "items", "unit")

    def segment(self, rows):
        """The segments of the rows of `rows` (a `_RowLayout`)."""
        lay = self.Layout()
        lay.rows = rows
        step = max(self.SEGMENT, -(-rows.ncol // 16))
        lay.step = -(-step // CHUNK) * CHUNK
        lay.items = -(-rows.ncol // lay.step)
        lay.unit = lay.step
        return lay

    def prepare(self, backend, ir, e, inputs, xs, shape, donatable, lay):
        lay.parts = [np.empty((lay.items, lay.rows.nrow),
                              dtype=np.bool_ if acc == "boolean" else acc)
                     for _, _, acc in e.split]
        r = lay.rows
        return [], [r.nrow, r.ncol, lay.step, r.rshape, r.rstrides, r.cstrides, r.offsets,
                    r.buffers(xs, e.half_in), lay.parts], ()

    def key(self, lay, alias):
        return ("rows", lay.rows.letters, "partial", lay.rows.multi_dim)

    def variant(self, lay, alias):
        return RowVariant(letters=lay.rows.letters, partial=True,
                          multi_dim_rows=lay.rows.multi_dim)

    def kernel(self, fn):
        return _SegmentKernel(fn)

    def results(self, backend, ir, e, inputs, shape, lay):
        known = {}
        row = ir.row_shape(shape)
        for (r, rt, _), p in zip(e.split, lay.parts):
            v = _COMBINE[rt](p, axis=0)
            known[r] = v.astype(ir.dtype_of(r).np_dtype).reshape(row)
        return backend._reference().run_known(ir, inputs, shape, known)


class _SegmentKernel:
    """Runs a partial row kernel on segments [start, stop), each on its own column range
    and its own row of every partial-accumulator array (one object per kernel: the pool
    measures each kernel's cost on its own)."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, start, stop, nrow, ncol, step, rshape, rstrides, cstrides, offsets,
                 bufs, parts):
        for t in range(start, stop):
            c0 = t * step
            self.fn(0, nrow, min(step, ncol - c0), rshape, rstrides, cstrides,
                    offsets + c0 * cstrides, *bufs, *[p[t] for p in parts])


# how partial accumulators of column segments combine (np.max/np.min propagate NaN)
_COMBINE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "and": np.all,
            "or": np.any}

ONE = _One()
FLAT = _Flat()
STRIDED = _Strided()
ROWS = _Rows()
SEGMENTS = _Segments()


# -- layouts ---------------------------------------------------------------------------------
class _RowLayout:
    """The geometry of a row kernel's inputs, the same for every call with the same shapes
    and strides (so it is cached per entry): letters, row shape, row strides, column strides,
    offsets, and how each input's 1-D buffer is obtained ("flat", "span" or "copy" with the
    shape to broadcast to); `items`/`unit` are what the pool splits (rows of ncol)."""

    __slots__ = ("letters", "rshape", "rstrides", "cstrides", "offsets", "how", "nrow",
                 "ncol", "multi_dim")

    @property
    def items(self):
        return self.nrow

    @property
    def unit(self):
        return self.ncol

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
    lay.multi_dim = len(cs_) > 1
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


def _strided_layout(xs, scal, out_shape):
    """Collapsed shape, element strides and offsets (int64 arrays) of the strided kernel's
    inputs, and the positions of inputs it reads from a dense copy (strides that are not
    whole elements)."""
    sts, offs, odd = [], [], []
    for p, (x, s) in enumerate(zip(xs, scal)):
        if s == "V":
            st = _broadcast_strides(x, out_shape)
            if st is None:  # pragma: no cover - odd views: a dense copy
                odd.append(p)
                x = np.ascontiguousarray(x)
                st = _broadcast_strides(x, out_shape)
            sts.append(st)
            offs.append(_span(x)[1])
    cs, cst = _collapse(out_shape, sts)
    shape_a = np.array(cs, dtype=np.int64)
    st_a = np.array(cst, dtype=np.int64).reshape(len(sts), len(cs))
    return shape_a, st_a, np.array(offs, dtype=np.int64), tuple(odd)


#: a strided launch whose rows are shorter than this merges rows (`_merge_short_rows`)
SHORT_ROW = 128
#: the longest merged row: a row vector is repeated this many elements, per call
MERGED_ROW = 512


def _merge_short_rows(lay) -> tuple:
    """Rows of a rank-2 strided layout that are short (an NHWC tensor times a per-channel
    vector of a few channels: the kernel's per-row work outweighs its elements) become k rows
    at a time, when every input is either dense rows or one row vector broadcast over them:
    the vector's buffer is then repeated k times per call (`prepare`). Rewrites `lay` in
    place; returns the (input position, offset, row length, k) of each repeated vector."""
    if len(lay.shape) != 2:
        return ()
    nrow, ncol = (int(v) for v in lay.shape)
    if ncol >= SHORT_ROW or nrow < 2:
        return ()
    rows = [tuple(int(v) for v in st) for st in lay.strides]
    if not all(st in ((ncol, 1), (0, 1)) for st in rows) or (0, 1) not in rows:
        return ()
    k = max([d for d in range(2, MERGED_ROW // ncol + 1) if nrow % d == 0], default=1)
    if k == 1:
        return ()
    vec = [p for p, s in enumerate(lay.scalars) if s == "V"]
    tiled = tuple((vec[i], int(lay.offsets[i]), ncol, k)
                  for i, st in enumerate(rows) if st == (0, 1))
    lay.shape = np.array([nrow // k, k * ncol], dtype=np.int64)
    lay.strides = np.array([(k * ncol, 1) if st == (ncol, 1) else (0, 1) for st in rows],
                           dtype=np.int64).reshape(len(rows), 2)
    lay.offsets = np.array([0 if st == (0, 1) else int(lay.offsets[i])
                            for i, st in enumerate(rows)], dtype=np.int64)
    return tiled


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
    fl = x.flags
    if fl.c_contiguous:
        return x.reshape(-1), 0
    if fl.f_contiguous:  # a transposed array (a Linear's weight gradient): its memory in order
        return x.reshape(-1, order="F"), 0
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


def _elementwise_layout(cls, shape):
    """A new layout of class `cls` for one element per index of `shape` (`items` of them)."""
    lay = cls()
    lay.unit = 1
    lay.items = 1
    for s in shape:
        lay.items *= s
    return lay
