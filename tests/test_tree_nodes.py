"""Dataclasses and registered classes are pytrees for compile and the transforms (beyond MLX,
whose `mlx.utils` functions keep treating them as leaves, as braze's do)."""
import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import braze.core as mx
from braze._src import tree as T
from braze.utils import register_pytree_node, tree_map


@dataclasses.dataclass
class Params:
    w: object
    b: object
    scale: float = dataclasses.field(default=2.0, metadata={"static": True})


class Pair(NamedTuple):
    x: object
    y: object


class KVCache:
    def __init__(self, keys, values, offset):
        self.keys, self.values, self.offset = keys, values, offset


register_pytree_node(KVCache, lambda c: ((c.keys, c.values), c.offset),
                     lambda offset, kv: KVCache(*kv, offset))


def test_dataclass_flattens_to_its_fields_and_rebuilds():
    p = Params(mx.ones(2), mx.zeros(2), 3.0)
    leaves, td = T.flatten(p)
    assert len(leaves) == 2  # `scale` is static: structure, not a leaf
    q = T.unflatten(td, leaves)
    assert isinstance(q, Params) and q.scale == 3.0 and q.w is leaves[0]
    assert T.flatten(Params(1, 2))[1] == T.flatten(Params(5, 6))[1]  # same structure
    assert T.flatten(Params(1, 2, 1.0))[1] != T.flatten(Params(1, 2, 2.0))[1]
    assert "Params" in repr(td)


def test_compiled_function_traces_dataclass_fields_as_inputs():
    traces = []

    def f(p, x):
        traces.append(1)
        return Params(p.w * x + p.b, p.b, p.scale)

    cf = mx.compile(f)
    for k in range(3):  # new array values: no retrace
        p = Params(mx.full((3,), float(k)), mx.ones(3))
        out = cf(p, mx.array(2.0))
        assert isinstance(out, Params) and out.scale == 2.0
        np.testing.assert_allclose(np.asarray(out.w), 2.0 * k + 1)
    assert len(traces) == 1


def test_grad_and_vmap_over_a_dataclass_and_a_registered_class():
    def loss(p, x):
        return mx.sum((p.w * x + p.b) ** 2)

    p = Params(mx.array([1.0, 2.0]), mx.array([0.5, -1.0]))
    g = mx.grad(loss)(p, mx.array([3.0, 4.0]))
    assert isinstance(g, Params)
    np.testing.assert_allclose(np.asarray(g.w), [2 * 3.5 * 3, 2 * 7.0 * 4])
    np.testing.assert_allclose(np.asarray(g.b), [2 * 3.5, 2 * 7.0])

    def step(cache, k):
        return KVCache(cache.keys + k, cache.values * 2, cache.offset + 1)

    c = mx.compile(step)(KVCache(mx.zeros((2, 4)), mx.ones((2, 4)), 0), mx.ones((2, 4)))
    assert isinstance(c, KVCache) and c.offset == 1
    np.testing.assert_array_equal(np.asarray(c.values), 2 * np.ones((2, 4)))
    out = mx.vmap(lambda pr: pr.x * pr.y)(Pair(mx.arange(3.0), mx.arange(3.0)))
    np.testing.assert_array_equal(np.asarray(out), [0.0, 1.0, 4.0])


def test_mlx_tree_functions_keep_dataclasses_as_leaves():
    p = Params(1, 2)
    assert tree_map(lambda v: v, {"p": p})["p"] is p


def test_register_checks_its_arguments():
    with pytest.raises(TypeError, match="register_pytree_node"):
        register_pytree_node(KVCache(1, 2, 3), len, len)
    with pytest.raises(TypeError, match="callable"):
        register_pytree_node(KVCache, None, len)


def test_leaf_paths_name_every_leaf_in_flatten_order():
    tree = {"p": Params(1, 2), "kv": KVCache(3, 4, 0), "l": [5, (6,)]}
    paths = T.leaf_paths(tree, "out")
    assert [v for _, v in paths] == T.flatten(tree)[0]
    assert [p for p, _ in paths] == ["out['p'].w", "out['p'].b", "out['kv'][0]",
                                     "out['kv'][1]", "out['l'][0]", "out['l'][1][0]"]
    assert [p for p, _ in T.leaf_paths({"p": Params(1, 2)}, nodes=False)] == ["['p']"]
