"""Learning-rate schedules: closed forms at every step (boundaries included), MLX's documented
example values, errors, and optionally MLX itself."""
import math

import numpy as np
import pytest

import braze.core as mx
import braze.optimizers as optim

STEPS = list(range(0, 25))


def _values(schedule, steps=STEPS):
    return [schedule(mx.array(s, mx.uint64)).item() for s in steps]


def test_exponential_decay():
    got = _values(optim.exponential_decay(0.1, 0.9))
    np.testing.assert_allclose(got, [0.1 * 0.9 ** s for s in STEPS], rtol=1e-6)


def test_step_decay_boundaries():
    got = _values(optim.step_decay(0.1, 0.5, 10))
    want = [0.1 * 0.5 ** (s // 10) for s in STEPS]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[9] == pytest.approx(0.1) and got[10] == pytest.approx(0.05)


@pytest.mark.parametrize("end", [0.0, 0.01])
def test_cosine_decay_with_end_and_hold(end):
    got = _values(optim.cosine_decay(0.1, 20, end))
    want = [end + (0.1 - end) * 0.5 * (1 + math.cos(math.pi * min(s, 20) / 20)) for s in STEPS]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)
    assert got[20] == pytest.approx(end, abs=1e-8)
    assert got[24] == got[20]  # constant past decay_steps


def test_linear_schedule_and_hold():
    got = _values(optim.linear_schedule(0.0, 0.1, 10))
    want = [0.1 * min(s, 10) / 10 for s in STEPS]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    got = _values(optim.linear_schedule(1.0, 0.5, 4))
    np.testing.assert_allclose(got[:6], [1.0, 0.875, 0.75, 0.625, 0.5, 0.5], rtol=1e-6)


def test_join_schedules_boundaries():
    warm = optim.linear_schedule(0.0, 0.1, 5)
    cos = optim.cosine_decay(0.1, 10)
    const = optim.exponential_decay(0.02, 1.0)
    sched = optim.join_schedules([warm, cos, const], [5, 15])
    got = _values(sched)
    for s, g in zip(STEPS, got):
        if s < 5:
            want = 0.1 * s / 5
        elif s < 15:
            want = 0.1 * 0.5 * (1 + math.cos(math.pi * (s - 5) / 10))
        else:
            want = 0.02
        assert g == pytest.approx(want, rel=1e-5, abs=1e-8), s
    assert got[5] == pytest.approx(0.1)  # the next schedule starts at its step 0


def test_schedules_accept_python_ints_and_arrays():
    sched = optim.cosine_decay(1.0, 4)
    assert float(sched(2)) == pytest.approx(0.5)
    assert sched(mx.array(2)).item() == pytest.approx(0.5)


def test_documented_examples():
    """The values printed in MLX's docstrings (the step runs before the schedule advances)."""
    opt = optim.SGD(learning_rate=optim.exponential_decay(1e-1, 0.9))
    assert opt.learning_rate.item() == pytest.approx(0.1)
    for _ in range(5):
        opt.update(_NoModel(), {})
    assert opt.learning_rate.item() == pytest.approx(0.06561, rel=1e-5)

    opt = optim.SGD(learning_rate=optim.cosine_decay(1e-1, 1000))
    for _ in range(5):
        opt.update(_NoModel(), {})
    assert opt.learning_rate.item() == pytest.approx(0.0999961, rel=1e-6)

    sched = optim.join_schedules([optim.linear_schedule(0, 1e-1, steps=10),
                                  optim.cosine_decay(1e-1, 200)], [10])
    opt = optim.Adam(learning_rate=sched)
    assert opt.learning_rate.item() == 0.0
    for _ in range(12):
        opt.update(_NoModel(), {})
    assert opt.learning_rate.item() == pytest.approx(0.0999938, rel=1e-6)

    opt = optim.Adam(learning_rate=optim.linear_schedule(0, 1e-1, 100))
    for _ in range(101):
        opt.update(_NoModel(), {})
    assert opt.learning_rate.item() == pytest.approx(0.1)


class _NoModel(dict):
    def update(self, params):
        assert params == {}


@pytest.mark.parametrize("make, exc, match", [
    (lambda: optim.step_decay(0.1, 0.9, 0), ValueError, "step_size"),
    (lambda: optim.cosine_decay(0.1, 0), ValueError, "decay_steps"),
    (lambda: optim.linear_schedule(0.0, 1.0, 0), ValueError, "steps"),
    (lambda: optim.join_schedules([], []), ValueError, "at least 1"),
    (lambda: optim.join_schedules([optim.exponential_decay(1, 1)] * 2, []), ValueError,
     "boundaries"),
    (lambda: optim.join_schedules([1.0, 2.0], [3]), TypeError, "callables"),
    (lambda: optim.exponential_decay("0.1", 0.9), TypeError, "init"),
    (lambda: optim.step_decay(0.1, 0.9, 2.5), TypeError, "step_size"),
])
def test_bad_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize("name, args", [
    ("exponential_decay", (0.1, 0.95)),
    ("step_decay", (0.1, 0.5, 7)),
    ("cosine_decay", (0.1, 17, 0.003)),
    ("linear_schedule", (0.02, 0.1, 13)),
])
def test_matches_mlx(name, args):
    mlx_core = pytest.importorskip("mlx.core")
    mlx_optim = pytest.importorskip("mlx.optimizers")
    ours = getattr(optim, name)(*args)
    theirs = getattr(mlx_optim, name)(*args)
    for s in STEPS:
        a = ours(mx.array(s, mx.uint64))
        b = theirs(mlx_core.array(s, mlx_core.uint64))
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        assert a.item() == pytest.approx(b.item(), rel=1e-6, abs=1e-9), s
