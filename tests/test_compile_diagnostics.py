"""Compile diagnostics and control (issue 16, "Diagnostics and control"): misses named by
parameter, the compile-in-a-loop warning, shared traces for keyword calls and bound methods,
the cache bound and retrace policy, stats / cache_info, lower, and check=True."""
import gc
import warnings

import pytest

import braze.core as mx
from braze._src import config

LINE = 0


def _misses(capsys):
    return [ln for ln in capsys.readouterr().err.splitlines() if "] trace #" in ln]


# -- item 1: misses named by parameter and definition site ---------------------------------
def test_miss_lines_name_parameters_and_the_definition_site(capsys):
    def loss(x, batch, *rest, scale=1.0):
        return mx.sum(x) * batch["tokens"] * scale

    f = mx.compile(loss)
    with config.override(debug=1):
        f(mx.ones((2,)), {"tokens": mx.ones((2,))})
        f(mx.ones((2,)), {"tokens": mx.ones((3,))})
        f(mx.ones((3,)), {"tokens": mx.ones((3,))}, mx.ones(1), scale=2.0)
    lines = _misses(capsys)
    code = loss.__code__
    assert f"defined at {code.co_filename}:{code.co_firstlineno}" in lines[1]
    assert 'batch["tokens"]: shape (2,) -> (3,)' in lines[1]
    assert "args[" not in lines[1]
    reasons = f.stats()["miss_reasons"]
    assert reasons[1] == 'batch["tokens"]: shape (2,) -> (3,)'
    assert reasons[2].startswith("argument structure")


def test_positions_are_the_fallback_without_a_signature(capsys):
    f = mx.compile(mx.exp)  # a builtin-like callable whose signature is *args
    f(mx.ones((2,)))
    f(mx.ones((3,)))
    assert "shape (2,) -> (3,)" in f.stats()["miss_reasons"][1]


def test_compile_in_a_loop_warns_once_naming_the_line():
    x = mx.ones((2,))
    with pytest.warns(RuntimeWarning, match="same code") as rec:
        for _ in range(8):
            mx.eval(mx.compile(lambda x: x + 1)(x))  # the line the warning names
            gc.collect()
    assert len([r for r in rec if "same code" in str(r.message)]) == 1
    assert rec[0].filename == __file__


def test_long_lived_wrappers_of_one_code_object_do_not_warn():
    x = mx.ones((2,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fs = [mx.compile(lambda x, k=k: x + k) for k in range(6)]
        for f in fs:
            mx.eval(f(x))


# -- item 6: shared traces --------------------------------------------------------------
def test_positional_and_keyword_calls_share_a_trace():
    calls = []

    def f(x, y):
        calls.append(1)
        return x * y

    cf = mx.compile(f)
    a, b = mx.ones((2,)), mx.ones((2,))
    cf(a, b)
    cf(a, y=b)
    cf(x=a, y=b)
    assert len(calls) == 1 and cf.stats()["traces"] == 1


class _Model:
    def __init__(self):
        self.calls = 0

    def step(self, x):
        self.calls += 1
        return x * 2


def test_two_compiles_of_one_bound_method_share_traces():
    m = _Model()
    f, g = mx.compile(m.step), mx.compile(m.step)
    f(mx.ones((2,)))
    g(mx.ones((2,)))
    assert m.calls == 1
    other = _Model()
    mx.compile(other.step)(mx.ones((2,)))
    assert other.calls == 1  # another instance: its own trace


# -- item 2: the cache bound and the retrace policy ----------------------------------------
def test_the_cache_keeps_the_most_recently_used_entries():
    f = mx.compile(lambda x: x + 1)
    with config.override(compile_cache_size=2):
        for n in (1, 2, 1, 3):  # 2 is the least recently used when 3 arrives
            f(mx.ones((n,)))
        assert f.stats()["cached_entries"] == 2 and f.stats()["evictions"] == 1
        f(mx.ones((1,)))
        assert f.stats()["traces"] == 3
        f(mx.ones((2,)))
        assert f.stats()["traces"] == 4


def test_on_limit_error_and_eager(monkeypatch):
    from braze._src.compile import api
    monkeypatch.setattr(api, "RETRACE_LIMIT", 2)
    f = mx.compile(lambda x: x + 1, on_limit="error")
    f(mx.ones((1,)))
    f(mx.ones((2,)))
    with pytest.raises(mx.RetraceError, match=r"retrace limit.*x: shape"):
        f(mx.ones((3,)))
    g = mx.compile(lambda x: x + 1, on_limit="eager")
    g(mx.ones((1,)))
    g(mx.ones((2,)))
    with pytest.warns(RuntimeWarning, match="uncompiled"):
        assert g(mx.ones((3,))).tolist() == [2.0] * 3
    assert g.stats()["traces"] == 2 and g.stats()["eager_calls"] == 1
    with pytest.raises(ValueError, match="on_limit"):
        mx.compile(lambda x: x, on_limit="ignore")


def test_no_retrace_makes_a_retrace_an_error():
    f = mx.compile(lambda x: x + 1)
    f(mx.ones((2,)))
    with mx.no_retrace():
        f(mx.ones((2,)))  # a hit is fine
        mx.compile(lambda x: x * 2)(mx.ones((2,)))  # and so is a first trace
        with pytest.raises(mx.RetraceError, match=r"x: shape \(2,\) -> \(3,\)"):
            f(mx.ones((3,)))
    assert config.from_env({"BRAZE_COMPILE_NO_RETRACE": "1"}).compile_no_retrace
    assert config.from_env({"BRAZE_COMPILE_CACHE_SIZE": "8"}).compile_cache_size == 8


# -- item 3: stats, cache_info, the exit report -----------------------------------------
def test_stats_is_an_object_read_as_a_dict_too():
    f = mx.compile(lambda x, scale: mx.exp(x) * scale + 1)
    mx.eval(f(mx.ones((4,)), 2.0))
    mx.eval(f(mx.ones((4,)), 2.0))
    st = f.stats()
    assert st.hits == st["hits"] == 1 and dict(st)["traces"] == 1
    assert st.trace_seconds > 0 and st.pass_seconds > 0 and st.fused_kernels == 1
    assert st.kernel_builds + st.disk_loads >= 1 and st.kernel_build_seconds > 0
    assert st.call_overhead_us is None  # only timed under BRAZE_COMPILE_REPORT=1
    info = f.cache_info()
    assert [e.hits for e in info] == [1]
    assert info[0].signature == "x: array(4,) float32, scale: 2.0; captured: 1 arrays"


def test_report_times_calls_and_sums_the_process(capsys):
    from braze._src.compile import diagnostics
    with config.override(compile_report=True):
        f = mx.compile(lambda x: x * 3)
    for _ in range(3):
        f(mx.ones((2,)))
    assert f.stats().call_overhead_us > 0
    text = diagnostics.report()
    assert "compiled functions" in text and "traces" in text and "built" in text
    with config.override(compile_report=True):
        diagnostics._report_at_exit()
    assert "[compile] report:" in capsys.readouterr().err


# -- item 5: check=True ---------------------------------------------------------------------
def test_check_compares_with_the_uncompiled_function_for_the_first_calls():
    k = [1.0]
    calls = []

    def f(x):
        calls.append(1)
        return {"y": mx.exp(x) * k[0] + 1}  # k[0] is baked in at the trace

    cf = mx.compile(f, check=True)
    x = mx.array([0.0, 1.0, 2.0])
    cf(x)
    assert len(calls) == 2  # the trace and the uncompiled run
    k[0] = 2.0  # the trace no longer matches the function
    with pytest.raises(mx.CompileCheckError) as e:
        cf(x)
    msg = str(e.value)
    assert "output ['y'] at index (0,)" in msg and "kernel CompiledExp" in msg
    with pytest.raises(mx.CompileCheckError):
        cf(x)  # the third call is checked too
    cf(x)  # past the first 3 calls nothing is checked
    assert len(calls) == 4 and type(cf) is type(mx.compile(f))


def test_check_restores_the_compiled_state():
    state = [mx.array(1.0)]

    def step(x):
        state[0] = state[0] + x
        return state[0]

    cf = mx.compile(step, inputs=state, outputs=state, check=2)
    for _ in range(3):
        cf(mx.array(1.0))
    assert state[0].item() == 4.0  # each call updated the state once
    with config.override(compile_check=True):
        assert mx.compile(lambda x: x * 2)._checks_left == 3


# -- item 4: lower ------------------------------------------------------------------------
def test_lower_traces_without_running_and_shows_tape_fusion_and_kernels():
    calls = []

    def mlp(x, w):
        calls.append(1)
        h = mx.exp(x @ w) * 2 + 1   # the matmul is not fusable: a boundary
        return mx.sum(h, axis=0) * 3, h  # a reduction over a leading axis

    cf = mx.compile(mlp)
    low = cf.lower(mx.ones((4, 3)), w=mx.ones((3, 5)))
    assert len(calls) == 1 and cf.stats()["traces"] == 0  # no cache entry, nothing ran
    text = str(low)
    assert "== tape ==" in text and "== fusion ==" in text and "== kernels (cpu) ==" in text
    assert "Matmul" in low.fusion and "not fusable" in low.fusion
    assert "in0 <- x" in low.fusion or "x" in low.fusion
    (source, fn), *_ = low.kernels
    assert "def " in source and callable(fn)  # the Numba dispatcher, built
    with pytest.raises(ValueError, match="backend 'cuda' is not available"):
        cf.lower_for("cuda", mx.ones((4, 3)), mx.ones((3, 5)))
    assert cf.lower_for("numpy", mx.ones((4, 3)), mx.ones((3, 5))).kernels[0][1] is None


def test_lower_names_the_common_boundary_reasons():
    def f(x, y):
        a = mx.exp(x) * 2
        for _ in range(12):  # longer than one region may be deep
            a = mx.sin(a) + 1
        b = mx.exp(x) + 1
        c = mx.sum(b * 3, axis=-1, keepdims=True)
        return a + mx.log(y), mx.cos(mx.exp(x) * 2), b * 2, c * b

    fusion = mx.compile(f).lower(mx.ones((4, 3)), mx.ones((3,))).fusion
    assert "in0 <- argument x" in fusion and "argument y" in fusion
    assert "MAX_DEPTH (11)" in fusion
    assert "also read elsewhere" in fusion
    assert "an output of a row kernel" in fusion
    assert "Cos[4, 3]: not fused: a region of one primitive is not fused" in fusion
    assert "the constant 2.0: baked into the kernel" in fusion


# -- item 7: shapeless slices that follow the input, scans ---------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: x[:, :-1] * 2,
    lambda x: x[1:] + x[:-1],
    lambda x: x[::2, 1:],
    lambda x: x[..., -3:],
    lambda x: mx.cumsum(x, axis=-1),
    lambda x: mx.cumprod(x[1:], axis=0, reverse=True),
], ids=["end", "shifted", "strided", "ellipsis", "cumsum", "cumprod"])
def test_shapeless_slices_and_scans_follow_the_input(fn):
    import numpy as np
    f = mx.compile(fn, shapeless=True)
    for shape in ((4, 6), (7, 9), (5, 4)):
        x = mx.array(np.random.default_rng(0).random(shape, dtype=np.float32))
        got = f(x)
        assert got.shape == fn(x).shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(fn(x)), rtol=1e-5)
    assert f.stats()["traces"] == 1


def test_shapeless_slice_gradient_follows_the_input():
    import numpy as np
    loss = lambda x: mx.sum(x[:, 1:] * x[:, :-1])  # noqa: E731
    g = mx.compile(mx.grad(loss), shapeless=True)
    for shape in ((3, 4), (5, 7)):
        x = mx.ones(shape)
        np.testing.assert_allclose(np.asarray(g(x)), np.asarray(mx.grad(loss)(x)))
    assert g.stats()["traces"] == 1


@pytest.mark.parametrize("fn", [
    lambda x: x.reshape(x.shape[0] * x.shape[1]),
    lambda x: x.reshape(x.shape[0], 1, x.shape[1]) + 1,
    lambda x: mx.exp(x).reshape(x.shape[0] * x.shape[1], 1),
], ids=["flatten", "insert-axis", "merge-to-column"])
def test_shapeless_reshape_from_shape_arithmetic_follows_the_input(fn):
    import numpy as np
    f = mx.compile(fn, shapeless=True)
    for shape in ((4, 6), (3, 5)):
        x = mx.array(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))
        np.testing.assert_allclose(np.asarray(f(x)), np.asarray(fn(x)), rtol=1e-6)
    assert f.stats()["traces"] == 1


def test_shapeless_reshape_that_splits_an_axis_still_refuses_a_new_size():
    f = mx.compile(lambda x: x.reshape(x.shape[0], 2, 3), shapeless=True)
    f(mx.ones((4, 6)))
    with pytest.raises(ValueError, match="reshape"):
        f(mx.ones((4, 8)))  # (4, 2, 3) or (4, 2, 4)? the trace cannot tell


def test_shapeless_reshape_to_a_literal_shape_that_fits_keeps_it():
    f = mx.compile(lambda x: x.reshape(3, 4), shapeless=True)
    f(mx.ones((2, 6)))
    assert f(mx.ones((4, 3))).shape == (3, 4)  # as before: the requested shape fits


def test_check_of_a_training_step_whose_first_call_creates_optimizer_state():
    import braze.nn as nn
    import braze.optimizers as optim
    model, opt = nn.Linear(3, 2), optim.Adam(learning_rate=0.1)
    state = [model.state, opt.state]

    def step(x):
        loss, grads = nn.value_and_grad(model, lambda m, x: mx.sum(m(x) ** 2))(model, x)
        opt.update(model, grads)
        return loss

    cf = mx.compile(step, inputs=state, outputs=state, check=True)
    for _ in range(4):
        mx.eval(cf(mx.ones((4, 3))), model.parameters())
    assert cf._checks_left == 0  # the first call created state and was not checked
