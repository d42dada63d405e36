"""One node constructor, one call path and one replay path; transforms of a fused `Compiled`
node expand it into its primitives (issue 14, item 4); a shapeless replay asks each primitive
whether it re-infers its shape (`reinfers_shape`) instead of testing class names (item 1)."""
import gc
from dataclasses import dataclass

import numpy as np
import pytest

import braze.core as mx
from braze._src.array import TraceState, node, node_group
from braze._src.compile import api as capi
from braze._src.compile.replay import replay
from braze._src.prims.base import Primitive, bind


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def _fused(fn, *args):
    """`fn` as the replay of its stored (simplified and fused) tape for `args`'s signature,
    and the tape's fused regions."""
    cf = mx.compile(fn)  # its entries live as long as it does
    cf(*args)
    (entry,) = capi._thread_cache().map[id(fn)].values()

    def fused(*xs):  # the implicit state (the random key) is an input too
        real = [*xs, *(o.__braze_capture__() for o in capi._IMPLICIT)]
        return replay(entry.tape, real)[:entry.n_out]

    return fused, [a._prim.ir for a in entry.tape.nodes if hasattr(a._prim, "ir")]


# -- the node constructor ------------------------------------------------------------------------
def test_node_counts_its_inputs_and_groups_share_one_sibling_tuple():
    x = mx.array([1.0, 2.0])
    before = x._nc
    a = node((2,), x.dtype, None, (x, x))
    assert x._nc == before + 2 and a._prim is None and not a._tracer and a._data is None
    q, r = node_group([((2,), x.dtype), ((2,), x.dtype)], None, (x,), True)
    assert q._siblings is r._siblings == (q, r) and (q._idx, r._idx) == (0, 1) and r._tracer
    del a, q, r
    gc.collect()  # a sibling tuple and its arrays form a cycle
    assert x._nc == before


def test_bind_and_replay_build_multi_output_nodes_alike():
    def fn(a, b):
        q, r = mx.divmod(a, b)
        return r * 2, q

    a, b = mx.array([7.0, -7.0, 5.5]), mx.array([2.0, 3.0, -2.0])
    fused, _ = _fused(fn, a, b)
    for g, w in zip(fused(a, b), fn(a, b)):
        _close(g, w)


# -- transforms of fused nodes: the ordinary rules of the region's primitives ------------------
def _row(x, w):
    h = mx.softmax(x * w, axis=-1)  # a row region: a reduction fused with its neighbours
    return ((h * x).sum(-1) + mx.exp(w).sum(),)


def _wide(x, w):
    return mx.sin(mx.broadcast_to(x, (3, 4))) * w, mx.exp(w)  # outputs wider than x


@pytest.mark.parametrize("fn", [_row, _wide], ids=["row_region", "wider_outputs"])
def test_grad_jvp_vmap_of_fused_nodes_match_the_unfused_function(fn):
    x = mx.array(np.linspace(-1, 1, 4, dtype=np.float32))
    w = mx.array(np.linspace(0.5, 2, 4, dtype=np.float32))
    fused, kernels = _fused(fn, x, w)
    assert kernels and (fn is not _row or any(ir.reduce_ndim for ir in kernels))
    def loss(f):
        return lambda a, b: sum((o * o).sum() for o in f(a, b))

    for g, e in zip(mx.grad(loss(fused), argnums=(0, 1))(x, w),
                    mx.grad(loss(fn), argnums=(0, 1))(x, w)):
        _close(g, e)
    gg = mx.grad(lambda a: mx.grad(loss(fused))(a, w).sum())(x)
    _close(gg, mx.grad(lambda a: mx.grad(loss(fn))(a, w).sum())(x))
    t = mx.ones_like(x)
    for g, e in zip(mx.jvp(fused, [x, w], [t, t])[1], mx.jvp(fn, [x, w], [t, t])[1]):
        _close(g, e)
    xb = mx.stack([x, x * 2, -x], axis=1)  # batched along axis 1
    for g, e in zip(mx.vmap(fused, in_axes=(1, None))(xb, w),
                    mx.vmap(fn, in_axes=(1, None))(xb, w)):
        _close(g, e)


# -- one call path --------------------------------------------------------------------------------
def test_every_call_form_hits_after_its_trace():
    cf = mx.compile(lambda a, b, scale=1.0: (a * b + 1) * scale)
    x, y = mx.ones((3,)), mx.full((3,), 2.0)
    for _ in range(3):
        _close(cf(x, y), [3.0] * 3)
        _close(cf(x, b=y), [3.0] * 3)
        _close(cf(x, y, 2.0), [6.0] * 3)
    # the keyword call shares the positional call's trace (issue 16)
    assert cf.stats()["traces"] == 2 and cf.stats()["hits"] == 7


def test_declared_state_is_served_by_the_same_path():
    state = {"n": mx.array(0.0)}

    def count(x):
        state["n"] = state["n"] + x.sum()
        return state["n"]

    cf = mx.compile(count, inputs=state, outputs=state)
    for _ in range(4):
        cf(mx.ones((2,)))
    assert state["n"].item() == 8.0 and cf.stats()["traces"] == 1
    state["n"] = mx.zeros((1,))  # another captured shape: a new trace
    cf(mx.ones((2,)))
    assert state["n"].tolist() == [2.0] and cf.stats()["traces"] == 2


def test_shapeless_calls_hit_across_sizes_and_retrace_on_ndim():
    cf = mx.compile(lambda a: mx.exp(a) * 2, shapeless=True)
    for n in (2, 5, 3):
        _close(cf(mx.zeros((n,))), [2.0] * n)
    cf(mx.zeros((2, 2)))
    assert cf.stats()["traces"] == 2 and cf.stats()["hits"] == 2


def test_the_record_of_the_last_call_is_retired_by_clear_cache_and_disable():
    calls = []

    def fn(a):
        calls.append(1)
        return a + 1

    cf = mx.compile(fn)
    x = mx.array([1.0])
    cf(x)
    cf(x)
    mx.clear_streams()
    cf(x)
    assert len(calls) == 2
    mx.disable_compile()
    try:
        assert cf(x).item() == 2.0 and len(calls) == 3
    finally:
        mx.enable_compile()


def test_a_constant_output_is_a_fresh_array_on_every_call():
    k = mx.array([1.0, 2.0])
    cf = mx.compile(lambda a: (a + 1, k))
    x = mx.array([0.0, 0.0])
    for kwargs in ({}, {}, {"a": x}):
        _, c = cf(**kwargs) if kwargs else cf(x)
        assert c is not k
        c += 10  # an in-place update of the result leaves the cached constant alone
    assert k.tolist() == [1.0, 2.0] and cf(x)[1].tolist() == [1.0, 2.0]


def test_a_call_inside_a_transform_on_constants_replays():
    cf = mx.compile(lambda a: mx.exp(a))
    c = mx.array([0.5])
    cf(c)
    g = mx.grad(lambda x: (x * cf(c)).sum())(mx.array([2.0]))
    _close(g, np.exp([0.5]))
    assert cf.stats()["hits"] == 1 and TraceState.depth == 0


# -- shapeless replay asks the primitive -------------------------------------------------------
@dataclass(frozen=True)
class _Fixed(Primitive):
    """An elementwise copy (a test-only primitive: unregistered, as its name starts with _)."""

    def abstract_eval(self, x):
        return [(x.shape, x.dtype)]

    def eval_cpu(self, x):
        return [x.copy()]


@dataclass(frozen=True)
class _Refused(_Fixed):
    reinfers_shape = False


@pytest.mark.parametrize("prim", [_Fixed(), _Refused()], ids=["reinfers", "refused"])
def test_reinfers_shape_decides_a_shapeless_replay(prim):
    cf = mx.compile(lambda a: bind(prim, (a * 2,)) + 1, shapeless=True)  # USES-PRIM
    if prim.reinfers_shape:
        for n in (2, 4):
            _close(cf(mx.ones((n,))), [3.0] * n)
        return
    with pytest.raises(ValueError, match=r"_Refused cannot infer its output shape") as e:
        cf(mx.ones((2,)))  # every call replays shapeless, the first one too (as in MLX)
    assert "USES-PRIM" in str(e.value) and __file__ in str(e.value)


def test_a_fixed_broadcast_needs_inputs_that_still_broadcast():
    cf = mx.compile(lambda a: mx.broadcast_to(a, (3, 4)), shapeless=True)  # FIXED-HERE
    cf(mx.ones((1, 4)))
    _close(cf(mx.full((3, 1), 2.0)), np.full((3, 4), 2.0))
    with pytest.raises(ValueError, match=r"Unable to infer broadcast shape.*FIXED-HERE"):
        cf(mx.ones((2, 4)))


def test_tracing_pauses_the_cycle_collector_and_restores_it():
    """A trace and its passes run with gc paused (they allocate much and free little); the
    collector is back as it was after the call, nested compiles and errors included."""
    seen = []

    def inner(x):
        seen.append(("inner", gc.isenabled()))
        return x + 1

    g = mx.compile(inner)

    def outer(x):
        seen.append(("outer", gc.isenabled()))
        return g(x) * 2

    f = mx.compile(outer)
    assert gc.isenabled()
    mx.eval(f(mx.array([1.0, 2.0])))
    assert seen == [("outer", False), ("inner", False)] and gc.isenabled()

    def bad(x):
        raise ValueError("no")

    with pytest.raises(ValueError):
        mx.compile(bad)(mx.array([1.0]))
    assert gc.isenabled()
    gc.disable()
    try:
        mx.eval(mx.compile(lambda x: x - 1)(mx.array([1.0])))
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()


def test_a_call_reads_no_state_its_entry_neither_reads_nor_changes(monkeypatch):
    """The random key is implicit state of every compiled function: a function that draws no
    random numbers neither reads nor returns it, so its repeat calls skip reading it; one
    that draws does read it (and advances it) on every call."""
    from braze._src import random as R

    reads = []
    orig = R._RandomState.__braze_capture__
    monkeypatch.setattr(R._RandomState, "__braze_capture__",
                        lambda self: reads.append(1) or orig(self))
    x = mx.array([1.0, 2.0, 3.0])
    f = mx.compile(lambda v: v * 2.0)
    outs = [f(x + i) for i in range(4)]
    assert [o.tolist() for o in outs] == [[2.0 * (v + i) for v in (1, 2, 3)] for i in range(4)]
    first = len(reads)  # the trace and the call that makes the record read it
    assert first and [f(x).tolist() for _ in range(3)] == [[2.0, 4.0, 6.0]] * 3
    assert len(reads) == first  # the repeat calls did not

    g = mx.compile(lambda v: v + mx.random.uniform(shape=v.shape))
    draws = [np.asarray(g(x)) for _ in range(3)]
    n = len(reads)
    assert not np.array_equal(draws[1], draws[2])  # the key advances every call
    g(x)
    assert len(reads) == n + 1

    # a new implicit object registered later makes the record stale (the call reads again)
    class Holder:
        def __init__(self):
            self.v = mx.array([0.0])

        def __braze_capture__(self):
            return self.v

        def __braze_update__(self, value):
            self.v = value

    monkeypatch.setattr(capi, "_IMPLICIT", list(capi._IMPLICIT))
    capi.register_implicit_state(Holder())
    for _ in range(3):  # and, as it does not declare a fixed shape, every call reads it
        n = len(reads)
        assert f(x).tolist() == [2.0, 4.0, 6.0]
        assert len(reads) > n


def test_compiled_outputs_keep_their_container_types():
    from collections import namedtuple
    Pair = namedtuple("Pair", "a b")
    x = mx.array([1.0, 2.0])
    cases = [
        (lambda v: (v + 1, v * 2), tuple), (lambda v: [v + 1, v * 2], list),
        (lambda v: Pair(v + 1, v * 2), Pair), (lambda v: (v + 1, 3, v * 2), tuple),
        (lambda v: ((v + 1,), v * 2), tuple), (lambda v: (v + 1,), tuple),
    ]
    for fn, kind in cases:
        cf = mx.compile(fn)
        for _ in range(3):  # the trace, then the recorded call
            got, want = cf(x), fn(x)
            assert type(got) is kind
            assert len(got) == len(want)
            for g, w in zip(got, want):
                if isinstance(w, tuple):
                    assert type(g) is tuple
                    np.testing.assert_array_equal(np.array(g[0]), np.array(w[0]))
                elif isinstance(w, mx.array):
                    np.testing.assert_array_equal(np.array(g), np.array(w))
                else:
                    assert g == w


def test_scalar_inputs_of_single_element_kernels_follow_each_call():
    # captured scalars are the same buffers every call (their 1-D views are kept); a 0-d
    # argument is a new buffer each call, and each call reads its own
    cf = mx.compile(lambda p, s: (p * 0.9 + s * 0.1, p - s * 2.0))
    p = mx.array([1.0])
    for i in range(5):
        s = mx.array(float(i))
        a, b = cf(p, s)
        np.testing.assert_allclose(np.array(a), [0.9 + 0.1 * i], rtol=1e-6)
        np.testing.assert_allclose(np.array(b), [1.0 - 2.0 * i], rtol=1e-6)
    same = mx.array(7.0)
    for _ in range(2):
        np.testing.assert_allclose(np.array(cf(p, same)[1]), [-13.0])


@pytest.mark.parametrize("shape", [(), (1,), (1, 1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_single_element_launches_keep_shape_dtype_and_values(shape, dtype):
    # a single element takes the lean launch (float32) or the general one (half precision):
    # both give each output its own shape, dtype and value, call after call
    cf = mx.compile(lambda a, b: (a * b + 1.5, mx.exp(a) - b))
    dt = getattr(mx, dtype)
    for i in range(3):
        a = mx.array(np.full(shape, 0.25 * i), dt)
        b = mx.array(np.full(shape, 2.0 - i), dt)
        u, v = cf(a, b)
        assert u.shape == shape and v.shape == shape and u.dtype == dt and v.dtype == dt
        an, bn = 0.25 * i, 2.0 - i
        np.testing.assert_allclose(np.array(u, np.float64), np.full(shape, an * bn + 1.5),
                                   rtol=2e-3)
        np.testing.assert_allclose(np.array(v, np.float64), np.full(shape, np.exp(an) - bn),
                                   rtol=2e-3, atol=2e-3)
