"""`mx.distributed`: MLX's communication API (re-exported from braze._src.distributed).

Single process by default: `init()` returns a group of size 1 whose collectives return their
input; see braze/_src/distributed.py for the backend interface a multi-process backend fills.
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
