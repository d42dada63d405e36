"""Public ops: creation (to be filled)."""

__all__ = []
