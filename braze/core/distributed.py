"""`mx.distributed`: MLX's communication API (re-exported from braze._src.distributed).

Under `mpirun` (or `python -m braze.launch -n N`) with mpi4py installed, `init()` returns the
world group and the collectives are lazy primitives over MPI; otherwise a group of size 1 whose
collectives return their input. docs/distributed.md has the details.
"""
from braze._src.distributed import (  # noqa: F401
    Group,
    all_gather,
    all_max,
    all_min,
    all_sum,
    init,
    is_available,
    recv,
    recv_like,
    send,
    sum_scatter,
)

__all__ = ["Group", "init", "is_available", "all_sum", "all_max", "all_min", "all_gather",
           "sum_scatter", "send", "recv", "recv_like"]
