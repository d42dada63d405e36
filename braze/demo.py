"""A short tour of braze: lazy arrays, MLX's ops and promotion, and NumPy interop.

Run with `python -m braze.demo`.
"""
import time

import numpy as np

import braze.core as mx


def main():
    print("braze — an MLX-compatible array framework (import braze.core as mx)\n")

    x = mx.arange(6, dtype=mx.float32).reshape(2, 3)
    y = mx.exp(x) * 2 + 1          # nothing computed yet: this builds a graph
    print("x =", x)
    print("y = exp(x) * 2 + 1 is lazy; evaluated:", y._data is not None)
    mx.eval(y)
    print("after mx.eval(y):", y._data is not None)
    print("y =", y)

    print("\nMLX's type promotion: Python scalars are weak")
    i8 = mx.array([1, 2, 3], dtype=mx.int8)
    print("  int8 array + 1   ->", (i8 + 1).dtype)
    print("  int8 array + 1.5 ->", (i8 + 1.5).dtype)

    print("\nReductions, indexing, linear algebra")
    a = mx.array(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32))
    print("  softmax row sums:", mx.softmax(a, axis=-1).sum(axis=-1))
    print("  a[::-1, 1]      :", a[::-1, 1])
    print("  trace(a @ a.T)  :", mx.trace(a @ a.T).item())

    print("\nZero-copy NumPy interop")
    n = np.asarray(y)
    print("  np.asarray(y) shares y's buffer:",
          n.__array_interface__["data"][0] == np.asarray(y).__array_interface__["data"][0])

    print("\nA 100-op elementwise chain on 8 Mi float32 elements frees as it goes")
    mx.reset_peak_memory()
    z = mx.ones((8 * 1024 * 1024,))
    mx.eval(z)
    base = mx.get_active_memory()
    t0 = time.perf_counter()
    for k in range(100):
        z = z * 1.0001 + 0.5 if k % 2 else mx.sqrt(z)
    mx.eval(z)
    dt = time.perf_counter() - t0
    extra = (mx.get_peak_memory() - base) / z.nbytes
    print(f"  {dt * 1e3:.0f} ms; peak memory above the input: {extra:.1f} buffers")


if __name__ == "__main__":
    main()
