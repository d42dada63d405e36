"""Public ops: indexing (`a[idx]`, `a[idx] = v`, `a.at[idx].add(v)`, take, put, dynamic slices).

getitem follows NumPy's rules as MLX implements them: basic indices become one Slice plus a
Reshape; integer-array indices become one Gather (the broadcast index dims replace the indexed
axes when the advanced indices are adjacent, otherwise they go first). setitem and `.at[]`
follow MLX's scatter rules: integers are basic indices there (they drop their axis and never
move the array dims), so `a[0, :, idx] = v` expects v in `a[0][:, idx]`'s shape.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .. import dtypes as D
from ..array import array, overwrite_descriptor
from ..casts import cast
from ..prims.base import bind, bind_avals
from ..prims.core import Broadcast
from ..prims.indexing import Gather, GatherAxis, MaskedScatter, Scatter, ScatterAxis
from ..prims.shape import (
    DynamicSlice,
    DynamicSliceUpdate,
    RelativeSlice,
    Reshape,
    Slice,
    SliceUpdate,
    Squeeze,
)
from ..scheduler import CompileTraces
from ._helpers import as_array, astype, attach_methods, normalize_axis
from ._helpers import broadcast_shapes as _bshapes
from ._typing import ArrayLike, StreamOrDevice
from .shape import _broadcast_to, _int_tuple, _is_int, _pshape, _transpose, reshape

__all__ = ["take", "take_along_axis", "put_along_axis", "slice", "slice_update"]

_builtin_slice = slice


class IndexingError(IndexError, ValueError):
    """Bad index: an IndexError as NumPy raises, and a ValueError as MLX raises."""


class IndexTypeError(TypeError, ValueError):
    """An index of an unsupported type (MLX raises ValueError, Python convention TypeError)."""


def _const(v, dt=np.int32):
    return array._from_data(np.asarray(v, dtype=dt))


# -- parsing ----------------------------------------------------------------------------------
class _Entry:
    __slots__ = ("kind", "axis", "value")

    def __init__(self, kind, axis=None, value=None):
        self.kind, self.axis, self.value = kind, axis, value  # kind: int/slice/array/none


def _to_index_array(x, op):
    if type(x) is not array:
        x = as_array(x, op)
    if x._dtype is D.bool_:
        raise IndexingError(f"[{op}] Boolean indices are not supported (got a bool array of "
                            f"shape {_pshape(x._shape)}).")
    if x._dtype.kind not in "ui":
        raise IndexingError(f"[{op}] Indices must be integral, got an array of dtype "
                            f"{x._dtype.name}.")
    return x


def _slice_part(v, op):
    if v is None or _is_int(v):
        if v is not None and not -2**31 <= v < 2**31:
            raise IndexingError(f"[{op}] Slice indices must be 32-bit integers, got {v}.")
        return v if v is None else int(v)
    if isinstance(v, array) and v.size == 1 and v._dtype.kind in "uib":
        return int(v.item())
    raise IndexTypeError(f"[{op}] Slice indices must be integers or None, got {v!r}.")


def _parse(shape, idx, op):
    """Normalize an index into entries with their source axes; ellipsis expanded."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    items = []
    n_ell = 0
    for x in idx:
        if x is None or x is Ellipsis:
            n_ell += x is Ellipsis
            items.append(x)
        elif isinstance(x, (bool, np.bool_)):
            raise IndexTypeError(f"[{op}] Boolean scalar indices are not supported, got {x!r}.")
        elif _is_int(x):
            items.append(int(x))
        elif isinstance(x, _builtin_slice):
            items.append(_builtin_slice(_slice_part(x.start, op), _slice_part(x.stop, op),
                                        _slice_part(x.step, op)))
        elif isinstance(x, (array, np.ndarray, list)):
            items.append(_to_index_array(x, op))
        else:
            raise IndexTypeError(f"[{op}] Cannot index an array with {type(x).__name__}: "
                                 f"{x!r}.")
    if n_ell > 1:
        raise IndexingError(f"[{op}] An index can only have a single ellipsis (...).")
    n_real = sum(1 for x in items if x is not None and x is not Ellipsis)
    ndim = len(shape)
    if n_real > ndim:
        raise IndexingError(f"[{op}] Too many indices ({n_real}) for array with {ndim} "
                            f"dimensions.")
    if n_ell:
        k = items.index(Ellipsis)
        items = items[:k] + [_builtin_slice(None)] * (ndim - n_real) + items[k + 1:]
    entries, ax = [], 0
    for x in items:
        if x is None:
            entries.append(_Entry("none"))
            continue
        n = shape[ax]
        if isinstance(x, int):
            if not -n <= x < n:
                raise IndexingError(f"[{op}] Index {x} is out of bounds for axis {ax} with "
                                    f"size {n}.")
            entries.append(_Entry("int", ax, x % n))
        elif isinstance(x, _builtin_slice):
            if x.step == 0:
                raise IndexingError(f"[{op}] Slice step cannot be zero.")
            entries.append(_Entry("slice", ax, x.indices(n)))
        else:
            _check_bounds(x, n, op, ax)
            entries.append(_Entry("array", ax, x))
        ax += 1
    return entries


def _check_bounds(idx: array, n: int, op: str, axis) -> None:
    """Out-of-range indices raise when the index array is already evaluated (no forced eval)."""
    data = idx._data
    if data is None or data.size == 0:
        return
    lo, hi = int(data.min()), int(data.max())
    bad = hi if hi >= n else lo if lo < -n else None
    if bad is not None:
        raise IndexingError(f"[{op}] Index {bad} is out of bounds for axis {axis} with size {n}.")


def _len(sl):
    return len(range(*sl))


# -- getitem ----------------------------------------------------------------------------------
def _relative_slices(ndim, idx):
    """In a shapeless compile trace, an index of slices (and one ellipsis) as (start, stop,
    step) per axis, bounds as written so they follow the input at replay; None otherwise."""
    items = idx if isinstance(idx, tuple) else (idx,)
    if not all(isinstance(x, _builtin_slice) or x is Ellipsis for x in items):
        return None
    if sum(x is Ellipsis for x in items) > 1 or len(items) - (Ellipsis in items) > ndim:
        return None  # _parse raises the usual errors
    k = items.index(Ellipsis) if Ellipsis in items else len(items)
    full = [(None, None, None)] * (ndim - len(items) + (Ellipsis in items))
    out = [(_slice_part(x.start, "getitem"), _slice_part(x.stop, "getitem"),
            _slice_part(x.step, "getitem")) for x in items if x is not Ellipsis]
    out = out[:k] + full + out[k:]
    if any(t[2] == 0 for t in out):
        return None
    return tuple(out)


def _plain_bound(v) -> bool:
    return v is None or (type(v) is int and -2**31 <= v < 2**31)


def _basic_index(shape, idx):
    """(starts, stops, strides, sliced shape, output shape, whole) of an index of in-bounds
    Python ints, slices with Python int bounds, new axes (None) and at most one ellipsis
    (nearly every index a model writes), or None for any other index (`_parse` takes it, and
    raises what is wrong). `sliced` is the slice's shape (1 on an int's axis); `whole`: it
    takes every element in order (no slice to make)."""
    items = idx if type(idx) is tuple else (idx,)
    n_ell = n_new = 0
    for x in items:
        t = type(x)
        if t is _builtin_slice:
            if not (_plain_bound(x.start) and _plain_bound(x.stop) and _plain_bound(x.step)) \
                    or x.step == 0:
                return None
        elif x is Ellipsis:
            n_ell += 1
        elif x is None:
            n_new += 1
        elif t is not int:
            return None
    nd = len(shape)
    n_real = len(items) - n_ell - n_new
    if n_ell > 1 or n_real > nd:
        return None
    starts, stops, strides, sliced, out = [], [], [], [], []
    whole = True
    ax = 0
    for x in items + (Ellipsis,) * (1 - n_ell):  # the axes after the index: a trailing `...`
        if x is None:  # a new axis of size 1
            out.append(1)
            continue
        if x is Ellipsis:
            for _ in range(nd - n_real):
                n = shape[ax]
                starts.append(0)
                stops.append(n)
                strides.append(1)
                sliced.append(n)
                out.append(n)
                ax += 1
            n_ell = 2  # a second (implied) ellipsis adds no more axes
            continue
        n = shape[ax]
        if type(x) is int:
            if not -n <= x < n:
                return None
            x %= n
            starts.append(x)
            stops.append(x + 1)
            strides.append(1)
            sliced.append(1)
            whole = whole and n == 1  # an int on an axis of one takes all of it
        else:
            a, b, c = x.indices(n)
            starts.append(a)
            stops.append(b)
            strides.append(c)
            m = len(range(a, b, c))
            sliced.append(m)
            out.append(m)
            whole = whole and a == 0 and c == 1 and m == n
        ax += 1
    return tuple(starts), tuple(stops), tuple(strides), tuple(sliced), tuple(out), whole


def _getitem(self, idx):
    rel = _relative_slices(self.ndim, idx) if CompileTraces.dynamic else None
    if rel is not None:
        if all(t == (None, None, None) for t in rel):
            return self
        return bind(RelativeSlice(rel), (self,))
    basic = _basic_index(self._shape, idx)
    if basic is not None:
        return _basic_getitem(self, *basic)
    if type(idx) is array and self._shape and idx._dtype.kind in "ui":
        return _take_rows(self, idx)
    entries = _parse(self._shape, idx, "getitem")
    nd = self.ndim
    starts, stops, strides = [0] * nd, list(self._shape), [1] * nd
    for e in entries:
        if e.kind == "slice":
            starts[e.axis], stops[e.axis], strides[e.axis] = e.value
        elif e.kind == "int" and not any(x.kind == "array" for x in entries):
            starts[e.axis], stops[e.axis] = e.value, e.value + 1
    from .shape import _slice
    x = _slice(self, starts, stops, strides)
    adv = [e for e in entries if e.kind in ("int", "array")]
    if not any(e.kind == "array" for e in adv):
        out_shape = []
        used = set()
        for e in entries:
            if e.kind == "none":
                out_shape.append(1)
            elif e.kind == "slice":
                out_shape.append(x._shape[e.axis])
            if e.axis is not None:
                used.add(e.axis)
        out_shape += [x._shape[d] for d in range(nd) if d not in used]
        return reshape(x, tuple(out_shape))
    # advanced: ints and arrays together, NumPy's placement rule
    pos = [i for i, e in enumerate(entries) if e.kind in ("int", "array")]
    gather_first = any(entries[i].kind not in ("int", "array")
                       for i in range(pos[0], pos[-1] + 1))
    axes = tuple(e.axis for e in adv)
    inds = [e.value if e.kind == "array" else _const(e.value) for e in adv]
    bshape = _bshapes(*[i._shape for i in inds], op="getitem")
    sizes = tuple(1 if d in axes else x._shape[d] for d in range(nd))
    g = bind(Gather(axes, sizes), (x, *inds))
    rest = [d for d in range(nd) if d not in axes]
    g = reshape(g, tuple(bshape) + tuple(x._shape[d] for d in rest))
    nb = len(bshape)
    if not gather_first:
        p = sum(1 for e in entries[:pos[0]] if e.kind == "slice")
        perm = tuple(range(nb, nb + p)) + tuple(range(nb)) + tuple(range(nb + p, g.ndim))
        g = _transpose(g, perm, "getitem")
    # insert the None dims
    out_shape = []
    gi = 0
    block_done = False
    if gather_first:
        out_shape += list(bshape)
        gi = nb
        block_done = True
    for e in entries:
        if e.kind == "none":
            out_shape.append(1)
        elif e.kind == "slice":
            out_shape.append(g._shape[gi])
            gi += 1
        elif not block_done:
            out_shape += list(bshape)
            gi += nb
            block_done = True
    out_shape += list(g._shape[gi:])
    return reshape(g, tuple(out_shape))


def _take_rows(x, idx):
    """x[idx] for one integer index array (an embedding lookup): the Gather and Reshape the
    general path builds, without parsing the index."""
    _check_bounds(idx, x._shape[0], "getitem", 0)
    g = bind(Gather((0,), (1,) + x._shape[1:]), (x, idx))
    return bind(Reshape(idx._shape + x._shape[1:]), (g,))


def _basic_getitem(x, starts, stops, strides, sliced, out_shape, whole):
    """One Slice (none when it takes everything) and one Reshape (none when no int drops an
    axis and no new axis is added), as the general path builds them; their shapes are the
    index's, known already."""
    if not whole:
        x = bind_avals(Slice(starts, stops, strides), (x,), [(sliced, x._dtype)])
    if sliced == out_shape:
        return x
    return bind_avals(Reshape(out_shape), (x,), [(out_shape, x._dtype)])


# -- scatter arguments (MLX's rules for setitem and .at[]) ------------------------------------
def _strip_leading_ones(v: array) -> array:
    s = v._shape
    k = 0
    while k < len(s) and s[k] == 1:
        k += 1
    return reshape(v, s[k:]) if k else v


def _fit_update(v: array, shape: tuple, op: str) -> array:
    if v._shape == shape:  # no nodes to strip and broadcast back (a KV-cache token)
        return v
    v = _strip_leading_ones(v)
    if len(v._shape) > len(shape) or any(
            s != 1 and s != t for s, t in zip(reversed(v._shape), reversed(shape))):
        raise ValueError(f"[{op}] Cannot broadcast a value of shape {_pshape(v._shape)} to "
                         f"the indexed shape {_pshape(shape)}.")
    return v if v._shape == shape else bind(Broadcast(shape), (v,))


def _scatter_args(a: array, idx, op: str):
    """(index arrays, scatter axes, view shape, slice shape) for MLX's scatter of `a[idx]`."""
    entries = _parse(a._shape, idx, op)
    nd = a.ndim
    used = {e.axis for e in entries if e.axis is not None}
    # a suffix of full ':' slices (and implicit axes) stays a slice of the update
    trailing = [d for d in range(nd) if d not in used]
    while entries and entries[-1].kind == "slice" and entries[-1].value == (
            0, a._shape[entries[-1].axis], 1) and entries[-1].axis == (
            trailing[0] - 1 if trailing else nd - 1):
        trailing.insert(0, entries.pop().axis)
    arrays = [e for e in entries if e.kind == "array"]
    seq = [e for e in entries if e.kind != "int"]  # ints never move the array dims here
    pos = [i for i, e in enumerate(seq) if e.kind == "array"]
    arrays_first = bool(pos) and any(seq[i].kind != "array" for i in range(pos[0], pos[-1] + 1))
    bshape = tuple(_bshapes(*[e.value._shape for e in arrays], op=op)) if arrays else ()
    nb = len(bshape)
    # view dims (excluding trailing): build placement
    layout = []  # list of ("slice", entry) / ("none",) / ("block",)
    if arrays_first:
        layout.append(("block",))
    for e in seq:
        if e.kind == "array":
            if not arrays_first and ("block",) not in layout:
                layout.append(("block",))
        else:
            layout.append((e.kind, e))
    view = []
    block_at = 0
    for item in layout:
        if item[0] == "block":
            block_at = len(view)
            view += list(bshape)
        elif item[0] == "none":
            view.append(1)
        else:
            view.append(_len(item[1].value))
    V = len(view)
    inds, axes = [], []
    di = 0
    dim_of = {}
    for item in layout:
        if item[0] == "block":
            di += nb
        elif item[0] == "none":
            di += 1
        else:
            dim_of[id(item[1])] = di
            di += 1
    for e in entries:
        if e.kind == "none":
            continue
        axes.append(e.axis)
        if e.kind == "int":
            inds.append(_const(np.full((1,) * V, e.value)))
        elif e.kind == "slice":
            shp = [1] * V
            shp[dim_of[id(e)]] = _len(e.value)
            inds.append(_const(np.arange(*e.value).reshape(shp)))
        else:
            arr = e.value
            shp = [1] * V
            shp[block_at + nb - arr.ndim:block_at + nb] = list(arr._shape)
            inds.append(reshape(arr, tuple(shp)))
    slice_shape = tuple(1 if d in axes else a._shape[d] for d in range(nd))
    trailing_shape = tuple(a._shape[d] for d in trailing)
    return inds, tuple(axes), tuple(view), slice_shape, trailing_shape


def _scatter(a: array, idx, v: array, reduce_type: str, op: str) -> array:
    inds, axes, view, slice_shape, trailing_shape = _scatter_args(a, idx, op)
    full = view + trailing_shape
    v = _fit_update(v, full, op)
    if not axes:  # no indexed axis (`a.at[None]` of a 0-d array): every element is updated
        return _combine(a, reshape(v, a._shape), reduce_type)
    v = reshape(v, view + slice_shape)
    return bind(Scatter(reduce_type, axes), (a, *inds, v))


def _combine(a: array, v: array, reduce_type: str) -> array:
    from . import elementwise as E
    fn = {"sum": E.add, "prod": E.multiply, "max": E.maximum, "min": E.minimum}.get(reduce_type)
    return _broadcast_to(v, a._shape, "scatter") if fn is None else fn(a, v)


def _value(v, dt: D.Dtype, op: str) -> array:
    if type(v) is array:
        return astype(v, dt)
    try:
        return astype(as_array(v, op), dt) if not isinstance(v, (int, float, complex, bool)) \
            else array._from_data(cast(np.asarray(v), dt.np_dtype))
    except (OverflowError, ValueError, TypeError) as e:
        raise TypeError(f"[{op}] Cannot use {v!r} as a value for an array of dtype "
                        f"{dt.name}: {e}") from None


def _is_mask(idx) -> bool:
    return (isinstance(idx, array) and idx._dtype is D.bool_) or (
        isinstance(idx, np.ndarray) and idx.dtype == np.bool_)


def _setitem_mask(idx):
    """The boolean mask `a[idx] = v` uses, as MLX reads one: a bool array (braze or NumPy), a
    Python bool (0-d: every element) or a list of bools; None for any other index."""
    if _is_mask(idx):
        return idx if isinstance(idx, array) else array(idx)
    if isinstance(idx, (bool, np.bool_)):
        return array(bool(idx))
    if isinstance(idx, list) and idx:
        try:
            m = array(idx)
        except (ValueError, TypeError):
            return None
        return m if m._dtype is D.bool_ else None
    return None


def _set_slice(a, starts, stops, strides, sl_shape, view, whole, val, op) -> None:
    """a[index] = val for a basic index (`_basic_index`'s description of it): `view` is the
    indexed shape (new axes included), starts/stops/strides the slice of `a` it selects, of
    shape `sl_shape`."""
    upd = _fit_update(val, view, op)
    if upd._shape != sl_shape:
        upd = reshape(upd, sl_shape)
    if whole:
        def make(old):
            return upd
    else:
        def make(old):
            return bind(SliceUpdate(starts, stops, strides), (old, upd))
    _update_in_place(a, make, val)


def _update_in_place(a: array, make, val: array) -> None:
    """`a` takes the value `make(a)`; nodes built from `a` before keep its old value."""
    out = make(a)
    if out is a or out is val or out._prim is None:  # must be a node of our own
        out = bind(Broadcast(out._shape), (out,))
    overwrite_descriptor(a, out)


def _setitem(self, idx, v):
    op = "setitem"
    val = _value(v, self._dtype, op)
    basic = _basic_index(self._shape, idx)
    if basic is not None:
        return _set_slice(self, *basic, val, op)
    mask = _setitem_mask(idx)
    if mask is not None:
        k = mask.ndim
        if mask._shape != self._shape[:k]:
            raise ValueError(f"[setitem] The boolean mask should have the same shape as the "
                             f"beginning of the indexed array but the mask has shape "
                             f"{_pshape(mask._shape)} and the array has shape "
                             f"{_pshape(self._shape)}.")
        m = reshape(mask, mask._shape + (1,) * (self.ndim - k))

        def make(old):
            return bind(MaskedScatter(), (old, m, val))
        return _update_in_place(self, make, val)
    items = idx if isinstance(idx, tuple) else (idx,)
    basic = not any(isinstance(x, (array, np.ndarray, list)) for x in items)
    if basic:
        entries = _parse(self._shape, idx, op)
        nd = self.ndim
        starts, stops, strides = [0] * nd, list(self._shape), [1] * nd
        view = []
        used = set()
        for e in entries:
            if e.kind == "slice":
                starts[e.axis], stops[e.axis], strides[e.axis] = e.value
                view.append(_len(e.value))
            elif e.kind == "int":
                starts[e.axis], stops[e.axis] = e.value, e.value + 1
            else:
                view.append(1)
            if e.axis is not None:
                used.add(e.axis)
        view += [self._shape[d] for d in range(nd) if d not in used]
        sliced = tuple([len(range(*t)) for t in zip(starts, stops, strides)])
        whole = sliced == self._shape and all(st == 1 for st in strides)
        return _set_slice(self, tuple(starts), tuple(stops), tuple(strides), sliced,
                          tuple(view), whole, val, op)

    def make(old):
        return _scatter(old, idx, val, "none", op)
    _update_in_place(self, make, val)


# -- .at[] ------------------------------------------------------------------------------------
class ArrayAt:
    """`a.at[idx]`: returns an _ArrayAtIndexed whose methods scatter-accumulate."""

    __slots__ = ("_a",)

    def __init__(self, a):
        self._a = a

    def __getitem__(self, idx):
        return _ArrayAtIndexed(self._a, idx)

    def _no_indices(self, v=None):
        raise ValueError("[at] Must give indices to array.at (e.g. `x.at[0].add(4)`).")

    # `a.at.add(v)` without `[idx]`: MLX's ValueError rather than an AttributeError
    add = subtract = multiply = divide = maximum = minimum = _no_indices


class _ArrayAtIndexed:
    __slots__ = ("_a", "_idx")

    def __init__(self, a, idx):
        self._a, self._idx = a, idx

    def _run(self, v, reduce_type, op, transform=None):
        a = self._a
        if _is_mask(self._idx):
            raise IndexingError(f"[{op}] Boolean indices are not supported.")
        if type(v) is array:
            val = v
        else:
            val = _value(v, a._dtype, op)
        if transform is not None:
            val = transform(val)
        val = astype(val, a._dtype)
        return _scatter(a, self._idx, val, reduce_type, op)

    def add(self, v: ArrayLike) -> array:
        """The array with `v` added at the indices (repeated indices accumulate)."""
        return self._run(v, "sum", "at.add")

    def subtract(self, v: ArrayLike) -> array:
        """The array with `v` subtracted at the indices."""
        from .elementwise import negative
        return self._run(v, "sum", "at.subtract", negative)

    def multiply(self, v: ArrayLike) -> array:
        """The array with the elements at the indices multiplied by `v`."""
        return self._run(v, "prod", "at.multiply")

    def divide(self, v: ArrayLike) -> array:
        """The array with the elements at the indices divided by `v`."""
        from .elementwise import reciprocal
        return self._run(v, "prod", "at.divide", reciprocal)

    def maximum(self, v: ArrayLike) -> array:
        """The array with the elements at the indices replaced by their maximum with `v`."""
        return self._run(v, "max", "at.maximum")

    def minimum(self, v: ArrayLike) -> array:
        """The array with the elements at the indices replaced by their minimum with `v`."""
        return self._run(v, "min", "at.minimum")


# -- take / put -------------------------------------------------------------------------------
def take(a: ArrayLike, /, indices: ArrayLike, axis: Optional[int] = None, *,
         stream: StreamOrDevice = None) -> array:
    """Elements of `a` at `indices` along `axis` (of the flattened array when None).

    The result's shape is `a`'s with axis `axis` replaced by the shape of `indices` (an int
    index drops the axis). Negative indices count from the end; an out-of-bounds index
    raises when the indices are already evaluated (computed ones are not checked).
    """
    a = as_array(a, "take")
    if axis is None:
        a = reshape(a, (-1,))
        ax = 0
    else:
        ax = normalize_axis(axis, a.ndim, "take")
    if a.ndim == 0:
        raise ValueError("[take] Cannot take from a 0-dimensional array.")
    if _is_int(indices):
        n = a._shape[ax]
        if not -n <= indices < n:
            raise IndexingError(f"[take] Index {indices} is out of bounds for axis {ax} with "
                                f"size {n}.")
        idx = _const(int(indices) % n)
    else:
        idx = _to_index_array(indices, "take")
        _check_bounds(idx, a._shape[ax], "take", ax)
    sizes = tuple(1 if d == ax else s for d, s in enumerate(a._shape))
    g = bind(Gather((ax,), sizes), (a, idx))
    k = idx.ndim
    # drop the gathered axis with a Squeeze, which follows the index's shape at shapeless
    # replay (a Reshape to idx.shape + rest would bake the trace-time index size), as MLX does
    g = bind(Squeeze((k + ax,)), (g,))
    perm = tuple(range(k, k + ax)) + tuple(range(k)) + tuple(range(k + ax, g.ndim))
    return _transpose(g, perm, "take")


def _along_axis_args(a, indices, axis, op):
    a = as_array(a, op)
    if type(indices) is array and indices.size == 0 and indices._dtype.kind in "fc":
        indices = astype(indices, D.int32)  # MLX: empty indices of any number type select nothing
    idx = _to_index_array(indices, op)
    if axis is None:
        a = reshape(a, (-1,))
        idx = reshape(idx, (-1,))
        ax = 0
    else:
        ax = normalize_axis(axis, a.ndim, op)
    if idx.ndim != a.ndim:
        raise ValueError(f"[{op}] Indices of dimension {idx.ndim} does not match array of "
                         f"dimension {a.ndim}.")
    _check_bounds(idx, a._shape[ax], op, ax)
    shape = _bshapes(tuple(1 if d == ax else s for d, s in enumerate(a._shape)), idx._shape,
                     op=op)
    idx = _broadcast_to(idx, tuple(shape), op)
    return a, idx, ax, tuple(shape)


def take_along_axis(a: ArrayLike, /, indices: ArrayLike, axis: Optional[int] = -1, *,
                    stream: StreamOrDevice = None) -> array:
    """Elements of `a` picked along `axis` by `indices` of the same ndim (broadcast with
    `a` on the other axes), as NumPy's `take_along_axis`; None: along the flattened array.
    """
    a, idx, ax, shape = _along_axis_args(a, indices, axis, "take_along_axis")
    a_shape = tuple(a._shape[d] if d == ax else s for d, s in enumerate(shape))
    a = _broadcast_to(a, a_shape, "take_along_axis")
    return bind(GatherAxis(ax), (a, idx))


def put_along_axis(a: ArrayLike, /, indices: ArrayLike, values: ArrayLike,
                   axis: Optional[int] = None, *, stream: StreamOrDevice = None) -> array:
    """A copy of `a` with `values` written at `indices` along `axis` (the inverse of
    `take_along_axis`; None: along the flattened array).
    """
    src = as_array(a, "put_along_axis")
    x, idx, ax, shape = _along_axis_args(src, indices, axis, "put_along_axis")
    if any(shape[d] != x._shape[d] for d in range(x.ndim) if d != ax):
        raise ValueError(f"[put_along_axis] Indices of shape {_pshape(shape)} do not fit an "
                         f"array of shape {_pshape(x._shape)}.")
    vals = _value(values, x._dtype, "put_along_axis")
    vals = _broadcast_to(vals, shape, "put_along_axis")
    out = bind(ScatterAxis("none", ax), (x, idx, vals))
    return reshape(out, src._shape) if axis is None else out


# -- dynamic slices ---------------------------------------------------------------------------
def _dyn_args(a, start_indices, axes, op):
    if not isinstance(start_indices, array):
        raise TypeError(f"[{op}] start_indices must be an array, got "
                        f"{type(start_indices).__name__}: {start_indices!r}.")
    if start_indices._dtype.kind not in "ui":
        raise ValueError(f"[{op}] Start indices must be integers, got type "
                         f"{start_indices._dtype.name}.")
    axes = _int_tuple(axes, op, "axes")
    axes = tuple(normalize_axis(x, a.ndim, op) for x in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"[{op}] Received duplicate axes {axes}.")
    if start_indices.size != len(axes):
        raise ValueError(f"[{op}] Number of starting indices {start_indices.size} does not "
                         f"match number of axes {len(axes)}.")
    return reshape(start_indices, (len(axes),)), axes


def slice(a: ArrayLike, start_indices: array, axes: Sequence[int], slice_size: Sequence[int], *,
          stream: StreamOrDevice = None) -> array:  # noqa: A001  (MLX's name)
    """The `slice_size` elements of `a` from `start_indices` (an integer array, one start per
    axis of `axes`); the starts may be computed, the sizes are static.
    """
    a = as_array(a, "slice")
    starts, axes = _dyn_args(a, start_indices, axes, "slice")
    sizes = _int_tuple(slice_size, "slice", "slice_size")
    if len(sizes) != len(axes):
        raise ValueError(f"[slice] Got {len(sizes)} slice sizes {sizes} for {len(axes)} axes.")
    for ax, s in zip(axes, sizes):
        if not 0 <= s <= a._shape[ax]:
            raise ValueError(f"[slice] Invalid slice size {s} for axis {ax} with size "
                             f"{a._shape[ax]}.")
    return bind(DynamicSlice(axes, sizes), (a, starts))


def slice_update(a: ArrayLike, update: ArrayLike, start_indices: array, axes: Sequence[int], *,
                 stream: StreamOrDevice = None) -> array:
    """A copy of `a` with `update` written from `start_indices` (an integer array, one start
    per axis of `axes`); `update` broadcasts to the leading axes it lacks.
    """
    a = as_array(a, "slice_update")
    starts, axes = _dyn_args(a, start_indices, axes, "slice_update")
    u = _value(update, a._dtype, "slice_update")
    if u.ndim > a.ndim:
        raise ValueError(f"[slice_update] Update of shape {_pshape(u._shape)} has more "
                         f"dimensions than the array of shape {_pshape(a._shape)}.")
    if u.ndim < a.ndim:
        lead = a._shape[:a.ndim - u.ndim]
        u = _broadcast_to(u, lead + u._shape, "slice_update")
    for d in range(a.ndim):
        if u._shape[d] > a._shape[d]:
            raise ValueError(f"[slice_update] Update of shape {_pshape(u._shape)} does not fit "
                             f"in an array of shape {_pshape(a._shape)}.")
    return bind(DynamicSliceUpdate(axes), (a, u, starts))


def _at(self) -> ArrayAt:
    """Scatter updates, functionally: ``a.at[idx].add(v)`` returns `a` with `v` added at
    `idx` (repeated indices accumulate); also `subtract`, `multiply`, `divide`, `maximum`
    and `minimum`.
    """
    return ArrayAt(self)


attach_methods({"__getitem__": _getitem, "__setitem__": _setitem, "at": property(_at)})

