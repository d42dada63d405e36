"""The executor: a compiled call's whole plan as one lazy node, run on NumPy buffers by one
generated Python function.

Outside any transform, a call of a compiled function with fixed shapes returns the outputs of
one `PlanCall` node instead of a fresh node per step of its plan (`ReplayPlan.run`). When it
is evaluated, `Executor.run_node` runs the steps in order on plain buffers: no array, no
scheduler visit and no consumer count per step, which cost about 2 us a step (a small training
step has ~90). The steps are straight-line code written for the plan (`_source`), since a loop
that unpacks and dispatches step tuples costs another ~1 us a step. Evaluating any output
evaluates them all (a compiled call's outputs are used together; MLX evaluates the compiled
graph's nodes instead).

Buffers are given back as the scheduler gives them back: a value is dropped after its last
step, and a kernel or an update writes into a buffer that nothing else can see (the scheduler's
donation rule, here per step): an intermediate at its last use, or an input of the call that
only this node references (a training step's parameters and optimizer state). Whether anything
else sees a buffer is read from its reference count at that step, so a live view of it (a
reshape a later step reads) keeps it.

A step that raises (Ctrl-C, an error, out of memory) leaves the outputs lazy on a graph of
ordinary nodes: the values computed so far, then the remaining steps (`_recover`). An input
whose buffer an earlier step took is no longer read by it, so evaluating again continues where
the call stopped and gives what an uninterrupted call gives.
"""
from __future__ import annotations

import operator
import sys
from dataclasses import dataclass

import numpy as np

from .. import config, memory
from ..array import node, node_group, view_of
from ..prims.base import Primitive, bind
from ..prims.core import Copy
from ..prims.shape import InPlaceUpdate
from ..scheduler import DONATION
from .compiled import Compiled, Expanded, _evaluating, backend, free_inputs

_getrefcount = sys.getrefcount
_data_of = operator.attrgetter("_data")
_COPY = Copy()

# how a step runs
_CALL, _KERNEL, _UPDATE, _RESHAPE = range(4)
#: fewer steps than this keep a node per step (one node costs what the executor saves)
MIN_STEPS = 2


def supported(prim) -> bool:
    """Whether the executor can run a step of `prim`: a primitive evaluated from its buffers,
    a fused region, or an update (the other node-evaluated ones need their graph node)."""
    return not prim.node_eval or isinstance(prim, (Compiled, InPlaceUpdate))


class Executor:
    """A plan's steps over positions in one flat list of buffers: the call's inputs, the
    plan's constants, then each step's outputs.

    A step is (how it runs, primitive, input positions, first output position, output
    (shape, NumPy dtype)s, input slots that may be donated, positions that die at it, the
    region's shape for a fused region).
    """

    __slots__ = ("n_in", "n_vals", "steps", "outs", "avals", "dtypes", "ext", "rebuild", "fn")

    def __init__(self, n_real, n_in, in_avals, steps, outs):
        """`n_real` call inputs, then the plan's constants: `n_in` in all (the node's
        inputs), `in_avals` their (shape, dtype)s; `steps`: (primitive, input positions,
        output (shape, dtype)s) per step; `outs`: the positions the node outputs."""
        self.n_in = n_in
        self.rebuild = steps
        avals = list(in_avals)
        for prim, args, out_avals in steps:
            avals.extend(out_avals)
        self.n_vals = len(avals)
        self.avals = avals
        self.dtypes = [d for _, d in avals]
        self.outs = tuple(outs)
        last = {}
        for s, (prim, args, _) in enumerate(steps):
            for i in args:
                last[i] = s
        keep = set(outs)
        pos = n_in
        built = []
        ext = set()
        for s, (prim, args, out_avals) in enumerate(steps):
            dies = tuple(sorted({i for i in args if last[i] == s and i not in keep}))
            region = None
            if isinstance(prim, Compiled):
                kind = _KERNEL
                region = out_avals[0][0] if not prim.ir.reduce_ndim else \
                    prim.output_shape([avals[i][0] for i in args])
                may = region.count(1) != len(region)  # one element: cheaper to allocate
            elif isinstance(prim, InPlaceUpdate):
                kind, may = _UPDATE, True
            else:
                kind, may = (_RESHAPE if prim.pure_reshape else _CALL), False
            donate = ()
            if may and DONATION:
                donate = tuple(k for k, i in enumerate(args)
                               if i in dies and args.count(i) == 1
                               and not n_real <= i < n_in  # constants stay as they are
                               and (kind == _KERNEL or k == 0))
                ext.update(args[k] for k in donate if args[k] < n_in)
            outs_np = tuple((shape, dt.np_dtype) for shape, dt in out_avals)
            built.append((kind, prim, args, pos, outs_np, donate, dies, region))
            pos += len(out_avals)
        self.steps = built
        self.ext = tuple(sorted(ext))
        self.fn = None  # the generated function (`_function`), made on the first run

    # -- evaluation ----------------------------------------------------------------------------
    def run_node(self, node_) -> list:
        """The output buffers of the PlanCall node `node_`, its inputs' buffers donated where
        nothing else sees them."""
        ins = node_._inputs
        free = free_inputs(node_, ins, self.ext) if self.ext else None
        return self.run(list(map(_data_of, ins)), ins, free, node_)

    def run(self, vals, ins=None, free=None, node_=None) -> list:
        """The output buffers for the input buffers `vals` (a list it consumes); `ins`, `free`,
        `node_`: the node's inputs, which of them may be donated, the node."""
        fn = self.fn
        if fn is None:
            fn = self.fn = _function(self)
        return fn(vals, ins, free, node_)

    @property
    def source(self) -> str:
        """The Python function that runs the steps (`_source`; BRAZE_DEBUG=4 prints it)."""
        return _source(self)[0]


def _function(ex):
    """`ex`'s steps as one generated Python function (`_source`)."""
    src, env = _source(ex)
    if config.get().debug >= 4:
        from .diagnostics import emit
        emit(f"[compile] executor function:\n{src}")
    code = compile(src, "<braze executor>", "exec")
    exec(code, env)
    return env["run"]


def _source(ex) -> tuple:
    """(source, globals) of a function `run(vals, ins, free, node_)` that runs `ex`'s steps as
    straight-line code, a local `v<i>` per value and `m<i>` for the bytes it counts: a loop
    over step tuples costs ~1 us a step in Python's dispatch alone.

    It follows `Executor`'s rules: a value is deleted after its last step (with its count), a
    step writes into a buffer only when `_mine`/`_theirs` find no other holder, and a step
    that raises hands what it has to `_failed`.
    """
    env = {"C": memory.Counters, "ndarray": np.ndarray, "fixed": _fixed, "mine": _mine,
           "theirs": _theirs, "failed": _failed, "ev": _evaluating, "backend": backend,
           "ex": ex}
    n_in = ex.n_in
    read = {i for step in ex.steps for i in step[2]}
    lines = ["def run(vals, ins, free, node_):"]
    if n_in:
        lines.append(f"    {_names('v', range(n_in))}, = vals")
    lines += ["    vals.clear()  # the locals alone hold the inputs (see `_theirs`)",
              "    rc = backend().run_compiled", "    s = -1", "    try:"]
    for s, (kind, prim, args, pos, outs_np, donate, dies, region) in enumerate(ex.steps):
        env[f"p{s}"] = prim
        outs = range(pos, pos + len(outs_np))
        dead = tuple(p for p in outs if p not in read and p not in ex.outs)
        body = [f"s = {s}  # {prim.name}"]
        xs = ", ".join(f"v{i}" for i in args)
        took = {args[k]: _take(args[k], ex, n_in) for k in donate}
        if kind == _RESHAPE:
            body.append(f"v{pos} = v{args[0]}.reshape({outs_np[0][0]!r})")
        elif kind == _KERNEL:
            env[f"ir{s}"], env[f"r{s}"], env[f"o{s}"] = prim.ir, region, prim.origin
            body.append(f"ev.origin = o{s}")
            fl = "None"
            if took:
                flags = [f"d{k}" if k in donate else "False" for k in range(len(args))]
                body += [f"d{k} = {took[args[k]]}" for k in donate]
                body.append(f"fl = [{', '.join(flags)}] if "
                            f"{' or '.join(f'd{k}' for k in donate)} else None")
                fl = "fl"
            body.append(f"o = rc(ir{s}, [{xs}], r{s}, {fl})")
            body += _unpack(outs, outs_np, s, env)
        elif kind == _UPDATE and took:
            a = args[0]
            body.append(f"if {took[a]} and v{a}.flags.writeable and v{a}.flags.c_contiguous:")
            body.append(f"    p{s}.write({xs})  # an update in its input's own buffer")
            body.append(f"    v{pos} = v{a}")
            body += ["    " + line for line in _moved(pos, a, n_in)]
            body.append(f"    m{pos} = {_nbytes(outs_np[0])}")
            body.append("else:")
            body.append(f"    o = p{s}.eval_cpu({xs})")
            body += ["    " + line for line in _unpack(outs, outs_np, s, env)]
            body.append(f"    m{pos} = 0 if v{pos}.base is not None else {_nbytes(outs_np[0])}")
        else:
            body.append(f"o = p{s}.eval_cpu({xs})")
            body += _unpack(outs, outs_np, s, env)
        if kind != _UPDATE or not took:
            body += [f"m{p} = 0 if v{p}.base is not None else {_nbytes(outs_np[p - pos])}"
                     for p in outs]
        if kind == _KERNEL and took:
            body.append("if fl is not None:")
            for p in outs:
                for a in took:
                    body.append(f"    if v{p} is v{a}:")
                    body += ["        " + line for line in _moved(p, a, n_in)]
        counted = [f"m{p}" for p in outs if _nbytes(outs_np[p - pos])]
        if counted:
            body.append(f"C.active += {' + '.join(counted)}")
            body.append("if C.active > C.peak: C.peak = C.active")
        gone = tuple(dies) + dead
        mids = [f"m{i}" for i in gone if i >= n_in]
        if mids:
            body.append(f"C.active -= {' + '.join(mids)}")
        if gone:
            body.append(f"del {', '.join([f'v{i}' for i in gone] + mids)}")
        lines += ["        " + line for line in body]
    lines += ["    except BaseException:", "        failed(ex, node_, locals(), s)",
              "        raise"]
    kept = sorted({i for i in ex.outs if i >= n_in})
    if kept:  # the scheduler counts the outputs' bytes as it sets them
        lines.append(f"    C.active -= {' + '.join(f'm{i}' for i in kept)}")
    lines.append(f"    return [{', '.join(f'v{i}' for i in ex.outs)}]")
    return "\n".join(lines) + "\n", env


def _names(prefix, positions) -> str:
    return ", ".join(f"{prefix}{i}" for i in positions)


def _nbytes(aval) -> int:
    shape, npd = aval
    return int(np.prod(shape, dtype=np.int64)) * npd.itemsize


def _take(i, ex, n_in) -> str:
    """The expression that says whether the buffer of value `i` may be written into."""
    return f"mine(v{i})" if i >= n_in else f"theirs(v{i}, {i}, free)"


def _unpack(outs, outs_np, s, env) -> list:
    """Lines setting the step's output locals from its result list `o`, each checked to be
    an ndarray of the promised shape and dtype."""
    lines = []
    for j, p in enumerate(outs):
        env[f"s{p}"], env[f"t{p}"] = outs_np[j]
        lines.append(f"v{p} = o[{j}]")
        lines.append(f"if type(v{p}) is not ndarray or v{p}.dtype is not t{p} or "
                     f"v{p}.shape != s{p}: v{p} = fixed(v{p}, s{p}, t{p}, p{s})")
    return lines + ["del o"]


def _moved(p, a, n_in) -> list:
    """Lines moving the byte count of value `a`, whose buffer value `p` took, to `p`."""
    if a >= n_in:
        return [f"C.active -= m{a}", f"m{a} = 0"]
    return [f"C.active -= ins[{a}]._mem", f"ins[{a}]._mem = 0"]


def _mine(d) -> bool:
    """Whether nothing but the executor's local holds the intermediate buffer `d`: no view
    of it, no array, no caller (the local, the argument, getrefcount's argument)."""
    return type(d) is np.ndarray and d.base is None and _getrefcount(d) == 3


def _theirs(d, i, free) -> bool:
    """Whether the buffer `d` of the call's input `i` may be written into: the input array
    only this node references (`free`), and nothing else holds the buffer (the array's
    `_data`, the executor's local, the argument, getrefcount's argument)."""
    return (free is not None and free.get(i, False) and type(d) is np.ndarray
            and d.base is None and _getrefcount(d) == 4)


def _failed(ex, node_, names, s) -> None:
    """After step `s` raised: stop counting what the call held, and leave the node's outputs
    lazy on what it computed (`_recover`)."""
    vals = [names.get(f"v{i}") for i in range(ex.n_vals)]
    for i in range(ex.n_in, ex.n_vals):
        memory.Counters.active -= names.get(f"m{i}", 0)
    if s >= 0:  # the failed step's outputs are not its results
        pos, n = ex.steps[s][3], len(ex.steps[s][4])
        vals[pos:pos + n] = [None] * n
    if node_ is not None:
        _recover(ex, node_, vals, s)


def _fixed(o, shape, npd, prim):
    """A step's result as an ndarray of the exact dtype and shape the plan promised."""
    o = np.asarray(o)
    if o.dtype != npd:
        o = o.astype(npd)
    if o.shape != shape:
        raise RuntimeError(f"[eval] {prim.name} produced shape {o.shape}, expected {shape}.")
    return o


def _recover(ex, node_, vals, failed):
    """After step `failed` raised: the node's outputs become lazy copies of a graph of
    ordinary nodes, the values computed so far as constants and the remaining steps as
    nodes, so evaluating them again continues from there."""
    ins = node_._inputs
    arrays = list(ins) + [None] * (ex.n_vals - len(ins))
    for i in range(len(ins), ex.n_vals):
        if vals[i] is not None:
            arrays[i] = view_of(vals[i], ex.dtypes[i])
    _step_nodes(ex, arrays, max(failed, 0))
    sibs = node_._siblings or (node_,)
    for x in ins:
        x._nc -= len(sibs)
    for out, i in zip(sibs, ex.outs):
        src = arrays[i]
        out._prim = _COPY
        out._inputs = (src,)
        out._siblings = None
        out._idx = 0
        src._nc += 1


def _step_nodes(ex, arrays, start):
    """Fill `arrays` (a value per position) with lazy nodes for the steps from `start` on
    whose outputs are missing."""
    for s in range(start, len(ex.steps)):
        prim, args, out_avals = ex.rebuild[s]
        pos = ex.steps[s][3]
        if any(arrays[pos + j] is None for j in range(len(out_avals))):
            xs = tuple(arrays[i] for i in args)
            if len(out_avals) == 1:
                (shape, dtype), = out_avals
                arrays[pos] = node(shape, dtype, prim, xs)
            else:
                arrays[pos:pos + len(out_avals)] = node_group(out_avals, prim, xs)


@dataclass(frozen=True, eq=False, repr=False)
class PlanCall(Expanded, Primitive):
    """One call of a compiled function: its plan's steps as a single node (`Executor`)."""

    executor: Executor
    fun_name: str = ""

    node_eval = True

    @property
    def name(self) -> str:
        return f"compiled {self.fun_name}" if self.fun_name else "compiled"

    @property
    def foldable(self) -> bool:
        return False

    def __repr__(self):
        return f"PlanCall({self.fun_name})"

    def abstract_eval(self, *inputs) -> list:
        return [self.executor.avals[i] for i in self.executor.outs]

    def eval_cpu(self, *xs) -> list:
        return self.executor.run(list(xs))

    def eval_node(self, node_) -> list:
        return self.executor.run_node(node_)

    def expand(self, inputs) -> list:
        """The plan's steps as ordinary nodes on `inputs`: one array per output."""
        ex = self.executor
        arrays = list(inputs) + [None] * (ex.n_vals - len(inputs))
        for s, (prim, args, out_avals) in enumerate(ex.rebuild):
            pos = ex.steps[s][3]
            outs = bind(prim, tuple(arrays[i] for i in args))
            arrays[pos:pos + len(out_avals)] = outs if isinstance(outs, list) else [outs]
        return [arrays[i] for i in ex.outs]

    def unfold(self, inputs) -> list:
        """The outputs as a graph of the plan's steps, one node each (what graph displays
        show: the fused regions and the other primitives the call runs)."""
        ex = self.executor
        arrays = list(inputs) + [None] * (ex.n_vals - len(inputs))
        _step_nodes(ex, arrays, 0)
        return [arrays[i] for i in ex.outs]
