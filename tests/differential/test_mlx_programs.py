"""Random programs over the op table's families, on braze (eager and compiled, cpu backend) and
on MLX (eager).

Hypothesis builds a straight-line program: elementwise unary and binary ops (with
broadcasting), reductions with axes/keepdims, basic indexing and slicing, reshapes and
transposes, and casts between float dtypes. The program is Python source, run with `mx` bound
to braze and to mlx.core, so a failure prints a ready-made regression test: the source and the
inputs. Deterministic (derandomized) and small, to fit the suite's time budget.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

mlx = pytest.importorskip("mlx.core")

from mlx_oracle import assert_values, describe_inputs, dtype_name, to_numpy  # noqa: E402

import braze.core as mx  # noqa: E402

UNARY = ["abs", "negative", "sin", "cos", "tanh", "sigmoid", "exp", "square", "floor",
         "sqrt(abs)", "log1p(abs)"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]
REDUCE = ["sum", "max", "min", "mean", "logsumexp", "prod"]
FLOATS = ["float32", "float16", "bfloat16"]
# float32 results after a few ops: a handful of ulps apart (MLX and braze use different
# exp/sin/tanh approximations); half-precision results: 2 ulps, as in the op table
TOL = {"float32": (1e-4, 1e-5), "float16": (4e-3, 4e-3), "bfloat16": (3.2e-2, 3.2e-2)}


@st.composite
def programs(draw):
    """(source, inputs): `def program(x0, x1, ...)` and NumPy inputs."""
    n_in = draw(st.integers(1, 2))
    shapes = []
    for _ in range(n_in):
        shapes.append(tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=3))))
    vals = [(f"x{i}", s, "float32") for i, s in enumerate(shapes)]
    lines = []
    for k in range(draw(st.integers(1, 6))):
        name = f"v{k}"
        a, sa, da = draw(st.sampled_from(vals))
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "index", "shape", "astype"]))
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            if "(" in op:
                outer, inner = op.rstrip(")").split("(")
                expr = f"mx.{outer}(mx.{inner}({a}))"
            else:
                expr = f"mx.{op}({a})"
            out = (sa, da)
        elif kind == "binary":
            b, sb, db = draw(st.sampled_from(vals))
            try:
                shape = np.broadcast_shapes(sa, sb)
            except ValueError:
                continue
            op = draw(st.sampled_from(BINARY))
            dt = da if da == db else ("float32" if "float32" in (da, db) else "float32")
            expr = f"mx.{op}({a}, {b})"
            out = (tuple(shape), dt)
        elif kind == "reduce":
            op = draw(st.sampled_from(REDUCE))
            keep = draw(st.booleans())
            if sa and draw(st.booleans()):
                axes = sorted(draw(st.sets(st.integers(0, len(sa) - 1), min_size=1)))
                axis = repr(tuple(axes)) if len(axes) > 1 else str(axes[0])
                rshape = tuple(1 if i in axes else n for i, n in enumerate(sa)) if keep else \
                    tuple(n for i, n in enumerate(sa) if i not in axes)
            else:
                axis = "None"
                rshape = (1,) * len(sa) if keep else ()
            expr = f"mx.{op}({a}, axis={axis}, keepdims={keep})"
            out = (rshape, da)
        elif kind == "index":
            if not sa:
                continue
            ax = draw(st.integers(0, len(sa) - 1))
            n = sa[ax]
            if draw(st.booleans()):
                i = draw(st.integers(-n, n - 1))
                idx = ", ".join([":"] * ax + [str(i)])
                rshape = sa[:ax] + sa[ax + 1:]
            else:
                start = draw(st.integers(0, n - 1))
                step = draw(st.sampled_from([1, 2, -1]))
                if step > 0:
                    sl, m = f"{start}::{step}", len(range(start, n, step))
                else:
                    sl, m = f"{start}::-1", start + 1
                idx = ", ".join([":"] * ax + [sl])
                rshape = sa[:ax] + (m,) + sa[ax + 1:]
            expr = f"{a}[{idx}]"
            out = (tuple(rshape), da)
        elif kind == "shape":
            if len(sa) >= 2 and draw(st.booleans()):
                perm = draw(st.permutations(range(len(sa))))
                expr = f"mx.transpose({a}, {tuple(perm)!r})"
                out = (tuple(sa[p] for p in perm), da)
            else:
                size = int(np.prod(sa)) if sa else 1
                target = draw(st.sampled_from([(size,), (1, size), (size, 1), ()]
                                              if size == 1 else [(size,), (1, size), (-1, 1)]))
                expr = f"mx.reshape({a}, {target!r})"
                out = (tuple(size if t == -1 else t for t in target), da)
        else:
            dt = draw(st.sampled_from(FLOATS))
            expr = f"{a}.astype(mx.{dt})"
            out = (sa, dt)
        lines.append(f"    {name} = {expr}")
        vals.append((name, out[0], out[1]))
    outs = [v[0] for v in vals[n_in:]] or ["x0"]
    args = ", ".join(f"x{i}" for i in range(n_in))
    src = f"def program({args}):\n" + "\n".join(lines) + f"\n    return [{', '.join(outs)}]\n"
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-2, 2, s).astype(np.float32) for s in shapes]
    return src, inputs


def _build(src, lib):
    ns = {"mx": lib}
    exec(compile(src, "<program>", "exec"), ns)  # noqa: S102 - the generated program
    return ns["program"]


def _results(lib, fn, inputs):
    out = fn(*[lib.array(x) for x in inputs])
    lib.eval(*out)
    return [(dtype_name(o.dtype), to_numpy(lib, o)) for o in out]


def check_program(src, inputs):
    want = _results(mlx, _build(src, mlx), inputs)
    for mode in ("eager", "compiled"):
        fn = _build(src, mx)
        if mode == "compiled":
            fn = mx.compile(fn)
        got = _results(mx, fn, inputs)
        msg = f"\nbraze {mode} vs MLX eager\nprogram:\n{src}inputs:\n{describe_inputs(inputs)}"
        assert len(got) == len(want), msg
        for k, ((gd, g), (wd, w)) in enumerate(zip(got, want)):
            assert gd == wd, f"v{k}: dtype {gd}, MLX {wd}{msg}"
            assert g.shape == w.shape, f"v{k}: shape {g.shape}, MLX {w.shape}{msg}"
            rtol, atol = TOL[gd]
            assert_values(g, w, gd, rtol, atol, msg=f"output {k}{msg}")


@settings(derandomize=True, max_examples=100, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs())
def test_random_programs(prog):
    check_program(*prog)


def test_program_regression_example():
    """The form a failure prints, pasted back as a test."""
    src = ("def program(x0, x1):\n    v0 = mx.tanh(x0)\n    v1 = mx.add(v0, x1)\n"
           "    v2 = mx.sum(v1, axis=0, keepdims=True)\n    v3 = v2.astype(mx.bfloat16)\n"
           "    return [v0, v1, v2, v3]\n")
    check_program(src, [np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4),
                        np.linspace(1, -1, 4, dtype=np.float32)])
