"""Public ops: reduction (to be filled)."""

__all__ = []
