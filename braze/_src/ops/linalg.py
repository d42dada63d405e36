"""Public ops: linalg (to be filled)."""

__all__ = []
