"""The random functions nn uses (`uniform`, `normal`, `bernoulli`), from `mx.random`.

`braze.core.random` is imported lazily. Until it exists, a NumPy generator stands in so layers
can still be constructed (that fallback is not traceable or capturable by compile).
"""
from __future__ import annotations

import numpy as np

import braze.core as mx

_FALLBACK = np.random.default_rng(0)


def _mod():
    try:
        from braze.core import random as r  # noqa: PLC0415
    except ImportError:
        return None
    return r


def uniform(low=0.0, high=1.0, shape=(), dtype=None):
    r = _mod()
    dtype = dtype or mx.float32
    if r is not None:
        return r.uniform(low, high, shape, dtype=dtype)
    return mx.array(_FALLBACK.uniform(low, high, size=tuple(shape)), dtype=dtype)


def normal(shape=(), dtype=None, loc=0.0, scale=1.0):
    r = _mod()
    dtype = dtype or mx.float32
    if r is not None:
        return r.normal(shape=shape, dtype=dtype, loc=loc, scale=scale)
    return mx.array(_FALLBACK.normal(loc, scale, size=tuple(shape)), dtype=dtype)


def bernoulli(p, shape):
    r = _mod()
    if r is not None:
        return r.bernoulli(p, shape)
    return mx.array(_FALLBACK.random(tuple(shape)) < p)
