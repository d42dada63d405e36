"""`mx.random`: splittable counter-based keys and MLX's distributions.

Every sampler is a composite of ordinary ops over one primitive, `RandomBits` (Threefry-2x32,
MLX's algorithm and bit layout: the same key gives the same bits as MLX), so samplers trace,
differentiate (through loc/scale/low/high), vmap (over batched keys) and compile like any op.

The implicit key is per thread, as in MLX: every thread starts from the key of a seed taken from
the clock once per process; `seed` reseeds the calling thread only; each draw without `key=`
splits the thread's key into (new key, subkey) and draws from the subkey. `key=` makes a draw
pure. `state` is the process-wide sentinel standing for the calling thread's key: a one-element
sequence (`len(state) == 1`, `state[0]`, `state[-1]`, `iter(state)`) that `mx.compile` captures
through the capture protocol (`__braze_capture__` reads the thread's key, `__braze_update__`
replaces it), so `compile(f, inputs=mx.random.state, outputs=mx.random.state)` threads the key
through the compiled graph.
"""
from __future__ import annotations

import math
import numbers
import threading
import time
from typing import Optional, Sequence, Union

import numpy as np

from . import dtypes as D
from . import ops as _ops
from .array import TraceState, array
from .device import register_clear_hook, to_stream
from .np_errors import ignoring
from .ops import (
    add,
    argmax,
    argsort,
    astype,
    cumsum,
    divide,
    equal,
    erf,
    erfinv,
    exp,
    expand_dims,
    floor,
    isinf,
    less,
    log,
    log1p,
    matmul,
    maximum,
    minimum,
    multiply,
    negative,
    reshape,
    searchsorted,
    sign,
    squeeze,
    subtract,
    take,
    view,
    where,
)
from .ops._helpers import check_shape
from .ops._typing import ArrayLike, Dtype, StreamOrDevice
from .prims import random as _random_prims
from .prims.base import bind
from .prims.random import CovarianceSqrt, RandomBits

__all__ = ["seed", "key", "split", "state", "bits", "uniform", "normal", "randint",
           "bernoulli", "truncated_normal", "gumbel", "categorical", "laplace", "permutation",
           "multivariate_normal"]

_F32_BELOW_ONE = float(np.nextafter(np.float32(1.0), np.float32(0.0)))
_F32_ABOVE_MINUS_ONE = float(np.nextafter(np.float32(-1.0), np.float32(0.0)))
_U32_MAX = float(np.iinfo(np.uint32).max)
# the float just above UINT32_MAX in float32 (2^32): p * this >= any 32-bit draw when p >= 1
_BERNOULLI_SCALE = float(np.nextafter(np.float32(_U32_MAX), np.float32(np.inf)))


def _below_one(dtype: D.Dtype) -> float:
    """The largest value below 1.0 in `dtype` (as a float32 number, like MLX's)."""
    if dtype.size >= 4:
        return _F32_BELOW_ONE
    return float(np.nextafter(np.asarray(1.0, dtype.np_dtype), np.asarray(0.0, dtype.np_dtype)))


# -- keys and the per-thread state --------------------------------------------------------------
def _seed_value(seed, op: str) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (numbers.Integral, np.integer)):
        raise TypeError(f"[{op}] Expected an int seed, got {type(seed).__name__}: {seed!r}.")
    s = int(seed)
    if not 0 <= s < 2**64:
        raise ValueError(f"[{op}] The seed must be in [0, 2**64), got {s}.")
    return s


def key(seed: int) -> array:
    """A PRNG key from a seed: the array [seed >> 32, seed & 0xFFFFFFFF] of uint32 (MLX's)."""
    s = _seed_value(seed, "key")
    return array(np.array([(s >> 32) & 0xFFFFFFFF, s & 0xFFFFFFFF], np.uint32))


#: the clock seed every thread's key starts from (MLX: milliseconds since the epoch, once)
_INITIAL_SEED = int(time.time() * 1000) & (2**64 - 1)


class _ThreadKey(threading.local):
    def __init__(self):
        self.key = None


_tls = _ThreadKey()


def _get_key() -> array:
    k = _tls.key
    if k is None:
        k = _tls.key = key(_INITIAL_SEED)
    return k


def _set_key(k) -> None:
    _tls.key = k


def reset_thread_state() -> None:
    """Put the calling thread's key back to its start value (MLX's `clear_streams` does this)."""
    _tls.key = None


register_clear_hook(reset_thread_state)  # mx.clear_streams() resets the key, as in MLX


def seed(seed: int) -> None:
    """Seed the calling thread's implicit PRNG key."""
    _set_key(key(_seed_value(seed, "seed")))


class _RandomState:
    """`mx.random.state`: one process-wide object standing for the calling thread's key.

    Behaves as a one-element sequence holding the key; `mx.compile(inputs=, outputs=)` reads
    and replaces that key through `__braze_capture__` / `__braze_update__`."""

    __slots__ = ()
    __braze_fixed_aval__ = True  # the key is always uint32[2] (see compile's capture protocol)

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i):
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (numbers.Integral, np.integer)):
            raise TypeError(f"random state indices must be integers, not {type(i).__name__}")
        if int(i) not in (0, -1):
            raise IndexError("random state index out of range")
        return _get_key()

    def __iter__(self):
        yield _get_key()

    def __repr__(self) -> str:
        return f"<braze.core.random.state: {_get_key()!r}>"

    # -- the compile capture protocol ----------------------------------------------------------
    def __braze_capture__(self) -> array:
        return _get_key()

    def __braze_update__(self, value) -> None:
        if not isinstance(value, array):
            raise TypeError(f"[random.state] Expected the new key to be an array, got "
                            f"{type(value).__name__}.")
        _set_key(value)


state = _RandomState()

_SPLIT2 = RandomBits((2, 2), 4)


def _next_key() -> array:
    """Split the thread's key: keep the first half as the new key, return the second."""
    both = bind(_SPLIT2, (_get_key(),))
    _set_key(both[0])
    return both[1]


def _check_key(k, op: str) -> array:
    if not isinstance(k, array):
        raise TypeError(f"[{op}] Expected the key to be an array, got {type(k).__name__}.")
    if k.dtype != D.uint32:
        raise ValueError(f"[{op}] Expected key type uint32 but received {k.dtype}.")
    if tuple(k.shape) != (2,):
        raise ValueError(f"[{op}] Expected key shape (2) but received {tuple(k.shape)}.")
    return k


def _resolve_key(k, op: str) -> array:
    """The key a draw uses: the given one (checked by `_prepare`), else the next subkey of
    the calling thread (which advances its key)."""
    return _next_key() if k is None else k


def _prepare(k, stream, op: str):
    to_stream(stream, op)
    if k is not None:
        _check_key(k, op)


def _shape(shape, op: str) -> tuple:
    try:
        return check_shape(shape, op)
    except ValueError:
        raise ValueError(f"[{op}] Negative dimensions are not allowed: {shape!r}.") from None


def _dtype(dtype, op: str, default: D.Dtype = D.float32) -> D.Dtype:
    return default if dtype is None else D.to_dtype(dtype, op)


def _floating(dtype: D.Dtype, op: str, what: str = "floating point types") -> None:
    if not D.issubdtype(dtype, D.DtypeCategory.floating):
        raise ValueError(f"[{op}] Only {what} are supported, got {dtype}.")


def _to_array(x, op: str, what: str) -> array:
    """MLX's `to_array` for `scalar | array` arguments (int -> int32, float -> float32)."""
    if isinstance(x, array):
        return x
    if isinstance(x, (numbers.Number, np.generic, np.ndarray, list, tuple)):
        try:
            return array(x)
        except (TypeError, ValueError) as e:
            raise TypeError(f"[{op}] Cannot convert {what}={x!r} to an array: {e}") from None
    raise TypeError(f"[{op}] Expected a scalar or an array for {what}, got "
                    f"{type(x).__name__}.")


def _is_real_scalar(x) -> bool:
    return isinstance(x, (numbers.Real, np.integer, np.floating)) and not isinstance(
        x, (bool, np.bool_))


def _fits(shape: tuple, shapes, op: str) -> None:
    """The parameters' shapes must broadcast to the requested shape (MLX's check)."""
    out = _broadcast((shape,) + tuple(shapes), op)
    if out != shape:
        raise ValueError(f"[{op}] Cannot generate random values of shape {shape} from "
                         f"broadcasted shape {out}.")


def _broadcast(shapes, op: str) -> tuple:
    try:
        return tuple(_ops.broadcast_shapes(*shapes))
    except ValueError:
        pretty = " and ".join(str(tuple(s)) for s in shapes)
        raise ValueError(f"[{op}] Shapes {pretty} cannot be broadcast.") from None


# -- bits and split ---------------------------------------------------------------------------
def bits(shape: Sequence[int] = (), width: int = 4, key: Optional[array] = None,
         stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Random bits: an array of `shape` of uint32 (width 4), uint16 (2) or uint8 (1).

    The same key gives the same bits as MLX's `random::bits`."""
    shape = _shape(shape, "bits")
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or \
            int(width) not in (1, 2, 4):
        raise ValueError(f"[bits] Bit width must be in {{1, 2, 4}} but got {width!r}.")
    _prepare(key, stream, "bits")
    return bind(RandomBits(shape, int(width)), (_resolve_key(key, "bits"),))


def split(key: array, num: int = 2, stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Split a key into `num` subkeys: an array of shape (num, 2)."""
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)):
        raise TypeError(f"[split] Expected an int num, got {type(num).__name__}: {num!r}.")
    if num < 0:
        raise ValueError(f"[split] num must be non-negative, got {num}.")
    to_stream(stream, "split")
    _check_key(key, "split")
    return bind(RandomBits((int(num), 2), 4), (key,))


# -- uniform and friends ------------------------------------------------------------------------
_CONSTANTS: dict = {}  # (value, dtype name) -> a 0-d constant array (never handed out)
#: `mx.compile`, registered by braze.core.random (compile sits above this layer): an eager
#: normal draw's elementwise tail runs as one compiled kernel (`_eager`), as nn's activations do
COMPILE: list = [None]
_EAGER: dict = {}  # tail function -> its shapeless compiled version


def _constant(value: float, dtype: D.Dtype) -> array:
    """A 0-d array of `value`, made once: an eager draw used to make its constants per call."""
    key = (value, dtype.name)
    c = _CONSTANTS.get(key)
    if c is None:
        c = _CONSTANTS[key] = array(value, dtype)
    return c


def _eager(tail):
    """`tail` compiled shapeless, once the compile layer has registered itself and the native
    backend runs the draws' Threefry (else as it is): the ~8 elementwise nodes of an eager
    normal draw, erfinv's NumPy passes among them (35 us for 16 values), become one fused
    kernel."""
    c = _EAGER.get(tail)
    if c is None:
        make = COMPILE[0]
        if make is None or _random_prims._THREEFRY[0] is _random_prims.threefry2x32:
            return tail  # no native backend yet: a script's first draws import no Numba
        c = _EAGER[tail] = make(tail, shapeless=True)
    return c


def _uniform_tail(b, rng, lo, dtype: str, scaled: bool):
    """MLX's uniform from its bits b: min(b / UINT32_MAX, below_one) * rng + lo, in the dtype
    named `dtype` (a name: compile takes strings as arguments); without `scaled` (rng 1, lo 0:
    uniform's and bernoulli's defaults) the last two ops are left out: u >= 0, so `u * 1 + 0`
    is u, bit for bit."""
    dtype = D.to_dtype(dtype)
    u = divide(astype(b, D.float32), _constant(_U32_MAX, D.float32))
    u = astype(minimum(u, _constant(_below_one(dtype), D.float32)), dtype)
    return add(multiply(rng, u), lo) if scaled else u


def _normal_tail(b, rng, lo, applied, dtype: str):
    """`normal`'s samples from bits: sqrt(2) (times the scale) * erfinv(uniform in (-1, 1))."""
    u = _uniform_tail(b, rng, lo, "float32", True)
    return multiply(applied, astype(erfinv(u), D.to_dtype(dtype)))


def _uniform_parts(lo: array, hi: array, shape: tuple, dtype: D.Dtype, k: array, op: str):
    """(bits, high - low, low, whether the tail scales, whether it may run compiled) of
    `_uniform`: bounds that are evaluated single elements outside transforms are computed
    now, in NumPy as the graph would (and the tail may then run compiled)."""
    if (lo._data is not None and hi._data is not None and lo.size == 1 == hi.size
            and not TraceState.depth):
        npd = dtype.np_dtype
        lo_v, hi_v = lo._data.astype(npd), hi._data.astype(npd)
        with ignoring():
            rng_v = hi_v - lo_v
        rng, lo = array(rng_v, dtype), array(lo_v, dtype)
        scaled = not (rng_v.reshape(-1)[0] == 1 and lo_v.reshape(-1)[0] == 0
                      and rng.ndim <= len(shape))
        eager = True
    else:
        lo = astype(lo, dtype)
        rng = subtract(astype(hi, dtype), lo)
        scaled, eager = True, False
    _fits(shape, (rng.shape,), op)
    return bind(RandomBits(shape, 4), (k,)), rng, lo, scaled, eager


def _uniform(lo: array, hi: array, shape: tuple, dtype: D.Dtype, k: array, op: str) -> array:
    """MLX's uniform: min(bits / UINT32_MAX, below_one) * (high - low) + low."""
    b, rng, lo, scaled, _ = _uniform_parts(lo, hi, shape, dtype, k, op)
    return _uniform_tail(b, rng, lo, dtype.name, scaled)  # 4 ops: cheaper than a compiled call


def uniform(low: ArrayLike = 0, high: ArrayLike = 1, shape: Sequence[int] = (),
            dtype: Optional[Dtype] = D.float32, key: Optional[array] = None,
            stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Uniform samples in the half-open interval [low, high)."""
    op = "uniform"
    shape = _shape(shape, op)
    dtype = _dtype(dtype, op)
    if not D.issubdtype(dtype, D.DtypeCategory.floating):
        raise ValueError(f"[{op}] Can only generate uniform numbers with real floating point "
                         f"type, got {dtype}.")
    lo, hi = _to_array(low, op, "low"), _to_array(high, op, "high")
    _prepare(key, stream, op)
    _fits(shape, (lo.shape, hi.shape), op)
    return _uniform(lo, hi, shape, dtype, _resolve_key(key, op), op)


def normal(shape: Sequence[int] = (), dtype: Optional[Dtype] = D.float32,
           loc: Optional[ArrayLike] = None, scale: Optional[ArrayLike] = None,
           key: Optional[array] = None, stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Normal samples with mean `loc` (default 0) and standard deviation `scale` (default 1)."""
    op = "normal"
    shape = _shape(shape, op)
    dtype = _dtype(dtype, op)
    if dtype != D.complex64:
        _floating(dtype, op, "floating point and complex64 types")
    loc_a = None if loc is None else _to_array(loc, op, "loc")
    scale_a = None if scale is None else _to_array(scale, op, "scale")
    _prepare(key, stream, op)
    k = _resolve_key(key, op)
    lo, hi = _constant(_F32_ABOVE_MINUS_ONE, D.float32), _constant(1.0, D.float32)
    if dtype == D.complex64:  # real and imaginary parts each of variance 1/2
        s = erfinv(_uniform(lo, hi, shape + (2,), D.float32, k, op))
        s = squeeze(view(s, D.complex64), -1)
        if scale_a is not None:
            s = multiply(scale_a, s)
        if loc_a is not None:
            s = add(loc_a, s)
        return s
    applied = _constant(math.sqrt(2.0), dtype)
    if scale_a is not None:
        applied = multiply(applied, astype(scale_a, dtype))
    b, rng, lo, _, eager = _uniform_parts(lo, hi, shape, D.float32, k, op)
    s = (_eager(_normal_tail) if eager else _normal_tail)(b, rng, lo, applied, dtype.name)
    if loc_a is not None:
        s = add(astype(loc_a, dtype), s)
    return s


def randint(low: ArrayLike, high: ArrayLike, shape: Sequence[int] = (),
            dtype: Optional[Dtype] = D.int32, key: Optional[array] = None,
            stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Random integers in the half-open interval [low, high), as MLX draws them: the floor of
    a float32 uniform in [low, high), clipped to [low, high - 1] in the output dtype."""
    op = "randint"
    shape = _shape(shape, op)
    dtype = _dtype(dtype, op, D.int32)
    if D.issubdtype(dtype, D.DtypeCategory.inexact):
        raise ValueError(f"[{op}] randint only accepts integer dtypes and bool, got {dtype}.")
    lo, hi = _to_array(low, op, "low"), _to_array(high, op, "high")
    _prepare(key, stream, op)
    _fits(shape, (lo.shape, hi.shape), op)
    u = _uniform(lo, hi, shape, D.float32, _resolve_key(key, op), op)
    out = astype(floor(u), dtype)
    lo_t, hi_t = astype(lo, dtype), astype(hi, dtype)
    if dtype != D.bool_:
        hi_t = subtract(hi_t, array(1, dtype))
    return maximum(minimum(out, hi_t), lo_t)


def bernoulli(p: ArrayLike = 0.5, shape: Optional[Sequence[int]] = None,
              key: Optional[array] = None, stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Bernoulli samples (bool) with probability `p` of True; shape defaults to p's shape."""
    op = "bernoulli"
    p_a = _to_array(p, op, "p")
    if not D.issubdtype(p_a.dtype, D.DtypeCategory.floating):
        raise ValueError(f"[{op}] bernoulli probability `p` must be a float type, got "
                         f"{p_a.dtype}.")
    shape = tuple(p_a.shape) if shape is None else _shape(shape, op)
    _prepare(key, stream, op)
    if _broadcast((shape, p_a.shape), op) != shape:
        raise ValueError(f"[{op}] shape of `p` {tuple(p_a.shape)} is incompatible with "
                         f"argument `shape` {shape}.")
    b = bind(RandomBits(shape, 4), (_resolve_key(key, op),))
    return less(b, multiply(p_a, array(_BERNOULLI_SCALE, D.float32)))


def truncated_normal(lower: ArrayLike, upper: ArrayLike, shape: Optional[Sequence[int]] = None,
                     dtype: Optional[Dtype] = D.float32, key: Optional[array] = None,
                     stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Normal samples truncated to [lower, upper]."""
    op = "truncated_normal"
    dtype = _dtype(dtype, op)
    _floating(dtype, op)
    lower_a, upper_a = _to_array(lower, op, "lower"), _to_array(upper, op, "upper")
    bshape = _broadcast((lower_a.shape, upper_a.shape), op)
    shape = bshape if shape is None else _shape(shape, op)
    _prepare(key, stream, op)
    _fits(shape, (bshape,), op)
    sqrt2 = array(math.sqrt(2.0), dtype)
    lower_t, upper_t = astype(lower_a, dtype), astype(upper_a, dtype)
    a = erf(divide(lower_t, sqrt2))
    b = erf(divide(upper_t, sqrt2))
    u = _uniform(a, b, shape, dtype, _resolve_key(key, op), op)
    out = multiply(sqrt2, erfinv(u))
    return maximum(minimum(upper_t, out), lower_t)


def gumbel(shape: Sequence[int] = (), dtype: Optional[Dtype] = D.float32,
           key: Optional[array] = None, stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Standard Gumbel samples (CDF exp(-exp(-x)))."""
    op = "gumbel"
    shape = _shape(shape, op)
    dtype = _dtype(dtype, op)
    _floating(dtype, op)
    _prepare(key, stream, op)
    return _gumbel(shape, dtype, _resolve_key(key, op), op)


def _gumbel(shape, dtype, k, op):
    u = _uniform(array(0.0, dtype), array(1.0, dtype), shape, dtype, k, op)
    return negative(log(negative(log(u))))


def _valid_axis(axis, ndim: int, op: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"[{op}] Expected an int axis, got {type(axis).__name__}: {axis!r}.")
    ax = int(axis) + ndim if axis < 0 else int(axis)
    if not 0 <= ax < ndim:
        raise ValueError(f"[{op}] Invalid axis {axis} for logits with {ndim} dimensions.")
    return ax


def categorical(logits: ArrayLike, axis: int = -1, shape: Optional[Sequence[int]] = None,
                num_samples: Optional[int] = None, key: Optional[array] = None,
                stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Samples (uint32 indices along `axis`) from the categorical distributions given by the
    unnormalized log-probabilities `logits`, as MLX draws them: by inverse CDF when `logits`
    hold one distribution and samples have a shape (`_inverse_cdf`), else the Gumbel-max
    trick."""
    op = "categorical"
    logits = _to_array(logits, op, "logits")
    if shape is not None and num_samples is not None:
        raise ValueError(f"[{op}] At most one of shape or num_samples can be specified.")
    ax = _valid_axis(axis, logits.ndim, op)
    reduced = tuple(s for i, s in enumerate(logits.shape) if i != ax)
    if num_samples is not None:
        if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
            raise TypeError(f"[{op}] Expected an int num_samples, got {num_samples!r}.")
        if num_samples < 0:
            raise ValueError(f"[{op}] num_samples must be non-negative, got {num_samples}.")
        logits = expand_dims(logits, -1)
        shape = reduced + (int(num_samples),)
    elif shape is not None:
        shape = _shape(shape, op)
        if _broadcast((shape, reduced), op) != shape:
            raise ValueError(f"[{op}] Requested shape {shape} is not broadcast compatible "
                             f"with reduced logits shape {reduced}.")
    else:
        shape = reduced
    _prepare(key, stream, op)
    n = logits.shape[ax]
    if n and logits.size == n and shape:
        return _inverse_cdf(reshape(logits, (n,)), shape, _resolve_key(key, op), op)
    offset = ax + len(shape) - logits.ndim + 1
    gshape = shape[:offset] + (logits.shape[ax],) + shape[offset:]
    g = _gumbel(gshape, D.float32, _resolve_key(key, op), op)
    if 0 in shape:  # no samples (num_samples=0): MLX's empty result, where argmax refuses
        return astype(g.sum(axis=offset), D.uint32)
    return argmax(add(g, logits), axis=offset)


def _inverse_cdf(logits, shape, k, op):
    """`shape` samples of the one distribution of the 1-D `logits`: O(n + samples) memory,
    where Gumbel-max needs O(n * samples). A uniform draw times the total weight is looked up
    in the exclusive cumulative weights; an infinite maximum (where exp(x - max) is NaN) makes
    the distribution uniform over its maximal entries."""
    dt = D.promote(logits.dtype, D.float32)
    x = astype(logits, dt)
    m = _ops.max(x)
    w = where(isinf(m), astype(equal(x, m), dt), exp(subtract(x, m)))
    cdf = cumsum(w, 0, inclusive=False)
    u = multiply(_uniform(array(0.0), array(1.0), shape, D.float32, k, op), _ops.sum(w))
    return subtract(searchsorted(cdf, u, "right"), array(1, D.uint32))


def laplace(shape: Sequence[int] = (), dtype: Optional[Dtype] = D.float32, loc: float = 0.0,
            scale: float = 1.0, key: Optional[array] = None,
            stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Laplace samples with location `loc` and scale `scale`."""
    op = "laplace"
    shape = _shape(shape, op)
    dtype = _dtype(dtype, op)
    _floating(dtype, op)
    for name, v in (("loc", loc), ("scale", scale)):
        if not (_is_real_scalar(v) or isinstance(v, array)):
            raise TypeError(f"[{op}] Expected a float for {name}, got {type(v).__name__}.")
    _prepare(key, stream, op)
    lo, hi = array(_F32_ABOVE_MINUS_ONE, D.float32), array(1.0, D.float32)
    s = _uniform(lo, hi, shape, D.float32, _resolve_key(key, op), op)
    # the inverse CDF: sign(u) * log(1 - |u|)
    s = astype(multiply(sign(s), log1p(negative(_ops.abs(s)))), dtype)
    if isinstance(scale, array) or scale != 1.0:
        s = multiply(_param(scale, dtype), s)
    if isinstance(loc, array) or loc != 0.0:
        s = add(_param(loc, dtype), s)
    return s


def _param(v, dtype: D.Dtype) -> array:
    return astype(v, dtype) if isinstance(v, array) else array(float(v), dtype)


def permutation(x: Union[int, ArrayLike], axis: int = 0, key: Optional[array] = None,
                stream: StreamOrDevice = None) -> array:  # noqa: A002
    """A random permutation of `range(x)` (x an int), or of `x` along `axis`."""
    op = "permutation"
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        n = int(x)
        if n < 0:
            raise ValueError(f"[{op}] Expected a non-negative int, got {n}.")
        _prepare(key, stream, op)
        return argsort(bind(RandomBits((n,), 4), (_resolve_key(key, op),)))
    if not isinstance(x, array):
        raise TypeError(f"[{op}] Expected an int or an array, got {type(x).__name__}.")
    if x.ndim == 0:
        raise ValueError(f"[{op}] Cannot permute a 0-dimensional array.")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"[{op}] Expected an int axis, got {type(axis).__name__}: {axis!r}.")
    ax = int(axis) + x.ndim if axis < 0 else int(axis)
    if not 0 <= ax < x.ndim:
        raise ValueError(f"[{op}] Invalid axis {axis} for an array with {x.ndim} dimensions.")
    _prepare(key, stream, op)
    perm = argsort(bind(RandomBits((x.shape[ax],), 4), (_resolve_key(key, op),)))
    return take(x, perm, axis=ax)


def multivariate_normal(mean: ArrayLike, cov: ArrayLike, shape: Sequence[int] = (),
                        dtype: Optional[Dtype] = D.float32, key: Optional[array] = None,
                        stream: StreamOrDevice = None) -> array:  # noqa: A002
    """Jointly normal samples with mean `mean` (..., n) and covariance `cov` (..., n, n)."""
    op = "multivariate_normal"
    shape = _shape(shape, op)
    dtype = _dtype(dtype, op)
    if dtype != D.float32:
        raise ValueError(f"[{op}] dtype must be float32, got {dtype}.")
    mean = _to_array(mean, op, "mean")
    cov = _to_array(cov, op, "cov")
    if mean.ndim < 1:
        raise ValueError(f"[{op}] mean must have at least one dimension.")
    if cov.ndim < 2:
        raise ValueError(f"[{op}] cov must have at least two dimensions.")
    n = mean.shape[-1]
    if cov.shape[-1] != cov.shape[-2]:
        raise ValueError(f"[{op}] last two dimensions of cov must be equal, got "
                         f"{tuple(cov.shape)}.")
    if n != cov.shape[-1]:
        raise ValueError(f"[{op}] mean and cov must have compatible shapes, got "
                         f"{tuple(mean.shape)} and {tuple(cov.shape)}.")
    out_shape = _broadcast((cov.shape[:-2], mean.shape[:-1], shape), op) + (n,)
    _prepare(key, stream, op)
    std = astype(bind(CovarianceSqrt(), (astype(cov, D.float32),)), dtype)
    z = normal(out_shape, dtype, key=_resolve_key(key, op))
    scaled = squeeze(matmul(expand_dims(z, -2), std), -2)
    return add(mean, scaled)
