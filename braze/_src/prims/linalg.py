"""Primitives: linalg family (to be filled)."""
