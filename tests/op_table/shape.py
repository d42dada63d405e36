"""Op table: shape."""
from . import OpCase  # noqa: F401

CASES = []
