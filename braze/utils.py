"""MLX's `mlx.utils`: tree helpers for nested lists, tuples and dicts of arrays; and, beyond MLX,
`register_pytree_node` (containers of your own for compile and the transforms)."""
from braze._src.tree import (  # noqa: F401
    register_pytree_node,
    tree_flatten,
    tree_map,
    tree_map_with_path,
    tree_merge,
    tree_reduce,
    tree_unflatten,
)

__all__ = ["tree_map", "tree_map_with_path", "tree_flatten", "tree_unflatten", "tree_reduce",
           "tree_merge", "register_pytree_node"]
