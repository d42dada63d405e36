"""Sequential: call modules (or any callables) one after another."""
from __future__ import annotations

from .base import Module

__all__ = ["Sequential"]


class Sequential(Module):
    """Calls each of `modules` on the output of the previous one."""

    def __init__(self, *modules: Module):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for m in self.layers:
            x = m(x)
        return x
