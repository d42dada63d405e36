"""Primitives: unary family (to be filled)."""
