"""Primitives: the scan family (Scan: cumulative sum, prod, max, min, logaddexp).

The output has the input's dtype (the ops layer casts first). `reverse` scans from the end;
`inclusive=False` shifts the result by one along the axis and fills the first slot (the last
one when reversed) with the identity of the operation, as MLX does.
"""
from __future__ import annotations

import numpy as np

from .base import Primitive, bind, lazy_dataclass, ops
from .binary import _logaddexp
from .reduce import acc_dtype, batched_axis

SCAN_TYPES = ("sum", "prod", "max", "min", "logaddexp")


def scan_identity(reduce_type: str, npd: np.dtype):
    """The value an exclusive scan starts from."""
    if reduce_type == "sum":
        return 0
    if reduce_type == "prod":
        return 1
    if reduce_type == "logaddexp":
        return -np.inf
    big = reduce_type == "min"
    if npd.kind == "b":
        return big
    if npd.kind in "iu":
        info = np.iinfo(npd)
        return info.max if big else info.min
    return np.inf if big else -np.inf


def _complex_logaddexp_accumulate(x, ax):
    """np.logaddexp has no complex loop: accumulate with the binary primitive's kernel."""
    r = np.moveaxis(x, ax, 0).copy()
    for i in range(1, r.shape[0]):
        r[i] = _logaddexp(r[i - 1], r[i])
    return np.moveaxis(r, 0, ax)


@lazy_dataclass
class Scan(Primitive):
    """Cumulative `reduce_type` along `axis` (non-negative)."""
    # the output has the input's shape (MLX refuses; braze re-infers it in shapeless replay)

    reduce_type: str
    axis: int
    reverse: bool = False
    inclusive: bool = True

    def __post_init__(self):
        if self.reduce_type not in SCAN_TYPES:
            raise ValueError(f"[Scan] Unknown scan type {self.reduce_type!r}.")

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        rt, ax = self.reduce_type, self.axis
        out_np = x.dtype
        xa = x.astype(acc_dtype(x.dtype), copy=False)
        if self.reverse:
            xa = np.flip(xa, ax)
        with np.errstate(all="ignore"):
            if rt == "sum":
                r = np.cumsum(xa, axis=ax, dtype=xa.dtype)
            elif rt == "prod":
                r = (np.logical_and.accumulate(xa, axis=ax) if xa.dtype.kind == "b"
                     else np.cumprod(xa, axis=ax, dtype=xa.dtype))
            elif rt == "max":
                r = np.maximum.accumulate(xa, axis=ax) if xa.size else xa.copy()
            elif rt == "min":
                r = np.minimum.accumulate(xa, axis=ax) if xa.size else xa.copy()
            elif xa.dtype.kind == "c":
                r = _complex_logaddexp_accumulate(xa, ax)
            else:
                r = np.logaddexp.accumulate(xa, axis=ax) if xa.size else xa.copy()
        if not self.inclusive and r.shape[ax]:
            shifted = np.empty_like(r)
            head = [slice(None)] * r.ndim
            head[ax] = slice(0, 1)
            rest = [slice(None)] * r.ndim
            rest[ax] = slice(1, None)
            src = [slice(None)] * r.ndim
            src[ax] = slice(0, -1)
            shifted[tuple(head)] = scan_identity(rt, r.dtype)
            shifted[tuple(rest)] = r[tuple(src)]
            r = shifted
        if self.reverse:
            r = np.flip(r, ax)
        return [np.ascontiguousarray(r).astype(out_np, copy=False)]

    # An exclusive scan is the inclusive one shifted by a step along the scan direction (the
    # identity fills the vacated slot), so the prod/max/min/logaddexp rules are written for
    # inclusive scans and the exclusive ones shift the tangent or the cotangent.
    def vjp(self, primals, cotangents, argnums, outputs):
        x, g = primals[0], cotangents[0]
        rt, ax, rev = self.reduce_type, self.axis, self.reverse
        if rt == "sum":
            return [bind(Scan("sum", ax, not rev, self.inclusive), (g,))]
        if x.size == 0:
            return [ops.zeros_like(x)]
        if self.inclusive:
            out = outputs[0]
        else:
            out = bind(Scan(rt, ax, rev, True), (x,))
            g = _shift(g, ax, not rev)
        return [_VJP[rt](x, out, g, ax, rev)]

    def jvp(self, primals, tangents, argnums):
        x, t = primals[0], tangents[0]
        rt, ax, rev = self.reduce_type, self.axis, self.reverse
        if rt == "sum":
            return [bind(self, (t,))]
        if x.size == 0:
            return [ops.zeros_like(x)]
        out = bind(Scan(rt, ax, rev, True), (x,))
        j = _JVP[rt](x, out, t, ax, rev)
        return [j if self.inclusive else _shift(j, ax, rev)]

    def vmap(self, inputs, axes):
        x, bax = inputs[0], axes[0]
        if bax is None:
            return [bind(self, (x,))], [None]
        prim = Scan(self.reduce_type, batched_axis(self.axis, bax), self.reverse, self.inclusive)
        return [bind(prim, (x,))], [bax]


# -- helpers of the transform rules (inclusive scans; `out` is the inclusive scan of x) ---------
def _along(x, ax, start, stop):
    return x[(slice(None),) * ax + (slice(start, stop),)]


def _unit(x, ax, n=1):
    """Zeros shaped like `x` but with `n` entries along `ax`."""
    return ops.zeros(tuple(n if i == ax else d for i, d in enumerate(x.shape)), x.dtype)


def _shift(y, ax, reverse):
    """`y` moved one step along the scan direction; the vacated slot is 0 (the transpose of
    `_shift(., ax, r)` is `_shift(., ax, not r)`)."""
    n = y.shape[ax]
    if n == 0:
        return y
    if reverse:
        return ops.concatenate([_along(y, ax, 1, n), _unit(y, ax)], axis=ax)
    return ops.concatenate([_unit(y, ax), _along(y, ax, 0, n - 1)], axis=ax)


def _positions(x, ax):
    """0 .. n-1 along `ax` (int32), shaped to broadcast against x."""
    n = x.shape[ax]
    return ops.reshape(ops.arange(n), tuple(n if i == ax else 1 for i in range(x.ndim)))


def _scan(rt, ax, reverse, inclusive, y):
    return bind(Scan(rt, ax, reverse, inclusive), (y,))


def _first_zero(x, out, ax, rev):
    """(out == 0, the position of the first zero of each scanned line)."""
    excl = _scan("prod", ax, rev, False, x)
    eq_zero = ops.equal(out, 0)
    return eq_zero, ops.logical_and(eq_zero, ops.not_equal(excl, 0))


def _prod_vjp(x, out, g, ax, rev):
    # MLX's formula: exact before the first zero (out / x), the first zero gets the product
    # of the others (the scan with that zero replaced by one), everything after it gets 0.
    eq_zero, first = _first_zero(x, out, ax, rev)

    def partial(a):
        return _scan("sum", ax, not rev, True, ops.multiply(a, g))

    with_one = _scan("prod", ax, rev, True, ops.where(first, 1, x))
    safe_x = ops.where(ops.equal(x, 0), 1, x)
    grad = ops.divide(partial(out), safe_x)
    return ops.where(first, partial(with_one), ops.where(eq_zero, 0, grad))


def _prod_jvp(x, out, t, ax, rev):
    # no zero so far: out * cumsum(t / x); exactly one: t at that zero times the product of
    # the others; two or more: 0 (the product of the others is then 0 as well).
    _, first = _first_zero(x, out, ax, rev)
    with_one = _scan("prod", ax, rev, True, ops.where(first, 1, x))
    safe_x = ops.where(ops.equal(x, 0), 1, x)
    no_zero = ops.multiply(out, _scan("sum", ax, rev, True, ops.divide(t, safe_x)))
    t_zero = _scan("sum", ax, rev, True, ops.where(first, t, 0))
    return ops.where(ops.not_equal(out, 0), no_zero, ops.multiply(t_zero, with_one))


def _source(x, out, ax, rev):
    """(mask, idx): the positions where x equals the running extremum, and for every output
    the position it was taken from: the latest such position in scan order (MLX's choice
    on ties)."""
    n = x.shape[ax]
    mask = ops.equal(x, out)
    pos = _positions(x, ax)
    if rev:
        idx = _scan("min", ax, True, True, ops.where(mask, pos, n - 1))
    else:
        idx = _scan("max", ax, False, True, ops.where(mask, pos, 0))
    return mask, pos, idx


def _extremum_vjp(x, out, g, ax, rev):
    # each output's cotangent is scatter-added to its source, as MLX does (differences of
    # cumulative sums would cancel and round); the sources are constant near x, so their
    # indices carry no gradient (second-order gradients go through g only)
    from .indexing import ScatterAxis
    _, _, idx = _source(x, out, ax, rev)
    return bind(ScatterAxis("sum", ax), (ops.zeros_like(g), ops.stop_gradient(idx), g))


def _extremum_jvp(x, out, t, ax, rev):
    _, _, idx = _source(x, out, ax, rev)
    return ops.take_along_axis(t, ops.stop_gradient(idx), axis=ax)


def _log_parts(v):
    """(log(v) where v > 0, log(-v) where v < 0), -inf elsewhere; NaN goes to the first (it
    must propagate, not vanish). The inner `where`s keep the derivatives NaN-free."""
    pos, neg = ops.logical_not(ops.less_equal(v, 0)), ops.less(v, 0)
    lp = ops.where(pos, ops.log(ops.where(pos, v, 1)), -np.inf)
    ln = ops.where(neg, ops.log(ops.where(neg, ops.negative(v), 1)), -np.inf)
    return lp, ln


def _shifted(lg, shift, sign):
    """lg + sign * shift, but -inf where lg is -inf: a zero (co)tangent contributes nothing,
    even where `shift` is infinite (no -inf - -inf = NaN)."""
    return ops.where(ops.isneginf(lg), lg, ops.add(lg, shift) if sign > 0
                     else ops.subtract(lg, shift))


def _logaddexp_vjp(x, out, g, ax, rev):
    # grad_j = exp(x_j) * sum_{i after j} g_i exp(-out_i), in log space by the sign of g
    lp, ln = _log_parts(g)
    a = _scan("logaddexp", ax, not rev, True, _shifted(lp, out, -1))
    b = _scan("logaddexp", ax, not rev, True, _shifted(ln, out, -1))
    return ops.subtract(ops.exp(_shifted(a, x, 1)), ops.exp(_shifted(b, x, 1)))


def _logaddexp_jvp(x, out, t, ax, rev):
    # d out_i = exp(-out_i) * sum_{j up to i} t_j exp(x_j), in log space by the sign of t
    lp, ln = _log_parts(t)
    a = _scan("logaddexp", ax, rev, True, _shifted(lp, x, 1))
    b = _scan("logaddexp", ax, rev, True, _shifted(ln, x, 1))
    return ops.subtract(ops.exp(_shifted(a, out, -1)), ops.exp(_shifted(b, out, -1)))


_VJP = {"prod": _prod_vjp, "max": _extremum_vjp, "min": _extremum_vjp,
        "logaddexp": _logaddexp_vjp}
_JVP = {"prod": _prod_jvp, "max": _extremum_jvp, "min": _extremum_jvp,
        "logaddexp": _logaddexp_jvp}
