"""A compiled call outside transforms is one PlanCall node run by the executor
(braze/_src/compile/execute.py): its results, buffer donation, memory counts and faults."""
import io

import numpy as np
import pytest

import braze.core as mx
from braze._src.compile.execute import PlanCall
from braze._src.prims import linalg as L


def _ptr(a):
    return a._data.__array_interface__["data"][0]


def _step(p, g, w):
    """A small optimizer-like step: a kernel over p and g, then a product and a reduction."""
    p1 = p * 0.9 - 0.1 * g
    return p1, mx.sum((p1 @ w) ** 2, axis=1)


def _np_step(p, g, w):
    p1 = p.astype(np.float64) * 0.9 - 0.1 * g.astype(np.float64)
    return p1, np.sum((p1 @ w.astype(np.float64)) ** 2, axis=1)


def _inputs(seed=0, n=64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, n)).astype(np.float32) for _ in range(3)]


def test_a_call_is_one_node_with_the_uncompiled_results():
    cf = mx.compile(_step)
    pn, gn, wn = _inputs()
    for _ in range(3):
        p1, s = cf(mx.array(pn), mx.array(gn), mx.array(wn))
        assert isinstance(p1._prim, PlanCall) and s._siblings is not None
        assert s._siblings is p1._siblings
        want = _np_step(pn, gn, wn)
        np.testing.assert_allclose(np.array(p1), want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.array(s), want[1], rtol=1e-4)


def test_inside_a_transform_the_call_is_a_node_per_step():
    cf = mx.compile(lambda x, w: mx.sum(mx.tanh(x @ w)))
    x, w = (mx.array(a) for a in _inputs()[:2])
    g = mx.grad(cf)(x, w)
    xn, wn = np.array(x, np.float64), np.array(w, np.float64)
    want = (1 - np.tanh(xn @ wn) ** 2) @ wn.T
    np.testing.assert_allclose(np.array(g), want, rtol=1e-4, atol=1e-5)


def test_an_input_only_the_call_holds_gives_its_buffer():
    cf = mx.compile(_step)
    pn, gn, wn = _inputs()
    for _ in range(2):  # the trace, then the cached plan
        p = mx.array(pn)
        before = _ptr(p)
        p1, s = cf(p, mx.array(gn), mx.array(wn))
        del p
        mx.eval(p1, s)
        assert _ptr(p1) == before
        np.testing.assert_allclose(np.array(p1), _np_step(pn, gn, wn)[0], rtol=1e-5, atol=1e-6)


def test_an_input_the_caller_still_holds_never_changes():
    cf = mx.compile(_step)
    pn, gn, wn = _inputs()
    p, g, w = mx.array(pn), mx.array(gn), mx.array(wn)
    for _ in range(3):
        p1, s = cf(p, g, w)
        mx.eval(p1, s)
        assert _ptr(p1) != _ptr(p)
        for a, n in ((p, pn), (g, gn), (w, wn)):
            np.testing.assert_array_equal(np.array(a), n)


def test_a_live_view_keeps_its_buffer_from_a_later_kernel():
    # t's last reader is the kernel exp(t) * 3, which could write into t's buffer, but the
    # transposed view of t is read after it
    def fn(x, w):
        t = x @ w
        v = t.T
        u = mx.exp(t) * 3.0
        return u @ v

    cf = mx.compile(fn)
    xn, wn = (a * 0.1 for a in _inputs()[:2])
    for _ in range(2):
        got = cf(mx.array(xn), mx.array(wn))
        t = xn.astype(np.float64) @ wn
        want = (np.exp(t) * 3) @ t.T
        np.testing.assert_allclose(np.array(got), want, atol=1e-4 * np.abs(want).max())


def test_an_update_in_the_plan_writes_in_place_and_matches():
    def fn(x, v):
        y = x * 2.0
        y[1:3] = v
        return y.sum(axis=0), y

    cf = mx.compile(fn)
    xn = np.arange(40, dtype=np.float32).reshape(5, 8)
    vn = np.full((2, 8), -1.0, np.float32)
    for _ in range(2):
        s, y = cf(mx.array(xn), mx.array(vn))
        want = xn * 2
        want[1:3] = vn
        np.testing.assert_array_equal(np.array(y), want)
        np.testing.assert_array_equal(np.array(s), want.sum(axis=0))


def test_evaluating_one_output_evaluates_every_output():
    cf = mx.compile(_step)
    p1, s = cf(*(mx.array(a) for a in _inputs()))
    mx.eval(s)
    assert p1._data is not None and p1._prim is None


def test_memory_counts_return_after_the_call():
    cf = mx.compile(_step)
    args = [mx.array(a) for a in _inputs()]
    mx.eval(cf(*args))  # traced and built
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    p1, s = cf(*args)
    mx.eval(p1, s)
    # p1 owns its buffer; s (a row sum's view) is counted as uncompiled calls count it
    assert mx.get_active_memory() >= base + p1.nbytes
    assert mx.get_peak_memory() >= base + p1.nbytes + s.nbytes
    del p1, s
    assert mx.get_active_memory() == base


def test_a_step_that_raises_leaves_the_outputs_computable(monkeypatch):
    # p is donated to the first kernel, then the product raises once (an interrupt): the
    # outputs stay lazy on the steps left, and evaluating again gives the full result
    cf = mx.compile(_step)
    pn, gn, wn = _inputs()
    mx.eval(cf(*(mx.array(a) for a in (pn, gn, wn))))
    calls = {"n": 0}
    real = L.Matmul.eval_cpu

    def flaky(self, *xs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt
        return real(self, *xs)

    monkeypatch.setattr(L.Matmul, "eval_cpu", flaky)
    p = mx.array(pn)
    p1, s = cf(p, mx.array(gn), mx.array(wn))
    del p
    with pytest.raises(KeyboardInterrupt):
        mx.eval(s)
    assert calls["n"] == 1
    want = _np_step(pn, gn, wn)
    np.testing.assert_allclose(np.array(s), want[1], rtol=1e-4)
    np.testing.assert_allclose(np.array(p1), want[0], rtol=1e-5, atol=1e-6)


def test_the_graph_display_shows_the_steps():
    cf = mx.compile(_step)
    outs = cf(*(mx.array(a) for a in _inputs()))
    buf = io.StringIO()
    mx.export_to_dot(buf, *outs)
    text = buf.getvalue()
    assert "Matmul" in text and "Compiled" in text and "PlanCall" not in text


def test_an_unread_input_is_not_an_input_of_the_node():
    # the function reads no randomness: the implicit random key is not among the node's
    # inputs, so another compiled function may capture the lazy result
    f = mx.compile(lambda a: (a @ a).reshape(-1) + mx.sum(a))
    lazy = f(mx.ones((3, 3)))
    assert all(x.shape != (2,) for x in lazy._inputs)
    h = mx.compile(lambda x: x * lazy)
    np.testing.assert_array_equal(np.array(h(mx.ones(9))), np.full(9, 12.0))


def test_the_steps_run_as_one_generated_function_that_debug_4_prints(capfd):
    from braze._src import config

    cf = mx.compile(_step)
    args = [mx.array(a) for a in _inputs()]
    with config.override(debug=4):
        p1, s = cf(*args)
        ex = p1._prim.executor
        mx.eval(p1, s)
    err = capfd.readouterr().err
    src = ex.source
    assert "[compile] executor function:" in err and src in err
    n_steps = len(ex.steps)
    # straight-line code: a marker line per step, no loop over them
    assert sum(line.strip().startswith("s = ") for line in src.splitlines()) == n_steps + 1
    assert "for " not in src and "while " not in src
    want = _np_step(*_inputs())
    np.testing.assert_allclose(np.array(s), want[1], rtol=1e-4)


def test_memory_counts_return_after_a_step_raises(monkeypatch):
    cf = mx.compile(_step)
    args = [mx.array(a) for a in _inputs()]
    mx.eval(cf(*args))
    base = mx.get_active_memory()
    real = L.Matmul.eval_cpu

    def fails(self, *xs):
        raise MemoryError

    monkeypatch.setattr(L.Matmul, "eval_cpu", fails)
    p1, s = cf(*args)
    with pytest.raises(MemoryError):
        mx.eval(s)
    monkeypatch.setattr(L.Matmul, "eval_cpu", real)
    mx.eval(p1, s)
    np.testing.assert_allclose(np.array(s), _np_step(*_inputs())[1], rtol=1e-4)
    del p1, s
    assert mx.get_active_memory() == base


def test_an_output_nothing_reads_is_given_back_at_its_step():
    # a multi-output step (a split's two halves) whose second half nothing reads: the
    # generated function deletes it right after the step
    cf = mx.compile(lambda x: mx.sum(mx.split(x, 2)[0] * 2.0) + mx.sum(mx.exp(x)))
    x = mx.array(np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32))
    mx.eval(cf(x))
    out = cf(x)
    ex = out._prim.executor
    sort = next(st for st in ex.steps if len(st[4]) == 2)
    unread = sort[3] + 1  # the second half's position
    want = np.sum(np.array(x)[:4] * 2.0) + np.sum(np.exp(np.array(x)))
    np.testing.assert_allclose(float(out), want, rtol=1e-5)
    step_lines = ex.source.split(f"s = {ex.steps.index(sort) + 1}")[0]
    assert f"del v{unread}" in step_lines.split(f"s = {ex.steps.index(sort)}  ")[1]
