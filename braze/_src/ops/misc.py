"""Public ops: misc (to be filled)."""

__all__ = []
