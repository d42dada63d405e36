"""Op table: indexing."""
from . import OpCase  # noqa: F401

CASES = []
