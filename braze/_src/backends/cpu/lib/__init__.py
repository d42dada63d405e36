"""The code that runs inside generated cpu kernels (the host-side launch code is `launch.py`).

- `math.py`: the vectorizable math library (exp, log, erf, sin, ... in float32 and float64);
- `scalar.py`: every per-element function a kernel calls by name: half-precision conversions,
  braze's casts, integer and min/max semantics, and the kernel-callable copies of the math
  functions (`scalar.MATH`, compiled on first use by `scalar.prepare`);
- `rows.py`: the chunk reductions of row kernels (pairwise sums, NaN-propagating max/min).

Generated kernel modules import their names from these modules by absolute path.
"""
