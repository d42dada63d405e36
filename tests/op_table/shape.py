"""Op table: shape ops (exact comparisons against NumPy on the same data)."""
import numpy as np

import braze.core as mx

from . import OpCase

DTS = ("bool", "int8", "uint16", "int32", "int64", "float16", "bfloat16", "float32",
       "float64", "complex64")


def sample(rng, dt, shape):
    if dt == "bool":
        return rng.random(shape) > 0.5
    if dt == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.startswith(("int", "uint")):
        return rng.integers(0, 50, shape).astype(dt)
    import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy)
    return rng.standard_normal(shape).astype(np.dtype(dt) if dt != "bfloat16"
                                             else ml_dtypes.bfloat16)


def ins(*shapes):
    return lambda rng, dt: tuple(sample(rng, dt, s) for s in shapes)


def case(name, mx_fn, np_fn, inputs, variant="", dtypes=DTS, **kw):
    return OpCase(name, mx_fn, np_fn, inputs, dtypes=dtypes, exact=True, variant=variant, **kw)


def _np_pad_edge(x):
    return np.pad(x, ((1, 2), (0, 3)), mode="edge")


CASES = [
    case("reshape", lambda a: mx.reshape(a, (4, -1)), lambda a: a.reshape(4, -1), ins((2, 3, 4))),
    case("reshape", lambda a: a.reshape(6, 4), lambda a: a.reshape(6, 4), ins((2, 3, 4)),
         "method"),
    case("reshape", lambda a: mx.reshape(a, ()), lambda a: a.reshape(()), ins((1, 1)), "scalar"),
    case("flatten", lambda a: mx.flatten(a), lambda a: a.reshape(-1), ins((2, 3, 4))),
    case("flatten", lambda a: mx.flatten(a, 1, 2), lambda a: a.reshape(2, 12), ins((2, 3, 4)),
         "axes"),
    case("unflatten", lambda a: mx.unflatten(a, 1, (3, -1)), lambda a: a.reshape(2, 3, 4),
         ins((2, 12))),
    case("squeeze", lambda a: mx.squeeze(a), lambda a: np.squeeze(a), ins((1, 3, 1, 2))),
    case("squeeze", lambda a: mx.squeeze(a, (0, -2)), lambda a: np.squeeze(a, (0, -2)),
         ins((1, 3, 1, 2)), "axes"),
    case("expand_dims", lambda a: mx.expand_dims(a, (0, -1)),
         lambda a: np.expand_dims(a, (0, -1)), ins((3, 2))),
    case("transpose", lambda a: mx.transpose(a), lambda a: a.T, ins((2, 3, 4))),
    case("transpose", lambda a: mx.transpose(a, (1, 2, 0)), lambda a: a.transpose(1, 2, 0),
         ins((2, 3, 4)), "axes"),
    case("transpose", lambda a: a.T, lambda a: a.T, ins((2, 3)), "T"),
    case("permute_dims", lambda a: mx.permute_dims(a, (2, 0, 1)),
         lambda a: a.transpose(2, 0, 1), ins((2, 3, 4))),
    case("swapaxes", lambda a: mx.swapaxes(a, 0, -1), lambda a: np.swapaxes(a, 0, -1),
         ins((2, 3, 4))),
    case("moveaxis", lambda a: mx.moveaxis(a, 0, -1), lambda a: np.moveaxis(a, 0, -1),
         ins((2, 3, 4))),
    case("broadcast_to", lambda a: mx.broadcast_to(a, (2, 3, 4)),
         lambda a: np.broadcast_to(a, (2, 3, 4)), ins((3, 1))),
    case("broadcast_arrays", lambda a, b: mx.broadcast_arrays(a, b),
         lambda a, b: np.broadcast_arrays(a, b), ins((3, 1), (1, 4))),
    case("atleast_2d", lambda a: mx.atleast_2d(a), lambda a: np.atleast_2d(a), ins((3,))),
    case("atleast_3d", lambda a: mx.atleast_3d(a), lambda a: np.atleast_3d(a), ins((3,))),
    case("atleast_1d", lambda a: mx.atleast_1d(a), lambda a: np.atleast_1d(a), ins(())),
    case("concatenate", lambda a, b: mx.concatenate([a, b], axis=1),
         lambda a, b: np.concatenate([a, b], axis=1), ins((2, 3), (2, 2))),
    case("concatenate", lambda a, b: mx.concatenate([a, b], axis=None),
         lambda a, b: np.concatenate([a, b], axis=None), ins((2, 3), (4,)), "flat"),
    case("concat", lambda a, b: mx.concat([a, b]), lambda a, b: np.concatenate([a, b]),
         ins((2, 3), (1, 3))),
    case("stack", lambda a, b: mx.stack([a, b], axis=1), lambda a, b: np.stack([a, b], 1),
         ins((2, 3), (2, 3))),
    case("unstack", lambda a: mx.unstack(a, axis=1), lambda a: list(np.moveaxis(a, 1, 0)),
         ins((2, 3))),
    case("split", lambda a: mx.split(a, 3, axis=1), lambda a: np.split(a, 3, axis=1),
         ins((2, 6))),
    case("split", lambda a: mx.split(a, [1, 4]), lambda a: np.split(a, [1, 4]), ins((6, 2)),
         "indices"),
    case("tile", lambda a: mx.tile(a, (2, 1, 3)), lambda a: np.tile(a, (2, 1, 3)), ins((2, 3))),
    case("repeat", lambda a: mx.repeat(a, 3, axis=1), lambda a: np.repeat(a, 3, axis=1),
         ins((2, 3))),
    case("repeat", lambda a: mx.repeat(a, 2), lambda a: np.repeat(a, 2), ins((2, 3)), "flat"),
    case("pad", lambda a: mx.pad(a, ((1, 2), (0, 3))), lambda a: np.pad(a, ((1, 2), (0, 3))),
         ins((2, 3))),
    case("pad", lambda a: mx.pad(a, ((1, 2), (0, 3)), mode="edge"), _np_pad_edge, ins((2, 3)),
         "edge"),
    case("pad", lambda a: mx.pad(a, 2, mode="reflect"), lambda a: np.pad(a, 2, mode="reflect"),
         ins((3, 4)), "reflect"),
    case("pad", lambda a: mx.pad(a, 4, mode="symmetric"),
         lambda a: np.pad(a, 4, mode="symmetric"), ins((3, 2)), "symmetric"),
    case("flip", lambda a: mx.flip(a), lambda a: np.flip(a), ins((2, 3))),
    case("flip", lambda a: mx.flip(a, -1), lambda a: np.flip(a, -1), ins((2, 3)), "axis"),
    case("roll", lambda a: mx.roll(a, 2), lambda a: np.roll(a, 2), ins((2, 3))),
    case("roll", lambda a: mx.roll(a, (1, -1), (0, 1)), lambda a: np.roll(a, (1, -1), (0, 1)),
         ins((2, 3)), "axes"),
    case("diag", lambda a: mx.diag(a, 1), lambda a: np.diag(a, 1), ins((3,))),
    case("diag", lambda a: mx.diag(a, -1), lambda a: np.diag(a, -1), ins((3, 4)), "2d"),
    case("diagonal", lambda a: mx.diagonal(a, 1, 0, 2), lambda a: np.diagonal(a, 1, 0, 2),
         ins((3, 2, 4))),
    case("diagonal", lambda a: mx.diagonal(a, -1, 2, 1), lambda a: np.diagonal(a, -1, 2, 1),
         ins((2, 3, 4)), "neg"),
    OpCase("trace", lambda a: mx.trace(a, 1), lambda a: np.trace(a, 1), ins((3, 4)),
           dtypes=("float32", "float64", "int32")),
    case("view", lambda a: mx.view(a, mx.int8), lambda a: a.view(np.int8), ins((2, 4)),
         dtypes=("int32", "float32", "uint16"), out_dtype=lambda d: "int8", ref_float64=False,
         differentiable=False),
]

# -- issue 13: ops MLX has that braze lacked --------------------------------------------------
CASES += [
    case("matrix_transpose", mx.matrix_transpose, lambda a: np.swapaxes(a, -1, -2),
         ins((2, 3, 4)), dtypes=("int32", "float32")),
    case("contiguous", lambda a: mx.contiguous(mx.transpose(a)), lambda a: a.T, ins((2, 3)),
         dtypes=("float32",)),
    OpCase("diff", lambda a: mx.diff(a, 2, axis=0), lambda a: np.diff(a, 2, axis=0),
           ins((5, 3)), dtypes=("int32", "float32")),
    OpCase("depends", mx.depends, lambda a, b: a, ins((3,), (2,)), dtypes=("float32",)),
]
CASES += [
    case("as_strided", lambda a: mx.as_strided(a, (3, 4), (2, 1), 1),
         lambda a: np.lib.stride_tricks.as_strided(
             a.reshape(-1)[1:], (3, 4), (2 * a.itemsize, a.itemsize)).copy(),
         ins((2, 5)), dtypes=("int32", "float32")),
    case("as_strided", lambda a: mx.as_strided(a, (4,), (-1,), 3),
         lambda a: a.reshape(-1)[::-1], ins((4,)), "reversed", dtypes=("float32",)),
]
