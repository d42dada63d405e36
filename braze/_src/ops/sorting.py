"""Public ops: sorting (to be filled)."""

__all__ = []
