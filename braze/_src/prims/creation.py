"""Primitives: creation family (to be filled)."""
