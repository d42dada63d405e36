"""Op table: creation.

Ops without array inputs receive the dtype name as their only "input" (a plain string, which
the drivers pass through untouched); their references are NumPy in float64 or the exact ints.
"""
import ml_dtypes
import numpy as np

import braze.core as mx

from . import ALL_REAL, FLOATS, INTS, SINTS, OpCase

NUMERIC = INTS + FLOATS
# dtypes for cases with array inputs: the driver builds them with mx.array(ndarray), which reads
# float64 NumPy data as float32 (MLX's rule), so float64 only appears in dtype-only cases
A_FLOATS = tuple(d for d in FLOATS if d != "float64")
A_REAL = tuple(d for d in ALL_REAL if d != "float64")
A_NUMERIC = INTS + A_FLOATS


def _np_dtype(dt):
    return ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype("bool" if dt == "bool" else dt)


def _ref_dtype(dt):
    """Reference dtype: float64 for floats (more accurate than the op), exact otherwise."""
    return np.float64 if dt in FLOATS else _np_dtype(dt)


def gen(rng, shape, dt):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in INTS:
        lo = 0 if dt.startswith("u") else -5
        return rng.integers(lo, 6, size=shape).astype(dt)
    return rng.standard_normal(shape).astype(_np_dtype(dt))


def _dt_only(rng, dt):
    return (dt,)


def _ins(*shapes):
    return lambda rng, dt: tuple(gen(rng, s, dt) for s in shapes)


def _const(dt_name):
    return lambda dt: dt_name


CASES = []


def _case(name, mx_fn, np_fn, inputs=_dt_only, dtypes=("float32",), **kw):
    kw.setdefault("differentiable", False)
    CASES.append(OpCase(name, mx_fn, np_fn, inputs, dtypes, **kw))


# -- arange -----------------------------------------------------------------------------------
_case("arange", lambda dt: mx.arange(0, 10, 3, dtype=dt),
      lambda dt: np.arange(0, 10, 3).astype(_ref_dtype(dt)), dtypes=NUMERIC, variant="int_step")
_case("arange", lambda dt: mx.arange(7), lambda dt: np.arange(7, dtype=np.int32),
      dtypes=("int32",), variant="stop_only", exact=True)
_case("arange", lambda dt: mx.arange(0.5, 3.0, 0.25, dt),
      lambda dt: np.arange(0.5, 3.0, 0.25), dtypes=FLOATS, variant="float_step")
_case("arange", lambda dt: mx.arange(10, 0, -3, dtype=dt),
      lambda dt: np.arange(10, 0, -3).astype(_ref_dtype(dt)), dtypes=SINTS + FLOATS,
      variant="negative_step")
_case("arange", lambda dt: mx.arange(5, 0, dtype=dt), lambda dt: np.zeros(0),
      dtypes=("int32", "float32"), variant="empty")
_case("arange", lambda dt: mx.arange(1.0, 2.0, 0.1),
      lambda dt: np.arange(1.0, 2.0, 0.1), dtypes=("float32",), variant="inferred_float")

# -- linspace ---------------------------------------------------------------------------------
_case("linspace", lambda dt: mx.linspace(-1.5, 2.0, 9, dtype=dt),
      lambda dt: np.linspace(-1.5, 2.0, 9), dtypes=FLOATS)
_case("linspace", lambda dt: mx.linspace(0, 1, 5, endpoint=False, dtype=dt),
      lambda dt: np.linspace(0, 1, 5, endpoint=False), dtypes=FLOATS, variant="no_endpoint")
_case("linspace", lambda dt: mx.linspace(0, 10, 4, dtype=dt),
      lambda dt: np.linspace(0, 10, 4).astype(dt), dtypes=("int32", "int64", "uint8"),
      variant="int")
_case("linspace", lambda dt: mx.linspace(3, 7, 1, dtype=dt), lambda dt: np.array([3.0]),
      dtypes=("float32",), variant="num1")
_case("linspace", lambda dt: mx.linspace(3, 7, 0, dtype=dt), lambda dt: np.zeros(0),
      dtypes=("float32",), variant="num0")
_case("linspace", lambda dt: mx.linspace(0, 1), lambda dt: np.linspace(0, 1),
      dtypes=("float32",), variant="default_num")

# -- zeros / ones / full ----------------------------------------------------------------------
for _shape, _v in (((2, 3), "2d"), ((), "0d"), ((0, 3), "empty"), (5, "int_shape")):
    _case("zeros", lambda dt, s=_shape: mx.zeros(s, dt),
          lambda dt, s=_shape: np.zeros(s, _ref_dtype(dt)), dtypes=ALL_REAL, variant=_v)
    _case("ones", lambda dt, s=_shape: mx.ones(s, dt),
          lambda dt, s=_shape: np.ones(s, _ref_dtype(dt)), dtypes=ALL_REAL, variant=_v)
_case("zeros", lambda dt: mx.zeros((3, 2)), lambda dt: np.zeros((3, 2)), dtypes=("float32",),
      variant="default_dtype")
_case("full", lambda dt: mx.full((2, 3), 3, dt), lambda dt: np.full((2, 3), 3, _ref_dtype(dt)),
      dtypes=ALL_REAL, variant="scalar")
_case("full", lambda dt: mx.full((4,), 2.5, dt),
      lambda dt: np.full((4,), 2.5).astype(_ref_dtype(dt)), dtypes=FLOATS + ("int32",),
      variant="float_scalar")
_case("full", lambda dt: mx.full((2, 3), 7), lambda dt: np.full((2, 3), 7, np.int32),
      dtypes=("int32",), variant="inferred_int")
_case("full", lambda v: mx.full((2, 3), v), lambda v: np.broadcast_to(v, (2, 3)),
      _ins((3,)), dtypes=A_REAL, variant="array_vals")
_case("full", lambda v: mx.full((4, 2, 3), v), lambda v: np.broadcast_to(v, (4, 2, 3)),
      _ins((2, 1)), dtypes=("float32", "int8"), variant="array_vals_col")
_case("full", lambda v: mx.full((2, 3), v, mx.float32),
      lambda v: np.broadcast_to(v, (2, 3)).astype(np.float64), _ins((3,)),
      dtypes=("int32", "float16", "bool"), out_dtype=_const("float32"), variant="array_astype")
_case("full", lambda v: mx.full((0, 3), v), lambda v: np.broadcast_to(v, (0, 3)), _ins((3,)),
      dtypes=("float32",), variant="empty")

# -- *_like -----------------------------------------------------------------------------------
_case("zeros_like", lambda x: mx.zeros_like(x), lambda x: np.zeros_like(x), _ins((3, 4)),
      dtypes=A_REAL)
_case("ones_like", lambda x: mx.ones_like(x), lambda x: np.ones_like(x), _ins((2, 0, 3)),
      dtypes=A_REAL, variant="empty")
_case("ones_like", lambda x: mx.ones_like(x), lambda x: np.ones_like(x), _ins((3, 4)),
      dtypes=A_REAL)
_case("ones_like", lambda x: mx.ones_like(x, dtype=mx.float16),
      lambda x: np.ones(x.shape), _ins((3,)), dtypes=("int32", "bool"),
      out_dtype=_const("float16"), variant="dtype")
_case("full_like", lambda x: mx.full_like(x, 2), lambda x: np.full_like(x, 2), _ins((2, 3)),
      dtypes=A_NUMERIC)
_case("full_like", lambda x, v: mx.full_like(x, v), lambda x, v: np.broadcast_to(v, x.shape),
      _ins((2, 3), (3,)), dtypes=("float32", "int16"), variant="array_vals")
_case("empty_like", lambda x: mx.empty_like(x),
      lambda x: np.zeros_like(x), _ins((2, 3)), dtypes=("float32",))
_case("empty", lambda dt: mx.empty((2, 3), dt), lambda dt: np.zeros((2, 3)),
      dtypes=("float32", "int32"))

# -- eye / identity / tri ---------------------------------------------------------------------
for _args, _v in (((4,), "square"), ((3, 5, 1), "wide_k1"), ((5, 3, -2), "tall_km2"),
                  ((2, 3, 5), "k_out_of_range"), ((0,), "empty")):
    _case("eye", lambda dt, a=_args: mx.eye(*a, dtype=dt),
          lambda dt, a=_args: np.eye(*a, dtype=_ref_dtype(dt)), dtypes=ALL_REAL, variant=_v)
    _case("tri", lambda dt, a=_args: mx.tri(*a, dtype=dt),
          lambda dt, a=_args: np.tri(*a, dtype=_ref_dtype(dt)), dtypes=ALL_REAL, variant=_v)
_case("identity", lambda dt: mx.identity(3, dt), lambda dt: np.identity(3, _ref_dtype(dt)),
      dtypes=ALL_REAL)
_case("tri", lambda dt: mx.tri(3, 4), lambda dt: np.tri(3, 4), variant="default_dtype")

# -- tril / triu ------------------------------------------------------------------------------
for _shape in ((4, 4), (3, 5), (2, 4, 3), (0, 3)):
    for _k in (0, 1, -2):
        _v = f"{'x'.join(map(str, _shape))}_k{_k}"
        _case("tril", lambda x, k=_k: mx.tril(x, k), lambda x, k=_k: np.tril(x, k),
              _ins(_shape), dtypes=A_REAL if _k == 0 else ("float32", "int32"), variant=_v,
              differentiable=True)
        _case("triu", lambda x, k=_k: mx.triu(x, k), lambda x, k=_k: np.triu(x, k),
              _ins(_shape), dtypes=A_REAL if _k == 0 else ("float32", "int32"), variant=_v,
              differentiable=True)

# -- meshgrid ---------------------------------------------------------------------------------
for _ix in ("xy", "ij"):
    for _sparse in (False, True):
        _case("meshgrid", lambda x, y, z, i=_ix, s=_sparse: mx.meshgrid(x, y, z, indexing=i,
                                                                      sparse=s),
              lambda x, y, z, i=_ix, s=_sparse: np.meshgrid(x, y, z, indexing=i, sparse=s),
              _ins((3,), (2,), (4,)), dtypes=("float32", "int32"),
              variant=f"{_ix}{'_sparse' if _sparse else ''}", differentiable=True)
_case("meshgrid", lambda x, y: mx.meshgrid(x, y), lambda x, y: np.meshgrid(x, y),
      _ins((3,), (0,)), dtypes=("float32",), variant="empty")
_case("meshgrid", lambda x, y: mx.meshgrid(x, y), lambda x, y: np.meshgrid(x, y),
      _ins((2, 2), (3,)), dtypes=("float32", "bool"), variant="flattens")

# -- asarray ----------------------------------------------------------------------------------
_case("asarray", lambda x: mx.asarray(x), lambda x: x, _ins((2, 3)), dtypes=A_REAL,
      exact=True, differentiable=True)

# -- windows (issue 13): float32 formulas, as MLX -----------------------------------------------
for _w in ("bartlett", "hanning", "hamming", "blackman"):
    _case(_w, lambda dt, _w=_w: getattr(mx, _w)(7), lambda dt, _w=_w: getattr(np, _w)(7),
          atol=1e-6)
