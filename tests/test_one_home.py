"""A primitive carries everything about itself: the compiler and the backends ask it (its
`kernel_op`, `costly`, `exact`, `noop`, `reduction`, `shape_only_from`, `reinfers_shape`)
instead of testing class names, so adding a primitive touches its own files only.

The check reads the source of every module in `braze/_src/compile` and `braze/_src/backends`:
no comparison with a `__name__`, and no comparison with, or collection of, strings that name
primitive classes. `compile/export.py` is exempt: its file format stores MLX's primitive names.
"""
import ast
import pathlib

import pytest

import braze.core  # noqa: F401  (registers every primitive)
from braze._src.prims.base import REGISTRY

ROOT = pathlib.Path(__file__).resolve().parent.parent / "braze" / "_src"
EXEMPT = {"compile/export.py"}
FILES = sorted(p for d in ("compile", "backends") for p in (ROOT / d).rglob("*.py")
               if str(p.relative_to(ROOT)) not in EXEMPT)


def _names_primitive(node) -> bool:
    return isinstance(node, ast.Constant) and node.value in REGISTRY


def _collection_of_names(node) -> bool:
    items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
    return items is not None and any(_names_primitive(e) for e in items if e is not None)


def _is_dunder_name(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "__name__"


def offences(tree) -> list:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_dunder_name(s) for s in sides) and not any(
                    isinstance(s, ast.Constant) and s.value == "__main__" for s in sides):
                out.append((node.lineno, "compares a __name__"))
            if any(_names_primitive(s) or _collection_of_names(s) for s in sides):
                out.append((node.lineno, "compares with a primitive's class name"))
        elif isinstance(node, (ast.Set, ast.Tuple, ast.List, ast.Dict)) and \
                _collection_of_names(node):
            out.append((node.lineno, "a collection of primitive class names"))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_class_name_tests(path):
    found = offences(ast.parse(path.read_text(), str(path)))
    assert not found, "\n".join(f"{path.name}:{ln}: {why}" for ln, why in found)


def test_the_check_finds_what_it_forbids():
    bad = ('if type(p).__name__ == "Exp": pass\n'
           'COSTLY = {"Exp", "Log"}\n'
           'x = name in ("Reduce", "ArgReduce")\n')
    assert {ln for ln, _ in offences(ast.parse(bad))} == {1, 2, 3}
    good = 'if p.kernel_op == "exp" and p.costly: pass\nk = "Compiled" + "".join(n)\n'
    assert offences(ast.parse(good)) == []
