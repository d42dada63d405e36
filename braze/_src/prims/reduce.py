"""Primitives: reduce family (to be filled)."""
