"""Seconds-long end-to-end checks of the main features (run: python -m pytest tests/smoke)."""
import numpy as np

import braze.core as mx
from braze.utils import tree_flatten


def test_lazy_ops_and_numpy_interop():
    x = mx.arange(6, dtype=mx.float32).reshape(2, 3)
    y = mx.exp(x) * 2 + 1
    assert y._data is None
    np.testing.assert_allclose(np.asarray(y), np.exp(np.arange(6.0).reshape(2, 3)) * 2 + 1,
                               rtol=1e-6)


def test_promotion_with_weak_scalars():
    i8 = mx.array([1, 2], dtype=mx.int8)
    assert (i8 + 1).dtype == mx.int8
    assert (i8 + 1.5).dtype == mx.float32


def test_reductions_indexing_linalg():
    a = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert a.sum().item() == 66
    assert a[::-1, 1].tolist() == [9.0, 5.0, 1.0]
    assert (a @ a.T).shape == (3, 3)
    assert mx.argmax(a, axis=1).tolist() == [3, 3, 3]


def test_inplace_semantics():
    a = mx.zeros((3,))
    b = a * 2
    a[0] = 5
    a += 1
    assert a.tolist() == [6, 1, 1] and b.tolist() == [0, 0, 0]


def test_grad_and_vmap():
    f = lambda x: mx.sum(mx.sin(x) * x)  # noqa: E731
    x = mx.array([0.5, 1.0, 2.0])
    g = mx.grad(f)(x)
    xn = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(np.asarray(g), np.cos(xn) * xn + np.sin(xn), rtol=1e-5)
    v = mx.vmap(lambda r: mx.sum(r * r))(mx.ones((4, 3)))
    assert v.tolist() == [3.0] * 4


def test_trees():
    assert [k for k, _ in tree_flatten({"a": [1, 2], "b": {"c": 3}})] == ["a.0", "a.1", "b.c"]
