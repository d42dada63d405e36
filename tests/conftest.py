import os
import sys

# The suite runs on the backend users get: the default `cpu` backend (Numba kernels). Tests
# that use the `numpy` reference backend as an oracle select it explicitly
# (`config.override(backend="numpy")`); `BRAZE_BACKEND=numpy python -m pytest` runs the whole
# suite on the reference instead. Kernels are built once per machine: the disk kernel cache
# (~/.cache/braze, or BRAZE_CACHE_DIR) is shared by every test and every run.

# Kernels are built in the call (not in the background while the call runs on the reference
# backend, the default for users): every compiled call a test checks runs a native kernel.
# tests/test_background_builds.py turns background builds on where it tests them.
os.environ.setdefault("BRAZE_BACKGROUND_BUILDS", "0")

sys.path.insert(0, os.path.dirname(__file__))
