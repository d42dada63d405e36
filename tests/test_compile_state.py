"""Captured state (`inputs=` / `outputs=`) whose structure appears or changes during a trace.

Every program here runs three ways: uncompiled braze, compiled braze, and (where `mlx` is
installed) compiled MLX, and records its results and the state after each call. MLX's
compile (python/src/transforms.cpp) flattens the captured trees before the call, fills the
tracers in, re-flattens the *outputs* tree after the function ran (so state created inside the
trace is an output), puts the originals back wherever the tracers still are (not at their old
positions: the function may have deleted, moved or re-wrapped them), and after the call fills
the outputs tree as it is then; tuples are rebuilt in their parents. The cache is keyed on the
number, shapes and dtypes of the captured arrays, not on the trees' structure.
"""
from functools import partial
from typing import NamedTuple

import numpy as np
import pytest

import braze.core as bmx
from braze._src import config
from braze._src.backends import base as B


def _mlx():
    return pytest.importorskip("mlx.core")


def _show(t):
    """A comparable picture of a state tree (container kinds, keys and rounded values)."""
    if isinstance(t, dict):
        return {k: _show(v) for k, v in t.items()}
    if isinstance(t, (list, tuple)):
        return (type(t).__name__, [_show(v) for v in t])
    if hasattr(t, "tolist"):
        return np.round(np.array(t, dtype=np.float64), 5).tolist()
    return t


class Pair(NamedTuple):
    a: object
    b: object


# -- the programs: prog(mx, compiled) -> what each call returned and left in the state ------
def dict_gains_key(mx, compiled):
    st = {"a": mx.array([1.0, 2.0])}

    def f(x):
        if "b" not in st:
            st["b"] = mx.zeros_like(x)  # created inside the first (traced) call
        st["b"] = st["b"] + x * st["a"]
        st["a"] = st["a"] + 1
        return st["a"].sum() + st["b"].sum()

    return _calls(mx, f, st, compiled, 4, lambda: (mx.array([1.0, 3.0]),))


def list_grows(mx, compiled):
    st = [mx.array(1.0)]

    def f(x):
        st.append(st[-1] * x)
        return sum(st[1:], mx.array(0.0))

    return _calls(mx, f, st, compiled, 4, lambda: (mx.array(2.0),))


def nested_dict_gains_subtree(mx, compiled):
    st = [{"w": mx.array(2.0)}, {}]

    def f(x):
        if "m" not in st[1]:
            st[1]["m"] = {"v": mx.array(0.0)}
        st[1]["m"]["v"] = st[1]["m"]["v"] + x
        st[0]["w"] = st[0]["w"] * st[1]["m"]["v"]
        return st[0]["w"]

    return _calls(mx, f, st, compiled, 3, lambda: (mx.array(1.0),))


def structure_changes_on_a_later_call(mx, compiled):
    st = {"w": mx.array([1.0, 2.0])}

    def f(x):
        if "m" in st:
            st["m"] = 0.5 * st["m"] + x
            st["w"] = st["w"] - st["m"]
        else:
            st["w"] = st["w"] - x
        return st["w"].sum()

    def before(i):
        if i == 2:
            st["m"] = mx.zeros((2,))  # the caller adds state between calls

    return _calls(mx, f, st, compiled, 5, lambda: (mx.array([0.5, 0.25]),), before)


def dict_loses_key(mx, compiled):
    st = {"a": mx.array(1.0), "b": mx.array(2.0), "c": mx.array(3.0)}

    def f(x):
        b = st.pop("b") if "b" in st else mx.array(0.0)
        st["c"] = st["c"] + b + x
        st["a"] = st["a"] * 2
        return st["a"] + st["c"]

    return _calls(mx, f, st, compiled, 3, lambda: (mx.array(1.0),))


def list_shrinks(mx, compiled):
    st = [mx.array(1.0), mx.array(2.0), mx.array(3.0)]

    def f(x):
        last = st.pop()
        st[0] = st[0] + last * x
        return st[0]

    return _calls(mx, f, st, compiled, 2, lambda: (mx.array(1.0),))


def list_insert_moves_inputs(mx, compiled):
    st = [mx.array(1.0)]

    def f(x):
        st.insert(0, st[0] * x)
        return st[0] + st[1]

    return _calls(mx, f, st, compiled, 3, lambda: (mx.array(3.0),))


def nested_container_replaced(mx, compiled):
    st = {"sub": {"w": mx.array(1.0)}}

    def f(x):
        old = st["sub"]
        st["sub"] = {"m": old["w"] * x, "w": old["w"] + 1}
        return st["sub"]["m"]

    return _calls(mx, f, st, compiled, 3, lambda: (mx.array(2.0),))


def tuples_replaced(mx, compiled):
    st = {"t": (mx.array(1.0), mx.array(2.0)), "n": Pair(mx.array(3.0), mx.array(4.0)),
          "l": [(mx.array(5.0),)]}

    def f(x):
        a, b = st["t"]
        st["t"] = (a + x, b * 2)
        st["n"] = Pair(st["n"].a + 1, st["n"].b)
        st["l"][0] = (st["l"][0][0] - x,)
        return a

    return _calls(mx, f, st, compiled, 3, lambda: (mx.array(1.0),))


def _calls(mx, f, st, compiled, n, args, before=None):
    if compiled:
        f = mx.compile(f, inputs=st, outputs=st)
    out = []
    for i in range(n):
        if before is not None:
            before(i)
        r = f(*args())
        mx.eval(r, st)
        out.append((_show(r), _show(st)))
    return out


PROGRAMS = [dict_gains_key, list_grows, nested_dict_gains_subtree,
            structure_changes_on_a_later_call, dict_loses_key, list_shrinks,
            list_insert_moves_inputs, nested_container_replaced, tuples_replaced]


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_compiled_state_matches_uncompiled(prog):
    assert prog(bmx, True) == prog(bmx, False)


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_compiled_state_matches_mlx(prog):
    mlx = _mlx()
    assert prog(bmx, True) == prog(mlx, True)


def test_state_created_in_the_trace_retraces_once():
    st = {}
    n = [0]

    def f(x):
        n[0] += 1
        st["count"] = st.get("count", bmx.array(0.0)) + x
        return st["count"]

    cf = bmx.compile(f, inputs=st, outputs=st)
    for _ in range(4):
        cf(bmx.array(1.0))
    assert st["count"].item() == 4.0
    assert n[0] == 2  # the captured state grew after the first call: one retrace, then hits
    assert cf.stats()["hits"] == 2


def _renamed(mx):
    st = {"p": mx.array([1.0]), "q": mx.array([10.0])}

    def f(x):
        k = sorted(st)
        st[k[0]] = st[k[0]] + x
        return st[k[1]] * 2

    cf = mx.compile(f, inputs=st, outputs=st)
    out = []
    for i in range(3):
        if i == 1:  # same number, shapes and dtypes of captured arrays, other keys and order
            st.clear()
            st["q"] = mx.array([5.0])
            st["p"] = mx.array([7.0])
        r = cf(mx.array([1.0]))
        mx.eval(r, st)
        out.append((_show(r), _show(st)))
    return out


def test_captured_structure_is_not_in_the_cache_key_as_in_mlx():
    """MLX keys a trace on the captured arrays' number, shapes and dtypes only: a captured
    dict whose keys were reordered between calls reuses the trace (positionally)."""
    got = _renamed(bmx)
    assert got[1] == ([14.0], {"q": [6.0], "p": [7.0]})  # the first trace, replayed
    mlx = _mlx()
    assert got == _renamed(mlx)


def test_failed_trace_restores_state_that_was_deleted_or_reassigned():
    st = {"a": bmx.array(1.0), "b": bmx.array(2.0)}

    def bad():
        st["a"] = st["a"] + 1
        del st["b"]
        raise KeyError("boom")

    with pytest.raises(KeyError):
        bmx.compile(bad, inputs=st, outputs=st)()
    assert set(st) == {"a"} and st["a"].item() == 1.0
    assert not st["a"]._tracer


# -- the optimizer step of MLX's docs: `optimizer.init` never called ---------------------------
def _train(mx, nn, optim, compiled, init):
    def make():
        mx.random.seed(0)
        return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))

    def loss_fn(m, x, y):
        return nn.losses.cross_entropy(m(x), y, reduction="mean")

    mx.random.seed(1)
    x = mx.random.normal((64, 16))
    y = mx.random.randint(0, 8, (64,))
    m = make()
    opt = optim.Adam(learning_rate=1e-2)
    lg = nn.value_and_grad(m, loss_fn)
    if init:
        opt.init(m.trainable_parameters())
    state = [m.state, opt.state]

    def step(x, y):
        loss, g = lg(m, x, y)
        opt.update(m, g)
        return loss

    if compiled:
        step = partial(mx.compile, inputs=state, outputs=state)(step)
    out = []
    for _ in range(4):
        loss = step(x, y)
        mx.eval(loss, state)
        out.append(round(loss.item(), 5))
    return out


_MLX_LOSSES = [2.08611, 1.90223, 1.69118, 1.46466]  # MLX 0.32.4, all three ways


def _with_backend(name):
    if name == "cpu":
        pytest.importorskip("numba")
        if "cpu" not in B.registered():
            from braze._src.backends.cpu import CpuBackend
            B.register("cpu", CpuBackend)
    return config.override(backend=name)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_compiled_adam_without_init_matches_uncompiled(backend):
    import braze.nn as nn
    import braze.optimizers as optim
    with _with_backend(backend):
        eager = _train(bmx, nn, optim, False, False)
        assert _train(bmx, nn, optim, True, False) == eager
        assert _train(bmx, nn, optim, True, True) == eager
    assert np.allclose(eager, _MLX_LOSSES, atol=2e-5)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_compiled_adam_without_init_matches_mlx(backend):
    mlx = _mlx()
    import mlx.nn as mnn
    import mlx.optimizers as moptim

    import braze.nn as nn
    import braze.optimizers as optim
    want = _train(mlx, mnn, moptim, True, False)
    assert want == _train(mlx, mnn, moptim, False, False)
    with _with_backend(backend):
        got = _train(bmx, nn, optim, True, False)
    assert np.allclose(got, want, atol=2e-5)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_donated_input_read_by_a_later_output_of_a_strided_kernel(backend):
    """The root cause of the Adam divergence: a fused kernel over a transposed (strided)
    operand writes its first output into a donated input that its last output still reads."""
    def f(w, a, lr):
        g = (a * 1.0).T
        m = 0.9 * bmx.zeros_like(g) + 0.1 * g
        v = 0.999 * bmx.zeros_like(g) + 0.001 * bmx.square(g)
        return m, v, w - lr * m / (bmx.sqrt(v) + 1e-8)

    rng = np.random.default_rng(0)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    a = rng.standard_normal((16, 32)).astype(np.float32)
    with _with_backend(backend):
        want = [np.array(o) for o in f(bmx.array(w), bmx.array(a), bmx.array(0.01))]
        cf = bmx.compile(f)
        for _ in range(2):  # the first argument is a temporary: its buffer may be donated
            got = [np.array(o) for o in cf(bmx.array(w), bmx.array(a), bmx.array(0.01))]
            for g, e in zip(got, want):
                np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)


def test_state_walks_keep_flatten_order_and_update_in_place():
    """The captured-tree walks: plain containers (the fast path), a dict subclass, a capture
    protocol object; arrays in flatten order; lists and dicts updated in place, a tuple rebuilt
    in its parent, the object told through `__braze_update__`."""
    import braze.core as mx
    from braze._src.compile import api as capi

    class Held:
        def __init__(self, a):
            self.a = a

        def __braze_capture__(self):
            return self.a

        def __braze_update__(self, v):
            self.a = v

    class Sub(dict):
        pass

    xs = [mx.array(float(i)) for i in range(6)]
    held = Held(xs[5])
    inner = [xs[2]]
    d = {"a": xs[0], "b": (xs[1], inner, 7), "s": Sub(c=xs[3]), "n": None}
    tree = [d, (xs[4],), held, "text"]
    assert [x is y for x, y in zip(capi._flatten_state(tree, []), xs)] == [True] * 6
    new = [mx.array(10.0 + i) for i in range(6)]
    it = iter(new)
    assert capi._update_state(tree, lambda a: next(it)) is tree
    assert tree[0] is d and d["b"][1] is inner and inner[0] is new[2]
    assert d["a"] is new[0] and d["b"][0] is new[1] and d["b"][2] == 7
    assert d["s"]["c"] is new[3] and tree[1][0] is new[4] and held.a is new[5]
    assert [x is y for x, y in zip(capi._flatten_state(tree, []), new)] == [True] * 6
