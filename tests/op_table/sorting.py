"""Op table: sorting."""
from . import OpCase  # noqa: F401

CASES = []
