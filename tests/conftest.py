import os
import sys

# The suite checks semantics on the `numpy` reference backend, where a test costs no kernel
# builds; the Numba `cpu` backend (the users' default) is compared against it in
# tests/test_cpu_backend.py and tests/test_kernel_cache.py, which select it explicitly.
# BRAZE_BACKEND=cpu python -m pytest runs everything on the native backend instead.
os.environ.setdefault("BRAZE_BACKEND", "numpy")

sys.path.insert(0, os.path.dirname(__file__))
