"""Op table: reductions and scans.

References are NumPy (float64 inputs for floats). Scan references are written as loops over the
scanned axis (out[i] = reduce of the prefix), independent of the implementation's shift-and-fill.
"""
import functools

import ml_dtypes
import numpy as np

import braze.core as mx

from . import FLOATS as _ALL_FLOATS
from . import INTS, SINTS, OpCase

# The drivers keep float64 inputs as float64, so the float64 cases test the float64 kernels and
# the transform tests check gradients in float64 (finite differences are unreliable in float32:
# near-ties swap places within the step of sort/max).
FLOATS = _ALL_FLOATS
ALL_REAL = ("bool",) + INTS + FLOATS
NUMERIC = INTS + FLOATS
SHAPE = (3, 4, 5)


def _np_dtype(dt):
    return ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype("bool" if dt == "bool" else dt)


def gen(rng, shape, dt, kind="normal"):
    """Sample values of dtype `dt`; `kind` = normal | small (|x| in [0.5, 2], for products)."""
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in INTS:
        if kind == "small":
            v = rng.choice([1, 1, 2] if dt.startswith("u") else [1, -1, 2, 1], size=shape)
        else:
            v = rng.integers(0 if dt.startswith("u") else -5, 6, size=shape)
        return v.astype(dt)
    if kind == "small":
        x = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    else:
        x = rng.standard_normal(shape)
    return x.astype(_np_dtype(dt))


def _ins(shape=SHAPE, kind="normal"):
    return lambda rng, dt: (gen(rng, shape, dt, kind),)


def _same(dt):
    return dt


def _float_out(dt):
    return dt if dt in FLOATS else "float32"


def _sum_out(dt):
    if dt in ("bool", "int8", "int16"):
        return "int32"
    if dt in ("uint8", "uint16"):
        return "uint32"
    return dt


# -- reductions ------------------------------------------------------------------------------
AXES = [("all", None, False), ("ax0", 0, False), ("ax-1", -1, False), ("ax1", 1, False),
        ("tuple", (0, 2), False), ("list", [2, 0], False), ("keep", 1, True),
        ("all-keep", None, True), ("tuple-keep", (-1, 0), True), ("empty-tuple", (), False)]
SHORT_AXES = [a for a in AXES if a[0] in ("all", "ax-1", "tuple", "keep", "all-keep")]


def _np_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _red(name, mx_fn, np_fn, dtypes, out_dtype, axes=AXES, kind="normal", **kw):
    cases = []
    for variant, axis, keep in axes:
        cases.append(OpCase(
            name, functools.partial(mx_fn, axis=axis, keepdims=keep),
            functools.partial(np_fn, axis=_np_axis(axis), keepdims=keep),
            _ins(kind=kind), dtypes=dtypes, out_dtype=out_dtype, variant=variant, **kw))
    return cases


def _np_logsumexp(x, axis=None, keepdims=False):
    x = x.astype(np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


def _np_softmax(x, axis=None):
    x = x.astype(np.float64)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _np_argmax(fn):
    def ref(x, axis=None, keepdims=False):
        r = fn(x, axis=axis, keepdims=keepdims)
        if axis is None and keepdims:
            r = np.reshape(r, (1,) * x.ndim)
        return r
    return ref


def _np_mean(x, axis=None, keepdims=False):
    return np.mean(x.astype(np.float64), axis=axis, keepdims=keepdims)


def _np_var(ddof):
    return lambda x, axis=None, keepdims=False: np.var(
        x.astype(np.float64), axis=axis, keepdims=keepdims, ddof=ddof)


def _np_std(ddof):
    return lambda x, axis=None, keepdims=False: np.std(
        x.astype(np.float64), axis=axis, keepdims=keepdims, ddof=ddof)


def _np_median(x, axis=None, keepdims=False):
    if axis == ():
        return x.astype(np.float64)
    return np.median(x.astype(np.float64), axis=axis, keepdims=keepdims)


def _np_all(x, axis=None, keepdims=False):
    return np.all(x != 0, axis=axis, keepdims=keepdims)


def _np_any(x, axis=None, keepdims=False):
    return np.any(x != 0, axis=axis, keepdims=keepdims)


def _np_count(x, axis=None, keepdims=False):
    if axis == ():
        return (x != 0).astype(np.int32)
    return np.count_nonzero(x, axis=axis, keepdims=keepdims)


def _np_sum_like(fn):
    """sum/prod over axis=() return the input unchanged in MLX (no dtype widening)."""
    def ref(x, axis=None, keepdims=False):
        if axis == ():
            return x
        return fn(x, axis=axis, keepdims=keepdims)
    return ref


def _sum_out_axes(axis):
    return _same if axis == () else _sum_out


CASES = []
for _v, _ax, _kd in AXES:
    CASES.append(OpCase("sum", functools.partial(mx.sum, axis=_ax, keepdims=_kd),
                        functools.partial(_np_sum_like(np.sum), axis=_np_axis(_ax), keepdims=_kd),
                        _ins(), dtypes=ALL_REAL, out_dtype=_sum_out_axes(_ax), variant=_v))
    CASES.append(OpCase("prod", functools.partial(mx.prod, axis=_ax, keepdims=_kd),
                        functools.partial(_np_sum_like(np.prod), axis=_np_axis(_ax),
                                          keepdims=_kd),
                        _ins(shape=(2, 3, 4), kind="small"), dtypes=ALL_REAL,
                        out_dtype=_sum_out_axes(_ax), variant=_v))
CASES += _red("max", mx.max, np.max, ALL_REAL, _same)
CASES += _red("min", mx.min, np.min, ALL_REAL, _same)
CASES += _red("mean", mx.mean, _np_mean, ALL_REAL, _float_out)
CASES += _red("var", mx.var, _np_var(0), ALL_REAL, _float_out, rtol=1e-4)
CASES += _red("std", mx.std, _np_std(0), ALL_REAL, _float_out, axes=SHORT_AXES, rtol=1e-4)
for _v, _ax, _kd in SHORT_AXES:
    CASES.append(OpCase("var", functools.partial(mx.var, axis=_ax, keepdims=_kd, ddof=1),
                        functools.partial(_np_var(1), axis=_ax, keepdims=_kd), _ins(),
                        dtypes=FLOATS + ("int32",), out_dtype=_float_out, rtol=1e-4,
                        variant="ddof1-" + _v))
    CASES.append(OpCase("std", functools.partial(mx.std, axis=_ax, keepdims=_kd, ddof=1),
                        functools.partial(_np_std(1), axis=_ax, keepdims=_kd), _ins(),
                        dtypes=FLOATS + ("int32",), out_dtype=_float_out, rtol=1e-4,
                        variant="ddof1-" + _v))
CASES += _red("all", mx.all, _np_all, ALL_REAL, lambda dt: "bool", differentiable=False)
CASES += _red("any", mx.any, _np_any, ALL_REAL, lambda dt: "bool", differentiable=False)
CASES += _red("logsumexp", mx.logsumexp, _np_logsumexp, ALL_REAL, _float_out)
CASES += _red("median", mx.median, _np_median, NUMERIC, _float_out)
CASES += _red("count_nonzero", mx.count_nonzero, _np_count, ALL_REAL, lambda dt: "int32",
              differentiable=False)

for _name, _fn, _ref in (("argmax", mx.argmax, np.argmax), ("argmin", mx.argmin, np.argmin)):
    for _v, _ax, _kd in [("all", None, False), ("ax0", 0, False), ("ax-1", -1, False),
                         ("keep", 1, True), ("all-keep", None, True)]:
        CASES.append(OpCase(_name, functools.partial(_fn, axis=_ax, keepdims=_kd),
                            functools.partial(_np_argmax(_ref), axis=_ax, keepdims=_kd),
                            _ins(), dtypes=ALL_REAL, out_dtype=lambda dt: "uint32",
                            differentiable=False, variant=_v))

for _v, _ax in [("all", None), ("ax-1", -1), ("ax0", 0), ("tuple", (0, 2))]:
    CASES.append(OpCase("softmax", functools.partial(mx.softmax, axis=_ax),
                        functools.partial(_np_softmax, axis=_ax), _ins(), dtypes=ALL_REAL,
                        out_dtype=_float_out, variant=_v))
CASES.append(OpCase("softmax", functools.partial(mx.softmax, axis=-1, precise=True),
                    functools.partial(_np_softmax, axis=-1), _ins(), dtypes=FLOATS,
                    variant="precise"))


# -- scans -----------------------------------------------------------------------------------
_REDUCE = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.maximum,
           "cummin": np.minimum, "logcumsumexp": np.logaddexp}


def _identity(name, dtype):
    if name == "cumsum":
        return 0
    if name == "cumprod":
        return 1
    if name == "logcumsumexp":
        return -np.inf
    big = name == "cummin"
    if dtype.kind == "b":
        return big
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.max if big else info.min
    return np.inf if big else -np.inf


def np_scan(name, x, axis=None, reverse=False, inclusive=True, out=None):
    """out[i] = reduce(x[:i+1]) (inclusive) or reduce(x[:i]) (exclusive; identity when empty);
    reversed: reduce(x[i:]) / reduce(x[i+1:])."""
    if axis is None:
        x, axis = x.reshape(-1), 0
    if out is not None:
        x = x.astype(out)
    if name == "logcumsumexp":
        x = x.astype(np.float64)
    ufunc = _REDUCE[name]
    xm = np.moveaxis(x, axis, 0)
    n = xm.shape[0]
    res = np.empty(xm.shape, dtype=x.dtype)
    for i in range(n):
        if reverse:
            part = xm[i:] if inclusive else xm[i + 1:]
        else:
            part = xm[:i + 1] if inclusive else xm[:i]
        if part.shape[0] == 0:
            res[i] = _identity(name, x.dtype)
        else:
            res[i] = ufunc.reduce(part, axis=0, dtype=x.dtype)
    return np.moveaxis(res, 0, axis)


SCAN_VARIANTS = [("flat", None, False, True), ("ax1", 1, False, True),
                 ("ax-1", -1, False, True), ("rev", 0, True, True),
                 ("excl", -1, False, False), ("rev-excl", 1, True, False),
                 ("flat-rev-excl", None, True, False)]


def _scan_out(name):
    if name == "cumsum":
        return lambda dt: "int32" if dt == "bool" else dt
    if name == "logcumsumexp":
        return _float_out
    return _same


def _scan_ref(name):
    def ref(x, axis, reverse, inclusive):
        out = None
        if name == "cumsum" and x.dtype == np.bool_:
            out = np.int32
        return np_scan(name, x, axis, reverse, inclusive, out)
    return ref


for _name in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"):
    _fn = getattr(mx, _name)
    for _v, _ax, _rev, _inc in SCAN_VARIANTS:
        CASES.append(OpCase(
            _name, functools.partial(_fn, axis=_ax, reverse=_rev, inclusive=_inc),
            functools.partial(_scan_ref(_name), axis=_ax, reverse=_rev, inclusive=_inc),
            _ins((3, 4, 5) if _name != "cumprod" else (2, 3, 4),
                 "small" if _name == "cumprod" else "normal"),
            dtypes=ALL_REAL, out_dtype=_scan_out(_name), variant=_v))

CASES.append(OpCase("cumsum", functools.partial(mx.cumsum, axis=1, dtype=mx.float32),
                    functools.partial(np_scan, "cumsum", axis=1, out=np.float64), _ins(),
                    dtypes=SINTS + ("float16", "bool"), out_dtype=lambda dt: "float32",
                    variant="dtype"))

# -- issue 13 ----------------------------------------------------------------------------------
CASES.append(OpCase("minmax", lambda a: list(mx.minmax(a, axis=1)),
                    lambda a: [np.min(a, axis=1), np.max(a, axis=1)],
                    lambda rng, dt: (gen(rng, (3, 4), dt),), dtypes=("int32", "float32")))
