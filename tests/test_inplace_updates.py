"""Slice updates and scatters write into their input's buffer when nothing else can see it
(issue 15 item 4), as MLX donates it, so a KV-cache step costs the new tokens, not the cache.

Every test checks both halves of the rule: the result takes the input's buffer (same data
pointer) when the input is referenced by the update alone, and an array anyone can still
read (another name, a pending consumer, a view, a NumPy export, a captured constant, a value
a transform keeps) never changes.
"""
from functools import partial

import numpy as np
import pytest

import braze.core as mx
from braze._src import scheduler

SHAPE = (8, 1024)  # 32 KiB of float32: above the donation threshold
DATA = np.arange(SHAPE[0] * SHAPE[1], dtype=np.float32).reshape(SHAPE) % 97


def _ptr(a) -> int:
    """The address of a's buffer (evaluates it; keeps no view alive)."""
    return np.asarray(a).__array_interface__["data"][0]


def _fresh():
    x = mx.array(DATA)
    mx.eval(x)
    return x


def _setitem_slice(x):
    x[2:4, 10:20] = -1.0
    return x


def _setitem_scatter(x):
    x[1, mx.array([3, 4, 900])] = 7.0
    return x


def _setitem_mask(x):
    x[mx.array(DATA > 50)] = 0.0
    return x


IDX = mx.array([1, 1, 5])
# functional updates: each returns a new array from x
UPDATES = {
    "slice_update": lambda x: mx.slice_update(x, mx.full((2, 1024), -1.0), mx.array([3]),
                                              axes=(0,)),
    "at_add": lambda x: x.at[IDX].add(2.0),
    "at_subtract": lambda x: x.at[IDX, 7].subtract(2.0),
    "at_multiply": lambda x: x.at[IDX].multiply(3.0),
    "at_divide": lambda x: x.at[:, IDX].divide(4.0),
    "at_maximum": lambda x: x.at[IDX].maximum(60.0),
    "at_minimum": lambda x: x.at[IDX].minimum(10.0),
    "put_along_axis": lambda x: mx.put_along_axis(x, mx.zeros((8, 1), mx.int32),
                                                  mx.array(-5.0), axis=1),
    "put_along_axis_flat": lambda x: mx.put_along_axis(x, mx.array([3, 9]), mx.array(-5.0),
                                                       axis=None),
}
# the same through `x[idx] = v`, which gives the object x the new value
SETITEMS = {"slice": _setitem_slice, "scatter": _setitem_scatter, "mask": _setitem_mask}


def _reference(update):
    """update's result on an input that stays referenced (copied, never written)."""
    held = mx.array(DATA)
    want = np.array(update(mx.array(held)))
    np.testing.assert_array_equal(np.asarray(held), DATA)
    return want


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_update_takes_a_free_input_buffer(name):
    want = _reference(UPDATES[name])
    x = _fresh()
    p = _ptr(x)
    x = UPDATES[name](x)  # the old x is referenced by the update alone
    assert _ptr(x) == p
    np.testing.assert_array_equal(np.asarray(x), want)


@pytest.mark.parametrize("name", sorted(SETITEMS))
def test_setitem_writes_in_place(name):
    want = _reference(SETITEMS[name])
    x = _fresh()
    p = _ptr(x)
    SETITEMS[name](x)
    assert _ptr(x) == p
    np.testing.assert_array_equal(np.asarray(x), want)


def _hold_name(x):
    return x


def _hold_consumer(x):
    return x * 1  # pending: evaluated after the update


def _hold_view(x):
    v = x[2:6]
    mx.eval(v)
    return v


def _hold_lazy_view(x):
    return x[2:6]


def _hold_reshape(x):
    v = x.reshape(-1)
    mx.eval(v)
    return v


def _hold_copy(x):
    c = mx.array(x)  # a lazy copy: a view of x's buffer once evaluated
    mx.eval(c)
    return c


def _hold_numpy(x):
    return np.asarray(x)


HOLDS = {"name": _hold_name, "consumer": _hold_consumer, "view": _hold_view,
         "lazy_view": _hold_lazy_view, "reshape": _hold_reshape, "copy": _hold_copy,
         "numpy": _hold_numpy}


def _value(held):
    return np.asarray(held).reshape(-1)[:DATA.size]


@pytest.mark.parametrize("hold", sorted(HOLDS))
@pytest.mark.parametrize("name", ["slice_update", "at_add", "put_along_axis_flat"])
def test_what_others_can_read_never_changes(name, hold):
    want = _reference(UPDATES[name])
    x = _fresh()
    held = HOLDS[hold](x)
    before = np.array(held).reshape(-1)
    x = UPDATES[name](x)
    mx.eval(x)
    np.testing.assert_array_equal(_value(held), before)
    np.testing.assert_array_equal(np.asarray(x), want)


@pytest.mark.parametrize("hold", ["consumer", "view", "lazy_view", "copy", "numpy"])
def test_setitem_leaves_what_others_read(hold):
    want = _reference(_setitem_slice)
    x = _fresh()
    held = HOLDS[hold](x)
    before = np.array(held).reshape(-1)
    _setitem_slice(x)
    mx.eval(x, held) if hold != "numpy" else mx.eval(x)
    np.testing.assert_array_equal(_value(held), before)
    np.testing.assert_array_equal(np.asarray(x), want)


def test_an_evaluated_result_the_caller_holds_is_not_written():
    y = mx.array(DATA) + 1
    mx.eval(y)
    z = y.at[IDX].add(5.0)
    mx.eval(z)
    np.testing.assert_array_equal(np.asarray(y), DATA + 1)
    assert _ptr(z) != _ptr(y)


def test_update_reading_its_own_input():
    """`x[1:5] = x[0:4]` and an update computed from the array: the value read is the old
    one, whether or not the buffer is taken."""
    x = _fresh()
    x[1:5] = x[0:4]
    x = x.at[IDX].add(x[0])
    want = DATA.copy()
    want[1:5] = DATA[0:4]
    np.add.at(want, [1, 1, 5], want[0])
    np.testing.assert_array_equal(np.asarray(x), want)


def test_a_chain_of_lazy_updates_holds_one_buffer():
    x = _fresh()
    p = _ptr(x)
    for i in range(8):
        x = x.at[i].add(1.0)
        x[i, 0] = -float(i)
    mx.eval(x)
    want = DATA + 1
    want[:, 0] = -np.arange(8)
    assert _ptr(x) == p
    np.testing.assert_array_equal(np.asarray(x), want)


def test_no_donation_where_reference_counts_cannot_be_trusted(monkeypatch):
    monkeypatch.setattr(scheduler, "DONATION", False)
    want = _reference(UPDATES["at_add"])
    x = _fresh()
    p = _ptr(x)
    x = UPDATES["at_add"](x)
    assert _ptr(x) != p
    np.testing.assert_array_equal(np.asarray(x), want)


# -- compile ---------------------------------------------------------------------------------
def _compiled_setitem(c, k):
    c[:, 1:2] = k
    return c


def test_compiled_updates_take_the_input_buffer():
    k = mx.full((8, 1), -2.0)
    slice_step = mx.compile(lambda c, t: mx.slice_update(c, k, t, axes=(1,)))
    set_step = mx.compile(_compiled_setitem)
    x = _fresh()
    p = _ptr(x)
    for t in range(3):  # the first call traces, the others replay
        x = slice_step(x, mx.array([t]))
        x = set_step(x, k)
        assert _ptr(x) == p
    want = DATA.copy()
    want[:, 0:3] = -2.0
    np.testing.assert_array_equal(np.asarray(x), want)


def test_compiled_state_update_takes_the_buffer():
    state = [_fresh()]
    p = _ptr(state[0])

    @partial(mx.compile, inputs=state, outputs=state)
    def step(t):
        state[0] = state[0].at[t].add(1.0)

    for t in range(3):
        step(mx.array(t))
        mx.eval(state)
        assert _ptr(state[0]) == p
    want = DATA.copy()
    want[:3] += 1
    np.testing.assert_array_equal(np.asarray(state[0]), want)


def test_compiled_readers_of_the_input_see_its_old_value():
    """The update and a fused kernel and a reduction of the same input, in one compiled
    function: the update runs first and must copy."""
    k = mx.full((1, 1024), -3.0)
    f = mx.compile(lambda c: (mx.slice_update(c, k, mx.array([0]), axes=(0,)), c * 2,
                              c.sum()))
    want = DATA.copy()
    want[0] = -3.0
    for _ in range(2):
        y, doubled, total = f(_fresh())
        mx.eval(y)
        np.testing.assert_array_equal(np.asarray(y), want)
        np.testing.assert_array_equal(np.asarray(doubled), DATA * 2)
        assert total.item() == DATA.sum()


def test_a_captured_constant_is_never_written():
    c = _fresh()
    f = mx.compile(lambda u: c.at[IDX].add(u))
    for v in (1.0, 2.0, 3.0):
        r = f(mx.array(v))
        want = DATA.copy()
        np.add.at(want, [1, 1, 5], v)
        np.testing.assert_array_equal(np.asarray(r), want)
    np.testing.assert_array_equal(np.asarray(c), DATA)


def test_a_caller_held_input_of_a_compiled_update_is_not_written():
    step = mx.compile(lambda c: c.at[IDX].add(1.0))
    x = _fresh()
    for _ in range(2):
        y = step(x)
        mx.eval(y)
        np.testing.assert_array_equal(np.asarray(x), DATA)


# -- transforms --------------------------------------------------------------------------------
def _loss(x, u, inner_eval):
    y = (x * 2).at[IDX].multiply(u)  # prod: the vjp reads the scattered input and u
    y = mx.slice_update(y * 1, mx.full((1, 1024), 3.0) * u, mx.array([6]), axes=(0,))
    y[0, :5] = u
    if inner_eval:
        mx.eval(y)  # evaluated while grad keeps the graph
    return (y * y).sum()


def _grads(inner_eval):
    x = mx.array(DATA / 97)
    g = mx.grad(partial(_loss, inner_eval=inner_eval), argnums=(0, 1))(x, mx.array(1.5))
    mx.eval(g)
    np.testing.assert_array_equal(np.asarray(x), DATA / 97)
    return [np.asarray(v) for v in g]


@pytest.mark.parametrize("inner_eval", [False, True])
def test_grad_sees_the_values_before_the_update(monkeypatch, inner_eval):
    """The gradients with donation on are those without it (which copies every update)."""
    got = _grads(inner_eval)
    monkeypatch.setattr(scheduler, "DONATION", False)
    want = _grads(inner_eval)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# -- a KV-cache decode loop --------------------------------------------------------------------
@pytest.mark.parametrize("compiled", [False, True])
def test_kv_cache_decode_does_not_copy_the_cache(compiled):
    """64 single-token updates of a (1, 8, 2048, 64) cache, each followed by a small
    attention over a view of the filled part: the cache keeps its one buffer."""
    cache = mx.zeros((1, 8, 2048, 64))
    q = mx.ones((1, 8, 1, 64))
    step = mx.compile(lambda c, k, t: mx.slice_update(c, k, t, axes=(2,)))
    mx.eval(cache, q)
    p = _ptr(cache)
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    for t in range(64):
        k = mx.full((1, 8, 1, 64), float(t + 1))
        if compiled:
            cache = step(cache, k, mx.array([t]))
        else:
            cache[..., t:t + 1, :] = k
        keys = cache[..., :t + 1, :]
        scores = mx.softmax(q @ keys.swapaxes(-1, -2), axis=-1)
        out = scores @ keys
        mx.eval(out, cache)
        assert _ptr(cache) == p, t
    assert mx.get_peak_memory() - base < cache.nbytes // 4
    assert mx.get_active_memory() - base < cache.nbytes // 4
    got = np.asarray(cache)[0, :, :65, 0]
    np.testing.assert_array_equal(got[:, :64], np.broadcast_to(np.arange(1, 65), (8, 64)))
    assert not got[:, 64].any()


# -- random programs against a NumPy model ------------------------------------------------------
def test_random_updates_and_references_match_numpy(monkeypatch):
    """Random updates of random arrays while names, views and exports come and go: every
    array anyone holds keeps the value a copying implementation gives it."""
    taken = []
    take = scheduler._take_count
    monkeypatch.setattr(scheduler, "_take_count", lambda *a: (taken.append(1), take(*a)))
    rng = np.random.default_rng(0)
    names = [[_fresh(), DATA.copy()] for _ in range(3)]  # [array, its NumPy model]
    views = []  # (something that reads a buffer, its value when taken)
    for _ in range(200):
        box = names[int(rng.integers(len(names)))]
        op = int(rng.integers(6))
        r, c = int(rng.integers(8)), int(rng.integers(1024))
        if op == 0:  # a new array; the old one keeps its other names, if any
            new = [box[0].at[r, c].add(1.0), box[1].copy()]
            new[1][r, c] += 1
            if rng.random() < 0.7:
                names = [new if b is box else b for b in names]
            else:
                names.append(new)
        elif op == 1:  # the object takes the new value: every name of it sees it
            box[0][r] = float(c)
            box[1][r] = c
        elif op == 2:
            views.append((box[0][r], box[1][r].copy()))
        elif op == 3:
            views.append((np.asarray(box[0]), box[1].copy()))
        elif op == 4:
            names.append(box)
        elif views:
            views.pop(int(rng.integers(len(views))))
        if len(names) > 6:
            names.pop(int(rng.integers(len(names))))
        if rng.random() < 0.3:
            mx.eval([b[0] for b in names])
    for a, m in names:
        np.testing.assert_array_equal(np.asarray(a), m)
    for v, m in views:
        np.testing.assert_array_equal(np.asarray(v), m)
    assert len(taken) > 20  # the program did write in place
