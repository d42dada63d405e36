"""Op table: linalg."""
from . import OpCase  # noqa: F401

CASES = []
