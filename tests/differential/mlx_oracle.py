"""MLX as a differential oracle: run the same program on braze and on MLX, compare the results.

- `to_mlx(fn)` turns a program written against braze (a function of the op table, a lambda,
  a `functools.partial`) into the *same* program against MLX: every braze module, function and
  dtype it reaches (globals, closures, defaults, partial arguments, helper functions of the same
  module) is replaced by MLX's object of the same name. Nothing is re-implemented.
- `braze_input` / `mlx_input` build identical arrays from a NumPy sample (float64 kept as
  float64; a dtype name becomes that library's dtype).
- `run(lib, fn, inputs)` evaluates and returns `("ok", [numpy results])` or
  `("raise", exception)`.
- `compare(...)` checks shape, dtype (by name) and values: exact for bool/integers, NaN
  positions equal, infinities equal, the sign of zero equal where asked, per-dtype tolerances.
"""
from __future__ import annotations

import functools
import types

import ml_dtypes
import mlx.core as mc
import mlx.nn
import mlx.optimizers
import mlx.utils
import numpy as np

import braze
import braze.core as bx
import braze.nn
import braze.optimizers
import braze.utils

BF16 = ml_dtypes.bfloat16
# results of the same computation in the same dtype on two implementations: a few ulps apart
# (transcendental functions use different approximations; reductions sum in other orders)
TOL = {"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2), "float32": (1e-5, 1e-6),
       "float64": (1e-6, 1e-9), "complex64": (1e-5, 1e-6)}

_PAIRS = ((bx, mc), (bx.fast, mc.fast), (bx.linalg, mc.linalg), (bx.fft, mc.fft),
          (bx.random, mc.random), (braze.nn, mlx.nn), (braze.nn.init, mlx.nn.init),
          (braze.nn.losses, mlx.nn.losses), (braze.optimizers, mlx.optimizers),
          (braze.utils, mlx.utils))
_MAP: dict = {}  # id(braze object) -> (braze object, MLX object)
for _b, _m in _PAIRS:
    _MAP[id(_b)] = (_b, _m)
    for _name in dir(_b):
        if _name.startswith("__") or not hasattr(_m, _name):
            continue
        _obj = getattr(_b, _name)
        if isinstance(_obj, (types.ModuleType, types.FunctionType, type, bx.Dtype)) or \
                callable(_obj):
            _MAP.setdefault(id(_obj), (_obj, getattr(_m, _name)))
_MAP[id(braze)] = (braze, mc)


class Unmapped(Exception):
    """A braze object the program uses has no MLX counterpart."""


def _is_braze(obj) -> bool:
    mod = getattr(obj, "__module__", None) or ""
    return mod == "braze" or mod.startswith("braze.") or (
        isinstance(obj, types.ModuleType) and obj.__name__.startswith("braze"))


def to_mlx(obj, _globals=None):
    """The MLX counterpart of `obj` (see the module doc); other values are returned as is."""
    if _globals is None:
        _globals = {}
    hit = _MAP.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    if isinstance(obj, bx.array):
        return mlx_input(to_numpy(bx, obj))
    if isinstance(obj, functools.partial):
        return functools.partial(to_mlx(obj.func, _globals),
                                 *[to_mlx(a, _globals) for a in obj.args],
                                 **{k: to_mlx(v, _globals) for k, v in obj.keywords.items()})
    if isinstance(obj, (list, tuple)):
        out = [to_mlx(v, _globals) for v in obj]
        if all(a is b for a, b in zip(out, obj)):
            return obj
        return type(obj)(out) if isinstance(obj, list) else tuple(out)
    if isinstance(obj, dict):
        return {k: to_mlx(v, _globals) for k, v in obj.items()}
    if isinstance(obj, types.FunctionType):
        if _is_braze(obj):
            raise Unmapped(f"{obj.__module__}.{obj.__qualname__}")
        return _rebuild(obj, _globals)
    if _is_braze(obj) and (callable(obj) or isinstance(obj, types.ModuleType)):
        raise Unmapped(repr(obj))
    return obj


def _mlx_globals(g: dict, cache: dict) -> dict:
    new = cache.get(id(g))
    if new is not None:
        return new
    new = {}
    cache[id(g)] = new
    for k, v in g.items():
        if k == "__builtins__":
            new[k] = v
            continue
        try:
            new[k] = to_mlx(v, cache)
        except Unmapped:
            pass  # only an error if the program actually reads it (NameError then)
    return new


def _rebuild(fn: types.FunctionType, cache: dict):
    g = _mlx_globals(fn.__globals__, cache)
    closure = None
    if fn.__closure__:
        cells = []
        for c in fn.__closure__:
            try:
                v = c.cell_contents
            except ValueError:  # an empty cell
                cells.append(types.CellType())
                continue
            cells.append(types.CellType(to_mlx(v, cache)))
        closure = tuple(cells)
    new = types.FunctionType(fn.__code__, g, fn.__name__,
                             to_mlx(fn.__defaults__, cache) if fn.__defaults__ else None,
                             closure)
    if fn.__kwdefaults__:
        new.__kwdefaults__ = to_mlx(fn.__kwdefaults__, cache)
    new.__qualname__ = fn.__qualname__
    return new


# -- inputs -----------------------------------------------------------------------------------
def lib_input(lib, x):
    """A table input for `lib` (braze.core or mlx.core): dtype names become dtypes, NumPy
    arrays become arrays (float64 kept as float64)."""
    if isinstance(x, str):
        return getattr(lib, "bool_" if x == "bool" else x)
    if isinstance(x, np.ndarray):
        return lib.array(x, dtype=lib.float64) if x.dtype == np.float64 else lib.array(x)
    return x


def braze_input(x):
    return lib_input(bx, x)


def mlx_input(x):
    return lib_input(mc, x)


# -- evaluation -------------------------------------------------------------------------------
def dtype_name(d) -> str:
    return str(d).rsplit(".", 1)[-1]


def to_numpy(lib, a) -> np.ndarray:
    """A result as NumPy (bfloat16 as ml_dtypes.bfloat16, exactly)."""
    if lib is mc:
        if a.dtype == mc.bfloat16:
            return np.array(a.astype(mc.float32)).astype(BF16)
        return np.array(a)
    return np.array(a, copy=True)


def _listify(r):
    return list(r) if isinstance(r, (list, tuple)) else [r]


_MLX_STREAM = [None]


def _mlx_stream():
    if _MLX_STREAM[0] is None:
        _MLX_STREAM[0] = mc.new_stream(mc.cpu)
    return _MLX_STREAM[0]


def _evaluate(lib, fn, inputs):
    out = _listify(fn(*inputs))
    lib.eval(*[o for o in out if isinstance(o, (bx.array, mc.array))])
    return out


def run(lib, fn, inputs):
    """("ok", [(dtype name, ndarray)]) or ("raise", exception)."""
    try:
        if lib is mc:
            # not `with mc.stream(...)`: MLX 0.32's context manager keeps the new stream as
            # the default when the body raises (later MLX users in this process would see it)
            prev = mc.default_stream(mc.cpu)
            mc.set_default_stream(_mlx_stream())
            try:
                out = _evaluate(lib, fn, inputs)
            finally:
                mc.set_default_stream(prev)
        else:
            out = _evaluate(lib, fn, inputs)
        res = []
        for o in out:
            if not isinstance(o, (bx.array, mc.array)):
                raise AssertionError(f"returned {type(o).__name__}, not an array")
            res.append((dtype_name(o.dtype), to_numpy(lib, o)))
        return "ok", res
    except AssertionError:
        raise
    except Exception as e:  # noqa: BLE001 - the oracle's exception is the expected result
        if lib is mc:
            # MLX 0.32 can leave a task counted as active when a kernel raises inside eval;
            # after ten of them every later eval on that stream waits forever. Drain what can
            # be drained and move on to a fresh stream.
            mc.synchronize(_mlx_stream())
            _MLX_STREAM[0] = None
        return "raise", e


ERRORS = (ValueError, TypeError, IndexError)


def describe_inputs(inputs) -> str:
    lines = []
    with np.printoptions(threshold=200, precision=9, floatmode="maxprec"):
        for i, x in enumerate(inputs):
            if isinstance(x, np.ndarray):
                lines.append(f"  x{i}: {x.dtype} {x.shape} = {np.array2string(x, separator=', ')}")
            else:
                lines.append(f"  x{i}: {x!r}")
    return "\n".join(lines)


def compare(got, want, *, program: str, inputs, rtol=None, atol=None, zero_sign=False):
    """`got` (braze) against `want` (MLX), both from `run`. Raises AssertionError with the
    program and its inputs."""
    where = f"\nprogram:\n{program}\ninputs:\n{describe_inputs(inputs)}"
    gk, gv = got
    wk, wv = want
    if wk == "raise":
        if gk != "raise":
            raise AssertionError(f"MLX raises {type(wv).__name__}: {wv}\nbraze returns "
                                 f"{[(d, a.shape) for d, a in gv]}{where}")
        if not isinstance(gv, ERRORS):
            raise AssertionError(f"MLX raises {type(wv).__name__}: {wv}\nbraze raises "
                                 f"{type(gv).__name__}: {gv}{where}")
        return
    if gk == "raise":
        raise AssertionError(f"braze raises {type(gv).__name__}: {gv}\nMLX returns "
                             f"{[(d, a.shape) for d, a in wv]}{where}") from gv
    if len(gv) != len(wv):
        raise AssertionError(f"{len(gv)} results, MLX has {len(wv)}{where}")
    for k, ((gd, g), (wd, w)) in enumerate(zip(gv, wv)):
        tag = f"result {k}: "
        if gd != wd:
            raise AssertionError(f"{tag}dtype {gd}, MLX {wd}{where}")
        if g.shape != w.shape:
            raise AssertionError(f"{tag}shape {g.shape}, MLX {w.shape}{where}")
        assert_values(g, w, gd, rtol=rtol, atol=atol, zero_sign=zero_sign, msg=tag + where)


def assert_values(g, w, dt, rtol=None, atol=None, zero_sign=False, msg=""):
    if dt == "bool" or np.dtype(g.dtype).kind in "biu":
        np.testing.assert_array_equal(g, w, err_msg=msg)
        return
    r0, a0 = TOL.get(dt, (1e-5, 1e-6))
    rtol = r0 if rtol is None else max(rtol, r0)
    atol = a0 if atol is None else max(atol, a0)
    big = np.complex128 if g.dtype.kind == "c" else np.float64
    gg, ww = g.astype(big), w.astype(big)
    np.testing.assert_allclose(gg, ww, rtol=rtol, atol=atol, equal_nan=True, err_msg=msg)
    if zero_sign and g.dtype.kind == "f":
        z = (gg == 0) & (ww == 0)
        bad = np.signbit(gg) != np.signbit(ww)
        if np.any(z & bad):
            raise AssertionError(f"sign of zero differs at {np.argwhere(z & bad)[:5].tolist()}"
                                 f"\n braze: {g[z & bad][:5]}\n MLX:   {w[z & bad][:5]}{msg}")
