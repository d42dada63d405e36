"""Imports flow one way (the layer table of docs/architecture.md): a module never imports a
higher layer."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "braze"

# Lowest first. A module may import its own layer or any lower one.
LAYERS = [
    {"_src.config", "_src.dtypes", "_src.casts", "_src.tree", "_src.memory", "_src.jit",
     "_src.np_errors", "_src.threads"},
    {"_src.array", "_src.graph", "_src.scheduler", "_src.device", "_src.metal"},
    {"_src.prims"},
    {"_src.ops"},
    {"_src.transforms"},
    {"_src.random", "_src.distributed", "_src.io"},
    {"_src.compile"},
    {"_src.backends"},
    {"core", "utils", "nn", "optimizers", "demo", "launch"},
]


def _layer_of(mod: str):
    """Layer index of a dotted module name relative to the braze package."""
    best = None
    for i, group in enumerate(LAYERS):
        for prefix in group:
            if mod == prefix or mod.startswith(prefix + "."):
                best = i
    return best


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: pathlib.Path, mod: str):
    tree = ast.parse(path.read_text())
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            elif node.module and node.module.startswith("braze."):
                names = [node.module[len("braze."):]]
            else:
                continue
            for n in names:
                yield n.strip(".")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("braze."):
                    yield a.name[len("braze."):]


def test_no_upward_imports():
    bad = []
    for path in ROOT.rglob("*.py"):
        mod = _module_name(path)
        mine = _layer_of(mod)
        if mine is None:
            continue
        for target in _imports(path, mod):
            theirs = _layer_of(target)
            if theirs is not None and theirs > mine:
                bad.append(f"{mod} imports {target}")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_layer_table_knows_every_module():
    unknown = [_module_name(p) for p in ROOT.rglob("*.py")
               if _layer_of(_module_name(p)) is None and _module_name(p) not in ("", "_src")]
    assert not unknown, f"modules missing from the layer table: {unknown}"
