"""A compiled call whose plan is one elementwise kernel over a single element, on evaluated
inputs, runs at once (replay.py `_run_now`): what it returns, what it counts, and where it
stays lazy."""
import numpy as np
import pytest

import braze.core as mx
from braze._src import memory

B1, B2 = 0.9, 0.999


def _adam(p, m, v, g):
    m = B1 * m + (1 - B1) * g
    v = B2 * v + (1 - B2) * mx.square(g)
    return p - 1e-3 * m / (mx.sqrt(v) * 0.5 + 1e-8), m, v


def _np_adam(p, m, v, g):
    m = B1 * m + (1 - B1) * g
    v = B2 * v + (1 - B2) * g * g
    return p - 1e-3 * m / (np.sqrt(v) * 0.5 + 1e-8), m, v


def _state(seed=0, shape=(1,)):
    rng = np.random.default_rng(seed)
    p, m, v, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    return [p, m, np.abs(v), g]  # a second moment is never negative


ADAM = mx.compile(_adam)  # one compiled function for every test (no "wraps again" warning)


@pytest.mark.parametrize("shape", [(1,), (), (1, 1)])
def test_a_one_element_call_returns_evaluated_outputs_equal_to_uncompiled(shape):
    f = ADAM
    xs = _state(1, shape)
    f(*map(mx.array, xs))  # the trace
    outs = f(*map(mx.array, xs))
    assert all(o._prim is None and o._data is not None for o in outs)  # computed already
    for o, want in zip(outs, _np_adam(*[x.astype(np.float64) for x in xs])):
        assert o.shape == shape and o.dtype == mx.float32
        np.testing.assert_allclose(np.asarray(o), want, rtol=1e-6)


def test_the_state_loop_of_a_training_step_matches_numpy():
    f = ADAM
    p, m, v, g = map(mx.array, _state(2))
    want = [x.astype(np.float64) for x in _state(2)]
    for _ in range(5):
        p, m, v = f(p, m, v, g)
        want[:3] = _np_adam(*want)
    for o, w in zip((p, m, v), want):
        np.testing.assert_allclose(np.asarray(o), w, rtol=1e-5)


def test_a_lazy_input_keeps_the_call_lazy():
    f = mx.compile(lambda x, y: x * y + 1)
    a, b = mx.array([2.0]), mx.array([3.0])
    f(a, b)
    lazy = a + 1  # not evaluated yet
    out = f(lazy, b)
    assert out._prim is not None
    assert out.item() == 10.0


def test_memory_counts_return_after_the_outputs_die():
    f = ADAM
    xs = list(map(mx.array, _state(3)))
    mx.eval(f(*xs))
    before = memory.Counters.active
    outs = f(*xs)
    assert memory.Counters.active > before  # the outputs' buffers are counted
    del outs
    assert memory.Counters.active == before


def test_outputs_compose_with_grad_and_vmap():
    f = mx.compile(lambda x: mx.sin(x) * x)
    x = mx.array([0.7])
    f(x)
    g = mx.grad(lambda t: f(t).sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.cos(0.7) * 0.7 + np.sin(0.7), rtol=1e-6)
    xs = mx.array([[0.1], [0.2]])
    np.testing.assert_allclose(np.asarray(mx.vmap(f)(xs)), np.sin([[0.1], [0.2]]) * [[0.1], [0.2]],
                               rtol=1e-6)


def test_a_checked_one_element_call_names_the_kernel_of_a_mismatch():
    k = [1.0]

    def f(x):
        return mx.exp(x) * k[0]

    cf = mx.compile(f, check=True)
    x = mx.array([0.5])
    cf(x)
    k[0] = 2.0
    with pytest.raises(mx.CompileCheckError, match="kernel CompiledExp"):
        cf(x)
