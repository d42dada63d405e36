"""Primitives: binary family (to be filled)."""
