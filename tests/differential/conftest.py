"""The differential tests run on braze's `cpu` backend (Numba kernels, the users' default),
whatever tests/conftest.py selects for the rest of the suite."""
import pytest

from braze._src import config


@pytest.fixture(autouse=True)
def _cpu_backend():
    with config.override(backend="cpu"):
        yield
