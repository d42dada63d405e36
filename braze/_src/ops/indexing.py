"""Public ops: indexing (to be filled)."""

__all__ = []
