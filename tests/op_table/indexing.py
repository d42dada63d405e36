"""Op table: indexing (getitem, take, take/put_along_axis, dynamic slices, scatter-adds)."""
import numpy as np

import braze.core as mx

from .shape import case, ins

IDX = np.array([[2, 0], [1, 2]])


def _put_ref(a, v):
    out = a.copy()
    np.put_along_axis(out, np.array([[0], [2]]), v.astype(a.dtype)[:, :1], axis=1)
    return out


def _at_add_ref(a, v):
    out = a.copy()
    np.add.at(out, np.array([0, 0, 2]), v.astype(a.dtype))
    return out


CASES = [
    case("getitem", lambda a: a[1, ::-1, None, 1:3], lambda a: a[1, ::-1, None, 1:3],
         ins((2, 3, 4)), "basic"),
    case("getitem", lambda a: a[mx.array(IDX), ..., 1], lambda a: a[IDX, ..., 1],
         ins((3, 2, 4)), "gather"),
    case("getitem", lambda a: a[:, mx.array([1, -1]), 0], lambda a: a[:, [1, -1], 0],
         ins((2, 3, 4)), "gather_mid"),
    case("take", lambda a: mx.take(a, mx.array(IDX), axis=1), lambda a: np.take(a, IDX, 1),
         ins((2, 3, 4))),
    case("take", lambda a: mx.take(a, mx.array([5, 0, 1])), lambda a: np.take(a, [5, 0, 1]),
         ins((2, 3)), "flat"),
    case("take_along_axis", lambda a: mx.take_along_axis(a, mx.array(IDX), axis=1),
         lambda a: np.take_along_axis(a, IDX, 1), ins((2, 3))),
    case("put_along_axis",
         lambda a, v: mx.put_along_axis(a, mx.array([[0], [2]]), v[:, :1], axis=1),
         _put_ref, ins((2, 3), (2, 3)), dtypes=("int32", "float32", "float64", "bool", "complex64"),
         ref_float64=False),
    case("slice", lambda a: mx.slice(a, mx.array([1, 2]), (0, 1), (1, 2)),
         lambda a: a[1:2, 2:4], ins((2, 4))),
    case("slice_update",
         lambda a, u: mx.slice_update(a, u, mx.array([1]), (1,)),
         lambda a, u: np.concatenate([a[:, :1], u, a[:, 3:]], axis=1),
         ins((2, 4), (2, 2))),
    case("at_add", lambda a, v: a.at[mx.array([0, 0, 2])].add(v), _at_add_ref,
         ins((3, 2), (3, 2)), dtypes=("int32", "float32", "float64", "int8", "complex64"),
         ref_float64=False),
]
