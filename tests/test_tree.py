"""Pytrees: braze.utils against expectations recorded from mlx.utils (MLX 0.32), plus the
structural flatten/unflatten the transforms and compile use."""
from collections import OrderedDict, defaultdict, namedtuple

import pytest

import braze.core as mx
from braze._src import tree as T
from braze.utils import (
    tree_flatten,
    tree_map,
    tree_map_with_path,
    tree_merge,
    tree_reduce,
    tree_unflatten,
)

P = namedtuple("P", "x y")


def sample():
    return {"model": [{"w": 0, "b": 1}, {"w": 2, "b": (3, 4)}], "head": None, "n": P(5, [6])}


FLAT = [("model.0.w", 0), ("model.0.b", 1), ("model.1.w", 2), ("model.1.b.0", 3),
        ("model.1.b.1", 4), ("head", None), ("n.0", 5), ("n.1.0", 6)]


# -- tree_flatten ---------------------------------------------------------------------------
def test_tree_flatten_paths():
    assert tree_flatten(sample()) == FLAT
    assert tree_flatten([[[0]]]) == [("0.0.0", 0)]
    assert tree_flatten(5) == [("", 5)]
    assert tree_flatten([]) == [] and tree_flatten({}) == []


def test_tree_flatten_prefix_drops_first_character():
    assert tree_flatten(sample(), prefix=".hello") == [("hello." + k, v) for k, v in FLAT]
    assert tree_flatten(sample(), prefix="hello") == [("ello." + k, v) for k, v in FLAT]


def test_tree_flatten_destination_and_is_leaf():
    assert tree_flatten({"a": {"b": 1}}, destination={}) == {"a.b": 1}
    dest = [("pre", 0)]
    assert tree_flatten([1], destination=dest) is dest and dest == [("pre", 0), ("0", 1)]
    assert tree_flatten(sample(), is_leaf=lambda x: isinstance(x, tuple)) == [
        ("model.0.w", 0), ("model.0.b", 1), ("model.1.w", 2), ("model.1.b", (3, 4)),
        ("head", None), ("n", P(5, [6]))]
    with pytest.raises(ValueError, match="Destination should be either"):
        tree_flatten([1], destination=set())


def test_tree_flatten_dict_subclass_is_a_dict():
    class D(dict):
        pass
    assert tree_flatten(D(a=[1, 2])) == [("a.0", 1), ("a.1", 2)]


# -- tree_unflatten -------------------------------------------------------------------------
def test_tree_unflatten():
    assert tree_unflatten(FLAT) == {"model": [{"w": 0, "b": 1}, {"w": 2, "b": [3, 4]}],
                                    "head": None, "n": [5, [6]]}
    assert tree_unflatten([("hello.world", 42)]) == {"hello": {"world": 42}}
    assert tree_unflatten({"hello.world": 42}) == {"hello": {"world": 42}}
    assert tree_unflatten([("", 1)]) == 1
    assert tree_unflatten([]) == []
    assert tree_unflatten([("0", 1), ("2", 3)]) == [1, {}, 3]  # gaps become {}
    assert tree_unflatten([("1", 1), ("01", 3)]) == {"1": 1, "01": 3}
    assert tree_unflatten([("a.1.x", 1), ("a.0.x", 2)]) == {"a": [{"x": 2}, {"x": 1}]}


def test_flatten_unflatten_roundtrip_of_arrays():
    params = {"layers": [{"w": mx.array([1.0]), "b": mx.array([0.0])}] * 2}
    back = tree_unflatten(tree_flatten(params))
    assert back["layers"][1]["w"] is params["layers"][1]["w"]


# -- tree_map / tree_map_with_path ----------------------------------------------------------
def test_tree_map_keeps_structure_and_namedtuples():
    out = tree_map(lambda x: x * 10 if x is not None else "N", sample())
    assert out == {"model": [{"w": 0, "b": 10}, {"w": 20, "b": (30, 40)}], "head": "N",
                   "n": P(50, [60])}
    assert type(out["n"]) is P and type(out["model"][1]["b"]) is tuple


def test_tree_map_with_rest_trees_as_supersets():
    assert tree_map(lambda x, y: (x, y), {"a": [1, 2]}, {"a": [3, 4], "b": 5}) == \
        {"a": [(1, 3), (2, 4)]}


def test_tree_map_is_leaf_and_dict_subclasses():
    class D(dict):
        pass
    assert type(tree_map(lambda x: x, D(a=1))) is dict
    assert type(tree_map(lambda x: x, OrderedDict(a=1))) is dict
    assert tree_map(repr, [(1, 2), [3]], is_leaf=lambda x: isinstance(x, tuple)) == \
        ["(1, 2)", ["3"]]


def test_tree_map_with_path():
    out = tree_map_with_path(lambda p, x: p, sample())
    assert out == {"model": [{"w": "model.0.w", "b": "model.0.b"},
                             {"w": "model.1.w", "b": ("model.1.b.0", "model.1.b.1")}],
                   "head": "head", "n": P("n.0", ["n.1.0"])}
    rooted = tree_map_with_path(lambda p, x: p, sample(), path="root")
    assert rooted["n"] == P("root.n.0", ["root.n.1.0"])
    assert tree_map_with_path(lambda p, x: p, 5) is None
    seen = []
    tree_map_with_path(lambda p, x, y: seen.append((p, x, y)), {"a": [1]}, {"a": [2]})
    assert seen == [("a.0", 1, 2)]


# -- tree_reduce ----------------------------------------------------------------------------
def test_tree_reduce():
    t = {"a": [1, 2, 3], "b": [4, 5]}
    assert tree_reduce(lambda acc, x: acc + x, t, 0) == 15
    assert tree_reduce(lambda acc, x: acc + x, t) == 15
    assert tree_reduce(lambda acc, x: acc + [x], [(1, 2), 3], [],
                       is_leaf=lambda x: isinstance(x, tuple)) == [(1, 2), 3]
    assert tree_reduce(lambda a, x: a + x, []) is None


def test_tree_reduce_over_arrays():
    t = {"w": mx.array([1.0, 2.0]), "b": [mx.array([3.0])]}
    assert tree_reduce(lambda acc, x: acc + x.size, t, 0) == 3


# -- tree_merge -----------------------------------------------------------------------------
def test_tree_merge():
    assert tree_merge({"a": {"b": 1}, "c": []}, {"a": {"d": 2}, "c": [5]}) == \
        {"a": {"b": 1, "d": 2}, "c": [5]}
    assert tree_merge([1, None, [2]], [None, 3]) == [1, 3, [2]]
    assert tree_merge({"a": 1}, {"a": 2}, lambda a, b: a + b) == {"a": 3}
    assert tree_merge(P(1, None), P(None, 2)) == P(1, 2)
    assert tree_merge([], []) == [] and tree_merge({}, {}) == {}
    with pytest.raises(ValueError, match="no merge function was provided"):
        tree_merge({"a": 1}, {"a": 2})
    with pytest.raises(ValueError, match="Cannot merge list with dict"):
        tree_merge([], {})


def test_tree_merge_key_order_is_deterministic():
    assert list(tree_merge({"b": 1, "a": 2}, {"c": 3, "a": None})) == ["b", "a", "c"]


# -- live comparison with mlx.utils ---------------------------------------------------------
def test_utils_live_mlx():
    mu = pytest.importorskip("mlx.utils")
    cases = [sample(), [[[0]]], 5, [], {}, {"a": (1, {"b": [2, 3]})}, P(1, [2, (3,)])]
    for t in cases:
        assert tree_flatten(t) == mu.tree_flatten(t)
        assert tree_flatten(t, prefix=".p") == mu.tree_flatten(t, prefix=".p")
        flat = mu.tree_flatten(t)
        assert tree_unflatten(flat) == mu.tree_unflatten(flat)
        f = lambda x: (x, "leaf")
        assert tree_map(f, t) == mu.tree_map(f, t)
        g = lambda p, x: (p, x)
        assert tree_map_with_path(g, t) == mu.tree_map_with_path(g, t)
        assert tree_reduce(lambda a, x: a + [x], t, []) == mu.tree_reduce(lambda a, x: a + [x],
                                                                           t, [])
    merged = ({"a": {"b": 1}, "c": [1, None]}, {"a": {"d": 2}, "c": [None, 2], "e": 3})
    assert tree_merge(*merged) == mu.tree_merge(*merged)


# -- structural flatten / unflatten (braze._src.tree) ---------------------------------------
def test_structural_flatten_roundtrip():
    t = sample()
    leaves, td = T.flatten(t)
    assert leaves == [0, 1, 2, 3, 4, None, 5, 6]
    assert td.num_leaves == 8
    back = T.unflatten(td, leaves)
    assert back == t and type(back["n"]) is P and type(back["model"][1]["b"]) is tuple
    assert T.unflatten(td, [x if x is None else -x for x in leaves])["n"] == P(-5, [-6])


def test_structural_dict_types():
    dd = defaultdict(list, a=1)
    od = OrderedDict([("b", 1), ("a", 2)])

    class D(dict):
        pass

    leaves, td = T.flatten([dd, od, D(z=3)])
    back = T.unflatten(td, leaves)
    assert type(back[0]) is defaultdict and back[0].default_factory is list
    assert type(back[1]) is OrderedDict and list(back[1]) == ["b", "a"]
    assert type(back[2]) is dict and back[2] == {"z": 3}  # other subclasses: plain dicts (MLX)


def test_treedef_equality_and_hash():
    a = T.structure({"x": [1, 2], "y": (3,)})
    b = T.structure({"x": [mx.array(1), "s"], "y": (None,)})
    c = T.structure({"y": (3,), "x": [1, 2]})  # different key order: different structure
    d = T.structure({"x": (1, 2), "y": (3,)})
    assert a == b and hash(a) == hash(b)
    assert a != c and a != d
    assert len({a, b, c, d}) == 3
    assert repr(a) == "{'x': [*, *], 'y': (*,)}"
    assert repr(T.structure(P(1, 2))) == "P(*, *)"


def test_structural_is_leaf_and_scalars():
    leaves, td = T.flatten([(1, 2), 3], is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), 3]
    leaves, td = T.flatten(7)
    assert leaves == [7] and T.unflatten(td, [8]) == 8
    leaves, td = T.flatten([])
    assert leaves == [] and T.unflatten(td, []) == []


def test_structural_unflatten_wrong_count():
    _, td = T.flatten([1, 2])
    with pytest.raises(ValueError, match="Expected 2 leaves"):
        T.unflatten(td, [1])


def test_map_structure_is_strict():
    assert T.map_structure(lambda a, b: a + b, {"x": [1, 2]}, {"x": [10, 20]}) == {"x": [11, 22]}
    with pytest.raises(ValueError, match="structures differ"):
        T.map_structure(lambda a, b: a, {"x": [1, 2]}, {"x": [1]})


def test_deep_nesting():
    t = 0
    for _ in range(200):
        t = [t]
    leaves, td = T.flatten(t)
    assert leaves == [0] and T.unflatten(td, [1]) == tree_map(lambda x: 1, t)
