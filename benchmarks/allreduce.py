"""mx.distributed.all_sum against mpi4py's Allreduce on the same buffers, 4 B to 64 MiB of
float32 (and a float16 row: reduced in float32):

    python -m braze.launch -n 2 benchmarks/allreduce.py [--max-mib 64]

Rank 0 prints the median time per call and the bus bandwidth (2 (n-1)/n bytes per call, the
usual allreduce convention).
"""
import argparse
import time

import numpy as np

import braze.core as mx


def _median_time(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--max-mib", type=int, default=64)
    args = p.parse_args()
    world = mx.distributed.init(strict=True)
    from mpi4py import MPI

    n, rank = world.size(), world.rank()
    if rank == 0:
        print(f"{n} processes; bus bandwidth = bytes * 2 (n-1)/n / time")
        print(f"{'bytes':>10} {'dtype':>8} {'braze':>10} {'mpi4py':>10} {'braze GB/s':>11}")
    sizes = [1, 256, 1 << 16, 1 << 20, args.max_mib << 18]
    for count, dt in [(c, mx.float32) for c in sizes] + [(1 << 20, mx.float16)]:
        x = mx.ones((count,), dtype=dt)
        buf, out = np.ones(count, dt.np_dtype), np.empty(count, dt.np_dtype)
        repeat = 50 if count <= 1 << 16 else 10
        t_mx = _median_time(lambda: mx.eval(mx.distributed.all_sum(x)), repeat)
        t_np = _median_time(lambda: MPI.COMM_WORLD.Allreduce(buf, out), repeat) \
            if dt == mx.float32 else float("nan")
        nbytes = count * dt.size
        if rank == 0:
            bw = nbytes * 2 * (n - 1) / n / t_mx / 1e9
            print(f"{nbytes:>10} {dt.name:>8} {t_mx * 1e6:>8.1f}us {t_np * 1e6:>8.1f}us "
                  f"{bw:>11.2f}")


if __name__ == "__main__":
    main()
