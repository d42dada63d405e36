"""Op table: reduction."""
from . import OpCase  # noqa: F401

CASES = []
