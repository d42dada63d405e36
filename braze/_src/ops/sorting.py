"""Public ops: sort, argsort, partition, argpartition, topk.

`axis=None` sorts the flattened array. Sorting is stable, NaN sorts last, indices are uint32.
`topk` returns the k largest values along the axis in no particular order (it is the last k
of a partition, as in MLX).
"""
from __future__ import annotations

from typing import Optional

from ..prims.base import bind
from ..prims.shape import Reshape, Slice
from ..prims.sort import ArgPartition, ArgSort, Partition, SearchSorted, Sort
from ._helpers import astype, normalize_axis
from ._typing import ArrayLike, StreamOrDevice, array
from .reduction import check_array, check_int

__all__ = ["sort", "argsort", "partition", "argpartition", "topk", "searchsorted"]


def _along(a, axis, op):
    """(array, axis): the flattened array and axis 0 for axis=None."""
    a = check_array(a, op)
    if axis is None:
        flat = (a.size,)
        return (a if a.shape == flat else bind(Reshape(flat), (a,))), 0
    return a, normalize_axis(axis, a.ndim, op)


def sort(a: ArrayLike, /, axis: Optional[int] = -1, *, stream: StreamOrDevice = None) -> array:
    """Sorted copy of `a` along `axis` (None: the flattened array)."""
    x, ax = _along(a, axis, "sort")
    return bind(Sort(ax), (x,))


def argsort(a: ArrayLike, /, axis: Optional[int] = -1, *, stream: StreamOrDevice = None) -> array:
    """Indices (uint32) that sort `a` along `axis`; stable (equal elements keep their order)."""
    x, ax = _along(a, axis, "argsort")
    return bind(ArgSort(ax), (x,))


def _kth(x, kth, ax, axis, op):
    kth = check_int(kth, "kth", op)
    n = x.shape[ax]
    if not -n <= kth < n:
        raise ValueError(f"[{op}] Received invalid kth {kth} along axis {axis} for array "
                         f"with shape {x.shape}.")
    return kth % n


def partition(a: ArrayLike, /, kth: int, axis: Optional[int] = -1, *,
              stream: StreamOrDevice = None) -> array:
    """`a` rearranged along `axis` so that position `kth` holds the value it would hold sorted,
    smaller-or-equal values before it and larger-or-equal after (in no particular order)."""
    x, ax = _along(a, axis, "partition")
    return bind(Partition(_kth(x, kth, ax, axis, "partition"), ax), (x,))


def argpartition(a: ArrayLike, /, kth: int, axis: Optional[int] = -1, *,
                 stream: StreamOrDevice = None) -> array:
    """Indices (uint32) that partition `a` along `axis` around position `kth`."""
    x, ax = _along(a, axis, "argpartition")
    return bind(ArgPartition(_kth(x, kth, ax, axis, "argpartition"), ax), (x,))


def topk(a: ArrayLike, /, k: int, axis: Optional[int] = -1, *,
         stream: StreamOrDevice = None) -> array:
    """The `k` largest elements of `a` along `axis` (None: flattened), in no particular order."""
    x, ax = _along(a, axis, "topk")
    k = check_int(k, "k", "topk")
    n = x.shape[ax]
    if not 0 <= k <= n:
        raise ValueError(f"[topk] Received invalid k={k} along axis {axis} for array with "
                         f"shape {x.shape}.")
    if 0 < k < n:
        x = bind(Partition(n - k, ax), (x,))
    start = tuple(n - k if i == ax else 0 for i in range(x.ndim))
    stop = x.shape
    if start == (0,) * x.ndim:
        return x if x is not a else bind(Slice(start, stop, (1,) * x.ndim), (x,))
    return bind(Slice(start, stop, (1,) * x.ndim), (x,))


def searchsorted(sorted_sequence: ArrayLike, values: ArrayLike, /, side: str = "left", *,
                 stream: StreamOrDevice = None) -> array:
    """Indices (uint32) that keep the 1-D `sorted_sequence` sorted when inserting `values`:
    'left' counts the elements less than each value, 'right' those less or equal."""
    from .. import dtypes as D

    if side not in ("left", "right"):
        raise ValueError(f"[searchsorted] Invalid side '{side}'. Expected 'left' or 'right'.")
    seq = check_array(sorted_sequence, "searchsorted")
    v = check_array(values, "searchsorted")
    if seq.ndim != 1:
        raise ValueError(f"[searchsorted] The sorted sequence must be 1-D but has {seq.ndim} "
                         f"dimensions.")
    dt = D.promote(seq.dtype, v.dtype)  # promoted, never truncated (4.5 stays 4.5)
    return bind(SearchSorted(side == "right"), (astype(seq, dt), astype(v, dt)))
