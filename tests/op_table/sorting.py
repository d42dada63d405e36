"""Op table: sort, argsort, partition, argpartition, topk.

Partitions and topk leave an order unspecified, so their cases compare a canonical form built
with braze ops: the sorted part before kth, the kth element, the sorted part after it.
"""
import functools

import numpy as np

import braze.core as mx

from . import OpCase
from .reduction import ALL_REAL, _np_dtype, gen

SHAPE = (3, 4, 6)


def _ins(rng, dt):
    return (gen(rng, SHAPE, dt),)


def _distinct(rng, dt):
    """Values without ties (a permutation along every axis position), so indices are unique."""
    n = int(np.prod(SHAPE))
    v = rng.permutation(n).reshape(SHAPE) % 97
    if dt.startswith("int"):
        v = v - 40
    return (v.astype(_np_dtype(dt)),)


def _ax(axis, ndim):
    return 0 if axis is None else axis % ndim


def _sl(x, ax, s):
    return x[(slice(None),) * ax + (s,)]


def _canon_mx(p, kth, axis):
    ax = _ax(axis, 1 if axis is None else p.ndim)
    return [mx.sort(_sl(p, ax, slice(0, kth)), axis=ax), _sl(p, ax, slice(kth, kth + 1)),
            mx.sort(_sl(p, ax, slice(kth + 1, None)), axis=ax)]


def _canon_np(s, kth, axis):
    ax = _ax(axis, s.ndim)
    return [np.sort(_sl(s, ax, slice(0, kth)), axis=ax), _sl(s, ax, slice(kth, kth + 1)),
            np.sort(_sl(s, ax, slice(kth + 1, None)), axis=ax)]


def _flat(x, axis):
    return (x.reshape(-1), 0) if axis is None else (x, axis % x.ndim)


def _np_sort(x, axis):
    x, axis = _flat(x, axis)
    return np.sort(x, axis=axis, kind="stable")


def _np_argsort(x, axis):
    x, axis = _flat(x, axis)
    return np.argsort(x, axis=axis, kind="stable")


def _mx_partition(x, kth, axis):
    p = mx.partition(x, kth, axis=axis)
    n = p.shape[_ax(axis, p.ndim)]
    return _canon_mx(p, kth % n, axis)


def _np_partition(x, kth, axis):
    x, ax = _flat(x, axis)
    s = np.sort(x, axis=ax, kind="stable")
    return _canon_np(s, kth % s.shape[ax], ax)


def _mx_argpartition(x, kth, axis):
    p = mx.argpartition(x, kth, axis=axis)
    n = p.shape[_ax(axis, p.ndim)]
    return _canon_mx(p, kth % n, axis)


def _np_argpartition(x, kth, axis):
    x, ax = _flat(x, axis)
    s = np.argsort(x, axis=ax, kind="stable")
    return _canon_np(s, kth % s.shape[ax], ax)


def _mx_topk(x, k, axis):
    t = mx.topk(x, k, axis=axis)
    return mx.sort(t, axis=-1 if axis is None else axis)


def _np_topk(x, k, axis):
    x, ax = _flat(x, axis)
    s = np.sort(x, axis=ax, kind="stable")
    return _sl(s, ax, slice(s.shape[ax] - k, None))


AXES = [("ax-1", -1), ("ax0", 0), ("ax1", 1), ("flat", None)]

CASES = []
for _v, _a in AXES:
    CASES.append(OpCase("sort", functools.partial(mx.sort, axis=_a),
                        functools.partial(_np_sort, axis=_a), _ins, dtypes=ALL_REAL,
                        variant=_v, exact=True))
    CASES.append(OpCase("argsort", functools.partial(mx.argsort, axis=_a),
                        functools.partial(_np_argsort, axis=_a), _ins, dtypes=ALL_REAL,
                        out_dtype=lambda dt: "uint32", differentiable=False, variant=_v))
for _v, _k, _a in [("k2", 2, -1), ("k-1-ax0", -1, 0), ("k0-ax1", 0, 1), ("k5-flat", 5, None),
                   ("k-3", -3, -1)]:
    CASES.append(OpCase("partition", functools.partial(_mx_partition, kth=_k, axis=_a),
                        functools.partial(_np_partition, kth=_k, axis=_a), _ins,
                        dtypes=ALL_REAL, variant=_v, exact=True))
    CASES.append(OpCase("argpartition", functools.partial(_mx_argpartition, kth=_k, axis=_a),
                        functools.partial(_np_argpartition, kth=_k, axis=_a), _distinct,
                        dtypes=tuple(d for d in ALL_REAL if d != "bool"),
                        out_dtype=lambda dt: "uint32", differentiable=False, variant=_v))
for _v, _k, _a in [("k2", 2, -1), ("k1-ax0", 1, 0), ("kall", 6, -1), ("k0", 0, -1),
                   ("k7-flat", 7, None)]:
    CASES.append(OpCase("topk", functools.partial(_mx_topk, k=_k, axis=_a),
                        functools.partial(_np_topk, k=_k, axis=_a), _ins, dtypes=ALL_REAL,
                        variant=_v, exact=True))


# -- searchsorted (issue 13): values with ties to the sequence, so left and right differ -------
def _search_values(rng, dt):
    return (rng.choice([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0], (3, 4)).astype(_np_dtype(dt)),)


_SEQ = [-1.0, 0.0, 0.0, 0.5, 2.0]
for _side in ("left", "right"):
    CASES.append(OpCase(
        "searchsorted",
        functools.partial(lambda v, side: mx.searchsorted(mx.array([-1.0, 0.0, 0.0, 0.5, 2.0]),
                                                          v, side=side), side=_side),
        functools.partial(lambda v, side: np.searchsorted(_SEQ, v, side=side), side=_side),
        _search_values, dtypes=("int32", "float16", "float32"), out_dtype=lambda dt: "uint32",
        differentiable=False, exact=True, variant=_side))
