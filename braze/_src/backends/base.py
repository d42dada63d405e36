"""The backend interface and the backend registry (resolved by name, `BRAZE_BACKEND`).

A backend evaluates `Compiled` nodes: given a region's `KernelIR`, its input buffers, the output
shape and the inputs it may donate, it returns the output buffers. Native backends are built
from a renderer (KernelIR + `Variant` -> source text, a module of the backend) and two small
parts defined here:

- `Compiler`: source -> a loaded callable, with an `identity` string for cache keys;
- `Program`: the callable, launched with input/output buffers, the shape and strides.

The `numpy` backend (backends/numpy) interprets the IR with each primitive's `eval_cpu`; it is
always available and is the oracle the native backends are tested against.

Donation (MLX's rule: an input buffer nothing else holds may become an output): `Compiled`
decides which inputs nothing else references (`donatable`); the backend decides which of those
it can write an output into (`assign_donors`): inputs in order, one output cursor, same dtype,
shape equal to the output shape, not 0-d, not a baked constant, and a buffer layout the backend
can write through.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Variant:
    """Which loop a kernel is rendered for: `contiguous` (one flat loop) or `strided` with
    `ndim` collapsed dimensions."""

    kind: str = "contiguous"
    ndim: int = 0

    @property
    def suffix(self) -> str:
        return "_contiguous" if self.kind == "contiguous" else f"_strided_{self.ndim}"


class Compiler:
    """Source text -> loaded callable. `identity` names the toolchain for cache keys."""

    identity = ""

    def compile(self, source: str, name: str):  # pragma: no cover - interface
        raise NotImplementedError


class Program:
    """A loaded kernel: `program(inputs, outputs, shape, strides)` writes `outputs`."""

    def __call__(self, inputs, outputs, shape, strides):  # pragma: no cover - interface
        raise NotImplementedError


class Backend:
    """Runs `Compiled` nodes (and, by default, other primitives with their `eval_cpu`)."""

    name = ""

    def available(self) -> bool:
        return True

    def eval(self, prim, inputs) -> list:
        """A non-fused node: the primitive's NumPy kernel."""
        return prim.eval_cpu(*inputs)

    def run_compiled(self, ir, inputs, out_shape, donatable=None) -> list:
        """Evaluate a region. `inputs` are NumPy buffers (baked constants included, in IR
        order), `out_shape` the common output shape (None: the IR's shape rule on the inputs),
        `donatable[k]` True when nothing but this node references input k. Returns one fresh
        (or donated) buffer per IR output, of shape `out_shape`."""
        raise NotImplementedError  # pragma: no cover - interface

    def can_write(self, buf: np.ndarray) -> bool:
        """Whether an output may be written through `buf` (owned, writeable, dense)."""
        f = buf.flags
        return buf.base is None and f.writeable and (f.c_contiguous or f.f_contiguous)

    def assign_donors(self, ir, inputs, out_shape, donatable, allowed=None) -> list:
        """For each IR output, the index of the input whose buffer it is written into, or
        None (MLX's order: inputs in order, one output cursor). `allowed[j]` False: output j
        takes no donor (per-row outputs never do)."""
        donors = [None] * len(ir.outputs)
        if not donatable or not any(donatable) or not out_shape:
            return donors
        out_dtypes = ir.output_dtypes
        j = 0
        if allowed is None and ir.reduce_ndim:
            allowed = tuple(not r for r in ir.row_outputs)
        for k in range(len(inputs)):
            if not donatable[k]:  # most inputs (a compiled step's scalars): nothing to check
                continue
            while allowed is not None and j < len(allowed) and not allowed[j]:
                j += 1
            if j == len(donors):
                break
            x = inputs[k]
            npd = out_dtypes[j].np_dtype
            if ir.inputs[k].const or x.shape != out_shape or (x.dtype is not npd
                                                               and x.dtype != npd):
                continue
            if not self.can_write(x):
                continue
            donors[j] = k
            j += 1
        return donors


# -- registry ---------------------------------------------------------------------------------
_FACTORIES: dict = {}
_INSTANCES: dict = {}
_WARNED: set = set()


def register(name: str, factory) -> None:
    """Make a backend available under `name`; `factory()` builds it on first use."""
    _FACTORIES[name] = factory
    _INSTANCES.pop(name, None)


def registered() -> list:
    return sorted(_FACTORIES)


def _build(name: str):
    inst = _INSTANCES.get(name)
    if inst is None and name in _FACTORIES:
        inst = _FACTORIES[name]()
        if not inst.available():
            inst = None
        else:
            _INSTANCES[name] = inst
    return inst


def _fallback_cpu():
    try:
        return _build("cpu")
    except ImportError:  # no Numba here: the caller falls back to the reference
        return None


def get(name: str | None = None) -> Backend:
    """The backend called `name` (default: the `BRAZE_BACKEND` knob). A backend that is not
    built or not available here falls back to `cpu` (native kernels), or to the `numpy`
    reference where `cpu` is unavailable too, with a warning once."""
    if name is None:
        from .. import config
        name = config.get().backend
    inst = _build(name)
    if inst is not None:
        return inst
    inst = _fallback_cpu() if name != "cpu" else None
    inst = inst or _build("numpy")
    if inst is None:  # pragma: no cover - numpy is always registered
        raise RuntimeError("[backend] The numpy reference backend is not registered.")
    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(f"[backend] Backend {name!r} is not available; using {inst.name!r}.",
                      RuntimeWarning, stacklevel=2)
    return inst
