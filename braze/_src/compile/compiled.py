"""The `Compiled` primitive: one fused region (a `KernelIR`) as a graph node.

- `name` is MLX's: "Compiled" + the primitive names of the region in tape order
  (`CompiledBroadcastMultiplyAdd`), so `export_to_dot` output reads like MLX's.
- `abstract_eval`: every output has the region's common shape (the broadcast of the input
  shapes, see `KernelIR.output_shape`), or for a per-row output of a row region that shape with
  the reduced axes set to 1; dtypes come from the IR; this is what shapeless replay calls.
- Evaluation is delegated to the active backend (`BRAZE_BACKEND`, resolved by name at run time:
  the backends layer sits above this one). `eval_node(node)` additionally decides which inputs
  may be donated: an input is donatable when nothing but this node references the array object
  and nothing but that array references its buffer (checked with `sys.getrefcount` and the
  arrays' consumer counts `_nc`), it owns its buffer, and no transform is keeping the graph.
  A region of one element donates nothing: allocating it costs less than the checks.
- vjp / jvp / vmap expand the region back into its primitives (`expand`) and let the ordinary
  transform drivers apply their rules (MLX raises here; braze can transform a fused graph,
  e.g. `grad` of a replayed compiled function built outside any trace).
"""
from __future__ import annotations

import importlib
import math
import operator
import sys
from dataclasses import dataclass, field

from .. import config as _config
from .. import memory
from ..array import TraceState
from ..np_errors import restore, silence
from ..prims import random as _random_prims
from ..prims.base import Primitive, bind, ops
from ..transforms.autodiff import expanded_jvp, expanded_vjp
from ..transforms.vmap import expanded_vmap
from . import notice
from .kernel_ir import KernelIR

_getrefcount = sys.getrefcount
_data_of = operator.attrgetter("_data")
_evaluating = notice._current  # the thread's compiled function, named in build notices


_backends = None


def backend():
    """The active backend (the backends package is found by name: it sits above compile)."""
    global _backends, _instances
    if _backends is None:
        _backends = importlib.import_module("braze._src.backends")
        _instances = importlib.import_module("braze._src.backends.base")._INSTANCES
    # the common case without the registry's fallback logic: the knob's backend is built
    inst = _instances.get(_config._current.backend)
    return inst if inst is not None else _backends.get()


_instances: dict = {}
_random_prims._NATIVE[0] = backend  # an eager program's draws get the backend's Threefry


def backend_named(name: str):
    """The backend registered as `name`, built; ValueError when it is not available."""
    base = importlib.import_module("braze._src.backends.base")
    importlib.import_module("braze._src.backends")  # registers the built-in backends

    def build(n):
        try:
            return base._build(n) if n in base.registered() else None
        except ImportError:  # its compiler is not installed (Numba for cpu)
            return None

    inst = build(name)
    if inst is None:
        raise ValueError(f"[compile] backend {name!r} is not available here (available: "
                         f"{', '.join(n for n in base.registered() if build(n))}); a "
                         "backend that is planned but not built yet (cuda) cannot lower.")
    return inst


def programs(ir) -> list:
    """The active backend's built programs for `ir` (each with `how`, "built" or "disk", and
    `seconds`), for diagnostics; none for a backend that keeps no per-region record."""
    e = getattr(backend(), "_entries", {}).get(ir.key)
    return list(e.programs.values()) if e is not None else []


def prefetch(tape) -> None:
    """Hand the active backend the regions the first run of `tape` (after the passes) is about
    to evaluate, in order, so that it may build their kernels ahead of need and concurrently
    (`BRAZE_BUILD_WORKERS`; the cpu backend's `prefetch`). Each region comes with its input
    shapes and, per input, whether the run will likely donate it: made inside the tape, not an
    output, and this region its last reader in tape order (the run frees an array as its
    readers finish, so the last one finds it free: `Compiled._donatable`). Only a hint: what
    the run needs is built as ever."""
    if not _config._current.build_workers:
        return
    hint = getattr(backend(), "prefetch", None)
    if hint is None:
        return
    last: dict = {}  # id(array) -> id of the inputs tuple of its last reader
    for a in tape.nodes:
        for x in a._inputs:
            last[id(x)] = id(a._inputs)  # siblings share their inputs tuple: one reader
    outs = {id(x) for x in tape.outputs}
    regions, seen = [], set()
    for a in tape.nodes:
        ir = getattr(a._prim, "ir", None)
        if ir is None or id(a._inputs) in seen:
            continue
        seen.add(id(a._inputs))
        shapes = [tuple(x.shape) for x in a._inputs]
        likely = [x._prim is not None and last.get(id(x)) == id(a._inputs)
                  and id(x) not in outs for x in a._inputs]
        regions.append((ir, shapes, likely))
    if regions:
        hint(regions)


class Expanded:
    """Mixin of a primitive that stands for a graph of other primitives (`expand(inputs)`):
    transforms build that graph and transform it by its primitives' own rules."""

    def vjp(self, primals, cotangents, argnums, outputs):
        return expanded_vjp(self.expand, primals, cotangents, argnums)

    def jvp(self, primals, tangents, argnums):
        return expanded_jvp(self.expand, primals, tangents, argnums)

    def vmap(self, inputs, axes):
        return expanded_vmap(self.expand, inputs, axes)


@dataclass(frozen=True, repr=False)
class Compiled(Expanded, Primitive):
    """A fused elementwise region; its single field is the region's KernelIR."""

    ir: KernelIR
    _shapes: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    #: the compiled function whose trace made the region (named in build notices)
    origin: str = field(default="", compare=False, hash=False, repr=False)

    #: the scheduler calls `eval_node(node)` (donation needs the node, not just its buffers)
    node_eval = True

    @property
    def name(self) -> str:
        return self.ir.name

    def __repr__(self):
        return f"{self.ir.name}(key={self.ir.key})"

    @property
    def differentiable(self) -> bool:
        return any(getattr(op.prim, "differentiable", True) for op in self.ir.ops)

    # -- shapes --------------------------------------------------------------------------------
    def output_shape(self, input_shapes) -> tuple:
        key = tuple(input_shapes)
        out = self._shapes.get(key)
        if out is None:
            out = self.ir.output_shape(key)
            if len(self._shapes) > 64:
                self._shapes.clear()
            self._shapes[key] = out
        return out

    def abstract_eval(self, *inputs) -> list:
        shape = self.output_shape([x.shape for x in inputs])
        return list(zip(self.ir.output_shapes(shape), self.ir.output_dtypes))

    # -- evaluation ----------------------------------------------------------------------------
    def eval_cpu(self, *xs) -> list:
        """Evaluate on NumPy buffers (no donation: the buffers' owners are unknown here)."""
        notice.evaluating(self.origin)
        return backend().run_compiled(self.ir, xs, None, None)

    def eval_node(self, node) -> list:
        """Evaluate the unevaluated node `node` (one of this primitive's outputs), donating
        the input buffers nothing else references."""
        ins = node._inputs
        ir = self.ir
        # a row region's outputs may be per-row: the backend wants the region's full shape
        shape = node._shape if not ir.reduce_ndim else self.output_shape([x._shape for x in ins])
        donatable = None
        # a single element is cheaper to allocate than to prove donatable (~10 us a call);
        # `count` rather than max(): this is the hot path of tiny compiled calls
        if ins and shape.count(1) != len(shape) and not (node._tracer and TraceState.depth):
            free = free_inputs(node, ins, self.__dict__.get("_slots") or self._run_slots())
            if free:
                donatable = [False] * len(ins)
                for k in free:
                    donatable[k] = True
        xs = list(map(_data_of, ins))  # C-level: no comprehension frame
        _evaluating.origin = self.origin  # notice.evaluating, inlined (the tiny-call path)
        outs = backend().run_compiled(ir, xs, shape, donatable)
        if donatable:
            _move_byte_counts(ins, xs, outs, donatable)
        return outs

    def one_element(self, avals):
        """The launch shape of this region for outputs `avals` [(shape, dtype)] when the launch
        is one element of an elementwise region, which a call runs at once (replay.py
        `_run_now`); None otherwise."""
        shape = avals[0][0]
        if self.ir.reduce_ndim or math.prod(shape) != 1 or any(s != shape for s, _ in avals):
            return None
        return shape

    def run_now(self, xs, shape) -> list:
        """The output buffers of a one-element launch on evaluated input buffers `xs`. Nothing
        is donated (one element is cheaper to allocate); a reference run (a kernel still
        building) warns no more than it would inside an eval."""
        _evaluating.origin = self.origin
        tok = silence()
        try:
            return backend().run_compiled(self.ir, xs, shape, None)
        finally:
            restore(tok)

    def _run_slots(self) -> tuple:
        """The inputs read at run time (not baked constants), cached beside the frozen fields
        (not part of equality or hash)."""
        m = self.__dict__.get("_slots")
        if m is None:
            mask = self.ir.const_mask
            m = self.__dict__["_slots"] = tuple(k for k in range(len(mask)) if not mask[k])
        return m

    # -- transforms: the region's own primitives, transformed by their ordinary rules -------
    def expand(self, inputs) -> list:
        """The region rebuilt from its primitives on `inputs`: one array per output, of the
        output's shape (a value smaller than the region is broadcast to it)."""
        vals = list(inputs)
        for op in self.ir.ops:
            vals.append(bind(op.prim, tuple(vals[r] for r in op.args)))
        shapes = self.ir.output_shapes(self.output_shape([x.shape for x in inputs]))
        return [vals[r] if tuple(vals[r].shape) == tuple(s) else ops.broadcast_to(vals[r], s)
                for r, s in zip(self.ir.outputs, shapes)]


def free_inputs(node, ins, slots) -> dict:
    """The slots among `slots` of the inputs `ins` of `node` (an unevaluated node) whose
    array and buffer nothing but the node references, as {slot: True}: a kernel may write
    its output there (the node's siblings share one inputs tuple, unless an update
    re-pointed one's)."""
    sibs = node._siblings
    if sibs is None:  # one holder tuple + the loop variable + getrefcount's argument
        n_slots, expect = 1, 3
    else:
        n_slots, expect = len(sibs), 3
        for s in sibs:
            if s._inputs is not ins:
                expect = len({id(s._inputs) for s in sibs}) + 2
                break
    free = {}
    for k in slots:
        x = ins[k]
        if not x._shape or x._nc != n_slots or x._prim is not None:
            continue
        if _getrefcount(x) != expect:
            continue
        d = x._data
        # the array's slot + the local + getrefcount's argument: no view, no other holder
        if d is None or d.base is not None or _getrefcount(d) != 3:
            continue
        free[k] = True
    return free


def _move_byte_counts(ins, xs, outs, donatable):
    """A donated buffer now belongs to the output: stop counting it under the input too."""
    out_ids = {id(o) for o in outs}
    for k in range(len(ins)):
        x = ins[k]
        if donatable[k] and id(xs[k]) in out_ids and x._mem:
            memory.Counters.active -= x._mem
            x._mem = 0
