"""Op table: creation."""
from . import OpCase  # noqa: F401

CASES = []
