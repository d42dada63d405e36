"""Buffer donation never changes a result (issue 20).

A fused kernel may write an output into the buffer of an input nothing else references (a
temporary). These tests run random fused programs with several outputs over inputs of mixed
dtypes of one itemsize (so outputs and inputs can share buffers), once with every input held
by the caller (no donation) and once with every input a temporary (donatable), on the cpu
backend (the users' default) and on the numpy reference backend, and check both against the
uncompiled program. Only exact ops are used (no transcendentals, no float sums), so every
comparison is bit for bit; a failure prints the program.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import braze.core as mx
from braze._src import config
from braze._src.backends import base as B

pytest.importorskip("numba")

from braze._src.backends.cpu import CpuBackend  # noqa: E402

# dtypes of one itemsize: an output of any of them can take an input's buffer
_GROUPS = {
    1: ["bool", "int8", "uint8"],
    4: ["float32", "int32", "uint32"],
    2: ["float16", "bfloat16", "int16"],
}
_SHAPES = [(9,), (3, 5), (4, 33), (2, 3, 4), (96, 70)]
_CMP = ["!=", "==", "<", ">"]
_BIN = ["+", "-", "*", "maximum", "minimum"]


def _mx(dt):
    return "bool_" if dt == "bool" else dt


def _cast(v, dt) -> str:
    """`v.astype(dt)`; to an integer dtype from a value kept in range and free of NaN (float
    to integer casts out of range are not what this file tests)."""
    if dt != "bool" and not dt.startswith("float") and dt != "bfloat16":
        v = f"mx.where({v} == {v}, mx.clip({v}, 0, 100), 0)"
    return f"{v}.astype(mx.{_mx(dt)})"


def _backend(name):
    if name == "cpu" and "cpu" not in B.registered():
        B.register("cpu", CpuBackend)
    return config.override(backend=name)


@st.composite
def programs(draw):
    """(source lines, input dtypes, shape, output names): a straight-line program over the
    inputs x0, x1 whose values are t0, t1, ... and whose outputs are several of them."""
    group = _GROUPS[draw(st.sampled_from(sorted(_GROUPS)))]
    dts = [draw(st.sampled_from(group)) for _ in range(2)]
    shape = draw(st.sampled_from(_SHAPES))
    vals = [("x0", dts[0]), ("x1", dts[1])]
    lines = []
    for i in range(draw(st.integers(2, 6))):
        a, adt = draw(st.sampled_from(vals))
        b, bdt = draw(st.sampled_from(vals))
        kind = draw(st.sampled_from(["cast", "cmp", "cmpc", "bin", "where", "rowmax"]))
        name = f"t{i}"
        if kind == "cast":
            dt = draw(st.sampled_from(group))
            lines.append(f"{name} = {_cast(a, dt)}")
        elif kind == "cmp":
            lines.append(f"{name} = {a} {draw(st.sampled_from(_CMP))} {b}")
            dt = "bool"
        elif kind == "cmpc":
            lines.append(f"{name} = {a} {draw(st.sampled_from(_CMP))} 2")
            dt = "bool"
        elif kind == "bin":
            op = draw(st.sampled_from(_BIN))
            lines.append(f"{name} = mx.{op}({a}, {b})" if op.isalpha()
                         else f"{name} = {a} {op} {b}")
            dt = None  # the promoted dtype, found by running
        elif kind == "where":
            lines.append(f"{name} = mx.where({a} > 0, {b}, {a})")
            dt = None
        else:  # a reduction over the last axis broadcast back: a row kernel
            lines.append(f"{name} = {a} - mx.max({a}, axis=-1, keepdims=True)"
                         if adt != "bool" else f"{name} = {a} & mx.all({a}, axis=-1, "
                         "keepdims=True)")
            dt = None if adt != "bool" else "bool"
        vals.append((name, dt))
    made = [v for v, _ in vals[2:]]
    outs = draw(st.lists(st.sampled_from(made), min_size=2, max_size=4, unique=True))
    # outputs of the inputs' own dtypes, so that donation happens
    casts = [_cast(outs[0], dts[0]), _cast(outs[-1], dts[1])]
    return lines, dts, shape, outs + casts, draw(st.integers(0, 3))


def _function(lines, outs):
    src = "def f(x0, x1):\n" + "".join(f"    {ln}\n" for ln in lines)
    src += f"    return {', '.join(outs)}\n"
    env = {"mx": mx}
    exec(src, env)
    return env["f"], src


def _inputs(dts, shape, seed):
    rng = np.random.default_rng(seed)
    out = []
    for dt in dts:
        if dt == "bool":
            a = rng.random(shape) < 0.5
        elif dt.startswith(("int", "uint")):
            a = rng.integers(0, 5, size=shape).astype(dt)
        else:  # small integers and halves: every op is exact; a few NaN and -0.0
            a = (rng.integers(-6, 7, size=shape) / 2).astype(np.float32)
            a.flat[::7] = -0.0
            a.flat[3::11] = np.nan
            a = np.asarray(mx.array(a).astype(getattr(mx, _mx(dt))))
        out.append(np.array(a))
    return out


def _eager(f, xs):
    with config.override(disable_compile=True):
        return [np.array(r) for r in f(*(mx.array(x) for x in xs))]


def _check(got, want, what, src, xs):
    for k, (g, w) in enumerate(zip(got, want)):
        ok = g.dtype == w.dtype and g.shape == w.shape
        if ok:
            gv, wv = g.view(np.uint8), w.view(np.uint8)
            ok = np.array_equal(gv, wv)
            if not ok and (g.dtype.kind == "f" or str(g.dtype) == "bfloat16"):
                gf, wf = g.astype(np.float64), w.astype(np.float64)
                ok = np.array_equal(gf, wf, equal_nan=True)  # NaN payloads, signed zeros
        assert ok, (f"{what}: output {k} differs from eager\n{src}\ninputs:\n"
                    + "\n".join(repr(x) for x in xs) + f"\ngot:\n{g!r}\nwant:\n{w!r}")


def _run(backend, lines, dts, shape, outs, seed):
    f, src = _function(lines, outs)
    xs = _inputs(dts, shape, seed)
    try:
        want = _eager(f, xs)
    except (ValueError, TypeError):
        return  # not a valid program (an op refuses these dtypes): nothing to compare
    with _backend(backend):
        cf = mx.compile(f)
        held = [mx.array(x) for x in xs]
        got = [np.array(r) for r in cf(*held)]
        _check(got, want, f"{backend}, held inputs", src, xs)
        res = cf(*(mx.array(x) for x in xs))  # temporaries: donatable
        mx.eval(res)
        got = [np.array(r) for r in res]
        _check(got, want, f"{backend}, temporary inputs", src, xs)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_donation_never_changes_a_result_cpu(p):
    _run("cpu", *p)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=40, deadline=None, derandomize=True)
@given(programs())
def test_donation_never_changes_a_result_numpy(p):
    _run("numpy", *p)


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_issue_20_second_output_reads_a_donated_input(backend):
    """A kernel whose first output is written into the donated input `x` while its second
    output still reads `x`."""
    def f(x):
        v0 = x != 2
        return v0 * x, v0

    data = np.array([1, 0, 0, 1, 1, 0, 1, 0, 0], dtype=bool)
    with _backend(backend):
        cf = mx.compile(f)
        held = mx.array(data)
        assert np.array(cf(held)[0]).tolist() == data.tolist()
        assert np.array(cf(mx.array(data))[0]).tolist() == data.tolist()


def test_row_kernel_donation_second_output_reads_the_input():
    """A row kernel whose last pass writes its first output into the donated input and its
    second output from that input: the variant writes through the input's own array."""
    def f(x):
        m = mx.max(x, axis=-1, keepdims=True)
        return x - m, (x - m) * x + x

    data = np.arange(4 * 3000, dtype=np.float32).reshape(4, 3000) % 17
    want = _eager(f, [data])
    with _backend("cpu"):
        cf = mx.compile(f)
        for _ in range(2):
            got = [np.array(r) for r in cf(mx.array(data))]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
        names = [p.name for e in B.get("cpu")._entries.values() for p in e.programs.values()]
        assert any("_rows_" in n and n.endswith("_o0in0") for n in names), names


def test_donation_still_happens_on_cpu():
    """The fix keeps donation: the output takes the temporary's buffer, through a kernel
    variant that writes it through the input's own array."""
    with _backend("cpu"):
        f = mx.compile(lambda a, b: a * b + 1.0)
        x = mx.array(np.arange(4096, dtype=np.float32))
        mx.eval(x)
        addr = np.asarray(x).__array_interface__["data"][0]
        y = mx.array(np.ones(4096, np.float32))
        out = f(x, y)
        del x
        mx.eval(out)
        assert np.asarray(out).__array_interface__["data"][0] == addr
        np.testing.assert_array_equal(np.asarray(out), np.arange(4096) + 1.0)
        be = B.get("cpu")
        names = [p.name for e in be._entries.values() for p in e.programs.values()]
        assert any(n.endswith("_contiguous_VV_o0in0") for n in names), names
