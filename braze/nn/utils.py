"""`nn.value_and_grad`, `nn.checkpoint` and `nn.average_gradients` (MLX's `mlx.nn.utils`)."""
from __future__ import annotations

from functools import wraps
from typing import Any, Callable, Optional

import braze.core as mx
from braze.utils import tree_map

from .layers.base import Module

__all__ = ["value_and_grad", "checkpoint", "average_gradients"]


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


def average_gradients(gradients: Any, group: Optional[mx.distributed.Group] = None,
                      all_reduce_size: int = 32 * 1024**2,
                      communication_stream: Optional[mx.Stream] = None) -> Any:
    """Average `gradients` over the processes of `group` (default: `mx.distributed.init()`).

    With one process (the default group) the gradients are returned unchanged. Otherwise each
    gradient is summed with `mx.distributed.all_sum` and divided by the group size.
    (`all_reduce_size`, which MLX uses to batch small gradients into one message, and
    `communication_stream` are accepted for compatibility.)
    """
    dist = getattr(mx, "distributed", None)
    if dist is None:
        try:
            from braze.core import distributed as dist  # noqa: PLC0415
        except ImportError:
            return gradients
    group = group or dist.init()
    n = group.size()
    if n == 1:
        return gradients
    return tree_map(lambda g: dist.all_sum(g, group=group) / n, gradients)
