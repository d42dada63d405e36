"""mx.compile: API, cache, tracing errors, passes, replay, captured state, composition,
diagnostics (issue 4). Fusion itself is tested in test_compile_fuse.py."""
import functools
import gc
import inspect
import math
import os
import pathlib
import re
import warnings

import numpy as np
import pytest

import braze.core as mx
from braze._src import config
from braze._src.compile import api as capi
from braze._src.compile import pipeline
from braze._src.compile import simplify as S
from braze._src.compile.replay import replay
from braze._src.compile.tape import Tape
from braze._src.compile.trace import placeholder

HERE = os.path.abspath(__file__)


@pytest.fixture(autouse=True)
def _clean():
    mx.enable_compile()
    with config.override(compile_mode="", debug=0, dump_dir=None):
        yield
    mx.enable_compile()


def counting(fn):
    calls = [0]

    @functools.wraps(fn)
    def f(*a, **k):
        calls[0] += 1
        return fn(*a, **k)
    f.calls = calls
    return f


# -- API ------------------------------------------------------------------------------------
def test_forms_of_compile():
    def fun(x):
        """doc"""
        return x * 2

    a = mx.array([1.0, 2.0])
    assert mx.compile(fun)(a).tolist() == [2, 4]

    @mx.compile
    def bare(x):
        return x + 1
    assert bare(a).tolist() == [2, 3]

    @mx.compile(shapeless=True)
    def opt(x):
        return x - 1
    assert opt(a).tolist() == [0, 1]
    assert opt(mx.array([1.0, 2.0, 3.0])).tolist() == [0, 1, 2]

    state = [mx.array(1.0)]

    @mx.compile(inputs=state, outputs=state)
    def step(x):
        state[0] = state[0] + x
        return state[0]
    step(mx.array(2.0))
    assert state[0].item() == 3.0

    p = functools.partial(mx.compile, shapeless=True)(fun)
    assert p(a).tolist() == [2, 4]
    assert isinstance(p, capi.CompiledFunction)


def test_metadata_preserved():
    def fun(x, y=3, *, z=None):
        """The doc."""
        return x

    cf = mx.compile(fun)
    assert (cf.__name__, cf.__qualname__, cf.__doc__) == (fun.__name__, fun.__qualname__,
                                                           "The doc.")
    assert inspect.signature(cf) == inspect.signature(fun)

    @functools.wraps(cf)
    def w(x):
        return cf(x)
    assert w.__name__ == "fun"


def test_not_callable():
    with pytest.raises(TypeError, match="callable"):
        mx.compile(3)


def test_disable_checked_every_call():
    f = counting(lambda x: x + 1)
    cf = mx.compile(f)
    x = mx.array(1.0)
    cf(x)
    cf(x)
    assert f.calls[0] == 1
    mx.disable_compile()
    cf(x)
    cf(x)
    assert f.calls[0] == 3
    with pytest.raises(ValueError, match="trees of arrays"):
        cf(object())  # still validated while disabled
    mx.enable_compile()
    cf(x)
    assert f.calls[0] == 3  # the old entry is used again


@pytest.mark.parametrize("var", ["BRAZE_DISABLE_COMPILE", "MLX_DISABLE_COMPILE"])
def test_disable_env(var):
    assert config.from_env({var: "1"}).disable_compile
    if var == "MLX_DISABLE_COMPILE":
        assert config.from_env({var: "0"}).disable_compile  # presence is enough


def test_compile_mode_no_simplify_keeps_duplicates():
    def fun(x):
        return mx.exp(x) + mx.exp(x)

    x = mx.array([1.0])
    with config.override(compile_mode="no_simplify"):
        cf = mx.compile(fun)
        cf(x)
        st = cf.stats()
    assert st["primitive_counts_before_fusion"]["Exp"] == 2
    cf2 = mx.compile(lambda x: mx.exp(x) + mx.exp(x))
    with config.override(compile_mode="no_fuse"):
        out = cf2(x)
    assert cf2.stats()["primitive_counts_after_fusion"] == {"Exp": 1, "Add": 1}
    assert mx.allclose(out, 2 * mx.exp(x))


# -- cache ----------------------------------------------------------------------------------
def test_cache_key_rules():
    f = counting(lambda x, c=None: x if c is None or isinstance(c, str) else x + c)
    cf = mx.compile(f)
    x = mx.array([1.0, 2.0])
    cf(x)
    cf(mx.array([3.0, 4.0]))  # values are not in the key
    assert f.calls[0] == 1
    cf(x, 1.0)
    cf(x, 1.0)
    cf(x, -0.0)
    cf(x, 0.0)  # 0.0 and -0.0 differ bitwise
    assert f.calls[0] == 4
    cf(x, "a")
    cf(x, "".join("a"))
    assert f.calls[0] == 5
    cf(x.astype(mx.float16))
    cf(mx.array([[1.0]]))
    assert f.calls[0] == 7


def test_shared_entries_and_erase_on_gc():
    f = counting(lambda x: x * 3)
    x = mx.array(1.0)
    cf = mx.compile(f)
    cf(x)
    mx.compile(f)(x)  # same function: no new trace ...
    assert f.calls[0] == 1
    gc.collect()  # ... but the temporary wrapper's death erases the shared entries (as MLX)
    cf(x)
    assert f.calls[0] == 2
    fid = id(f)
    del cf
    gc.collect()
    assert fid not in capi._thread_cache().map


def test_failed_trace_leaves_no_entry():
    boom = [True]

    def fun(x):
        if boom[0]:
            raise RuntimeError("first trace fails")
        return x + 1

    cf = mx.compile(fun)
    with pytest.raises(RuntimeError):
        cf(mx.array(1.0))
    assert not capi._thread_cache().map.get(id(fun))
    boom[0] = False
    assert cf(mx.array(1.0)).item() == 2.0


def test_unsupported_argument_types():
    cf = mx.compile(lambda *a, **k: a[0])
    for bad in (np.ones(2), 1j, b"x", mx.float32, object()):
        with pytest.raises(ValueError, match="Function arguments must be trees"):
            cf(mx.array(1.0), bad)
    with pytest.raises(ValueError, match="Function arguments must be trees"):
        cf(mx.array(1.0), k=[{"a": object()}])


def test_thread_local_cache():
    import threading
    f = counting(lambda x: x + 1)
    cf = mx.compile(f)
    cf(mx.array(1.0))
    t = threading.Thread(target=lambda: cf(mx.array(1.0)))
    t.start()
    t.join()
    assert f.calls[0] == 2


def test_output_structures_and_constants():
    cf = mx.compile(lambda x: {"a": (x, 3, None), "b": ["s", x + 1]})
    out = cf(mx.array(1))
    assert out["a"][1:] == (3, None) and out["b"][0] == "s" and out["b"][1].item() == 2
    assert cf(mx.array(1))["a"][0] is not None
    x = mx.array([1.0])
    # as MLX: a new array with the argument's value (the no-op is removed all the same)
    for f in (lambda x: x, lambda x: mx.stop_gradient(x)):
        y = mx.compile(f)(x)
        assert y is not x and y.tolist() == x.tolist()
    const = mx.compile(lambda x: mx.array(7.0))
    c1 = const(x)
    c1 += 1  # in place on the returned array must not alter the cached constant
    assert const(x).item() == 7.0


# -- tracing errors -------------------------------------------------------------------------
def _line_of(text):
    src = pathlib.Path(HERE).read_text().splitlines()
    return next(i + 1 for i, ln in enumerate(src) if text in ln)


@pytest.mark.parametrize("how, op", [
    ("item", "item()"), ("bool", "bool(x)"), ("if", "bool(x)"), ("print", "print(x)"),
    ("numpy", "NumPy conversion"), ("eval", "mx.eval"), ("tolist", "tolist()"),
])
def test_reading_a_placeholder_names_op_function_and_line(how, op):
    def my_function(x):
        y = x + 1
        if how == "item":
            y.item()  # READ-item
        elif how == "bool":
            bool(y)  # READ-bool
        elif how == "if":
            if y > 0:  # READ-if
                pass
        elif how == "print":
            print(y)  # READ-print
        elif how == "numpy":
            np.array(y)  # READ-numpy
        elif how == "eval":
            mx.eval(y)  # READ-eval
        else:
            y.tolist()  # READ-tolist
        return y

    cf = mx.compile(my_function)
    with pytest.raises(ValueError) as ei:
        cf(mx.array(1.0))
    msg = str(ei.value)
    assert "[eval] Attempting to eval an array during function transformations" in msg
    assert op in msg
    assert "my_function" in msg
    assert f"{HERE}:{_line_of('# READ-' + how)}" in msg
    assert "mx.where" in msg and "argument" in msg and "shapeless" in msg
    assert not capi._thread_cache().map.get(id(my_function))


def test_constant_evaluation_inside_trace_is_fine():
    def fun(x):
        k = (mx.array(2) + 1).item()  # depends on no input
        return x * k

    assert mx.compile(fun)(mx.array(2)).item() == 6


def test_leaked_placeholder():
    leaked = []

    def fun(x):
        z = x + 1
        leaked.append(z)
        return z

    mx.compile(fun)(mx.array(1.0))
    with pytest.raises(RuntimeError, match="make sure all the inputs and outputs are captured"):
        print(leaked[0])


def test_uncaptured_input():
    x = mx.array([1.0])
    with pytest.raises(ValueError, match="uncaptured inputs"):
        mx.compile(lambda y: y + x)(x)


def test_vmap_placeholders_are_not_compile_placeholders():
    f = lambda x: mx.exp(x) * 2  # noqa: E731
    cf = mx.compile(mx.vmap(f))
    x = mx.array([[0.0, 1.0], [2.0, 3.0]])
    assert mx.allclose(cf(x), f(x))
    cfs = mx.compile(mx.vmap(f), shapeless=True)
    assert mx.allclose(cfs(x), f(x))
    y = mx.ones((3, 5))
    assert mx.allclose(cfs(y), f(y))


# -- passes ---------------------------------------------------------------------------------
def _tape_of(fun, *args):
    phs = [placeholder(a) for a in args]
    from braze._src.compile.trace import capture, compile_trace
    with compile_trace("t", False):
        out = fun(*phs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return capture(phs, outs, list(args), "t").copy()


def _names(tape):
    return [a._prim.name for a in tape.nodes]


def test_merge_scalar_constants():
    x = mx.array([1.0, 2.0])
    t = _tape_of(lambda x: mx.maximum(x * 2.0, mx.array(2.0)) + mx.array(2.0), x)
    before = {id(c) for a in t.nodes for c in a._inputs if c._prim is None and c.ndim == 0}
    t = S.merge_scalar_constants(t)
    after = {id(c) for a in t.nodes for c in a._inputs if c._prim is None and c.ndim == 0
             and c._data is not None}
    assert len(after) < len(before)
    t2 = S.merge_scalar_constants(_tape_of(lambda x: x * 0.0 + x * -0.0, x))
    consts = {c._data.tobytes() for a in t2.nodes for c in a._inputs
              if c._prim is None and c._data is not None and c.ndim == 0}
    assert len(consts) == 2  # 0.0 and -0.0 are different bits


def test_remove_noops_and_outputs():
    x = mx.array([1.0])
    t = _tape_of(lambda x: (mx.stop_gradient(x), mx.exp(mx.stop_gradient(x) + 0)), x)
    t = S.remove_noops(t)
    assert "StopGradient" not in _names(t) and "Copy" not in _names(t)
    assert t.outputs[0] is t.inputs[0]


def test_cse_respects_parameters_and_outputs():
    x = mx.array([1.0, 2.0])
    t = S.dce(S.cse(_tape_of(lambda x: mx.exp(x) + mx.exp(x), x)))
    assert _names(t).count("Exp") == 1
    add = t.nodes[-1]
    assert add._inputs[0] is add._inputs[1]
    t = S.cse(_tape_of(lambda x: mx.log(x) + mx.log2(x), x))
    assert _names(t).count("Log") == 2
    t = S.cse(_tape_of(lambda a: mx.stack([mx.array_equal(a, a),
                                           mx.array_equal(a, a, equal_nan=True)]), x))
    eqs = [a._prim for a in t.nodes if a._prim.name == "Equal"]
    assert len(eqs) == 2
    t = S.cse(_tape_of(lambda x: (mx.exp(x), mx.exp(x)), x))  # outputs are never merged away
    assert t.outputs[0] is not t.outputs[1]
    t = S.cse(_tape_of(lambda x: mx.cos(x) + mx.sin(x), x))
    assert {"Cos", "Sin"} <= set(_names(t))


def test_square_powers_only_rewrites_float_powers_of_two():
    def names(fun, x):
        return _names(S.square_powers(_tape_of(fun, x)))

    x = mx.array([1.5, -2.0])
    assert "Square" in names(lambda a: a ** 2, x) and "Power" not in names(lambda a: a ** 2, x)
    assert "Power" in names(lambda a: a ** 2.5, x)
    assert "Power" in names(lambda a: a ** 2, mx.array([3, 4]))  # integers keep ipow
    assert "Power" in names(lambda a: a ** a, x)


def test_power_rules_see_through_the_gradient_of_a_square():
    """The vjp of `x ** 2` is `2 * x ** (2 - 1)`: the exponent folds to the constant 1 (through
    its broadcasts and the subtraction) and the power goes (pow(x, 1) is x, -0 and NaN
    included); x ** 1 alone goes too. Results: NumPy's float64 oracle."""
    vals = np.array([0.0, -0.0, 1.5, -3.0, np.inf, -np.inf, np.nan, 1e-30, 3e38], np.float32)
    x = mx.array(vals)
    t = S.square_powers(_tape_of(mx.grad(lambda a: mx.sum(a ** 2)), x))
    assert "Power" not in _names(t)
    t = S.square_powers(_tape_of(lambda a: a ** 1 + 1, x))
    assert "Power" not in _names(t)
    # an output is a new array: an in-place update of it leaves the argument alone
    y = mx.compile(lambda a: a ** 1)(x)
    assert y is not x
    y += 1
    np.testing.assert_array_equal(np.asarray(x), vals)
    assert "Power" in _names(S.square_powers(_tape_of(lambda a: a ** (a - 1), x)))
    assert "Power" in _names(S.square_powers(_tape_of(lambda a: a ** 1, mx.array([3, 4]))))
    g = mx.compile(mx.grad(lambda a: mx.sum(a ** 2)))(x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(np.asarray(g), np.float32(2) * vals)  # 6e38: inf
    np.testing.assert_array_equal(np.signbit(np.asarray(g)), np.signbit(vals))
    np.testing.assert_array_equal(np.asarray(mx.compile(lambda a: a ** 1)(x)), vals)
    h = mx.compile(mx.grad(lambda a: mx.sum((a - 1) ** 2 * 0.5)))(x)
    with np.errstate(over="ignore", invalid="ignore"):  # the vjp's order, in float32
        want = np.float32(0.5) * (np.float32(2) * (vals - np.float32(1)))
    np.testing.assert_array_equal(np.asarray(h), want)


def _transposed_products(fun, *args):
    return S.dce(S.transposed_products(S.cse(_tape_of(fun, *args))))


def test_a_transposed_product_is_the_product_of_the_transposes():
    """A Linear's weight gradient, `(x^T @ g)^T` (the vjp of `x @ w.T`), becomes `g^T @ x`:
    row-major like the weight, the values NumPy's float64 ones (batched products too); an
    operand that is a transpose is read untransposed, a transpose of a transpose is its
    input."""
    rng = np.random.default_rng(11)
    w, x = (rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5, 4)])
    W, X = mx.array(w), mx.array(x)

    def loss(w, x):
        return mx.sum((x @ w.T) ** 2)

    t = _transposed_products(mx.grad(loss), W, X)
    out = t.outputs[0]
    assert out._prim.matrix_product and not any(
        a._prim.swaps_matrix_axes and a._inputs[0]._prim is not None
        and a._inputs[0]._prim.matrix_product for a in t.nodes)
    assert _names(t).count("Transpose") == 2  # w.T forward, g^T: x is read as it lies
    g = mx.compile(mx.grad(loss))(W, X)
    want = 2 * (x.astype(np.float64) @ w.T.astype(np.float64)).T @ x.astype(np.float64)
    assert np.asarray(g).flags.c_contiguous
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-5)
    # x's gradient reads swap(w.T): w itself, no transpose of a transpose
    t = _transposed_products(mx.grad(loss, argnums=1), W, X)
    assert not any(a._prim.swaps_matrix_axes and a._inputs[0]._prim is not None
                   and a._inputs[0]._prim.swaps_matrix_axes for a in t.nodes)
    want = 2 * (x.astype(np.float64) @ w.T) @ w
    np.testing.assert_allclose(np.asarray(mx.compile(mx.grad(loss, argnums=1))(W, X)), want,
                               rtol=1e-5)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 4), (2, 4, 5)])
    f = mx.compile(lambda a, b: mx.swapaxes(a @ b, -1, -2) * 2)
    assert _names(_transposed_products(lambda a, b: mx.swapaxes(a @ b, -1, -2) * 2,
                                       mx.array(a), mx.array(b))).count("Matmul") == 1
    np.testing.assert_allclose(np.asarray(f(mx.array(a), mx.array(b))),
                               2 * np.swapaxes(a.astype(np.float64) @ b, -1, -2), rtol=1e-5)


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (2.0, 0.5)])
def test_a_linear_weight_gradient_is_row_major(alpha, beta):
    """addmm's vjp scales the cotangent (only by a factor that is not 1), then multiplies, as
    MLX's: a Linear's weight gradient, `addmm(b, x, w.T)`, is a transposed product the pass
    rewrites; the values are NumPy's float64 ones."""
    rng = np.random.default_rng(12)
    w, b, x = (rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (3,), (5, 4)])

    def loss(w, b, x):
        return mx.sum(mx.addmm(b, x, w.T, alpha=alpha, beta=beta) ** 2)

    t = _transposed_products(mx.grad(loss, argnums=(0, 1)), *map(mx.array, (w, b, x)))
    assert t.outputs[0]._prim.matrix_product  # a factor scales the cotangent, before
    gw, gb = mx.compile(mx.grad(loss, argnums=(0, 1)))(*map(mx.array, (w, b, x)))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    r = 2 * (alpha * x64 @ w64.T + beta * b.astype(np.float64))
    assert np.asarray(gw).flags.c_contiguous
    np.testing.assert_allclose(np.asarray(gw), alpha * r.T @ x64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gb), beta * r.sum(0), rtol=1e-5, atol=1e-5)


def test_a_transpose_of_a_transpose_that_is_an_output_stays_its_own():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = _transposed_products(lambda a: a.T.T, mx.array(w))
    assert _names(t) == ["Transpose", "Transpose"] and t.outputs[0] is not t.inputs[0]
    W = mx.array(w)
    y = mx.compile(lambda a: a.T.T)(W)
    assert y is not W
    np.testing.assert_array_equal(np.asarray(y), w)


def test_a_product_read_untransposed_too_stays():
    """A product that is also read as it is, or is an output, is not computed twice; a
    transpose over other axes is not a matrix transpose."""
    a, b = mx.array(np.ones((2, 3), np.float32)), mx.array(np.ones((3, 2), np.float32))
    for fun in [lambda a, b: (a @ b).T + (a @ b), lambda a, b: (lambda m: (m.T, m))(a @ b)]:
        t = _transposed_products(fun, a, b)
        assert _names(t).count("Matmul") == 1 and _names(t).count("Transpose") == 1
    c = mx.array(np.ones((2, 3, 4), np.float32))
    t = _transposed_products(lambda c, d: mx.transpose(c @ d, (1, 0, 2)), c,
                             mx.array(np.ones((2, 4, 4), np.float32)))
    assert _names(t) == ["Matmul", "Transpose"]


def _folded(fun, *args):
    return S.dce(S.fold_constants(_tape_of(fun, *args)))


def test_nodes_of_constants_are_computed_once_at_trace_time():
    """fold_constants: an arange, a gather and a scatter of constants, a transposed constant
    matrix and exactly rounded scalar arithmetic become constants (the run computes nothing
    of them); the results are the unfolded function's, bit for bit (uncompiled, and compiled
    with the passes off)."""
    rng = np.random.default_rng(13)
    m = mx.array(rng.standard_normal((6, 5)).astype(np.float32))
    idx = mx.array(np.array([4, 0, 2], np.int32))

    def fun(x):
        rows = mx.take(m, mx.arange(3), axis=0)  # Arange + Gather of constants
        hot = mx.put_along_axis(mx.zeros((3, 5)), idx[:, None], mx.array(2.0) * 0.25, axis=1)
        return x @ m.T, x[:3] * rows + hot * (mx.array(3.0) / 7)

    x = mx.array(rng.standard_normal((4, 5)).astype(np.float32))
    t = _folded(fun, x)
    ph = {id(p) for p in t.inputs}
    for a in t.nodes:  # every node left reads the input, directly or not
        assert any(id(y) in ph or y._prim is not None for y in a._inputs), a._prim.name
    assert "Arange" not in _names(t) and "Gather" not in _names(t)
    want = fun(x)
    for compiled in [mx.compile(fun)]:
        got = compiled(x)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    with config.override(compile_mode="no_simplify"):
        ref = mx.compile(fun)(x)
    for g, w in zip(ref, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_what_constants_do_not_fold():
    """A libm function (a kernel's exp may round otherwise than NumPy's), a broadcast scalar
    (fusion reads it as one), an output past FOLD_MAX_BYTES and a multi-output node stay."""
    c = mx.array(np.float32(0.5))
    x = mx.array(np.ones(3, np.float32))
    assert "Exp" in _names(_folded(lambda x: x * mx.exp(c), x))
    t = _folded(lambda x: x + mx.broadcast_to(c * 2, (3,)), x)
    assert _names(t) == ["Broadcast", "Add"] and t.nodes[0]._inputs[0]._prim is None
    n = S.FOLD_MAX_BYTES // 4 + 1
    assert "Arange" in _names(_folded(lambda x: x + mx.arange(n).sum(), x))
    assert "DivMod" in _names(_folded(lambda x: x + mx.divmod(mx.array(7), 3)[0], x))


def test_cse_multi_output_nodes():
    x = mx.array([7, 8])
    # the two 3s are separate constants until merge_scalar_constants runs first, as in simplify
    t = pipeline.run(_tape_of(lambda x: mx.divmod(x, 3)[0] + mx.divmod(x, 3)[1], x),
                     ("simplify",))
    assert _names(t).count("DivMod") == 2  # one node with two sibling outputs
    sib = [a for a in t.nodes if a._prim.name == "DivMod"]
    assert sib[0]._siblings is sib[1]._siblings


def test_dce():
    x = mx.array([1.0])

    def fun(x):
        mx.exp(x) * 3  # unused
        return x + 1

    t = S.dce(_tape_of(fun, x))
    assert _names(t) == ["Add"] or "Exp" not in _names(t)


def test_passes_are_one_list_of_named_tape_functions():
    assert [p.name for p in pipeline.PASSES] == [
        "merge_scalar_constants", "remove_noops", "square_powers", "cse", "transposed_products",
        "fold_constants", "dce", "decompose", "fuse_rows", "online_softmax", "chan_variance",
        "fuse"]
    t = _tape_of(lambda x: x + 1, mx.array(1.0))
    for p in pipeline.PASSES:
        t = p.run(t)
        assert isinstance(t, Tape)


# -- replay ---------------------------------------------------------------------------------
def test_replay_gives_fresh_lazy_outputs():
    x = mx.array([1.0, 2.0])
    t = _tape_of(lambda x: mx.exp(x) * 2, x)
    o1 = replay(t, [x])[0]
    o2 = replay(t, [x])[0]
    assert o1 is not o2 and o1._data is None
    assert o1._prim is t.nodes[-1]._prim  # same primitive objects
    assert mx.allclose(o1, mx.exp(x) * 2)


def test_shapeless_refusal_names_op_and_line():
    def fun(x):  # (cumsum re-infers its shape: issue 16; a pad's widths do not)
        return mx.pad(x, 1) * 2  # PAD-HERE

    cf = mx.compile(fun, shapeless=True)
    with pytest.raises(ValueError) as ei:
        cf(mx.array([1.0, 2.0]))
    msg = str(ei.value)
    assert "Pad" in msg and "shapeless" in msg
    assert f"{HERE}:{_line_of('# PAD-HERE')}" in msg
    with pytest.raises(ValueError, match="Pad"):  # raised on every call, as in MLX
        cf(mx.array([1.0, 2.0]))


def test_shapeless_keeps_size1_reductions():
    for op in ("sum", "prod", "max", "min", "all", "any", "mean", "argmax", "argmin", "var"):
        fn = (lambda op: lambda x: getattr(mx, op)(x, axis=0))(op)
        cf = mx.compile(fn, shapeless=True)
        for n in (1, 3, 2):
            x = mx.arange(n * 2).reshape(n, 2).astype(mx.float32) + 1
            assert mx.allclose(cf(x), fn(x)), (op, n)


def test_shapeless_mean_var_use_number_of_elements():
    cf = mx.compile(lambda x: (mx.mean(x, axis=-1), mx.var(x, axis=-1, ddof=1)), shapeless=True)
    for n in (2, 5, 7):
        x = mx.arange(n).astype(mx.float32)
        m, v = cf(x)
        assert mx.allclose(m, mx.mean(x, axis=-1)) and mx.allclose(v, mx.var(x, -1, ddof=1))
    assert "NumberOfElements" in cf.stats()["primitive_counts_before_fusion"]


@pytest.mark.parametrize("mode", ["", "no_fuse"])
def test_shapeless_grad_of_mean(mode):
    # no_fuse too: a fused kernel broadcasts its inputs itself, which could hide a baked
    # Broadcast inside it
    with config.override(compile_mode=mode):
        g = mx.compile(mx.grad(lambda x: mx.mean(x * x)), shapeless=True)
        for n in (2, 4, 7):
            x = mx.arange(n).astype(mx.float32)
            out = g(x)
            mx.eval(out)
            assert out.shape == (n,) and mx.allclose(out, 2 * x / n), n
        assert g.stats()["traces"] == 1


@pytest.mark.parametrize("mode", ["", "no_fuse"])
def test_shapeless_grad_follows_swapped_broadcast_roles(mode):
    # braze sums each cotangent over the axes its *run-time* input was broadcast along
    # (SumLike), so the gradients keep their inputs' shapes even when operands swap which
    # one is broadcast (MLX bakes the trace-time axes and returns (2, 1) and (2, 3) here)
    def loss(p):
        a, b = p
        return (a * b).sum()

    with config.override(compile_mode=mode):
        g = mx.compile(mx.grad(loss), shapeless=True)
        for sa, sb in (((2, 1), (2, 3)), ((2, 3), (2, 1)), ((1, 4), (5, 1)), ((3, 3), (3, 3))):
            a = mx.arange(math.prod(sa)).astype(mx.float32).reshape(sa) + 1
            b = mx.arange(math.prod(sb)).astype(mx.float32).reshape(sb) + 2
            ga, gb = g((a, b))
            ea, eb = mx.grad(loss)((a, b))
            assert ga.shape == sa and gb.shape == sb
            assert mx.allclose(ga, ea) and mx.allclose(gb, eb)
        assert g.stats()["traces"] == 1


@pytest.mark.parametrize("mode", ["", "no_fuse"])
def test_shapeless_grad_of_axis_reductions_and_shape_ops(mode):
    def f(x, w):
        y = mx.sum(x * x, axis=1)  # Squeeze's vjp is an ExpandDims (no baked sizes)
        z = mx.unflatten(mx.flatten(x, 0, 1), 0, (-1, 2))
        m = mx.where(y > 1, y, 0.5 * y)  # the condition broadcasts with x and y
        return (m * mx.max(x, axis=-1)).sum() + (x @ w).sum() + z.mean() + mx.zeros_like(x).sum()

    gf = mx.grad(f, argnums=(0, 1))
    with config.override(compile_mode=mode):
        g = mx.compile(gf, shapeless=True)
        for n, k in ((2, 3), (4, 5), (6, 1)):
            x = mx.arange(n * k).astype(mx.float32).reshape(n, k) / 7
            w = mx.ones((k, 3))
            got, exp = g(x, w), gf(x, w)
            for a, b in zip(got, exp):
                assert a.shape == b.shape and mx.allclose(a, b, atol=1e-5), (n, k)
        assert g.stats()["traces"] == 1


def test_shapeless_ops_follow_new_shapes():
    cases = [
        # Gather keeps the traced slice sizes of the other axes (as MLX does): vary axis 1 only
        (lambda x: mx.take(x, mx.array([0, 1]), axis=1), [(2, 3), (2, 5)]),
        (lambda x: mx.take(x, mx.array([[0], [1]])), [(2, 3), (3, 5)]),
        (lambda x: x.reshape(-1), [(2, 3), (4, 5)]),
        (lambda x: mx.flatten(x).reshape(2, -1), [(2, 3), (4, 5)]),
        (lambda x: mx.atleast_3d(x), [(2, 3), (4, 5)]),
        (lambda x: mx.broadcast_arrays(x, x.sum(0)), [(2, 3), (4, 5)]),
        (lambda x: mx.where(x.sum(-1, keepdims=True) > 2, x, mx.zeros_like(x.sum(0))),
         [(2, 3), (4, 5)]),
        (lambda x: mx.ones_like(x, dtype=mx.int32) + mx.full_like(x, 2.5), [(2, 3), (4, 5)]),
        (lambda x: x @ x.T + mx.addmm(x, x, mx.ones_like(x.T) @ x), [(2, 2), (3, 3)]),
        (lambda x: mx.matmul(x, x.sum(0)) + mx.matmul(x.sum(1), x), [(2, 2), (3, 3)]),
        (lambda x: mx.matmul(mx.expand_dims(x, 0), x), [(2, 2), (3, 3)]),
    ]
    for fn, shapes in cases:
        cf = mx.compile(fn, shapeless=True)
        for shape in shapes:
            x = mx.arange(math.prod(shape)).astype(mx.float32).reshape(shape)
            got, exp = cf(x), fn(x)
            got, exp = (got, exp) if isinstance(exp, (list, tuple)) else ([got], [exp])
            for a, b in zip(got, exp):
                assert a.shape == b.shape and mx.allclose(a, b), (shape, a.shape, b.shape)
        assert cf.stats()["traces"] == 1


def test_shapeless_reshape_keeps_requested_shape():
    cf = mx.compile(lambda x: x.reshape(2, -1), shapeless=True)
    assert cf(mx.zeros((4, 3))).shape == (2, 6)  # (an identity reshape would be elided)
    assert cf(mx.zeros((6, 1))).shape == (2, 3)
    x = mx.arange(10).astype(mx.float32).reshape(5, 2)
    assert mx.array_equal(cf(x), x.reshape(2, 5))
    with pytest.raises(ValueError, match=r"\[reshape\] Cannot reshape array of size 9"):
        cf(mx.zeros((3, 3)))
    baked = mx.compile(lambda x: x.reshape(6), shapeless=True)
    assert baked(mx.zeros((2, 3))).shape == (6,)
    # a size that no longer fits: the traced (2, 3) -> (6,) is a merge, which follows (issue 16)
    assert baked(mx.zeros((2, 4))).shape == (8,)
    split = mx.compile(lambda x: x.reshape(2, 3), shapeless=True)
    split(mx.zeros((6,)))
    with pytest.raises(ValueError, match="flatten/unflatten"):
        split(mx.zeros((8,)))  # a split cannot tell which dim follows


def test_clear_streams_clears_the_compile_cache():
    f = counting(lambda x: x + 1)
    cf = mx.compile(f)
    cf(mx.array(1.0))
    cf(mx.array(1.0))
    assert f.calls[0] == 1 and cf.stats()["cached_entries"] == 1
    mx.clear_streams()
    assert cf.stats()["cached_entries"] == 0
    assert cf(mx.array(1.0)).item() == 2.0 and f.calls[0] == 2


def test_retrace_limit_is_a_config_knob():
    assert capi.RETRACE_LIMIT == config.get().compile_retrace_limit
    assert config.from_env({}).compile_retrace_limit == 16
    assert config.from_env({"BRAZE_COMPILE_RETRACE_LIMIT": "3"}).compile_retrace_limit == 3
    assert config.from_env({"BRAZE_COMPILE_RETRACE_LIMIT": "0"}).compile_retrace_limit == 0
    with pytest.warns(UserWarning, match="BRAZE_COMPILE_RETRACE_LIMIT"):
        config.from_env({"BRAZE_COMPILE_RETRACE_LIMIT": "many"})
    with pytest.raises(ValueError, match="BRAZE_COMPILE_RETRACE_LIMIT"):
        config.set(compile_retrace_limit=-1)


# -- captured state -------------------------------------------------------------------------
class FakeKey:
    """A fake sentinel implementing the capture protocol (like mx.random.state)."""

    def __init__(self):
        self.value = mx.array(0)

    def __braze_capture__(self):
        return self.value

    def __braze_update__(self, v):
        self.value = v


def test_capture_protocol_sentinel():
    key = FakeKey()

    def draw(x):
        k = key.__braze_capture__()
        key.__braze_update__(k + 1)
        return x + k

    cf = mx.compile(draw, inputs=[key], outputs=[key])
    assert [cf(mx.array(10)).item() for _ in range(3)] == [10, 11, 12]
    assert key.value.item() == 3
    key.value = mx.array(100)  # "seeding" between calls changes the captured input
    assert cf(mx.array(0)).item() == 100


def test_implicit_state_hook():
    key = FakeKey()
    capi.register_implicit_state(key)
    try:
        def draw(x):
            k = key.__braze_capture__()
            key.__braze_update__(k + 1)  # undeclared use advances the state every call
            return x + k

        cf = mx.compile(draw)
        assert [cf(mx.array(0)).item() for _ in range(3)] == [0, 1, 2]
        # declared explicitly too: captured once
        cf2 = mx.compile(draw, inputs=key, outputs=key)
        assert cf2(mx.array(0)).item() == 3 and key.value.item() == 4
    finally:
        capi._IMPLICIT.remove(key)


def test_captured_nested_trees_and_module_like_dicts():
    class Module(dict):
        pass

    m = Module(w=mx.array(2.0), sub={"b": [mx.array(1.0)]})
    opt = ({"lr": mx.array(0.5)},)

    def step(x):
        m["w"] = m["w"] - opt[0]["lr"] * x
        m["sub"]["b"][0] = m["sub"]["b"][0] + 1
        return m["w"]

    cf = mx.compile(step, inputs=[m, opt], outputs=[m, opt])
    cf(mx.array(1.0))
    cf(mx.array(1.0))
    assert m["w"].item() == 1.0 and m["sub"]["b"][0].item() == 3.0
    assert isinstance(m, Module)


def test_captured_in_place_update():
    state = [mx.array(1.0), mx.array(3)]

    def fun():
        state[0] *= 2
        state[1] += 1
        return state[0]

    cf = mx.compile(fun, inputs=state, outputs=state)
    for i in range(3):
        cf()
    assert state[0].item() == 8.0 and state[1].item() == 6


def test_captured_tree_restored_after_failed_trace():
    state = [mx.array(1.0)]

    def bad():
        state[0] = state[0] + 1
        raise KeyError("boom")

    with pytest.raises(KeyError):
        mx.compile(bad, inputs=state, outputs=state)()
    assert state[0].item() == 1.0  # braze restores (MLX leaves the tracer in the container)


# -- composition ----------------------------------------------------------------------------
def test_transforms_of_compiled_call_function_directly():
    f = counting(lambda x: mx.sin(x) * x)
    cf = mx.compile(f)
    x = mx.array([0.3, 0.7])
    g = mx.grad(lambda x: cf(x).sum())(x)
    assert mx.allclose(g, mx.cos(x) * x + mx.sin(x))
    assert capi._thread_cache().map.get(id(f)) is None  # nothing traced or cached


def test_compile_of_transforms():
    def f(x):
        return (mx.exp(x) * x).sum()

    x = mx.array([0.1, 0.2, 0.3])
    for t in (mx.grad(f), mx.value_and_grad(f)):
        for shapeless in (False, True):
            a, b = mx.compile(t, shapeless=shapeless)(x), t(x)
            for p, q in zip(a if isinstance(a, tuple) else [a], b if isinstance(b, tuple)
                            else [b]):
                assert mx.allclose(p, q)
    vf = mx.vmap(lambda v: mx.exp(v) * v)
    assert mx.allclose(mx.compile(vf)(x.reshape(3, 1)), vf(x.reshape(3, 1)))


def test_nested_compile_inlines_and_constant_inner_calls():
    inner_f = counting(lambda x: mx.exp(x))
    inner = mx.compile(inner_f)
    outer = mx.compile(lambda x: inner(x) + inner(mx.array(0.0)))
    x = mx.array([1.0])
    assert mx.allclose(outer(x), mx.exp(x) + 1)
    assert inner_f.calls[0] == 2  # inlined once (tracer input) + traced once (constant input)


# -- diagnostics ----------------------------------------------------------------------------
def test_debug_1_explains_misses(capsys):
    def fun(x, s, y=None):
        return x * s

    cf = mx.compile(fun)
    with config.override(debug=1):
        cf(mx.ones((2, 3)), 1.0)
        cf(mx.ones((2, 4)), 1.0)  # CALLSITE
        cf(mx.ones((2, 4)), 2.0)
        cf(mx.ones((2, 4), mx.float16), 2.0)
        cf(mx.ones((2, 4), mx.float16), 2.0, y=None)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 5
    assert "fun" in err[0] and "first call" in err[0]
    assert "x: shape (2, 3) -> (2, 4)" in err[1]  # named by parameter
    assert f"{HERE}:{_line_of('# CALLSITE')}" in err[1]
    assert "s: value 1.0 -> 2.0" in err[2]
    assert "dtype float32 -> float16" in err[3]
    assert "structure" in err[4]
    st = cf.stats()
    assert st["misses"] == {"first call": 1, "shape": 1, "value": 1, "dtype": 1,
                            "structure": 1}


def test_debug_2_and_3_print_tapes(capsys, tmp_path):
    cf = mx.compile(lambda x: mx.exp(x) + mx.exp(x))
    with config.override(debug=3, dump_dir=str(tmp_path)):
        cf(mx.array([1.0]))
    err = capsys.readouterr().err
    assert "tape traced" in err and "Exp()" in err
    for p in pipeline.PASSES:  # every pass says what it did, or that it changed nothing
        assert f"after {p.name}" in err
    assert "after square_powers: unchanged" in err and "after cse: unchanged" not in err
    # the fused region's IR is printed under its node
    assert "after fuse:\n" in err and "  t0: float32 = Exp(in0)" in err
    files = sorted(os.listdir(tmp_path))
    assert any("traced" in f for f in files) and any("after_cse" in f or "cse" in f
                                                     for f in files)
    assert "%in0" in (tmp_path / next(f for f in files if "traced" in f)).read_text()


def test_retrace_warning():
    cf = mx.compile(lambda x: x + 1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(capi.RETRACE_LIMIT + 2):
            cf(mx.zeros((n + 1,)))
    msgs = [str(x.message) for x in w if "traced" in str(x.message)]
    assert len(msgs) == 1
    assert f"more than {capi.RETRACE_LIMIT}" in msgs[0] and "shape" in msgs[0]
    assert "shapeless=True" in msgs[0]


def test_stats():
    cf = mx.compile(lambda x: mx.exp(x) * 2 + 1)
    x = mx.array([1.0, 2.0])
    cf(x)
    cf(x)
    cf(x)
    st = cf.stats()
    assert st["hits"] == 2 and st["traces"] == 1 and st["misses"] == {"first call": 1}
    assert st["primitives_before_fusion"] >= 3
    assert st["primitives_after_fusion"] <= st["primitives_before_fusion"]
    assert st["fused_kernels"] >= 0


# -- docs -----------------------------------------------------------------------------------
DOC = pathlib.Path(HERE).parent.parent / "docs" / "compile.md"


def _doc_blocks():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


@pytest.mark.parametrize("i", range(len(_doc_blocks()) if DOC.exists() else 0))
def test_docs_examples_run(i):
    code = _doc_blocks()[i]
    exec(compile(code, f"{DOC}:block{i}", "exec"), {"__name__": "docs_example"})


def test_nonfinite_and_exact_constants_roundtrip():
    x = mx.array([1.0, -1.0], dtype=mx.float64)
    fn = lambda x: mx.where(x > 0, x * math.pi, mx.array(math.nan, mx.float64))  # noqa: E731
    a, b = mx.compile(fn)(x), fn(x)
    assert a[0].item() == b[0].item() and math.isnan(a[1].item())


def test_checks_verify_the_tape_after_every_pass():
    def broken(tape):  # a pass that drops a node another node still reads
        tape.nodes = tape.nodes[1:]
        return tape

    f = lambda x: mx.exp(x) * 2 + mx.sin(x)  # noqa: E731
    with config.override(checks=True):  # every real pass keeps the contract
        np.testing.assert_allclose(np.asarray(mx.compile(f)(mx.array([0.5]))),
                                   np.exp(0.5) * 2 + np.sin(0.5), rtol=1e-6)
    bad = pipeline.Pass("broken", broken, "simplify")
    saved = pipeline.PASSES
    pipeline.PASSES = (bad,) + saved
    try:
        with config.override(checks=True), pytest.raises(RuntimeError, match="after broken"):
            mx.compile(lambda x: mx.exp(x) * 2)(mx.array([0.5]))
    finally:
        pipeline.PASSES = saved
