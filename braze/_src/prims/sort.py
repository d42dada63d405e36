"""Primitives: sort family (to be filled)."""
