"""A compiled function that updates captured `inputs=` state which is not an `outputs=` tree
loses the update after the trace: braze warns once per function, naming the captured path and
the line of the update (issue 16, fault 2)."""
import warnings

import pytest

import braze.core as mx
import braze.nn as nn


def _calls(cf, n=3):
    for _ in range(n):
        mx.eval(cf(mx.array(1.0)))


def test_in_place_update_of_inputs_only_state_warns_once_with_path_and_line():
    state = {"w": [mx.array(0.0), mx.array(5.0)]}

    def step(x):
        state["w"][0] += x  # the update that is lost
        return x * 2

    cf = mx.compile(step, inputs=state)
    with pytest.warns(RuntimeWarning) as rec:
        _calls(cf)
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert "inputs['w'][0]" in msg and "inputs['w'][1]" not in msg
    assert 'state["w"][0] += x' in msg and __file__ in msg
    assert "outputs=" in msg
    assert rec[0].filename == __file__  # points at the call, not into braze
    assert state["w"][0].item() == 0.0  # still lost (MLX's behaviour), but no longer silently


def test_replaced_and_created_state_are_named():
    state = {"a": mx.array(1.0)}

    def step(x):
        state["a"] = state["a"] + x
        state["new"] = x * 3
        return x

    with pytest.warns(RuntimeWarning, match=r"inputs\['a'\].*inputs\['new'\]"):
        mx.compile(step, inputs=state)(mx.array(1.0))


def test_module_state_path_names_the_parameter():
    model = nn.Linear(2, 2)

    def step(x):
        model.weight[...] = 0.0
        return model(x)

    with pytest.warns(RuntimeWarning, match=r"inputs\['weight'\]"):
        mx.compile(step, inputs=model.state)(mx.ones((2,)))


def test_state_that_is_written_back_or_only_read_does_not_warn():
    state = [mx.array(1.0)]

    def update(x):
        state[0] += x
        return state[0]

    def read(x):
        return x + state[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _calls(mx.compile(update, inputs=state, outputs=state))
        assert state[0].item() == 4.0
        _calls(mx.compile(read, inputs=state))


def test_outputs_that_do_not_cover_the_updated_input_warn():
    a, b = [mx.array(1.0)], [mx.array(2.0)]

    def step(x):
        a[0] += x
        b[0] += x
        return x

    with pytest.warns(RuntimeWarning, match=r"inputs\[0\]\[0\]") as rec:
        mx.compile(step, inputs=[a, b], outputs=b)(mx.array(1.0))
    assert "inputs[1]" not in str(rec[0].message)
    assert b[0].item() == 3.0 and a[0].item() == 1.0
