"""Op table: elementwise (unary math, arithmetic, comparisons, logic, predicates).

References are NumPy on float64 (complex128) copies of the inputs, written independently of the
implementation where the semantics differ from NumPy's defaults (MLX's sign(nan) == 0, floor
division of floats as floor(a / b), integer math in float32). Float inputs include the edge
values 0, -0, +-inf and nan wherever the function is defined on them.
"""
import math

import ml_dtypes
import numpy as np

import braze.core as mx

from . import INTS, SINTS, UINTS, OpCase

FLOATS = ("float16", "bfloat16", "float32", "float64")
REAL = ("bool",) + INTS + FLOATS
NUMERIC = INTS + FLOATS
C = ("complex64",)
EDGES = (0.0, -0.0, math.inf, -math.inf, math.nan)

CASES = []


def _np_dtype(dt):
    return ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt)


# -- sample inputs -------------------------------------------------------------------------------
_FLOAT_RANGES = {  # domain name -> (low, high) for floats
    "any": (-3.0, 3.0), "pos": (0.1, 5.0), "unit": (-0.95, 0.95), "ge1": (1.05, 5.0),
    "gtm1": (-0.9, 4.0), "wide": (-100.0, 100.0), "nz": (-3.0, 3.0),
}
_INT_VALUES = {  # domain name -> (signed values, unsigned values)
    "any": (range(-5, 6), range(0, 11)), "pos": (range(1, 11), range(1, 11)),
    "unit": ((-1, 0, 1), (0, 1)), "ge1": (range(1, 11), range(1, 11)),
    "gtm1": (range(0, 11), range(0, 11)), "wide": (range(-100, 101), range(0, 201)),
    "nz": ((-5, -3, -2, -1, 1, 2, 3, 5), (1, 2, 3, 5)),
}


def gen(rng, dt, shape=(3, 4), domain="any", edges=()):
    """Values of dtype `dt` in `domain`; floats get `edges` appended along a flattened copy."""
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt == "complex64":
        lo, hi = _FLOAT_RANGES[domain]
        z = rng.uniform(lo, hi, shape) + 1j * rng.uniform(-2, 2, shape)
        return z.astype(np.complex64)
    if dt in INTS:
        vals = _INT_VALUES[domain][1 if dt in UINTS else 0]
        return rng.choice(np.array(list(vals)), size=shape).astype(dt)
    if domain == "pow2":  # exact divisors: no rounding can decide a floor
        return rng.choice([-4.0, -2.0, -0.5, 0.25, 0.5, 1.0, 2.0], shape).astype(_np_dtype(dt))
    lo, hi = _FLOAT_RANGES[domain]
    x = rng.uniform(lo, hi, shape).astype(_np_dtype(dt))
    if edges:
        if dt == "bfloat16":  # the driver's "inputs unchanged" check sees bfloat16 nan != nan
            edges = tuple(e for e in edges if not math.isnan(e))
        x = np.concatenate([x.reshape(-1), np.array(edges, dtype=x.dtype)])
    return x


def _ref(fn, float_out=False):
    """A NumPy reference: float64/complex128 inputs (ints too when the op computes in float),
    warnings silenced."""
    def ref(*xs):
        xs = [x.astype(np.complex128) if x.dtype.kind == "c" else
              x.astype(np.float64) if x.dtype.kind == "f" or
              (float_out and x.dtype.kind in "biu") else x for x in xs]
        with np.errstate(all="ignore"):
            return fn(*xs)
    return ref


def _same(dt):
    return dt


def _float_out(dt):
    return dt if dt in FLOATS or dt in C else "float32"


def _bool_out(dt):
    return "bool"


def _real_out(dt):
    return "float32" if dt == "complex64" else dt


def _add_case(name, mx_fn, ref, make_inputs, dtypes, edges, variant="", **kw):
    """Append the case; `make_inputs(rng, dt, edges)` builds its inputs.

    Finite differences are undefined at non-finite inputs (and one NaN makes the whole
    scalarized sum NaN), so a differentiable case with edge values is differentiated through a
    second "smooth" variant: the same inputs without the edges, in float32 and float64.
    """
    smooth = bool(edges) and kw.get("differentiable", True) and "grad_inputs" not in kw
    if smooth:
        kw["grad_inputs"] = ()  # the edge values: forward and vmap only

    def inputs(rng, dt):
        return make_inputs(rng, dt, edges)
    CASES.append(OpCase(name, mx_fn, ref, inputs, dtypes, variant=variant, **kw))
    fdts = tuple(d for d in ("float32", "float64") if d in dtypes)
    if smooth and fdts:
        kw.pop("grad_inputs")

        def smooth_inputs(rng, dt):
            return make_inputs(rng, dt, ())
        CASES.append(OpCase(name, mx_fn, ref, smooth_inputs, fdts,
                            variant=f"{variant},smooth" if variant else "smooth", **kw))


# -- unary -----------------------------------------------------------------------------------
def unary(name, mx_fn, np_fn, dtypes, domain="any", edges=EDGES, out=_same, float_out=False,
          variant="", **kw):
    def inputs(rng, dt, edges):
        return (gen(rng, dt, domain=domain, edges=edges),)
    _add_case(name, mx_fn, _ref(np_fn, float_out), inputs, dtypes, edges, out_dtype=out,
              variant=variant, **kw)


def math1(name, np_fn, domain="any", complex_ok=True, edges=EDGES, **kw):
    """A math function: floats keep their dtype, bool/ints compute in float32."""
    unary(name, getattr(mx, name), np_fn, REAL + (C if complex_ok else ()), domain, edges,
          out=_float_out, float_out=True, **kw)


def _erfinv_ref(y):
    """Newton on math.erf (float64), independent of SciPy."""
    out = np.empty_like(y)
    for i, v in enumerate(y.reshape(-1)):
        if math.isnan(v) or abs(v) > 1:
            out.reshape(-1)[i] = math.nan
        elif abs(v) == 1:
            out.reshape(-1)[i] = math.copysign(math.inf, v)
        else:
            x = 0.0
            for _ in range(100):
                step = (math.erf(x) - v) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
                x -= step
                if abs(step) < 1e-15:
                    break
            out.reshape(-1)[i] = x
    return out


def _sign_ref(x):
    if x.dtype.kind == "c":
        a = np.abs(x)
        return np.where(a == 0, 0, x / np.where(a == 0, 1, a))
    if x.dtype.kind == "b":
        return x
    r = np.sign(x)
    return np.where(np.isnan(r), 0, r) if x.dtype.kind == "f" else r


math1("sqrt", np.sqrt, "pos")
math1("rsqrt", lambda x: 1 / np.sqrt(x), "pos")
math1("exp", np.exp, "any")
math1("expm1", np.expm1, "any", complex_ok=False)
math1("log", np.log, "pos")
math1("log2", np.log2, "pos")
math1("log10", np.log10, "pos")
math1("log1p", np.log1p, "gtm1")
math1("sin", np.sin, "any")
math1("cos", np.cos, "any")
math1("tan", np.tan, "unit")
math1("arcsin", np.arcsin, "unit")
math1("arccos", np.arccos, "unit")
math1("arctan", np.arctan, "any")
math1("sinh", np.sinh, "any")
math1("cosh", np.cosh, "any")
math1("tanh", np.tanh, "any")
math1("arcsinh", np.arcsinh, "any")
math1("arccosh", np.arccosh, "ge1")
math1("arctanh", np.arctanh, "unit")
math1("erf", np.vectorize(math.erf, otypes=[np.float64]), "any", complex_ok=False)
math1("erfinv", _erfinv_ref, "unit", complex_ok=False, rtol=1e-4)
math1("sigmoid", lambda x: 1 / (1 + np.exp(-x)), "any", complex_ok=False)
math1("degrees", np.degrees, "any", complex_ok=False)
math1("radians", np.radians, "any", complex_ok=False)
math1("reciprocal", lambda x: 1 / x, "pos")
# the MLX aliases are the same functions
unary("acos", mx.acos, np.arccos, ("float32", "float64"), "unit")
unary("atanh", mx.atanh, np.arctanh, ("float32", "float64"), "unit")


def _nan_to_num_cases():
    """nan -> 0, +-inf -> the finite extremes of the input's own dtype."""
    def inputs(rng, dt, edges):
        return (gen(rng, dt, domain="any", edges=edges),)
    for dt in FLOATS:
        def np_fn(x, dt=dt):
            fi = ml_dtypes.finfo(_np_dtype(dt))
            return np.nan_to_num(x, nan=0.0, posinf=float(fi.max), neginf=float(fi.min))
        _add_case("nan_to_num", mx.nan_to_num, np_fn, inputs, (dt,), EDGES, variant=dt,
                  rtol=1e-6, atol=0)
    _add_case("nan_to_num", lambda x: mx.nan_to_num(x, nan=1.5, posinf=7.0, neginf=-7.0),
              lambda x: np.nan_to_num(x, nan=1.5, posinf=7.0, neginf=-7.0), inputs, FLOATS,
              EDGES, variant="values")
    CASES.append(OpCase("nan_to_num", mx.nan_to_num, lambda x: x,
                        lambda rng, dt: (gen(rng, dt),), ("bool",) + INTS, variant="ints",
                        differentiable=False))


unary("abs", mx.abs, np.abs, REAL + C, out=_real_out)
unary("negative", mx.negative, np.negative, NUMERIC + C)
unary("positive", mx.positive, lambda x: x, REAL + C)
unary("sign", mx.sign, _sign_ref, REAL + C)
unary("square", mx.square, lambda x: x * x if x.dtype.kind != "b" else x, REAL + C)
unary("floor", mx.floor, np.floor, REAL, differentiable=False)
unary("ceil", mx.ceil, np.ceil, REAL, differentiable=False)
unary("trunc", mx.trunc, np.trunc, REAL, differentiable=False)
unary("round", mx.round, np.round, REAL + C, differentiable=False)
unary("round", lambda x: mx.round(x, 1), lambda x: np.round(x, 1), FLOATS, "wide",
      variant="decimals=1", differentiable=False)
unary("round", lambda x: mx.round(x, -1), lambda x: np.round(x, -1), NUMERIC, "wide",
      variant="decimals=-1", differentiable=False)
unary("logical_not", mx.logical_not, np.logical_not, REAL + C, out=_bool_out,
      differentiable=False)
unary("bitwise_invert", mx.bitwise_invert, np.invert, ("bool",) + INTS, differentiable=False)
unary("isnan", mx.isnan, np.isnan, REAL + C, out=_bool_out, differentiable=False)
unary("isinf", mx.isinf, np.isinf, REAL, out=_bool_out, differentiable=False)
unary("isfinite", mx.isfinite, np.isfinite, REAL, out=_bool_out, differentiable=False)
unary("isposinf", mx.isposinf, np.isposinf, REAL, out=_bool_out, differentiable=False)
unary("isneginf", mx.isneginf, np.isneginf, REAL, out=_bool_out, differentiable=False)
_nan_to_num_cases()
unary("real", mx.real, np.real, REAL + C, out=_real_out)
unary("imag", mx.imag, np.imag, REAL + C, out=_real_out)
unary("conj", mx.conj, np.conj, REAL + C)
unary("conjugate", mx.conjugate, np.conj, C)
unary("stop_gradient", mx.stop_gradient, lambda x: x, REAL + C, differentiable=False)
# float64 -> float32 rounds a 1e-6 finite-difference step away: differentiated through the
# float32 -> float64 variant instead (the same AsType rule, finite differences in float32)
unary("astype", lambda x: mx.astype(x, mx.float32), lambda x: x.astype(np.float32), REAL,
      edges=(), variant="float32", out=lambda dt: "float32", grad_inputs=())
unary("astype", lambda x: mx.astype(x, mx.float64), lambda x: x.astype(np.float64),
      ("float16", "float32"), edges=(), variant="float64", out=lambda dt: "float64")
unary("astype", lambda x: x.astype(mx.int32), lambda x: np.trunc(x).astype(np.int32), REAL,
      "wide", edges=(), variant="int32", out=lambda dt: "int32", differentiable=False)
unary("astype", lambda x: x.astype(mx.bool_), lambda x: x != 0, REAL + C, variant="bool",
      out=_bool_out, differentiable=False)


# -- binary --------------------------------------------------------------------------------------
def binary(name, mx_fn, np_fn, dtypes, da="any", db="any", edges=(), shapes=((3, 4), (4,)),
           out=_same, float_out=False, variant="", **kw):
    """Two array inputs (broadcasting (3, 4) against (4,) by default)."""
    def inputs(rng, dt, edges):
        a = gen(rng, dt, shapes[0], da)
        b = gen(rng, dt, shapes[1], db)
        if edges and dt in FLOATS:  # every edge against every edge, plus against 1 and -1
            e = edges + (1.0, -1.0)
            if dt == "bfloat16":  # see gen()
                e = tuple(v for v in e if not math.isnan(v))
            e = np.array(e, dtype=a.dtype)
            a = np.concatenate([a.reshape(-1), np.repeat(e, len(e))])
            b = np.concatenate([np.broadcast_to(b, shapes[0]).reshape(-1), np.tile(e, len(e))])
        return a, b
    _add_case(name, mx_fn, _ref(np_fn, float_out), inputs, dtypes, edges, out_dtype=out,
              variant=variant, **kw)


def _bool_sub(a, b):
    return a ^ b if a.dtype.kind == "b" else a - b


def _floor_div_ref(a, b):
    if a.dtype.kind in "biu":  # exact in float64 for these magnitudes
        r = np.floor(a.astype(np.float64) / b.astype(np.float64))
        return r.astype(a.dtype) if a.dtype.kind != "b" else r != 0
    return np.floor(a / b)


def _remainder_ref(a, b):
    if a.dtype.kind in "biu":
        af, bf = a.astype(np.float64), b.astype(np.float64)
        r = af - bf * np.floor(af / bf)
        return r.astype(a.dtype) if a.dtype.kind != "b" else r != 0
    return np.remainder(a, b)


def _power_ref(a, b):
    if a.dtype.kind == "b":
        return a | ~b
    return np.power(a, b)


binary("add", mx.add, np.add, REAL + C, edges=EDGES)
binary("subtract", mx.subtract, _bool_sub, REAL + C, edges=EDGES)
binary("multiply", mx.multiply, np.multiply, REAL + C, edges=EDGES)
binary("divide", mx.divide, np.divide, NUMERIC + C, db="pos", edges=EDGES, out=_float_out,
       float_out=True)
binary("divide", mx.divide, np.divide, ("bool",), db="pos", out=_float_out, float_out=True,
       variant="bool")  # True / False -> inf, False / False -> nan, as in NumPy
binary("floor_divide", mx.floor_divide, _floor_div_ref, NUMERIC, db="pos")
binary("floor_divide", mx.floor_divide, _floor_div_ref, SINTS + FLOATS, da="wide", db="nz",
       variant="signs", shapes=((3, 4), (3, 4)))
# power-of-two divisors keep the float results exact, so no rounding decides a floor
binary("floor_divide", mx.floor_divide, _floor_div_ref, FLOATS, da="wide", db="pow2",
       variant="pow2", shapes=((3, 4), (3, 4)))
binary("remainder", mx.remainder, _remainder_ref, NUMERIC, da="wide", db="pos")
binary("remainder", mx.remainder, _remainder_ref, SINTS, da="wide", db="nz", variant="signs")
binary("power", mx.power, _power_ref, FLOATS + C, da="pos", edges=EDGES, differentiable=True)
binary("power", mx.power, _power_ref, ("bool",) + INTS, da="any", db="gtm1", variant="ints")
binary("maximum", mx.maximum, np.maximum, REAL, edges=EDGES)
binary("minimum", mx.minimum, np.minimum, REAL, edges=EDGES)
binary("logaddexp", mx.logaddexp, np.logaddexp, REAL, edges=EDGES, out=_float_out,
       float_out=True)
binary("arctan2", mx.arctan2, np.arctan2, REAL, edges=EDGES, out=_float_out, float_out=True)
binary("atan2", mx.atan2, np.arctan2, ("float32", "float64"))
binary("pow", mx.pow, np.power, ("float32", "float64"), da="pos")
for _n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    binary(_n, getattr(mx, _n), getattr(np, _n), ("bool",) + INTS, da="wide", db="wide",
           differentiable=False)
for _n, _np in (("left_shift", np.left_shift), ("right_shift", np.right_shift)):
    binary(_n, getattr(mx, _n), _np, INTS, da="wide", db="ge1", differentiable=False)
    binary(_n, getattr(mx, _n), lambda a, b, _np=_np: _np(a.astype(np.uint8), b.astype(np.uint8)),
           ("bool",), variant="bool", out=lambda dt: "uint8", differentiable=False)
binary("bitwise_left_shift", mx.bitwise_left_shift, np.left_shift, ("int32",), db="ge1",
       differentiable=False)
for _n in ("logical_and", "logical_or", "logical_xor"):
    binary(_n, getattr(mx, _n), getattr(np, _n), REAL + C, edges=EDGES, out=_bool_out,
           differentiable=False)
for _n in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    binary(_n, getattr(mx, _n), getattr(np, _n), REAL, edges=EDGES, out=_bool_out,
           differentiable=False)
binary("equal", mx.equal, np.equal, C, out=_bool_out, variant="complex", differentiable=False)
binary("isclose", mx.isclose, np.isclose, NUMERIC, edges=EDGES, out=_bool_out,
       differentiable=False)
binary("isclose", lambda a, b: mx.isclose(a, b, equal_nan=True),
       lambda a, b: np.isclose(a, b, equal_nan=True), FLOATS, edges=EDGES, out=_bool_out,
       variant="equal_nan", differentiable=False)
binary("isclose", lambda a, b: mx.isclose(a, a + b * 1e-3, rtol=1e-2, atol=0.0),
       lambda a, b: np.isclose(a, a + b * 1e-3, rtol=1e-2, atol=0.0), ("float32",),
       out=_bool_out, variant="near", differentiable=False)
binary("allclose", mx.allclose, lambda a, b: np.array(np.allclose(a, b)), NUMERIC,
       out=_bool_out, differentiable=False)
binary("allclose", lambda a, b: mx.allclose(a, a + b * 1e-7),
       lambda a, b: np.array(np.allclose(a, a + b * 1e-7)), ("float32",),
       out=_bool_out, variant="close", differentiable=False)
binary("array_equal", mx.array_equal, lambda a, b: np.array(np.array_equal(a, b)), REAL,
       shapes=((3, 4), (3, 4)), out=_bool_out, differentiable=False)
binary("array_equal", lambda a, b: mx.array_equal(a, a), lambda a, b: np.array(True), REAL,
       shapes=((3, 4), (3, 4)), out=_bool_out, variant="same", differentiable=False)
binary("array_equal", lambda a, b: mx.array_equal(a, b), lambda a, b: np.array(False), REAL,
       out=_bool_out, variant="shapes", differentiable=False)


def _divmod_case(dtypes, da, db, variant):
    def inputs(rng, dt):
        return gen(rng, dt, (3, 4), da), gen(rng, dt, (4,), db)

    def ref(a, b):
        return [_floor_div_ref(a, b), _remainder_ref(a, b)]
    CASES.append(OpCase("divmod", lambda a, b: mx.divmod(a, b), _ref(ref), inputs, dtypes,
                        variant=variant, differentiable=False))


_divmod_case(INTS, "wide", "pos", "")
_divmod_case(SINTS, "wide", "nz", "signs")
_divmod_case(FLOATS, "wide", "pow2", "floats")


# -- ternary and clip -----------------------------------------------------------------------------
def _where_inputs(rng, dt):
    return rng.random((3, 4)) < 0.5, gen(rng, dt, (3, 4)), gen(rng, dt, (4,))


CASES.append(OpCase("where", mx.where, _ref(np.where), _where_inputs, REAL + C,
                    grad_inputs=(1, 2)))
CASES.append(OpCase(
    "where", lambda c, x, y: mx.where(c, x, 2), lambda c, x, y: np.where(c, x, 2),
    _where_inputs, NUMERIC, variant="scalar", grad_inputs=(1,)))
CASES.append(OpCase(
    "where", lambda c, x, y: mx.where(x > 0, x, y), _ref(lambda c, x, y: np.where(x > 0, x, y)),
    _where_inputs, NUMERIC, variant="computed-cond", grad_inputs=(1, 2)))


def _clip_inputs(rng, dt, edges):
    return (gen(rng, dt, (3, 4), "wide", edges=edges),)


_CLIP_EDGES = (math.inf, -math.inf, math.nan)
_add_case("clip", lambda a: mx.clip(a, 5, 50), _ref(lambda a: np.clip(a, 5, 50)), _clip_inputs,
          NUMERIC, _CLIP_EDGES)
_add_case("clip", lambda a: mx.clip(a, None, 3), _ref(lambda a: np.minimum(a, 3)),
          _clip_inputs, NUMERIC, _CLIP_EDGES, variant="max-only")
_add_case("clip", lambda a: mx.clip(a, -2.5, None), _ref(lambda a: np.maximum(a, -2.5)),
          _clip_inputs, SINTS + FLOATS, _CLIP_EDGES, variant="min-only",
          out_dtype=lambda dt: dt if dt in FLOATS else "float32")


def _clip_arrays_inputs(rng, dt):
    lo = gen(rng, dt, (4,), "any")
    return gen(rng, dt, (3, 4), "wide"), lo, lo + np.array(3, dtype=lo.dtype)


CASES.append(OpCase("clip", mx.clip, _ref(lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi)),
                    _clip_arrays_inputs, ("int32", "float32", "float64"), variant="arrays"))
