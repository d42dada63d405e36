"""Public ops: elementwise (to be filled)."""

__all__ = []
