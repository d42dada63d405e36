"""Primitives: scan family (to be filled)."""
