"""Laziness and buffer freeing during evaluation."""
import numpy as np

import braze.core as mx


def test_ops_are_lazy_until_eval():
    x = mx.array([1.0, 2.0, 3.0])
    y = mx.exp(x) + 1
    assert y._data is None and y._prim is not None
    mx.eval(y)
    assert y._data is not None
    assert y._inputs == () and y._prim is None  # evaluated arrays drop their graph


def test_implicit_evaluation():
    x = mx.array([1.0, 2.0])
    for read in (repr, lambda a: a.tolist(), lambda a: np.asarray(a), lambda a: a.sum().item()):
        y = x * 2
        read(y)
        assert y._data is not None


def test_chain_of_100_ops_holds_few_buffers():
    n = 8 * 1024 * 1024
    x = mx.ones((n,))
    mx.eval(x)
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    z = x
    for k in range(100):
        z = z * 1.0001 if k % 2 else mx.sqrt(z)
    mx.eval(z)
    buffers = (mx.get_peak_memory() - base) / (n * 4)
    assert buffers <= 3, f"peak held {buffers:.1f} extra buffers"
    ref = 1.0
    for k in range(100):
        ref = ref * 1.0001 if k % 2 else ref ** 0.5
    np.testing.assert_allclose(np.asarray(z[:3]), np.full(3, ref), rtol=1e-5)


def test_deep_graph_does_not_hit_recursion_limit():
    z = mx.array(0.0)
    for _ in range(20000):
        z = z + 1
    assert z.item() == 20000


def test_freed_array_releases_memory():
    before = mx.get_active_memory()
    a = mx.zeros((1024, 1024)) + 1
    mx.eval(a)
    assert mx.get_active_memory() - before >= 4 * 1024 * 1024
    del a
    assert mx.get_active_memory() - before < 4 * 1024 * 1024
