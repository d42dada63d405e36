"""A corpus of KernelIRs for the cuda backend's tests: the fused regions of the op table's
elementwise ops over all their dtypes, and of gelu, softmax, layer norm and an Adam step (with
row fusion and without it, so their elementwise parts are in it too). Lowered on the numpy
backend: nothing runs, nothing is compiled for the cpu."""
from __future__ import annotations

import functools

import numpy as np

import braze.core as mx
import braze.nn as nn
from braze._src import config

from op_table import elementwise


def _mx(x):
    if not isinstance(x, np.ndarray):
        return x
    return mx.array(x, dtype=mx.float64) if x.dtype == np.float64 else mx.array(x)


def _lower(fn, *args) -> list:
    return mx.compile(fn).lower_for("numpy", *args).irs


def _adam(p, m, v, g, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    """One Adam step (benchmarks/compile_bench.py's workload): p, m, v, g -> p, m, v."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * mx.square(g)
    return p - lr * m / (mx.sqrt(v) + eps), m, v


def _models() -> list:
    x = mx.array(np.linspace(-3, 3, 8 * 64, dtype=np.float32).reshape(8, 64))
    w, b = mx.ones((64,)), mx.zeros((64,))
    irs = []
    for mode in ("", "no_reduce_fusion"):
        with config.override(compile_mode=mode):
            irs += _lower(nn.gelu, x)
            irs += _lower(nn.gelu_approx, x)
            irs += _lower(lambda v: mx.softmax(v, axis=-1), x)
            irs += _lower(lambda v: mx.fast.layer_norm(v, w, b, 1e-5), x)
            irs += _lower(_adam, x, x, x * x, x)
    return irs


@functools.lru_cache(maxsize=None)
def corpus() -> tuple:
    """Every distinct KernelIR of the corpus, in a stable order."""
    seen = {}
    rng_seed = 0
    for case in elementwise.CASES:
        for dt in case.dtypes:
            ins = case.inputs(np.random.default_rng(rng_seed), dt)
            args = [_mx(x) for x in ins]
            if not all(isinstance(a, mx.array) for a in args):
                continue
            for ir in _lower(case.mx_fn, *args):
                seen.setdefault(ir.key, ir)
    for ir in _models():
        seen.setdefault(ir.key, ir)
    return tuple(seen[k] for k in sorted(seen))
