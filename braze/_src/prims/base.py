"""The primitive base class and its registry.

A primitive is a frozen dataclass: its fields are its parameters, so equality gives CSE,
hashing gives kernel keys and repr gives graph dumps. Subclasses register themselves.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

from ..array import TraceState, node, node_group

REGISTRY: dict[str, type] = {}


# -- frozen dataclasses made when first used ---------------------------------------------------
# Python 3.11's dataclass() compiles six methods per class (about 1 ms a class): over the ~80
# primitive classes that is a third of `import braze.core`, while a program uses a few of them.
# `lazy_dataclass` is `dataclass(frozen=True)` run on the class when it is first needed: when
# an instance is made (until then the class has no `__init__` of its own, and
# `Primitive.__init__` makes it and calls the one made; a class is made with its bases and its
# subclasses, so no pending class inherits a made one's `__init__`; pickle and copy, which make
# instances without `__init__`, pass through `Primitive.__setstate__`), or when its fields are
# asked for (`__dataclass_fields__`, `__dataclass_params__` and `__match_args__` are
# descriptors in its dict until then: dataclasses.fields(cls), and a subclass being processed,
# which reads its bases' fields). The class made is exactly what the decorator makes, but for
# `__setstate__` (which does what pickle and copy do without one). A thread that meets a class
# being made waits for it.
_PENDING: set = set()
_REALIZING: set = set()
_PENDING_LOCK = threading.RLock()
_FIELD_ATTRS = ("__dataclass_fields__", "__dataclass_params__", "__match_args__")


def _realize(cls) -> None:
    with _PENDING_LOCK:
        if cls not in _PENDING or cls in _REALIZING:  # made, or being made by this thread
            return
        _REALIZING.add(cls)
        try:
            for base in cls.__mro__[1:]:
                _realize(base)
            del cls.__match_args__  # dataclass() sets it only when the class has none
            dataclass(frozen=True)(cls)  # sets the other two over their descriptors
        finally:
            _REALIZING.discard(cls)
            _PENDING.discard(cls)
        # a pending subclass would now inherit this class's __init__: make it too
        for sub in cls.__subclasses__():
            _realize(sub)


def _realize_mro(cls) -> None:
    for c in cls.__mro__:
        if c in _PENDING:
            _realize(c)


class _UntilRealized:
    """A class attribute that makes its class (and its bases) dataclasses when read."""

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, cls):
        _realize_mro(cls)
        for c in cls.__mro__:  # the first value that is not a descriptor of ours
            v = c.__dict__.get(self.name, self)
            if not isinstance(v, _UntilRealized):
                return v
        raise AttributeError(self.name)


def lazy_dataclass(cls):
    """`dataclass(frozen=True)`, applied to a Primitive subclass when first used (above)."""
    if cls.__init__ is not Primitive.__init__:  # a base of it is made already: now, then
        return dataclass(frozen=True)(cls)
    for name in _FIELD_ATTRS:
        setattr(cls, name, _UntilRealized(name))
    _PENDING.add(cls)
    return cls


def realize_all() -> None:
    """Make every pending lazy dataclass now (for code that inspects all classes at once)."""
    for cls in list(_PENDING):
        _realize(cls)


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
    #: its NumPy kernel is several times slower than a generated one (a scalar loop or many
    #: passes): a compiled function gives it a kernel even with no elementwise neighbour
    numpy_slow = False
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
    #: its output is its one input with the last two axes swapped (a matrix transpose)
    swaps_matrix_axes = False
    #: its output is `a @ b` of its two inputs over their last two axes and nothing more, so
    #: its transpose is `b^T @ a^T` (the compile pass `transposed_products`)
    matrix_product = False
    #: its one input reshaped to the node's shape is its value: the scheduler reshapes
    #: without calling `eval_cpu` (which recomputes the shape; a decode step has ~40 such)
    pure_reshape = False

    @property
    def foldable(self) -> bool:
        """Whether a compiled function may compute this node once, at trace time, when its
        inputs are constants (the pass `fold_constants`): a deterministic primitive whose
        NumPy kernel gives what the run would. Elementwise ones that round exactly (no libm
        call: a kernel's exp may differ from NumPy's in the last bit); view, indexing and
        creation primitives say so themselves."""
        return self.kernel_op is not None and not self.costly

    def __init__(self, *args, **kwargs):
        # the __init__ of a class without fields, and of a lazy_dataclass not made yet
        cls = type(self)
        if any(c in _PENDING for c in cls.__mro__):
            _realize_mro(cls)  # waits while another thread makes it
        init = cls.__init__
        if init is not Primitive.__init__:
            init(self, *args, **kwargs)
        elif args or kwargs:
            raise TypeError(f"{cls.__qualname__}.__init__() takes no arguments")

    def __setstate__(self, state):
        # pickle and copy make instances without __init__: the class is made here, then the
        # state is restored as they restore it without a __setstate__
        _realize_mro(type(self))
        if isinstance(state, tuple) and len(state) == 2:
            state, slots = state
            for k, v in (slots or {}).items():
                object.__setattr__(self, k, v)
        if state:
            self.__dict__.update(state)

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
    return bind_avals(prim, inputs, prim.abstract_eval(*inputs))


def bind_avals(prim: Primitive, inputs: tuple, avals: list):
    """`bind` with the outputs' [(shape, dtype), ...] already computed by `abstract_eval`."""
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
