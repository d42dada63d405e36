"""Op table: elementwise."""
from . import OpCase  # noqa: F401

CASES = []
