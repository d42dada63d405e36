"""Learning-rate schedules with MLX's formulas: each returns a function of the step (an
array, the optimizer's `state["step"]`) that returns the scheduled value as an array, so a
compiled step recomputes it from captured state.

Boundaries as MLX: `cosine_decay` and `linear_schedule` hold their end value for every step at
or beyond `decay_steps`/`steps`; `step_decay` decays at multiples of `step_size`;
`join_schedules` switches to schedule i+1 at step == boundary[i], which then sees
`step - boundary[i]` (0 at the switch).
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Callable, List

import braze.core as mx

__all__ = ["exponential_decay", "step_decay", "cosine_decay", "join_schedules",
           "linear_schedule"]


def _real(name, value, fn):
    if isinstance(value, bool) or not isinstance(value, (Real, mx.array)):
        raise TypeError(f"[{fn}] {name} must be a number, got {type(value).__name__}: "
                        f"{value!r}.")
    return value


def _int(name, value, fn):
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise TypeError(f"[{fn}] {name} must be an int, got {type(value).__name__}: "
                        f"{value!r}.")
    return value


def exponential_decay(init: float, decay_rate: float) -> Callable:
    """init * decay_rate ** step."""
    _real("init", init, "exponential_decay")
    _real("decay_rate", decay_rate, "exponential_decay")

    def schedule(step):
        return init * decay_rate ** step

    return schedule


def step_decay(init: float, decay_rate: float, step_size: int) -> Callable:
    """init * decay_rate ** (step // step_size)."""
    _real("init", init, "step_decay")
    _real("decay_rate", decay_rate, "step_decay")
    step_size = _int("step_size", step_size, "step_decay")
    if step_size < 1:
        raise ValueError(f"step_size must be greater than 0, but got {step_size}.")

    def schedule(step):
        return init * (decay_rate ** (step // step_size))

    return schedule


def cosine_decay(init: float, decay_steps: int, end: float = 0.0) -> Callable:
    """end + (init - end) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2."""
    _real("init", init, "cosine_decay")
    _real("end", end, "cosine_decay")
    decay_steps = _int("decay_steps", decay_steps, "cosine_decay")
    if decay_steps < 1:
        raise ValueError(f"decay_steps must be greater than 0, but got {decay_steps}.")

    def schedule(step):
        s = mx.minimum(step, decay_steps)
        decay = 0.5 * (1.0 + mx.cos((math.pi / decay_steps) * s))
        return end + decay * (init - end)

    return schedule


def join_schedules(schedules: List[Callable], boundaries: List[int]) -> Callable:
    """Schedule i+1 takes over at `boundaries[i]` and is called with `step - boundaries[i]`."""
    schedules = list(schedules)
    boundaries = [_int("boundary", b, "join_schedules") for b in boundaries]
    if len(schedules) == 0:
        raise ValueError("Must provide at least 1 schedule to join.")
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(f"Received {len(boundaries)} boundaries but expected "
                         f"{len(schedules) - 1}.")
    for s in schedules:
        if not callable(s):
            raise TypeError(f"[join_schedules] schedules must be callables, got {s!r}.")

    def schedule(step):
        output = schedules[0](step)
        for boundary, sched in zip(boundaries, schedules[1:]):
            output = mx.where(step < boundary, output, sched(step - boundary))
        return output

    return schedule


def linear_schedule(init: float, end: float, steps: int) -> Callable:
    """init + (end - init) * min(step, steps) / steps."""
    _real("init", init, "linear_schedule")
    _real("end", end, "linear_schedule")
    steps = _int("steps", steps, "linear_schedule")
    if steps < 1:
        raise ValueError(f"steps must be greater than 0, but got {steps}.")

    def schedule(step):
        step = mx.minimum(step, steps)
        return step * ((end - init) / steps) + init

    return schedule
