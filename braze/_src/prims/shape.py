"""Primitives: shape family (to be filled)."""
