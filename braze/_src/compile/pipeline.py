"""The compile pipeline: one list of named passes, each a function Tape -> Tape.

    simplify   merge_scalar_constants, remove_noops, square_powers, cse,
               transposed_products, fold_constants, dce
    rows       decompose (Softmax/LogSumExp into primitives), fuse_rows (reductions with
               their elementwise neighbours), online_softmax and chan_variance (row-kernel
               algorithms marked on the regions' IR)
    fuse       fuse (elementwise regions)

`BRAZE_COMPILE_MODE` switches groups off (`no_simplify`, `no_reduce_fusion`: the rows group,
`no_fuse`: rows and fuse). At `BRAZE_DEBUG=3` every pass prints the tape after it, or
"unchanged" when it changed nothing; with `BRAZE_CHECKS=1` the tape's contract is verified after
each (`Tape.check`). `PASSES` is read at every trace, so a tool can wrap the
passes (benchmarks/compile_latency.py times each one).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from .. import config
from . import diagnostics as diag
from . import fuse as F
from . import fuse_rows as FR
from . import row_algorithms as RA
from . import simplify as S
from .compiled import Compiled
from .tape import Tape


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Tape], Tape]
    group: str  # "simplify", "rows" or "fuse": what BRAZE_COMPILE_MODE switches off


PASSES = (
    Pass("merge_scalar_constants", S.merge_scalar_constants, "simplify"),
    Pass("remove_noops", S.remove_noops, "simplify"),
    Pass("square_powers", S.square_powers, "simplify"),
    Pass("cse", S.cse, "simplify"),
    Pass("transposed_products", S.transposed_products, "simplify"),
    Pass("fold_constants", S.fold_constants, "simplify"),
    Pass("dce", S.dce, "simplify"),
    Pass("decompose", FR.expand_composites, "rows"),
    Pass("fuse_rows", FR.fuse_rows, "rows"),
    Pass("online_softmax", RA.online_softmax, "rows"),
    Pass("chan_variance", RA.chan_variance, "rows"),
    Pass("fuse", F.fuse, "fuse"),
)

#: compile mode -> the groups it skips
SKIPPED = {"": (), "no_simplify": ("simplify",), "no_reduce_fusion": ("rows",),
           "no_fuse": ("rows", "fuse")}


def passes(groups=None) -> list:
    """The passes of `groups` (all when None), in pipeline order."""
    return [p for p in PASSES if groups is None or p.group in groups]


def run(tape: Tape, groups=None, name: str = "", trace_no: int = 0) -> Tape:
    """`tape` through the passes of `groups` (None: all) that the compile mode keeps,
    printing the tape after each at BRAZE_DEBUG=3."""
    cfg = config.get()
    skip = SKIPPED[cfg.compile_mode]
    show = cfg.debug >= 3 or bool(cfg.dump_dir)
    for p in passes(groups):
        if p.group in skip:
            continue
        before = _fingerprint(tape) if show else None
        tape = p.run(tape)
        if cfg.checks:
            tape.check(p.name)
        if show and _fingerprint(tape) == before:
            diag.show_unchanged(name, trace_no, p.name)
        else:
            diag.show_tape(name, trace_no, f"after {p.name}", tape, 3)
    _name_regions(tape, name)
    return tape


def _name_regions(tape: Tape, name: str) -> None:
    """Each new fused region's node records the compiled function it comes from."""
    for a in tape.nodes:
        prim = a._prim
        if isinstance(prim, Compiled) and not prim.origin and not a._idx:
            named = dataclasses.replace(prim, origin=name)
            for s in a._siblings if a._siblings is not None else (a,):
                s._prim = named


def _fingerprint(tape: Tape) -> tuple:
    """What a pass can change: the nodes, their primitives and inputs, the outputs, by
    identity (the last item holds the objects, so no id is reused while it lives)."""
    nodes = [(a, a._prim, a._inputs) for a in tape.nodes]
    ids = tuple((id(a), id(p), tuple(map(id, ins))) for a, p, ins in nodes)
    return ids, tuple(map(id, tape.outputs)), _Keep(nodes, tape.outputs)


class _Keep:
    """Objects a fingerprint keeps alive; every two compare equal (only ids are compared)."""

    def __init__(self, *objs):
        self.objs = objs

    def __eq__(self, other):
        return isinstance(other, _Keep)

    __hash__ = None
