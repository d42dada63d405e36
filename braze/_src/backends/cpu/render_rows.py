"""The `cpu` renderer for row regions (`KernelIR.reduce_ndim > 0`): one Numba loop per row.

The region's full shape is seen as R rows of C elements (the reduced trailing axes are the
columns). A kernel launch covers rows [start, stop), so the thread pool splits rows. Per row:

1. the row's offset in every input (the row index unravelled over the collapsed row dims);
2. *passes* over the row, chunk by chunk (`CHUNK` elements): a pass computes, for each
   element, the full values it needs, writes each reduction's operand into a scratch buffer
   (a loop that vectorizes), then reduces the buffer with `lib/rows.py` and folds the chunk's
   result into an accumulator (float sums in float64); pass p finishes the reductions that
   depend on p earlier ones and writes the full outputs that need p of them;
3. between passes, the per-row values (reduction results and elementwise ops on them);
4. the per-row outputs.

A row of 4096 float32 is 16 KiB, so the later passes read it from cache: each input comes
from memory once. Full values a later pass needs are recomputed, which costs arithmetic, not
memory traffic; in the `stash` variant (rows of at most `STASH_MAX` elements) values computed
by a transcendental function are stored in a row buffer instead and read back (softmax
computes each exp once).

Inputs are, per variant letter: `S` a single element (loaded once), `R` one value per row
(column stride 0), `V` contiguous along the row (column stride 1: plain indexed loads that
vectorize) and `G` any other column stride. Arguments: start, stop, C, rshape (int64[nr]),
rstrides (int64[n_vec, nr]), cstrides (int64[n_vec]), offsets (int64[n_vec]) for the
non-scalar inputs, then one 1-D buffer per run-time input, then one per output (full outputs
R*C elements, row-major; row outputs R elements). Dtypes follow render.py (half precision as
float32 rounded after every op; a half reduction accumulates in float32 and rounds once).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..base import Variant
from .body import Body, alias_lines, alias_suffix, written
from .spell import COMPUTE, HALF, LOAD, ROUND, STORAGE, Unsupported, cast, expr

CHUNK = 1024


#: costly full values a later pass needs are kept in a row buffer instead of recomputed
#: when rows have at most this many elements (the buffer then stays in cache)
STASH_MAX = 1 << 16


@dataclass(frozen=True)
class RowVariant(Variant):
    """A row kernel's variant: one letter per run-time input (S, R, V or G), and whether
    costly values are stashed in row buffers (rows of at most STASH_MAX elements)."""

    kind: str = "rows"
    letters: str = ""
    stash: bool = False
    #: write each reduction's raw accumulator instead of the outputs (`split_plan`)
    partial: bool = False
    #: the rows collapse to several dimensions (an input broadcast along a middle axis): the
    #: row index is unravelled; usually one dimension, a stride per input (a cheaper build)
    multi_dim_rows: bool = False
    #: (output j, input k) pairs: output j is written into input k's donated buffer
    alias: tuple = ()

    @property
    def suffix(self) -> str:
        return (f"_rows_{self.letters}" + ("_stash" if self.stash else "")
                + ("_partial" if self.partial else "")
                + ("_nd" if self.multi_dim_rows else "") + alias_suffix(self.alias))


def _is_red(op) -> bool:
    return op.row and op.prim.reduction


def _is_arg_red(op) -> bool:
    return op.prim.reduction and op.prim.reduce_type in ("argmax", "argmin")


def _value_args(op) -> tuple:
    """The arguments whose values `op` reads (a shape-following broadcast reads its other
    arguments for their shapes only)."""
    k = op.prim.shape_only_from
    return op.args if k is None else op.args[:k]


def donor_outputs(ir, stash) -> tuple:
    """Which outputs may be written into a donated input: full outputs of the last pass (an
    earlier pass's output would overwrite an input a later pass reads again)."""
    rr = row_read_inputs(ir)
    plan = _Plan(ir, ["R" if k in rr else "V" for k in range(ir.n_inputs)], online=not stash)
    last = plan.n_pass - 1
    return tuple(not ir.is_row(r) and plan.level[r] == last for r in ir.outputs)


_PARTIAL_STORAGE = {"np.float64": "float64", "np.float32": "float32", "np.bool_": "boolean",
                    "np.int8": "int8", "np.int16": "int16", "np.int32": "int32",
                    "np.int64": "int64", "np.uint8": "uint8", "np.uint16": "uint16",
                    "np.uint32": "uint32", "np.uint64": "uint64"}


def split_plan(ir):
    """For a region whose rows can be cut into column segments reduced separately: one
    (ref, reduce type, accumulator NumPy dtype) per reduction, in IR order; else None.
    That needs a single pass, no full outputs, reductions that combine (no arg-reductions)
    and no half-precision results (a partial would be rounded twice)."""
    rr = row_read_inputs(ir)
    plan = _Plan(ir, ["R" if k in rr else "V" for k in range(ir.n_inputs)])
    if plan.n_pass != 1 or plan.full_outs:
        return None
    out = []
    for r in plan.reds:
        op = ir.ops[r - ir.n_inputs]
        rt = getattr(op.prim, "reduce_type", "")
        if rt not in ("sum", "prod", "max", "min", "and", "or") or op.dtype.name in HALF:
            return None
        acc = _acc_type(op, ir.dtype_of(op.args[0]))
        if rt in ("sum", "prod") and _kind_of(acc) == "f":
            acc = "np.float64"
        out.append((r, rt, _PARTIAL_STORAGE[acc]))
    return out


def row_read_inputs(ir) -> set:
    """Inputs read by per-row elementwise ops: they must be per row (`R`) or scalars."""
    n = ir.n_inputs
    out = set()
    for op in ir.ops:
        if op.row and not _is_red(op):
            out.update(a for a in _value_args(op) if a < n)
    return out


class _Plan:
    """Levels: a value's level is the number of reductions on its longest input path; pass
    p computes the reductions of level p + 1 and the full outputs of level p."""

    def __init__(self, ir, letters, online=False):
        n = ir.n_inputs
        self.ir, self.n = ir, n
        total = n + len(ir.ops)
        self.rowlike = [False] * total  # one value per row (or per kernel)
        self.invariant = [False] * total  # constants and scalars only
        self.level = [0] * total
        self.operand = {}   # reduction -> the full value it accumulates
        self.red_pass = {}  # reduction -> the pass that accumulates it
        self.online = {}    # sum(exp(v - max v)) -> its max: accumulated with it
        self.chan = {}      # sum((v - mu)^2) -> mu: a running mean and M2 of v
        for k in range(n):
            c = ir.inputs[k].const or letters[k] == "S"
            self.invariant[k] = c
            self.rowlike[k] = c or letters[k] == "R"
        for i, op in enumerate(ir.ops):
            r = n + i
            if _is_red(op):
                self.rowlike[r] = True
                v = op.args[0]
                self.operand[r] = v
                self.red_pass[r] = self.level[v]
                self.level[r] = self.level[v] + 1
                if online:
                    self._merge(r)
                continue
            args = _value_args(op)
            if op.row and not all(self.rowlike[a] for a in args):
                raise Unsupported("a per-row op reads an input that is not per row")
            self.rowlike[r] = all(self.rowlike[a] for a in args)
            self.invariant[r] = all(self.invariant[a] for a in args)
            self.level[r] = max((self.level[a] for a in args), default=0)
        reds = [n + i for i, op in enumerate(ir.ops) if _is_red(op)]
        full_outs = [r for r in ir.outputs if not ir.is_row(r)]
        self.n_pass = max([self.red_pass[r] + 1 for r in reds]
                          + [self.level[r] + 1 for r in full_outs] + [0])
        self.reds = reds
        self.full_outs = full_outs

    # -- long rows: one pass fewer for the sums a row algorithm marked (IROp.fold) -------
    def _merge(self, r):
        """Accumulate a marked sum early when its value is read per element and its max /
        mean is per row: online softmax with the max, Chan's update of v's mean and M2."""
        op = self.ir.ops[r - self.n]
        if not op.fold:
            return
        how, v, row = op.fold
        if self.rowlike[v] or not self.rowlike[row]:
            return
        if how == "online":
            if self.red_pass.get(row) != self.level[v]:
                return
            self.online[r] = row
            self.operand[r] = v
            self.red_pass[r] = self.red_pass[row]
            self.level[r] = self.level[row]
        else:
            self.chan[r] = row
            self.operand[r] = v
            self.red_pass[r] = self.level[v]
            self.level[r] = max(self.level[v] + 1, self.level[row])

    def needed(self, targets, stashed=frozenset()) -> tuple:
        """(the full (not per-row) ops `targets` depend on, in IR order; the `stashed`
        values among them, read back instead of computed)."""
        n, ops = self.n, self.ir.ops
        need, loads, todo = set(), set(), list(targets)
        while todo:
            r = todo.pop()
            if r < n or self.rowlike[r] or r in need or r in loads:
                continue
            if r in stashed:
                loads.add(r)
                continue
            need.add(r)
            todo.extend(_value_args(ops[r - n]))
        return sorted(need), sorted(loads)

    def targets(self, p) -> tuple:
        """(reductions accumulated in pass p, (output index, ref) of full outputs written)."""
        ir = self.ir
        reds = [r for r in self.reds if self.red_pass[r] == p]
        outs = [(j, r) for j, r in enumerate(ir.outputs)
                if not ir.is_row(r) and self.level[r] == p]
        return reds, outs

    def operands(self, p) -> list:
        reds, outs = self.targets(p)
        return [self.operand[r] for r in reds] + [r for _, r in outs]

    def stash_plan(self) -> dict:
        """ref -> the pass that computes and stores it, for the costly full values that a
        later pass reads back."""
        n, ops = self.n, self.ir.ops
        first, later = {}, set()
        for p in range(self.n_pass):
            for r in self.needed(self.operands(p))[0]:
                if not ops[r - n].prim.costly:
                    continue
                if r in first:
                    later.add(r)
                else:
                    first[r] = p
        cand = {r: first[r] for r in later}
        # keep only the values actually read back once the others are stashed
        read = set()
        for p in range(self.n_pass):
            avail = {r for r, q in cand.items() if q < p}
            read.update(self.needed(self.operands(p), avail)[1])
        return {r: cand[r] for r in read}


def _identity(op, acc) -> tuple:
    """(accumulator init, chunk identity) source for a reduction op into type `acc`."""
    rt = getattr(op.prim, "reduce_type", "")
    f = _kind_of(acc) == "f"
    if rt == "sum":
        return ("np.float64(0.0)" if f else f"{acc}(0)"), f"{acc}(0)"
    if rt == "prod":
        return ("np.float64(1.0)" if f else f"{acc}(1)"), f"{acc}(1)"
    if rt in ("max", "min"):
        if acc == "np.bool_":
            return ("False", "False") if rt == "max" else ("True", "True")
        if f:
            v = f"{acc}(-np.inf)" if rt == "max" else f"{acc}(np.inf)"
        else:
            v = f"np.iinfo({acc}).min" if rt == "max" else f"np.iinfo({acc}).max"
            v = f"{acc}({v})"
        return v, v
    if rt in ("and", "or"):
        return ("True" if rt == "and" else "False"), ""
    return "np.int64(-1)", ""  # argmax / argmin: no index yet


def _kind_of(ct: str) -> str:
    if ct in ("np.float32", "np.float64"):
        return "f"
    return "b" if ct == "np.bool_" else "i"


def _acc_type(op, arg_dt) -> str:
    """The compute type of a reduction's scratch buffer."""
    rt = getattr(op.prim, "reduce_type", "")
    if rt in ("and", "or"):
        return "np.bool_"
    if _is_arg_red(op):
        return COMPUTE[arg_dt.name]
    return COMPUTE[op.dtype.name]


def render_row_kernel(ir, variant: RowVariant, fn_name: str = "kernel") -> str:
    """The source of a row-kernel module for `ir` and `variant` (see the module doc)."""
    return _Rows(ir, variant).module(fn_name)


class _Rows:
    """The row loop strategy: `for r in range(start, stop)`, then one chunked pass over the
    row's columns per reduction level (`_Plan`), the per-row values between passes."""

    def __init__(self, ir, variant: RowVariant):
        self.ir, self.variant = ir, variant
        self.b = Body(ir)
        n = self.n = ir.n_inputs
        self.run = [k for k in range(n) if not ir.inputs[k].const]
        if len(variant.letters) != len(self.run):
            raise ValueError("variant letters do not match the region's inputs")
        self.letters = dict(zip(self.run, variant.letters))
        self.plan = _Plan(ir, [self.letters.get(k, "S") for k in range(n)],
                          online=not (variant.stash or variant.partial))
        self.vec = [k for k in self.run if self.letters[k] != "S"]
        self.slot = {k: i for i, k in enumerate(self.vec)}
        self.donors = {k for _, k in variant.alias}
        self.pre, self.row_head = [], []  # before the row loop; at the top of each row
        self.acc = {}  # reduction ref -> the compute type of its scratch buffer
        self.stash = {}

    def module(self, fn_name: str) -> str:
        ir, v, b = self.ir, self.variant, self.b
        self._inputs()
        row_ops = self._row_ops()
        body = self._row_offsets() + self.row_head
        body += _lines(*map(self._expr_line, row_ops.get(0, [])))
        if self.plan.full_outs:
            body.append("rc = r * C")
        self._scratch()
        for p in range(self.plan.n_pass):
            body += self._pass(p)
            if v.partial:
                break
            body += _lines(*map(self._expr_line, row_ops.get(p + 1, [])))
        out_lines, out_params, out_types = self._outputs()
        params = ["start", "stop", "C", "rshape", "rstrides", "cstrides", "offsets"]
        params += [f"in{k}" for k in self.run] + out_params
        lines = [f"def {fn_name}({', '.join(params)}):"]
        lines += ["    " + s for s in self._prologue() + self.pre]
        lines.append("    for r in range(start, stop):")
        lines += ["        " + s for s in body + out_lines]
        imports = ["from braze._src.backends.cpu.lib.rows import "
                   "lsum, lprod, lmax, lmin, lall, lany, largmax, largmin, lsqdev"]
        sig = ["types.int64"] * 3 + ["_I64_1", "_I64_2", "_I64_1", "_I64_1"]
        sig = b.signature(sig, self.run, out_types, written(self.run, v.alias))
        return b.module(f"braze row kernel {ir.name}{v.suffix}", sig, lines, imports)

    # -- values -------------------------------------------------------------------------------
    def _inputs(self):
        """Constants and scalar inputs before the loop, per-row inputs at each row's top."""
        ir, b = self.ir, self.b
        for k in range(self.n):
            dt = ir.inputs[k].dtype
            if dt.kind == "c":
                raise Unsupported("complex input")
            if ir.inputs[k].const:
                self.pre.append(b.const_line(k))
                continue
            c = self.letters[k]
            if c == "S":
                b.names[k] = f"s{k}"
                self.pre.append(f"s{k} = {b.load(k, f'in{k}[0]')}  # in{k}: {dt.name} scalar")
            elif c == "R":
                b.names[k] = f"w{k}"
                self.row_head.append(f"w{k} = {b.load(k, f'in{k}[p{k}]')}  # in{k}: "
                                     f"{dt.name} per row")
            else:
                b.names[k] = f"v{k}"

    def _load(self, k) -> str:
        # unsigned indices: no negative-index wrap-around code (it slowed compiles by a
        # quarter and must not reach the vectorizer)
        src = (f"in{k}[np.uint64(q{k} + j)]" if self.letters[k] == "V"
               else f"in{k}[np.uint64(p{k} + (j0 + j) * cs{k})]")
        return f"v{k} = {self.b.load(k, src)}  # in{k}: {self.ir.inputs[k].dtype.name}"

    def _expr_line(self, i) -> str:
        ir, chan = self.ir, self.plan.chan
        if self.n + i in chan:  # sum((v - mu)^2) = M2 + C * (mean - mu)^2
            mu = self.b.names[chan[self.n + i]]
            return (f"t{i} = {COMPUTE[ir.ops[i].dtype.name]}(a{i} + C * (mu{i} - "
                    f"np.float64({mu})) ** 2)  # {ir.describe(i)}")
        return self.b.op_line(i)

    def _row_ops(self) -> dict:
        """Per-row ops by level (the pass after which they can run); the invariant ones go
        before the loop."""
        plan, row_ops = self.plan, {}
        for i, op in enumerate(self.ir.ops):
            r = self.n + i
            self.b.names[r] = f"t{i}"
            if r in plan.chan:
                row_ops.setdefault(plan.level[r], []).append(i)
            elif _is_red(op) or not plan.rowlike[r]:
                continue
            elif plan.invariant[r]:
                self.pre += _lines(self._expr_line(i))
            else:
                row_ops.setdefault(plan.level[r], []).append(i)
        return row_ops

    # -- layout -------------------------------------------------------------------------------
    def _prologue(self) -> list:
        """Donated outputs, and each input's first element and row stride."""
        v = self.variant
        lines = alias_lines(v.alias) + (["nr = rshape.shape[0]"] if v.multi_dim_rows else [])
        for k in self.vec:
            lines.append(f"o{k} = offsets[{self.slot[k]}]  # in{k}: first element")
            if not v.multi_dim_rows:
                lines.append(f"rs{k} = rstrides[{self.slot[k]}, 0]  # in{k}: row stride")
        return lines

    def _row_offsets(self) -> list:
        """The row's offset in each input (the row index unravelled when the rows span
        several dimensions)."""
        if not self.vec:
            return []
        if not self.variant.multi_dim_rows:
            return [f"p{k} = o{k} + r * rs{k}" for k in self.vec]
        lines = ["q = r"] + [f"p{k} = o{k}" for k in self.vec]
        lines += ["for d in range(nr - 1, -1, -1):", "    nd = rshape[d]", "    ix = q % nd",
                  "    q //= nd"]
        return lines + [f"    p{k} += ix * rstrides[{self.slot[k]}, d]" for k in self.vec]

    def _scratch(self):
        """One chunk buffer per reduction operand, one row buffer per stashed value."""
        ir, n = self.ir, self.n
        for r in self.plan.reds:
            op = ir.ops[r - n]
            self.acc[r] = acc = _acc_type(op, ir.dtype_of(op.args[0]))
            self.pre.append(f"b{r - n} = np.empty({CHUNK}, {acc})  # scratch: operand of "
                            f"t{r - n}")
        self.stash = self.plan.stash_plan() if self.variant.stash else {}
        for r in self.stash:
            self.pre.append(f"z{r - n} = np.empty(C, {COMPUTE[ir.dtype_of(r).name]})  # "
                            f"stash of t{r - n}")

    # -- one pass over the row ----------------------------------------------------------------
    def _pass(self, p) -> list:
        """Pass p: accumulate its reductions chunk by chunk and write its full outputs."""
        ir, plan, n = self.ir, self.plan, self.n
        reds, outs = plan.targets(p)
        if not reds and not outs:
            return []
        lines = [f"# pass {p}: " + ", ".join(
            [f"reduce {ir.ref_name(r)}" for r in reds] + [f"write out{j}" for j, _ in outs])]
        for r in reds:
            lines += self._accumulators(r)
        avail = {r for r, q in self.stash.items() if q < p}
        ops_needed, reads = plan.needed(plan.operands(p), avail)
        writes = [r for r in ops_needed if self.stash.get(r) == p]
        used = {a for r in ops_needed for a in _value_args(ir.ops[r - n]) if a < n}
        used.update(r for r in plan.operands(p) if r < n)
        used = [k for k in self.vec if k in used and self.letters[k] in "VG"]
        direct = self._direct(reds, writes)
        lines.append(f"for j0 in range(0, C, {CHUNK}):")
        inner = self._chunk_setup(used, direct, outs)
        loop = self._elements(used, reads, ops_needed, writes, reds, direct, outs)
        if any(not s.startswith("v") for s in loop):  # else: only loads, nothing to compute
            inner += ["for j in range(m):"] + ["    " + s for s in loop]
        inner += self._folds(reds, direct)
        lines += ["    " + s for s in inner]
        if not self.variant.partial:
            lines += self._finishes(reds)
        return lines

    def _accumulators(self, r) -> list:
        op, i = self.ir.ops[r - self.n], r - self.n
        lines = [f"a{i} = {_identity(op, self.acc[r])[0]}"]
        if _is_arg_red(op):
            lines.append(f"av{i} = {self.acc[r]}(0)")
        if r in self.plan.chan:
            lines += [f"n{i} = np.float64(0.0)", f"mu{i} = np.float64(0.0)"]
        return lines

    def _direct(self, reds, writes) -> dict:
        """Reductions of a contiguous input, or of a value stashed in this pass, of the
        accumulator's type: they read that memory directly instead of a scratch copy."""
        ir, plan, n, direct = self.ir, self.plan, self.n, {}
        for r in reds:
            op, a = ir.ops[r - n], plan.operand[r]
            dt = ir.dtype_of(a)
            if (r in plan.online or COMPUTE[dt.name] != self.acc[r]
                    or _acc_dtype(op, dt) != dt or dt.name in HALF):
                continue
            if (a < n and self.letters.get(a) == "V" and not _converted_on_load(ir, a)
                    and a not in self.donors):  # a donor's chunk is overwritten before the fold
                direct[r] = f"x{a}"
            elif a in writes:
                direct[r] = f"z{a - n}[j0:j0 + m]"
        return direct

    def _chunk_setup(self, used, direct, outs) -> list:
        lines = ["m = min(%d, C - j0)" % CHUNK]
        for k in used:
            lines.append(f"q{k} = p{k} + j0" if self.letters[k] == "V"
                         else f"cs{k} = cstrides[{self.slot[k]}]")
        for k in sorted({int(v[1:]) for v in direct.values() if v.startswith("x")}):
            lines.append(f"x{k} = in{k}[p{k} + j0:p{k} + j0 + m]")
        return lines + (["w = rc + j0"] if outs else [])

    def _elements(self, used, reads, ops_needed, writes, reds, direct, outs) -> list:
        """The body of `for j in range(m)`: loads, stash reads, ops, stash writes, reduction
        operands, full outputs."""
        ir, b, n = self.ir, self.b, self.n
        loop = [self._load(k) for k in used]
        loop += [f"t{r - n} = z{r - n}[np.uint64(j0 + j)]  # t{r - n}: stashed in an "
                 "earlier pass" for r in reads]
        for r in ops_needed:
            loop += _lines(self._expr_line(r - n))
            if r in writes:
                loop.append(f"z{r - n}[np.uint64(j0 + j)] = t{r - n}  # stash t{r - n} for a "
                            "later pass")
        for r in reds:
            op, a = ir.ops[r - n], self.plan.operand[r]
            if r in self.plan.online or r in direct:  # online: reads its max's buffer
                continue
            val = cast(b.ctx, b.names[a], ir.dtype_of(a), _acc_dtype(op, ir.dtype_of(a)))
            loop.append(f"b{r - n}[np.uint64(j)] = {val}  # operand of t{r - n}")
        for j, r in outs:
            loop.append(f"out{j}[np.uint64(w + j)] = {b.stored(r, b.names[r])}"
                        f"  # out{j} <- {ir.ref_name(r)}")
        return loop

    def _folds(self, reds, direct) -> list:
        """Each reduction's chunk folded into its accumulator."""
        ir, plan, n, ctx = self.ir, self.plan, self.n, self.b.ctx
        paired = {plan.online[r] for r in reds if r in plan.online}
        lines = []
        for r in reds:
            i = r - n
            if r in paired:  # a max folded by its online sum
                continue
            if r in plan.online:
                a = plan.online[r]
                lines += _fold_online(ctx, ir, i, a - n, direct.get(a) or f"b{a - n}")
            elif r in plan.chan:
                lines += _fold_chan(i, direct.get(r))
            else:
                lines += _fold(ctx, ir.ops[i], i, self.acc[r], direct.get(r))
        return lines

    def _finishes(self, reds) -> list:
        ir, plan, n, lines = self.ir, self.plan, self.n, []
        for r in reds:
            if r in plan.online:
                lines.append(f"t{r - n} = {COMPUTE[ir.dtype_of(r).name]}(a{r - n} if "
                             f"a{plan.online[r] - n} > -np.inf else np.nan)"
                             f"  # {ir.describe(r - n)}")
            elif r not in plan.chan:
                lines.append(_finish(self.b.ctx, ir, r - n, self.acc[r]))
        return lines

    def _outputs(self):
        """(the per-row stores at the end of each row, output parameters, their types)."""
        ir, b, n = self.ir, self.b, self.n
        lines, params, types = [], [], []
        if self.variant.partial:  # the accumulators of this column segment, combined later
            for j, (r, _, storage) in enumerate(split_plan(ir)):
                lines.append(f"out{j}[r] = a{r - n}  # partial accumulator of t{r - n}")
                params.append(f"out{j}")
                types.append(storage)
            return lines, params, types
        for j, r in enumerate(ir.outputs):
            if ir.is_row(r):
                lines.append(f"out{j}[r] = {b.stored(r, b.names[r])}  # out{j} <- "
                             f"{ir.ref_name(r)}")
            params.append(f"out{j}")
            types.append(STORAGE[ir.dtype_of(r).name])
        return lines, params, types


def _lines(*lines) -> list:
    """The non-empty ones (an op that is its argument as it is has no line)."""
    return [ln for ln in lines if ln]


def _acc_dtype(op, arg_dt):
    """The dtype a reduction's operand is converted to before it is accumulated."""
    from ... import dtypes as D
    rt = getattr(op.prim, "reduce_type", "")
    if rt in ("and", "or"):
        return D.bool_
    if _is_arg_red(op):
        return arg_dt
    return op.dtype


def _converted_on_load(ir, k) -> bool:
    """Whether input k's buffer elements are converted when loaded (half precision)."""
    return ir.inputs[k].dtype.name in LOAD


def _fold(ctx, op, i, acc, buf=None) -> list:
    """Source folding chunk `b{i}[:m]` (or the input slice `buf`) into accumulator `a{i}`."""
    rt = getattr(op.prim, "reduce_type", "")
    _, ident = _identity(op, acc)
    f = _kind_of(acc) == "f"
    b = f"{buf or f'b{i}'}, m"
    if rt in ("sum", "prod"):
        fn, sym, wrap = ("lsum", "+", "wadd") if rt == "sum" else ("lprod", "*", "wmul")
        chunk = f"{fn}({b}, {ident})"
        if f:  # float sums and products accumulate in float64
            return [f"a{i} {sym}= np.float64({chunk})"]
        if acc in ("np.int64", "np.uint64"):
            return [f"a{i} = {ctx.call(wrap)}(a{i}, {acc}({chunk}))"]
        return [f"a{i} = {acc}(a{i} {sym} {chunk})"]
    if rt in ("max", "min"):
        if acc == "np.bool_":
            return [f"a{i} = a{i} {'or' if rt == 'max' else 'and'} "
                    f"{'lany' if rt == 'max' else 'lall'}({b})"]
        fn = "lmax" if rt == "max" else "lmin"
        if f:
            return [f"a{i} = {ctx.call('max_f' if rt == 'max' else 'min_f')}(a{i}, {fn}({b}, "
                    f"{ident}))"]
        cmp = ">" if rt == "max" else "<"
        return [f"c{i}_ = {fn}({b}, {ident})", f"a{i} = a{i} if a{i} {cmp} c{i}_ else c{i}_"]
    if rt == "and":
        return [f"a{i} = a{i} and lall({b})"]
    if rt == "or":
        return [f"a{i} = a{i} or lany({b})"]
    fn, cmp = ("largmax", ">") if rt == "argmax" else ("largmin", "<")
    return [f"k{i}, c{i}_ = {fn}({b})",
            f"if a{i} < 0 or (av{i} == av{i} and (c{i}_ != c{i}_ or c{i}_ {cmp} av{i})):",
            f"    a{i} = j0 + k{i}",
            f"    av{i} = c{i}_"]


def _fold_online(ctx, ir, i, a, buf) -> list:
    """Fold a chunk into the pair max `a{a}` / sum(exp(v - max)) `a{i}`: the sum so far is
    rescaled to the new max (an all -inf or NaN chunk adds nothing: the finish gives NaN as
    eager does when the row's max is not > -inf)."""
    n = ir.n_inputs
    op = ir.ops[i]
    T = COMPUTE[op.dtype.name]
    exp_op = ir.ops[op.args[0] - n]
    sub_op = ir.ops[exp_op.args[0] - n]
    sub = expr(ctx, sub_op.prim, [f"{buf}[j]", f"mx{i}"], [op.dtype] * 2, op.dtype)
    ex = expr(ctx, exp_op.prim, [sub], [op.dtype], op.dtype)
    return [f"mx{i} = {ctx.call('max_f')}(a{a}, lmax({buf}, m, {T}(-np.inf)))",
            f"if mx{i} > -np.inf:",
            f"    if a{a} > -np.inf:",
            f"        a{i} *= np.exp(np.float64(a{a}) - np.float64(mx{i}))  # rescale",
            "    for j in range(m):",
            f"        b{i}[j] = {ex}",
            f"    a{i} += np.float64(lsum(b{i}, m, {T}(0)))",
            f"a{a} = mx{i}"]


def _fold_chan(i, buf) -> list:
    """Fold a chunk's mean and squared deviations into the running mean `mu{i}` and M2
    `a{i}` (Chan et al.'s parallel update, in float64)."""
    b = buf or f"b{i}"
    return [f"s{i}_ = np.float64(lsum({b}, m, {b}[0] * 0))",
            f"c{i}_ = s{i}_ / m",
            f"q{i}_ = lsqdev({b}, m, c{i}_)",
            f"nn{i}_ = n{i} + m",
            f"dl{i}_ = c{i}_ - mu{i}",
            f"mu{i} += dl{i}_ * m / nn{i}_",
            f"a{i} += q{i}_ + dl{i}_ * dl{i}_ * n{i} * m / nn{i}_",
            f"n{i} = nn{i}_"]


def _finish(ctx, ir, i, acc) -> str:
    """t{i} = the reduction's value from its accumulator."""
    op = ir.ops[i]
    dt = op.dtype
    rt = getattr(op.prim, "reduce_type", "")
    if rt in ("argmax", "argmin"):
        val = f"np.uint32(a{i})"
    elif _kind_of(acc) == "f":
        if dt.name in HALF:
            val = f"{ctx.call(ROUND[dt.name])}(np.float32(a{i}))"
        else:
            val = f"{COMPUTE[dt.name]}(a{i})"
    else:
        val = f"a{i}"
    return f"t{i} = {val}  # {ir.describe(i)}"
