"""The primitive base class and its registry.

A primitive is a frozen dataclass: its fields are its parameters, so equality gives CSE,
hashing gives kernel keys and repr gives graph dumps. Subclasses register themselves.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..array import TraceState, node, node_group

REGISTRY: dict[str, type] = {}


class _LateOps:
    """The public ops, as seen by transform rules.

    Rules emit ordinary ops (so transforms nest), but ops sit above prims; the ops package
    hands itself over here when it is imported, instead of prims importing upwards.
    """

    _module = None

    def __getattr__(self, name):
        if _LateOps._module is None:
            raise RuntimeError("braze._src.ops has not been imported yet.")
        return getattr(_LateOps._module, name)


ops = _LateOps()


def register_ops(module) -> None:
    _LateOps._module = module


@dataclass(frozen=True)
class Primitive:
    """Base of every primitive. Subclasses override the rules they support."""

    #: set on primitives that have no derivative (comparisons, integer ops, argmax, ...)
    differentiable = True
    #: the elementwise operation this primitive is inside a generated kernel, as an op name
    #: ("exp", "add", "cast", ...) that each backend spells in its own table, with the
    #: primitive's parameters (Log's base, Round's decimals); having one makes it fusable
    kernel_op = None
    #: a transcendental or libm call (tens of cycles): worth storing rather than recomputing
    costly = False
    #: its float16/bfloat16 result is exactly representable (kernels skip the rounding)
    exact = False
    #: its output equals its first input once gradients are traced (Copy, StopGradient):
    #: the compile passes bypass it
    noop = False
    #: a reduction over some axes of its input (`reduced_axes()`, `reduce_type`)
    reduction = False
    #: inputs from this slot on are read for their shape only (None: every input's value)
    shape_only_from = None
    #: whether it can re-infer its output shape from new input shapes in a shapeless trace
    reinfers_shape = True
    #: True when the scheduler should call `eval_node(array)` instead of `eval_cpu(*buffers)`
    #: (a fused kernel that may donate an input buffer needs to see the graph node)
    node_eval = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if not cls.__name__.startswith("_"):
            if cls.__name__ in REGISTRY and REGISTRY[cls.__name__] is not cls:
                raise TypeError(f"Primitive {cls.__name__} is defined twice.")
            REGISTRY[cls.__name__] = cls

    @property
    def name(self) -> str:
        return type(self).__name__

    def abstract_eval(self, *inputs) -> list:
        """Output [(shape, dtype), ...] from inputs that have `.shape` and `.dtype`."""
        raise NotImplementedError(f"[{self.name}] abstract_eval is not implemented.")

    def eval_cpu(self, *xs) -> list:
        """NumPy reference kernel: list of output ndarrays.

        Never return an input object itself (return `x.view()`): a buffer owned by two arrays
        would be counted twice in the memory statistics.
        """
        raise NotImplementedError(f"[{self.name}] eval_cpu is not implemented.")

    def vjp(self, primals, cotangents, argnums, outputs):
        raise NotImplementedError(f"[{self.name}] vjp is not implemented.")

    def jvp(self, primals, tangents, argnums):
        raise NotImplementedError(f"[{self.name}] jvp is not implemented.")

    def vmap(self, inputs, axes):
        raise NotImplementedError(f"[{self.name}] vmap is not implemented.")


def bind(prim: Primitive, inputs: tuple):
    """Create the lazy output array(s) of `prim` applied to `inputs`."""
    avals = prim.abstract_eval(*inputs)
    tracer = TraceState.depth > 0 and any(x._tracer for x in inputs)
    if len(avals) == 1:
        shape, dtype = avals[0]
        return node(shape, dtype, prim, inputs, tracer)
    return list(node_group(avals, prim, inputs, tracer))


def broadcast_shapes(*shapes, op="broadcast_shapes") -> tuple:
    """NumPy broadcasting of shapes; ValueError naming the op and the shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o == d or d == 1:
                continue
            if o == 1:
                out[off + i] = d
            else:
                pretty = " and ".join(str(tuple(t)) for t in shapes)
                raise ValueError(f"[{op}] Shapes {pretty} cannot be broadcast.")
    return tuple(out)
