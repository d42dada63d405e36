"""Primitives: indexing family (to be filled)."""
