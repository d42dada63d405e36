"""`nn.value_and_grad`, `nn.checkpoint`, `nn.average_gradients` and `clip_grad_norm_sharded`
(MLX's `mlx.nn.utils`)."""
from __future__ import annotations

import itertools
from functools import wraps
from typing import Any, Callable, Optional

import braze.core as mx
from braze.utils import tree_flatten, tree_map, tree_reduce, tree_unflatten

from .layers.base import Module

__all__ = ["value_and_grad", "checkpoint", "average_gradients", "clip_grad_norm_sharded"]


def value_and_grad(model: Module, fn: Callable) -> Callable:
    """`fn(*args) -> (value, grads)` where grads are with respect to the model's trainable
    parameters (a tree shaped like `model.trainable_parameters()`).

    The traced parameters are put into the model while `fn` runs and the model's own arrays
    are put back afterwards, so no tracer outlives the call.
    """
    def inner_fn(params, *args, **kwargs):
        model.update(params)
        return fn(*args, **kwargs)

    value_grad_fn = mx.value_and_grad(inner_fn)

    @wraps(fn)
    def wrapped(*args, **kwargs):
        params = model.trainable_parameters()
        try:
            return value_grad_fn(params, *args, **kwargs)
        finally:
            model.update(params)

    return wrapped


def checkpoint(module: Module, fn: Optional[Callable] = None) -> Callable:
    """Gradient checkpointing of `fn` (default: the module's `__call__`) with respect to the
    module's trainable parameters and the call's inputs."""
    if fn is None:
        fn = module

    def inner_fn(params, *args, **kwargs):
        module.update(params)
        return fn(*args, **kwargs)

    checkpointed = mx.checkpoint(inner_fn)

    @wraps(fn)
    def wrapped(*args, **kwargs):
        params = module.trainable_parameters()
        try:
            return checkpointed(params, *args, **kwargs)
        finally:
            module.update(params)

    return wrapped


def _buckets(sizes, itemsize, bucket_bytes):
    """Consecutive index groups of at least `bucket_bytes` bytes each (the last may be less)."""
    groups, cur, nbytes = [], [], 0
    for i, n in enumerate(sizes):
        cur.append(i)
        nbytes += n * itemsize
        if nbytes >= bucket_bytes:
            groups.append(cur)
            cur, nbytes = [], 0
    return groups + [cur] if cur else groups


def average_gradients(gradients: Any, group: Optional[mx.distributed.Group] = None,
                      all_reduce_size: int = 32 * 1024**2,
                      communication_stream: Optional[mx.Stream] = None) -> Any:
    """Average `gradients` over the processes of `group` (default: `mx.distributed.init()`).

    With one process the gradients are returned unchanged. Otherwise, as in MLX, arrays of one
    dtype are flattened and concatenated into buckets of at least `all_reduce_size` bytes, one
    `mx.distributed.all_sum` per bucket (`all_reduce_size <= 0`, or mixed dtypes: one per
    array), and divided by the group size. `communication_stream` is passed to all_sum.
    """
    group = group or mx.distributed.init()
    n = group.size()
    if n == 1:
        return gradients

    def average(x):
        return mx.distributed.all_sum(x, group=group, stream=communication_stream) / n

    flat = tree_flatten(gradients)
    if all_reduce_size <= 0 or len({g.dtype for _, g in flat}) > 1:
        return tree_map(average, gradients)
    if not flat:
        return gradients
    out = []
    for idx in _buckets([g.size for _, g in flat], flat[0][1].dtype.size, all_reduce_size):
        bucket = average(mx.concatenate([flat[i][1].reshape(-1) for i in idx]))
        cuts = list(itertools.accumulate(flat[i][1].size for i in idx[:-1]))
        for i, part in zip(idx, mx.split(bucket, cuts)):
            out.append((flat[i][0], part.reshape(flat[i][1].shape)))
    return tree_unflatten(out)


def clip_grad_norm_sharded(gradients: Any, max_norm: float,
                           group: Optional[mx.distributed.Group] = None):
    """Clip the global norm of gradients sharded over `group` (MLX's
    `mlx.nn.utils.clip_grad_norm_sharded`): the squared norms of each rank's shard are summed
    over the group. Returns the rescaled local gradients and the global norm."""
    local = tree_reduce(lambda acc, g: acc + g.square().sum(), gradients, 0.0)
    norm = mx.sqrt(mx.distributed.all_sum(local, group=group))
    scale = mx.minimum(max_norm / (norm + 1e-6), 1.0)
    return tree_map(lambda g: g * scale, gradients), norm
