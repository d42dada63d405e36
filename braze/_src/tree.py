"""Pytrees: nested lists, tuples (NamedTuples included) and dicts (subclasses included); for the
transforms and compile also dataclass instances and registered containers.

Two layers live here:

* `flatten(tree) -> (leaves, treedef)` and `unflatten(treedef, leaves)`: the structural pair
  the transforms and compile use. A `TreeDef` is hashable and comparable, so it can be part of
  a cache key. Beyond MLX, a dataclass instance is a container of its `init` fields (rebuilt
  with `cls(**fields)`; `field(metadata={"static": True})` marks a field that is structure,
  not a leaf), and `register_pytree_node(cls, flatten, unflatten)` makes any class
  one (a KV cache object, a parameter bundle).
* MLX's `mlx.utils` functions (`tree_map`, `tree_map_with_path`, `tree_flatten`,
  `tree_unflatten`, `tree_reduce`, `tree_merge`) with MLX's exact behaviour, re-exported by
  `braze.utils`.

For MLX's functions everything that is not a list, tuple or dict is a leaf (None included),
unless `is_leaf` says so first, exactly as in MLX. Recursion depth is the nesting depth of the
tree, not its size.
"""
from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict
from itertools import zip_longest
from typing import Any, Callable, Optional

__all__ = ["TreeDef", "flatten", "unflatten", "leaves", "structure", "map_structure",
           "register_pytree_node", "leaf_paths", "tree_map", "tree_map_with_path", "tree_flatten",
           "tree_unflatten", "tree_reduce", "tree_merge"]


# -- structural flatten / unflatten ---------------------------------------------------------
class TreeDef:
    """The shape of a pytree without its leaves.

    kind: "leaf", "list", "tuple", "dict" or "node" (a dataclass or registered class); `type`
    is the container's class (rebuilt as that class: NamedTuples by position, list/tuple
    subclasses from an iterable, OrderedDict and defaultdict as themselves, other dict
    subclasses as plain dicts, as MLX does); `keys` are the dict keys in order, or a node's
    hashable auxiliary data (a dataclass's field names); `children` the sub-TreeDefs.
    """

    __slots__ = ("kind", "type", "keys", "children", "num_leaves", "_hash", "_extra")

    def __init__(self, kind, type_=None, keys=(), children=(), extra=None):
        self.kind = kind
        self.type = type_
        self.keys = tuple(keys)
        self.children = tuple(children)
        self._extra = extra  # defaultdict's default_factory
        self.num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in self.children)
        self._hash = None

    def _key(self):
        return (self.kind, self.type, self.keys, self._extra, self.children)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, TreeDef):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        if self._hash is None:
            try:
                self._hash = hash(self._key())
            except TypeError:  # an unhashable default_factory: hash without it
                self._hash = hash((self.kind, self.type, self.keys, self.children))
        return self._hash

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children))
            return f"{self.type.__name__}({{{inner}}})" if self.type is not dict else f"{{{inner}}}"
        inner = ", ".join(repr(c) for c in self.children)
        if self.kind == "node":
            return f"{self.type.__name__}({inner})"
        if self.type is list:
            return f"[{inner}]"
        if self.type is tuple:
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        return f"{self.type.__name__}({inner})"

    def unflatten(self, leaves):
        return unflatten(self, leaves)


LEAF = TreeDef("leaf")

#: class -> (flatten(obj) -> (children, aux), unflatten(aux, children) -> obj)
_NODES: dict = {}


def register_pytree_node(cls: type, flatten_fn: Callable, unflatten_fn: Callable) -> None:
    """Make instances of `cls` containers for `mx.compile`, `grad`, `vmap` and friends.

    `flatten_fn(obj)` returns `(children, aux)`: a sequence of subtrees and hashable data that
    rebuilds the object with them (it is part of compile's cache key);
    `unflatten_fn(aux, children)` returns the rebuilt object. Example, a KV cache::

        register_pytree_node(KVCache, lambda c: ((c.keys, c.values), c.offset),
                             lambda offset, kv: KVCache(*kv, offset))
    """
    if not isinstance(cls, type):
        raise TypeError(f"[register_pytree_node] Expected a class, got {cls!r}.")
    if not callable(flatten_fn) or not callable(unflatten_fn):
        raise TypeError("[register_pytree_node] flatten_fn and unflatten_fn must be callable.")
    _NODES[cls] = (flatten_fn, unflatten_fn)


def _node_rules(tree):
    """(flatten, unflatten) when `tree` is a registered or dataclass instance, else None."""
    rules = _NODES.get(type(tree))
    if rules is None and dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        rules = _DATACLASS
    return rules


def node_parts(tree):
    """(children, rebuild) for a dataclass or registered instance, `rebuild(children)` making
    a new one of the same structure; None for anything else."""
    rules = _node_rules(tree)
    if rules is None:
        return None
    children, aux = rules[0](tree)
    unflatten_fn = rules[1] or _dataclass_unflatten(type(tree))
    return list(children), lambda new: unflatten_fn(aux, new)


def leaf_paths(tree, prefix: str = "", is_leaf: Optional[Callable] = None,
               nodes: bool = True) -> list:
    """[(path, leaf), ...] in `flatten`'s order, paths written as Python would index them:
    `prefix[0]['w']`, a dataclass field as `.name` (with `nodes=False`, dataclasses and
    registered containers are leaves, as for MLX's functions)."""
    out = []
    _leaf_paths(tree, prefix, is_leaf, nodes, out)
    return out


def _leaf_paths(tree, path, is_leaf, nodes, out):
    if is_leaf is not None and is_leaf(tree):
        out.append((path, tree))
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            _leaf_paths(v, f"{path}[{i}]", is_leaf, nodes, out)
    elif isinstance(tree, dict):
        for k, v in tree.items():
            _leaf_paths(v, f"{path}[{k!r}]", is_leaf, nodes, out)
    elif nodes and _node_rules(tree) is not None:
        children, aux = _node_rules(tree)[0](tree)
        names = aux[0] if _node_rules(tree) is _DATACLASS else range(len(children))
        for name, v in zip(names, children):
            sub = f"{path}.{name}" if isinstance(name, str) else f"{path}[{name}]"
            _leaf_paths(v, sub, is_leaf, nodes, out)
    else:
        out.append((path, tree))


def _dataclass_flatten(obj):
    """Children: the `init` fields; a field declared `field(metadata={"static": True})` is
    auxiliary data instead (part of the structure and of compile's key, never traced)."""
    fields = [f for f in dataclasses.fields(obj) if f.init]
    names = tuple(f.name for f in fields if not f.metadata.get("static"))
    static = tuple((f.name, getattr(obj, f.name)) for f in fields if f.metadata.get("static"))
    return [getattr(obj, n) for n in names], (names, static)


def _dataclass_unflatten(cls):
    return lambda aux, children: cls(**dict(zip(aux[0], children)), **dict(aux[1]))


_DATACLASS = (_dataclass_flatten, None)  # unflattened by its class (TreeDef.type)


def _flatten(tree, is_leaf, out) -> TreeDef:
    if is_leaf is not None and is_leaf(tree):
        out.append(tree)
        return LEAF
    if isinstance(tree, list):
        return TreeDef("list", type(tree), (), [_flatten(c, is_leaf, out) for c in tree])
    if isinstance(tree, tuple):
        return TreeDef("tuple", type(tree), (), [_flatten(c, is_leaf, out) for c in tree])
    if isinstance(tree, dict):
        keys = list(tree.keys())
        extra = tree.default_factory if isinstance(tree, defaultdict) else None
        return TreeDef("dict", type(tree), keys, [_flatten(tree[k], is_leaf, out) for k in keys],
                       extra)
    rules = _node_rules(tree)
    if rules is not None:
        children, aux = rules[0](tree)
        return TreeDef("node", type(tree), (aux,), [_flatten(c, is_leaf, out) for c in children])
    out.append(tree)
    return LEAF


def flatten(tree, is_leaf: Optional[Callable] = None):
    """(leaves in order, TreeDef). Dicts keep their insertion order."""
    out = []
    td = _flatten(tree, is_leaf, out)
    return out, td


def leaves(tree, is_leaf: Optional[Callable] = None) -> list:
    return flatten(tree, is_leaf)[0]


def structure(tree, is_leaf: Optional[Callable] = None) -> TreeDef:
    return flatten(tree, is_leaf)[1]


def _build(td: TreeDef, it):
    if td.kind == "leaf":
        return next(it)
    children = [_build(c, it) for c in td.children]
    t = td.type
    if td.kind == "list":
        return children if t is list else t(children)
    if td.kind == "tuple":
        if t is tuple:
            return tuple(children)
        return t(*children) if hasattr(t, "_fields") else t(children)
    if td.kind == "node":
        rules = _NODES.get(t)
        unflatten_fn = rules[1] if rules is not None else _dataclass_unflatten(t)
        return unflatten_fn(td.keys[0], children)
    pairs = zip(td.keys, children)
    if t is dict:
        return dict(pairs)
    if issubclass(t, defaultdict):
        return t(td._extra, pairs)
    if issubclass(t, OrderedDict):
        return t(pairs)
    return dict(pairs)


def unflatten(treedef: TreeDef, leaves_):
    """Rebuild the tree of `treedef` from a sequence of exactly `treedef.num_leaves` leaves."""
    leaves_ = list(leaves_)
    if len(leaves_) != treedef.num_leaves:
        raise ValueError(f"[tree] Expected {treedef.num_leaves} leaves for {treedef!r}, "
                         f"got {len(leaves_)}.")
    return _build(treedef, iter(leaves_))


def map_structure(fn: Callable, tree, *rest, is_leaf: Optional[Callable] = None):
    """Strict tree_map: every tree in `rest` must have `tree`'s structure (ValueError if not)."""
    lv, td = flatten(tree, is_leaf)
    others = []
    for r in rest:
        rl, rtd = flatten(r, is_leaf)
        if rtd != td:
            raise ValueError(f"[tree] Tree structures differ: {td!r} and {rtd!r}.")
        others.append(rl)
    return unflatten(td, [fn(*xs) for xs in zip(lv, *others)])


# -- MLX's mlx.utils ------------------------------------------------------------------------
def tree_map(fn: Callable, tree: Any, *rest: Any, is_leaf: Optional[Callable] = None) -> Any:
    """Apply `fn` to the leaves of `tree` (and the matching nodes of `rest`), keeping the
    structure. Trees in `rest` may be supersets of `tree`; dict subclasses come back as dicts."""
    if is_leaf is not None and is_leaf(tree):
        return fn(tree, *rest)
    if isinstance(tree, (list, tuple)):
        t = type(tree)
        subtrees = (tree_map(fn, child, *(r[i] for r in rest), is_leaf=is_leaf)
                    for i, child in enumerate(tree))
        return t(*subtrees) if hasattr(tree, "_fields") else t(subtrees)
    if isinstance(tree, dict):
        return {k: tree_map(fn, child, *(r[k] for r in rest), is_leaf=is_leaf)
                for k, child in tree.items()}
    return fn(tree, *rest)


def tree_map_with_path(fn: Callable, tree: Any, *rest: Any, is_leaf: Optional[Callable] = None,
                       path: Optional[Any] = None) -> Any:
    """tree_map where `fn(path, leaf, *rest_leaves)` also gets the dotted path ("a.0.b")."""
    if is_leaf is not None and is_leaf(tree):
        return fn(path, tree, *rest)
    if isinstance(tree, (list, tuple)):
        prefix = f"{path}." if path else ""
        t = type(tree)
        subtrees = (tree_map_with_path(fn, child, *(r[i] for r in rest), is_leaf=is_leaf,
                                       path=f"{prefix}{i}")
                    for i, child in enumerate(tree))
        return t(*subtrees) if hasattr(tree, "_fields") else t(subtrees)
    if isinstance(tree, dict):
        prefix = f"{path}." if path else ""
        return {k: tree_map_with_path(fn, child, *(r[k] for r in rest), is_leaf=is_leaf,
                                      path=f"{prefix}{k}")
                for k, child in tree.items()}
    return fn(path, tree, *rest)


def tree_flatten(tree: Any, prefix: str = "", is_leaf: Optional[Callable] = None,
                 destination: Optional[dict] = None) -> list | dict:
    """[("a.0.b", leaf), ...] (or a dict when `destination` is a dict). The first character of
    `prefix` is dropped, as in MLX: `tree_flatten(t, prefix=".w")` gives "w.0", ..."""
    if destination is None:
        destination = []
    if isinstance(destination, list):
        add = destination.extend
    elif isinstance(destination, dict):
        add = destination.update
    else:
        raise ValueError("Destination should be either a list or a dictionary or None")
    _flatten_paths(tree, prefix, is_leaf, add)
    return destination


def _flatten_paths(tree, prefix, is_leaf, add):
    if is_leaf is not None and is_leaf(tree):
        add([(prefix[1:], tree)])
    elif isinstance(tree, (list, tuple)):
        for i, item in enumerate(tree):
            _flatten_paths(item, f"{prefix}.{i}", is_leaf, add)
    elif isinstance(tree, dict):
        for key, value in tree.items():
            _flatten_paths(value, f"{prefix}.{key}", is_leaf, add)
    else:
        add([(prefix[1:], tree)])


def tree_unflatten(tree: list | dict) -> Any:
    """Rebuild a tree from [("a.0.b", leaf), ...] or {"a.0.b": leaf}. A level whose keys are
    all integers becomes a list (gaps are filled with empty dicts, as in MLX)."""
    items = list(tree.items()) if isinstance(tree, dict) else list(tree)
    if len(items) == 1:
        key, value = items[0]
        if key == "":
            return value
    children = {}
    for key, value in items:
        current, _, rest = key.partition(".")
        children.setdefault(current, []).append((rest, value))
    try:
        int_keys = {int(k): k for k in children}
        is_list = len(int_keys) == len(children)  # "01" and "1" are different keys
    except ValueError:
        is_list = False
    if is_list:
        out = []
        for i, k in sorted(int_keys.items()):
            out.extend({} for _ in range(i - len(out)))
            out.append(tree_unflatten(children[k]))
        return out
    return {k: tree_unflatten(v) for k, v in children.items()}


def tree_reduce(fn: Callable, tree: Any, initializer: Any = None,
                is_leaf: Optional[Callable] = None) -> Any:
    """Fold `fn(acc, leaf)` over the leaves; without an initializer the first leaf starts."""
    if is_leaf is not None and is_leaf(tree):
        return tree if initializer is None else fn(initializer, tree)
    acc = initializer
    if isinstance(tree, (list, tuple)):
        for item in tree:
            acc = tree_reduce(fn, item, acc, is_leaf)
    elif isinstance(tree, dict):
        for item in tree.values():
            acc = tree_reduce(fn, item, acc, is_leaf)
    else:
        return tree if acc is None else fn(acc, tree)
    return acc


def tree_merge(tree_a: Any, tree_b: Any, merge_fn: Optional[Callable] = None) -> Any:
    """A deep `dict.update`: the union of two trees; leaves present in both are combined by
    `merge_fn` (ValueError without one). Empty containers count as empty subtrees.

    Unlike MLX (which iterates a set of keys), merged dicts list `tree_a`'s keys first and then
    `tree_b`'s new ones, so the result's order is deterministic.
    """
    empty_a = isinstance(tree_a, (dict, list, tuple)) and len(tree_a) == 0
    empty_b = isinstance(tree_b, (dict, list, tuple)) and len(tree_b) == 0
    if empty_a and empty_b:
        if type(tree_a) is not type(tree_b):
            raise ValueError(
                f"Cannot merge {type(tree_a).__name__} with {type(tree_b).__name__}")
        return type(tree_a)()
    if empty_a:
        tree_a = None
    if empty_b:
        tree_b = None
    if tree_a is None and tree_b is not None:
        return tree_b
    if tree_a is not None and tree_b is None:
        return tree_a
    if isinstance(tree_a, (list, tuple)) and isinstance(tree_b, (list, tuple)):
        t = type(tree_a)
        subtrees = (tree_merge(a, b, merge_fn) for a, b in zip_longest(tree_a, tree_b))
        return t(*subtrees) if hasattr(tree_a, "_fields") else t(subtrees)
    if isinstance(tree_a, dict) and isinstance(tree_b, dict):
        keys = list(tree_a.keys()) + [k for k in tree_b.keys() if k not in tree_a]
        return {k: tree_merge(tree_a.get(k, None), tree_b.get(k, None), merge_fn) for k in keys}
    if merge_fn is None:
        raise ValueError("Trees contain elements at the same locations but no merge "
                         "function was provided")
    return merge_fn(tree_a, tree_b)
