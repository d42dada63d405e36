"""Public ops: shape (to be filled)."""

__all__ = []
