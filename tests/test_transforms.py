"""The transformations as MLX users call them: signatures and return structures, trees,
axis specifications, nesting, custom_function / checkpoint / stop_gradient, and the errors."""

import numpy as np
import pytest

import braze.core as mx


def npa(a):
    return np.asarray(a)


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(npa(a), np.asarray(b), rtol=rtol, atol=atol)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)
W = RNG.standard_normal((4, 5)).astype(np.float32)


# -- signatures and return structures ---------------------------------------------------------
def test_vjp_returns_outputs_and_vjps_lists():
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    outs, vjps = mx.vjp(lambda a, b: a * b, [x, y], [mx.array([1.0, 1.0])])
    assert isinstance(outs, list) and isinstance(vjps, list)
    close(outs[0], [3, 8])
    close(vjps[0], [3, 4])
    close(vjps[1], [1, 2])
    # tuple primals and several outputs
    outs, vjps = mx.vjp(lambda a: (a * 2, a), (x,), (x, x))
    assert len(outs) == 2 and len(vjps) == 1
    close(vjps[0], [3, 6])


def test_jvp_returns_outputs_and_jvps_lists():
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    outs, jvps = mx.jvp(lambda a, b: a * b, [x, y], [mx.ones(2), mx.ones(2)])
    assert isinstance(outs, list) and isinstance(jvps, list)
    close(outs[0], [3, 8])
    close(jvps[0], [4, 6])
    outs, jvps = mx.jvp(lambda a: (a * 2, mx.sin(a)), [x], [mx.ones(2)])
    close(jvps[0], [2, 2])
    close(jvps[1], np.cos([1.0, 2.0]))


def test_vjp_jvp_of_independent_outputs_are_zero():
    x = mx.array([1.0, 2.0])
    _, v = mx.vjp(lambda a: mx.ones(2), [x], [x])
    close(v[0], [0, 0])
    _, t = mx.jvp(lambda a: mx.ones(2), [x], [x])
    close(t[0], [0, 0])
    close(mx.grad(lambda a: mx.array(1.0))(x), [0, 0])


def test_vjp_output_is_input():
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    outs, v = mx.vjp(lambda a: (a, a), [x], [y, y])
    close(outs[0], [1, 2])
    close(v[0], [6, 8])


def test_grad_argnums_structures():
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])

    def f(a, b):
        return (a * b).sum()

    close(mx.grad(f)(x, y), [3, 4])
    close(mx.grad(f, argnums=1)(x, y), [1, 2])
    g = mx.grad(f, argnums=(0,))(x, y)  # MLX: a 1-tuple of argnums gives the array itself
    assert isinstance(g, mx.array)
    g = mx.grad(f, argnums=(0, 1))(x, y)
    assert isinstance(g, tuple) and len(g) == 2
    close(g[1], [1, 2])
    g = mx.grad(f, argnums=[1, 0])(x, y)
    close(g[0], [1, 2])
    close(g[1], [3, 4])


def test_grad_argnames():
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])

    def f(a, b=None):
        return (a * b).sum()

    pos, kw = mx.grad(f, argnames=["b"])(x, b=y)
    assert pos is None and set(kw) == {"b"}
    close(kw["b"], [1, 2])
    pos, kw = mx.grad(f, argnames="b")(x, b=y)
    assert pos is None
    pos, kw = mx.grad(f, argnums=0, argnames="b")(x, b=y)
    close(pos, [3, 4])
    close(kw["b"], [1, 2])
    pos, kw = mx.grad(f, argnums=(0,), argnames=("b",))(x, b=y)
    close(pos, [3, 4])
    # keyword arguments that are not differentiated are passed through
    close(mx.grad(f)(x, b=y), [3, 4])
    v, (pos, kw) = mx.value_and_grad(f, argnames="b")(x, b=y)
    close(v, 11)
    assert pos is None


def test_grad_trees_of_arguments():
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    g = mx.grad(lambda p: (p[0] * p[1]).sum())([x, y])
    assert isinstance(g, list)
    close(g[0], [3, 4])
    close(g[1], [1, 2])
    g = mx.grad(lambda p: (p["a"] * p["b"]).sum())({"a": x, "b": y})
    assert set(g) == {"a", "b"}
    close(g["a"], [3, 4])
    g = mx.grad(lambda p: (p["a"][0] * p["b"]["c"]).sum())({"a": (x,), "b": {"c": y}})
    assert isinstance(g["a"], tuple)
    close(g["a"][0], [3, 4])
    close(g["b"]["c"], [1, 2])
    # and trees as vjp primals / outputs (braze extension: MLX takes flat lists)
    outs, v = mx.vjp(lambda p: {"o": p["a"] * 2}, [{"a": x}], [y])
    close(outs[0], [2, 4])
    close(v[0]["a"], [6, 8])


def test_value_and_grad_full_output_and_aux():
    x = mx.array([1.0, 2.0])
    v, g = mx.value_and_grad(lambda a: (a * a).sum())(x)
    close(v, 5)
    close(g, [2, 4])
    (loss, aux, k), g = mx.value_and_grad(lambda a: ((a * a).sum(), {"d": a * 3}, 7))(x)
    close(loss, 5)
    close(aux["d"], [3, 6])
    assert k == 7
    close(g, [2, 4])


def test_gradient_of_integer_arrays_follows_mlx():
    g = mx.grad(lambda a: (a * 2).sum())(mx.array([1, 2]))
    assert g.dtype == mx.int32
    assert g.tolist() == [2, 2]
    g = mx.grad(lambda a: (a.astype(mx.float32) * 2).sum())(mx.array([1, 2]))
    assert g.dtype == mx.int32
    assert g.tolist() == [2, 2]


def test_grad_float16_keeps_dtype():
    g = mx.grad(lambda a: (a * 2).sum())(mx.array([1.0, 2.0], dtype=mx.float16))
    assert g.dtype == mx.float16


def test_transforms_keep_function_metadata():
    def loss(a):
        """doc"""
        return a.sum()

    assert mx.grad(loss).__name__ == "loss"
    assert mx.value_and_grad(loss).__doc__ == "doc"


# -- vmap axes ---------------------------------------------------------------------------------
def test_vmap_in_axes_and_out_axes():
    x = mx.array(X)
    close(mx.vmap(lambda a: a * 2)(x), X * 2)
    close(mx.vmap(lambda a: a.sum())(x), X.sum(1))
    close(mx.vmap(lambda a: a.sum(), in_axes=1)(x), X.sum(0))
    close(mx.vmap(lambda a: a.sum(), in_axes=-1)(x), X.sum(0))
    close(mx.vmap(lambda a: a * 2, out_axes=1)(x), (X * 2).T)
    close(mx.vmap(lambda a: a * 2, out_axes=-1)(x), (X * 2).T)
    close(mx.vmap(lambda a: a * 2, in_axes=1, out_axes=1)(x), X * 2)
    close(mx.vmap(lambda a: a, in_axes=1)(x), X.T)  # identity: output is the input


def test_vmap_unbatched_arguments_and_outputs():
    x, y = mx.array(X), mx.array(X[0])
    close(mx.vmap(lambda a, b: a + b, in_axes=(0, None))(x, y), X + X[0])
    close(mx.vmap(lambda a, b: a + b, in_axes=[0, None])(x, y), X + X[0])
    # an output that does not depend on the batch is broadcast along it
    out = mx.vmap(lambda a, b: b * 2, in_axes=(0, None))(x, y)
    assert out.shape == (3, 4)
    close(out, np.broadcast_to(X[0] * 2, (3, 4)))
    out = mx.vmap(lambda a, b: b * 2, in_axes=(0, None), out_axes=1)(x, y)
    close(out, np.broadcast_to(X[0] * 2, (3, 4)).T)
    out = mx.vmap(lambda a, b: b, in_axes=(0, None))(x, y)  # the unbatched input itself
    close(out, np.broadcast_to(X[0], (3, 4)))
    # braze extension: out_axes None for an unbatched output
    out = mx.vmap(lambda a, b: (a * 2, b * 2), in_axes=(0, None), out_axes=(0, None))(x, y)
    close(out[1], X[0] * 2)
    # non-array arguments pass through where their axis is None
    close(mx.vmap(lambda a, s: a * s, in_axes=(0, None))(x, 3.0), X * 3)


def test_vmap_trees():
    x, y = mx.array(X), mx.array(X[0])
    close(mx.vmap(lambda d: d["a"] * 2)({"a": x}), X * 2)
    out = mx.vmap(lambda d: d["a"] + d["b"], in_axes=({"a": 0, "b": None},))({"a": x, "b": y})
    close(out, X + X[0])
    out = mx.vmap(lambda p: p[0] + p[1], in_axes=((0, None),))((x, y))
    close(out, X + X[0])
    out = mx.vmap(lambda p: p[0] + p[1], in_axes=([1, None],))([x, mx.array(X[:, 0])])
    close(out, X.T + X[:, 0])
    out = mx.vmap(lambda p: p[0] + p[1], in_axes=0)([x, x])
    close(out, 2 * X)
    outs = mx.vmap(lambda a: (a * 2, a.sum()))(x)
    assert isinstance(outs, tuple) and outs[0].shape == (3, 4) and outs[1].shape == (3,)
    outs = mx.vmap(lambda a: {"p": a * 2, "q": [a.sum()]})(x)
    assert outs["p"].shape == (3, 4) and outs["q"][0].shape == (3,)
    outs = mx.vmap(lambda a: (a * 2, a.sum()), out_axes=(1, 0))(x)
    close(outs[0], (X * 2).T)
    close(outs[1], X.sum(1))
    outs = mx.vmap(lambda a: {"p": a * 2, "q": a.sum()}, out_axes={"p": 1, "q": 0})(x)
    close(outs["p"], (X * 2).T)


def test_vmap_empty_batch():
    out = mx.vmap(lambda a: a * 2)(mx.zeros((0, 3)))
    assert out.shape == (0, 3)


def test_vmap_with_matmul_and_reshape_against_loop():
    xs = RNG.standard_normal((5, 3, 4)).astype(np.float32)

    def f(a, w):
        return mx.reshape(mx.matmul(a, w), (-1,))

    want = np.stack([(xs[i] @ W).reshape(-1) for i in range(5)])
    close(mx.vmap(f, in_axes=(0, None))(mx.array(xs), mx.array(W)), want, rtol=1e-4, atol=1e-5)
    moved = np.moveaxis(xs, 0, 2)
    close(mx.vmap(f, in_axes=(2, None))(mx.array(moved), mx.array(W)), want, rtol=1e-4,
          atol=1e-5)


# -- nesting -----------------------------------------------------------------------------------
def f_sin_exp(x):
    return (mx.sin(x) * mx.exp(x)).sum()


def test_grad_of_grad_analytic():
    x = np.linspace(-1, 1, 7)
    xa = mx.array(x, dtype=mx.float64)
    g1 = mx.grad(f_sin_exp)(xa)
    close(g1, np.exp(x) * (np.sin(x) + np.cos(x)), rtol=1e-10)
    g2 = mx.grad(lambda a: mx.grad(f_sin_exp)(a).sum())(xa)
    close(g2, 2 * np.exp(x) * np.cos(x), rtol=1e-10)
    g3 = mx.grad(lambda a: mx.grad(lambda b: mx.grad(f_sin_exp)(b).sum())(a).sum())(xa)
    close(g3, 2 * np.exp(x) * (np.cos(x) - np.sin(x)), rtol=1e-10)


def test_grad_of_grad_scalar_cubic():
    x = mx.array(1.5)
    f = lambda a: a * a * a  # noqa: E731
    assert abs(mx.grad(mx.grad(f))(x).item() - 9.0) < 1e-5
    assert abs(mx.grad(mx.grad(mx.grad(f)))(x).item() - 6.0) < 1e-5


def _mlp_loss(w, x):
    return (mx.sin(mx.matmul(x, w)) * mx.exp(x.sum())).sum()


def test_vmap_of_grad_against_loop():
    xs = RNG.standard_normal((6, 2, 4)).astype(np.float32) * 0.3
    w = mx.array(W)
    got = mx.vmap(mx.grad(_mlp_loss), in_axes=(None, 0))(w, mx.array(xs))
    want = np.stack([npa(mx.grad(_mlp_loss)(w, mx.array(xs[i]))) for i in range(6)])
    close(got, want, rtol=1e-4, atol=1e-5)


def test_grad_of_vmap_against_loop():
    xs = RNG.standard_normal((6, 2, 4)).astype(np.float32) * 0.3
    w = mx.array(W)

    def batched(wt):
        return mx.vmap(_mlp_loss, in_axes=(None, 0))(wt, mx.array(xs)).sum()

    got = mx.grad(batched)(w)
    want = sum(npa(mx.grad(_mlp_loss)(w, mx.array(xs[i]))) for i in range(6))
    close(got, want, rtol=1e-4, atol=1e-4)
    # gradient with respect to the batched argument
    gx = mx.grad(lambda a: mx.vmap(_mlp_loss, in_axes=(None, 0))(w, a).sum())(mx.array(xs))
    want = np.stack([npa(mx.grad(_mlp_loss, argnums=1)(w, mx.array(xs[i]))) for i in range(6)])
    close(gx, want, rtol=1e-4, atol=1e-5)


def test_jvp_of_grad_is_hessian_vector_product():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(5) * 0.5
    v = rng.standard_normal(5)

    def f(a):
        return (mx.exp(a) * mx.sin(a)).sum() + (a * a * a).sum()

    g = mx.grad(f)
    _, (hv,) = mx.jvp(g, [mx.array(x, dtype=mx.float64)], [mx.array(v, dtype=mx.float64)])
    eps = 1e-6
    gp = npa(g(mx.array(x + eps * v, dtype=mx.float64)))
    gm = npa(g(mx.array(x - eps * v, dtype=mx.float64)))
    close(hv, (gp - gm) / (2 * eps), rtol=1e-6, atol=1e-7)
    # and the vjp of grad agrees (the Hessian is symmetric)
    _, (hv2,) = mx.vjp(g, [mx.array(x, dtype=mx.float64)], [mx.array(v, dtype=mx.float64)])
    close(hv2, hv, rtol=1e-10, atol=1e-12)


def test_vmap_of_vmap_against_loops():
    xs = RNG.standard_normal((3, 4, 2, 4)).astype(np.float32)
    w = mx.array(W)

    def f(a):
        return mx.matmul(mx.exp(a * 0.1), w).sum(axis=0)

    got = mx.vmap(mx.vmap(f))(mx.array(xs))
    want = np.stack([np.stack([npa(f(mx.array(xs[i, j]))) for j in range(4)]) for i in range(3)])
    close(got, want, rtol=1e-4, atol=1e-5)
    # inner and outer batch axes at different positions
    moved = np.moveaxis(xs, (0, 1), (3, 1))  # outer axis last, inner axis 1
    got = mx.vmap(mx.vmap(f, in_axes=1), in_axes=3)(mx.array(moved))
    close(got, want, rtol=1e-4, atol=1e-5)
    got = mx.vmap(mx.vmap(f), out_axes=1)(mx.array(xs))
    close(got, np.swapaxes(want, 0, 1), rtol=1e-4, atol=1e-5)


def test_value_and_grad_with_aux_nested_in_vmap():
    xs = mx.array(X)

    def f(a):
        return (a * a).sum(), a * 3

    (loss, aux), g = mx.vmap(mx.value_and_grad(f))(xs)
    close(loss, (X * X).sum(1), rtol=1e-5)
    close(aux, X * 3)
    close(g, 2 * X)


def test_transforms_of_functions_that_eval_intermediates():
    x = mx.array([0.5, 1.0, 1.5])

    def f(a):
        h = mx.exp(a) * 2
        mx.eval(h)
        s = mx.sin(h)
        s.item() if s.size == 1 else np.asarray(s)  # conversion evaluates too
        return (s * a).sum()

    def f_plain(a):
        return (mx.sin(mx.exp(a) * 2) * a).sum()

    close(mx.grad(f)(x), mx.grad(f_plain)(x), rtol=1e-6)
    _, (t,) = mx.jvp(f, [x], [mx.ones(3)])
    _, (t2,) = mx.jvp(f_plain, [x], [mx.ones(3)])
    close(t, t2, rtol=1e-6)
    close(mx.grad(lambda a: mx.grad(f)(a).sum())(x),
          mx.grad(lambda a: mx.grad(f_plain)(a).sum())(x), rtol=1e-5)


def test_vmap_eval_of_batched_intermediate_is_an_error_as_in_mlx():
    def f(a):
        h = a * 2
        mx.eval(h)
        return h

    with pytest.raises(ValueError, match="eval"):
        mx.vmap(f)(mx.array(X))


def test_deep_graph_is_walked_once_without_recursion(monkeypatch):
    # a 5000-op chain: no RecursionError, and each node's rule runs exactly once (a walk that
    # revisits nodes would be quadratic); timing is left to benchmarks/
    from braze._src.prims.base import REGISTRY

    sin = REGISTRY["Sin"]
    calls = []
    original = sin.vjp

    def counting_vjp(self, *args):
        calls.append(1)
        return original(self, *args)

    monkeypatch.setattr(sin, "vjp", counting_vjp)
    x = mx.array([0.3, 0.1])

    def f(a):
        for _ in range(5000):
            a = mx.sin(a) * 1.0001
        return a.sum()

    g = mx.grad(f)(x)
    mx.eval(g)
    assert len(calls) == 5000
    assert np.all(np.isfinite(np.asarray(g)))


def test_constant_graph_behind_inputs_is_not_walked():
    # a long constant chain feeding the function must not be walked by the transform
    c = mx.array([1.0, 2.0])
    for _ in range(3000):
        c = c + 0.0
    x = mx.array([1.0, 2.0])
    close(mx.grad(lambda a: (a * c).sum())(x), [1, 2])


# -- stop_gradient -----------------------------------------------------------------------------
def test_stop_gradient():
    x = mx.array([1.0, 2.0])
    close(mx.grad(lambda a: (mx.stop_gradient(a) * a).sum())(x), [1, 2])
    close(mx.grad(lambda a: mx.stop_gradient(a * a).sum())(x), [0, 0])
    _, (t,) = mx.jvp(lambda a: mx.stop_gradient(a) * a, [x], [mx.ones(2)])
    close(t, [1, 2])
    close(mx.vmap(mx.stop_gradient)(x), [1, 2])
    # d/da of the inner gradient 2 * stop(a) * a is 2 * stop(a) (MLX gives [2, 4] too)
    close(mx.grad(lambda a: mx.grad(lambda b: (mx.stop_gradient(b) * b * b).sum())(a).sum())(x),
          [2, 4])


# -- custom_function ---------------------------------------------------------------------------
def _make_custom(log):
    @mx.custom_function
    def f(x, y):
        return mx.sin(x) * y

    @f.vjp
    def f_vjp(primals, cotangent, output):
        log.append(("vjp", type(primals), type(cotangent)))
        x, y = primals
        return cotangent * 100, cotangent * 200

    @f.jvp
    def f_jvp(primals, tangents):
        log.append(("jvp",))
        dx, dy = tangents
        return dx * 7 + dy

    @f.vmap
    def f_vmap(inputs, axes):
        log.append(("vmap", axes))
        x, y = inputs
        ax, ay = axes
        if ax is not None and ay is not None and ax != ay:
            y = mx.moveaxis(y, ay, ax)
        return mx.sin(x) * y * 1000, (ax if ax is not None else ay)

    return f


def test_custom_function_forward_and_overrides():
    log = []
    f = _make_custom(log)
    assert f.vjp(f._vjp) is f  # the decorators return the custom function
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    close(f(x, y), np.sin([1.0, 2.0]) * [3, 4])
    g = mx.grad(lambda a, b: f(a, b).sum(), argnums=(0, 1))(x, y)
    close(g[0], [100, 100])
    close(g[1], [200, 200])
    assert log[-1] == ("vjp", tuple, mx.array)
    outs, v = mx.vjp(f, [x, y], [mx.ones(2)])
    close(outs[0], np.sin([1.0, 2.0]) * [3, 4])
    close(v[0], [100, 100])
    outs, t = mx.jvp(f, [x, y], [mx.ones(2), mx.ones(2)])
    close(t[0], [8, 8])
    close(mx.vmap(f)(x, y), np.sin([1.0, 2.0]) * [3, 4] * 1000, rtol=1e-5)
    assert log[-1] == ("vmap", (0, 0))
    mx.vmap(f, in_axes=(0, None))(x, mx.array(3.0))
    assert log[-1] == ("vmap", (0, None))


def test_custom_function_under_vmap_of_grad_and_grad_of_grad():
    log = []
    f = _make_custom(log)
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    g = mx.vmap(mx.grad(lambda a, b: f(a, b)))(x, y)
    close(g, [100, 100])
    assert any(e[0] == "vjp" for e in log)

    @mx.custom_function
    def h(a):
        return a * 2

    @h.vjp
    def h_vjp(p, c, o):
        assert isinstance(p, mx.array) and isinstance(c, mx.array) and isinstance(o, mx.array)
        return c * 5 * p  # depends on the primal, so its own derivative is visible

    close(mx.grad(lambda a: h(a).sum())(x), [5, 10])
    close(mx.grad(lambda a: mx.grad(lambda b: h(b).sum())(a).sum())(x), [5, 5])


def test_custom_function_single_argument_and_tree_outputs():
    seen = {}

    @mx.custom_function
    def h(d):
        return {"o": d * 2, "p": [d * 3]}

    @h.vjp
    def h_vjp(p, c, o):
        seen["types"] = (type(p), type(c), type(o))
        return c["o"] * 10 + c["p"][0] * 20

    x = mx.array([1.0, 2.0])
    g = mx.grad(lambda a: (h(a)["o"] + h(a)["p"][0]).sum())(x)
    close(g, [30, 30])
    assert seen["types"] == (mx.array, dict, dict)
    out = h(x)
    close(out["p"][0], [3, 6])

    @h.jvp
    def h_jvp(p, t):
        return {"o": t * 9, "p": [t * 8]}

    _, t = mx.jvp(h, [x], [mx.ones(2)])
    close(t[0], [9, 9])
    close(t[1], [8, 8])


def test_custom_function_defaults_fall_back_to_the_function():
    @mx.custom_function
    def f(a):
        return mx.sin(a)

    @f.vjp
    def f_vjp(p, c, o):
        return c * 100

    x = mx.array([1.0, 2.0])
    _, (t,) = mx.jvp(f, [x], [mx.ones(2)])  # no custom jvp: the derivative of sin
    close(t, np.cos([1.0, 2.0]))
    close(mx.vmap(f)(x), np.sin([1.0, 2.0]))
    close(mx.vmap(mx.grad(f))(x), [100, 100])

    @mx.custom_function
    def only_vmap(a, b):
        return a * b

    @only_vmap.vmap
    def _(inputs, axes):
        return inputs[0] * inputs[1], axes[0]

    y = mx.array([3.0, 4.0])
    g = mx.grad(lambda a, b: only_vmap(a, b).sum(), argnums=(0, 1))(x, y)
    close(g[0], [3, 4])
    close(g[1], [1, 2])


def test_custom_function_non_array_arguments_kwargs_and_partial_tangents():
    got = {}

    @mx.custom_function
    def g(a, s):
        return a * s

    @g.jvp
    def g_jvp(p, t):
        got["jvp"] = (p, t)
        return t[0] * 7

    @g.vmap
    def g_vmap(inputs, axes):
        got["vmap"] = axes
        return inputs[0] * 7, axes[0]

    @g.vjp
    def g_vjp(p, c, o):
        return c * 7, None  # None: zero cotangent for the second argument

    x, y = mx.array(2.0), mx.array(3.0)
    _, (t,) = mx.jvp(lambda a: g(a, 2.0), [x], [mx.array(1.0)])
    close(t, 7)
    assert got["jvp"][0][1] == 2.0 and got["jvp"][1][1] is None
    _, (t,) = mx.jvp(lambda a: g(a, y), [x], [mx.array(1.0)])
    assert got["jvp"][1][1] is None  # y has no tangent
    close(mx.vmap(lambda a: g(a, 2.0))(mx.array([1.0, 2.0])), [7, 14])
    assert got["vmap"] == (0, None)
    gx, gy = mx.grad(g, argnums=(0, 1))(x, y)
    close(gx, 7)
    close(gy, 0)

    @mx.custom_function
    def k(a, scale=1.0):
        return a * scale

    @k.vjp
    def k_vjp(p, c, o, scale=1.0):
        got["kw"] = scale
        return c * 3

    close(mx.grad(lambda a: k(a, scale=2.0).sum())(mx.array([1.0])), [3])
    assert got["kw"] == 2.0


def test_custom_function_captured_arrays_are_constants():
    def g(x, y):
        @mx.custom_function
        def f(a):
            return a * y

        @f.vjp
        def f_vjp(a, c, o):
            raise RuntimeError("abort")

        return f(x)

    x, y = mx.array(2.0), mx.array(3.0)
    close(g(x, y), 6)
    with pytest.raises(RuntimeError, match="abort"):
        mx.grad(g)(x, y)
    close(mx.grad(g, argnums=1)(x, y), 0)


def test_custom_function_multi_output_siblings_in_any_order():
    @mx.custom_function
    def two(a):
        return a * 2, mx.exp(a)

    @two.jvp
    def _(p, t):
        return t * 2, t * mx.exp(p)

    x = mx.array([0.5, 1.0])

    def f(a):
        u, v = two(a)
        w = v * 3  # consume the second sibling first
        return (w + u * v).sum()

    # no custom vjp: gradients flow through the forward graph, siblings ordered correctly
    e = np.exp([0.5, 1.0])
    want = 3 * e + 2 * e + 2 * np.array([0.5, 1.0]) * e
    close(mx.grad(f)(x), want, rtol=1e-5)

    @two.vjp
    def _(p, c, o):
        cu, cv = c
        return cu * 2 + cv * mx.exp(p)

    close(mx.grad(f)(x), want, rtol=1e-5)


def test_custom_function_errors():
    @mx.custom_function
    def f(a, b):
        return a * b

    @f.vjp
    def _(p, c, o):
        return c  # one value for two arguments

    x = mx.array([1.0, 2.0])
    with pytest.raises(ValueError, match="custom_function.*vjp.*1 values.*2 array arguments"):
        mx.grad(lambda a: f(a, a).sum())(x)

    @f.vjp
    def _(p, c, o):
        return mx.ones(3), c

    with pytest.raises(ValueError, match="shape"):
        mx.grad(lambda a: f(a, a).sum())(x)

    @mx.custom_function
    def kw(a, s=1.0):
        return a * s

    @kw.jvp
    def _(p, t):
        return t

    with pytest.raises(ValueError, match="positional"):
        mx.jvp(lambda a: kw(a, s=2.0), [x], [x])
    with pytest.raises(TypeError):
        mx.custom_function(3)


def test_custom_function_outside_transforms_is_the_function():
    calls = []

    @mx.custom_function
    def f(a):
        calls.append(1)
        return 3  # not an array: fine outside transforms, as in MLX

    @f.vjp
    def _(p, c, o):
        return c

    assert f(mx.array(1.0)) == 3
    with pytest.raises(ValueError, match="custom_function"):
        mx.grad(lambda a: f(a))(mx.array(1.0))


# -- checkpoint --------------------------------------------------------------------------------
def test_checkpoint_values_and_gradients():
    x = mx.array([0.5, 1.0, 1.5])

    def fc(a):
        return mx.sin(a) * mx.exp(a)

    ck = mx.checkpoint(fc)
    close(ck(x), fc(x))
    close(mx.grad(lambda a: ck(a).sum())(x), mx.grad(lambda a: fc(a).sum())(x), rtol=1e-6)
    _, (t,) = mx.jvp(ck, [x], [mx.ones(3)])
    _, (t2,) = mx.jvp(fc, [x], [mx.ones(3)])
    close(t, t2)
    close(mx.vmap(ck)(x), fc(x))
    close(mx.vmap(mx.grad(lambda a: ck(a).sum()))(x), mx.grad(lambda a: fc(a).sum())(x))
    close(mx.grad(lambda a: mx.grad(lambda b: ck(b).sum())(a).sum())(x),
          mx.grad(lambda a: mx.grad(lambda b: fc(b).sum())(a).sum())(x), rtol=1e-5)
    # several arguments, keyword arguments and trees
    g = mx.grad(lambda a, b: mx.checkpoint(lambda u, v=1.0: u * v)(a, v=b).sum(),
                argnums=(0, 1))(x, x * 2)
    close(g[0], npa(x) * 2)
    close(g[1], npa(x))
    out = mx.checkpoint(lambda d: {"o": d["a"] * 2})({"a": x})
    close(out["o"], npa(x) * 2)


def test_checkpoint_recomputes_forward_and_treats_captures_as_constants():
    calls = []
    y = mx.array(3.0)

    def fc(a):
        calls.append(1)
        return mx.sin(a) * y

    ck = mx.checkpoint(fc)
    x = mx.array(0.5)
    g = mx.grad(ck)(x)
    close(g, np.cos(0.5) * 3)
    assert len(calls) == 2  # forward, then the recomputation in the backward pass
    close(mx.grad(lambda a, b: mx.checkpoint(lambda u: u * b)(a), argnums=1)(x, y), 0)


# -- errors ------------------------------------------------------------------------------------
def _raises(exc, pattern, fn):
    with pytest.raises(exc, match=pattern):
        fn()


def test_grad_errors():
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])

    def f(a, b):
        return (a * b).sum()

    _raises(ValueError, r"\[grad\].*scalar array.*shape \(2,\)",
            lambda: mx.grad(lambda a: a * 2)(x))
    _raises(ValueError, r"\[grad\].*scalar array.*shape \(1,\)",
            lambda: mx.grad(lambda a: (a * 2)[:1])(x))
    _raises(ValueError, r"\[grad\].*scalar array.*float", lambda: mx.grad(lambda a: 3.0)(x))
    _raises(ValueError, r"\[grad\].*scalar array.*tuple",
            lambda: mx.grad(lambda a: (a.sum(), a))(x))
    _raises(ValueError, r"\[value_and_grad\].*list",
            lambda: mx.value_and_grad(lambda a: [a.sum(), a])(x))
    _raises(ValueError, r"\[value_and_grad\].*shape \(2,\)",
            lambda: mx.value_and_grad(lambda a: (a * 2, a))(x))
    _raises(ValueError, r"\[grad\].*argument index 2.*only 2 positional",
            lambda: mx.grad(f, argnums=2)(x, y))
    _raises(ValueError, r"\[grad\].*negative argument index -1", lambda: mx.grad(f, argnums=-1))
    _raises(ValueError, r"\[grad\] Duplicate argument index 0", lambda: mx.grad(f, (0, 0)))
    _raises(ValueError, r"\[grad\] Gradient wrt no argument", lambda: mx.grad(f, argnums=()))
    _raises(ValueError, r"\[grad\].*keyword argument 'z'",
            lambda: mx.grad(f, argnames="z")(x, b=y))
    _raises(ValueError, r"\[grad\].*argnums", lambda: mx.grad(f, argnums="a"))
    _raises(TypeError, r"\[grad\].*argnums", lambda: mx.grad(f, argnums=1.5))
    _raises(ValueError, r"\[grad\].*must be arrays.*float", lambda: mx.grad(f)(3.0, y))
    _raises(ValueError, r"\[grad\].*must be arrays.*NoneType", lambda: mx.grad(f)([x, None], y))
    _raises(TypeError, r"\[grad\].*callable", lambda: mx.grad(3))


def test_vjp_jvp_errors():
    x = mx.array([1.0, 2.0])
    _raises(ValueError, r"\[vjp\] Number of outputs.*\(2\).*cotangents \(1\)",
            lambda: mx.vjp(lambda a: (a * 2, a), [x], [x]))
    _raises(ValueError, r"\[vjp\] Output shape \(2,\) does not match cotangent shape \(3,\)",
            lambda: mx.vjp(lambda a: a * 2, [x], [mx.ones(3)]))
    _raises(ValueError, r"\[vjp\].*outputs must be arrays.*int",
            lambda: mx.vjp(lambda a: 3, [x], [x]))
    _raises(ValueError, r"\[vjp\].*primals must be a list", lambda: mx.vjp(lambda a: a, x, [x]))
    _raises(ValueError, r"\[vjp\].*Primals must be arrays", lambda: mx.vjp(lambda a: a, [1.0], [x]))
    _raises(ValueError, r"\[jvp\] Number of primals \(1\).*tangents \(2\)",
            lambda: mx.jvp(lambda a: a * 2, [x], [x, x]))
    _raises(ValueError, r"\[jvp\] Primal shape \(2,\) does not match tangent shape \(3,\)",
            lambda: mx.jvp(lambda a: a * 2, [x], [mx.ones(3)]))
    _raises(ValueError, r"\[jvp\].*outputs must be arrays.*NoneType",
            lambda: mx.jvp(lambda a: None, [x], [x]))


def test_vmap_errors():
    x = mx.array(X)
    y = mx.array(X[0])
    _raises(ValueError, r"\[vmap\] Invalid vectorization axis 2 for array with shape \(3, 4\)",
            lambda: mx.vmap(lambda a: a, in_axes=2)(x))
    _raises(IndexError, r"\[vmap\] Invalid vectorization axis -3",
            lambda: mx.vmap(lambda a: a, in_axes=-3)(x))
    _raises(ValueError, r"\[vmap\] Invalid vectorization axis 0 for array with shape \(\)",
            lambda: mx.vmap(lambda a: a)(mx.array(1.0)))
    _raises(ValueError, r"\[vmap\] Invalid output vectorization axis 2",
            lambda: mx.vmap(lambda a: a * 2, out_axes=2)(x))
    _raises(ValueError, r"\[vmap\] Inconsistent axis sizes: 3 and 4",
            lambda: mx.vmap(lambda a, b: a + b)(x, mx.ones((4, 4))))
    _raises(ValueError, r"\[vmap\] At least one of in_axes must be non-None",
            lambda: mx.vmap(lambda a: a * 2, in_axes=None)(x))
    _raises(ValueError, r"\[vmap\] At least one of in_axes must be non-None",
            lambda: mx.vmap(lambda a, b: a * b, in_axes=(None, None))(x, y))
    _raises(ValueError, r"\[vmap\] in_axes has 1 entries.*2 positional",
            lambda: mx.vmap(lambda a, b: a + b, in_axes=(0,))(x, y))
    _raises(ValueError, r"\[vmap\] in_axes has 3 entries",
            lambda: mx.vmap(lambda a, b: a + b, in_axes=(0, 0, 0))(x, y))
    _raises(ValueError, r"\[vmap\] in_axes at \[0\] has keys \['a'\].*\['a', 'b'\]",
            lambda: mx.vmap(lambda d: d["a"], in_axes=({"a": 0},))({"a": x, "b": y}))
    _raises(ValueError, r"\[vmap\] in_axes at \[0\] is a dict but the value it describes is a "
            r"list", lambda: mx.vmap(lambda d: d[0], in_axes=({"a": 0},))([x]))
    _raises(ValueError, r"\[vmap\] in_axes at \[0\] has 1 entries but the value it describes "
            r"has 2", lambda: mx.vmap(lambda d: d[0], in_axes=((0,),))([x, x]))
    _raises(ValueError, r"\[vmap\].*ints or None", lambda: mx.vmap(lambda a: a, in_axes=("a",))(x))
    _raises(ValueError, r"\[vmap\].*in_axes", lambda: mx.vmap(lambda a: a, in_axes="a"))
    _raises(ValueError, r"\[vmap\] Only arrays can be vectorized.*float",
            lambda: mx.vmap(lambda a: a)(3.0))
    _raises(ValueError, r"\[vmap\] The function must return arrays.*int",
            lambda: mx.vmap(lambda a: 3)(x))
    _raises(ValueError, r"\[vmap\] The function must return arrays.*NoneType",
            lambda: mx.vmap(lambda a: None)(x))
    _raises(ValueError, r"\[vmap\] out_axes has 3 entries",
            lambda: mx.vmap(lambda a: (a, a), out_axes=(0, 0, 0))(x))
    _raises(ValueError, r"\[vmap\] An output with out_axes None depends on a vectorized",
            lambda: mx.vmap(lambda a: a * 2, out_axes=None)(x))
    _raises(TypeError, r"\[vmap\] Keyword arguments are not supported",
            lambda: mx.vmap(lambda a, b=1: a * b)(x, b=y))
    _raises(TypeError, r"\[vmap\].*callable", lambda: mx.vmap(3))


def test_custom_function_as_method_and_nested():
    class M:
        def __init__(self):
            self.s = mx.array(2.0)

        @mx.custom_function
        def f(self, x):
            return x * self.s

        @f.vjp
        def f_vjp(primals, c, o):
            _, x = primals  # the instance is a non-array argument, kept as is
            return None, c * 10

    m = M()
    close(m.f(mx.array(1.0)), 2)
    close(mx.grad(lambda a: m.f(a))(mx.array(1.0)), 10)

    inner = mx.custom_function(lambda a: a * 2)
    inner.vjp(lambda p, c, o: c * 3)
    outer = mx.custom_function(inner)
    close(mx.grad(lambda a: outer(a))(mx.array(1.0)), 3)


# -- MLX behaviours from its test_autograd / test_vmap (issue 13) ------------------------------
def test_grad_fills_the_callers_lists_in_place():
    def fun(arrs):
        arrs[1] = sum(arrs)
        return arrs[1]
    arrs = [mx.array(1.0), mx.array(1.0), mx.array(1.0)]
    a0, a1, a2 = arrs
    assert [g.item() for g in mx.grad(fun)(arrs)] == [1.0, 1.0, 1.0]
    assert arrs[0] is a0 and arrs[2] is a2 and arrs[1] is not a1  # what fun stored stays
    model = {"w": mx.array(0.0), "b": [mx.array(1.0)]}

    def loss(m):
        m["b"][0] = mx.array(2.0)
        return m["w"]
    mx.grad(loss)(model)
    assert model["b"][0].item() == 2.0 and not model["w"]._tracer
    with pytest.raises(RuntimeError):
        mx.grad(lambda m: (_ for _ in ()).throw(RuntimeError("x")))([mx.array(1.0)])


def test_jvp_of_comparisons_has_the_tangent_dtype():
    x = mx.array([1.0, -2.0, 3.0])
    for op in (mx.greater, mx.less, mx.equal, mx.not_equal):
        _, (t,) = mx.jvp(lambda a, _op=op: _op(a, 0.0), [x], [mx.ones_like(x)])
        assert t.dtype == mx.float32 and t.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("fun,args", [
    (lambda x, i: mx.take(x, i), ([1.0, 2.0, 3.0, 4.0], [1, 3])),
    (lambda x, i: mx.take_along_axis(x, i, axis=0), ([[1.0], [2.0]], [[1]])),
    (lambda x, i, u: x.at[i].add(u), ([1.0, 2.0, 3.0], [0, 2], [5.0, 6.0])),
    (lambda x, i, u: mx.put_along_axis(x, i, u, axis=0), ([[1.0], [2.0]], [[1]], [[5.0]])),
])
def test_vjp_through_indices_needs_stop_gradient(fun, args):
    arrs = [mx.array(a) for a in args]
    out = fun(*arrs)
    with pytest.raises(ValueError, match=r"^\[\w+\] Cannot calculate VJP with respect to indic"):
        mx.vjp(fun, arrs, [mx.ones_like(out)])
    # the same indices built inside the function, through stop_gradient: fine
    w = mx.array([4.0, 3.0, 2.0, 1.0])
    g = mx.grad(lambda w: mx.take(w, mx.stop_gradient(mx.argsort(w)[:2])).sum())(w)
    assert g.tolist() == [0.0, 0.0, 1.0, 1.0]


def test_complex_products_vjp_is_conj_other_times_cotangent():
    p = mx.random.normal((2, 20), dtype=mx.complex64, key=mx.random.key(3))
    c = mx.random.normal((20,), dtype=mx.complex64, key=mx.random.key(4))
    want = mx.stack([mx.conj(p[1]) * c, mx.conj(p[0]) * c])
    _, (v,) = mx.vjp(lambda x: x.prod(axis=0), [p], [c])
    _, vm = mx.vjp(mx.multiply, [p[0], p[1]], [c])
    assert mx.array_equal(v, want).item() and mx.array_equal(mx.stack(vm), want).item()


@pytest.mark.parametrize("fn", [
    lambda a: mx.sort(a), lambda a: mx.partition(a, 2), lambda a: mx.topk(a, 2),
    lambda a: mx.cummax(a, axis=0), lambda a: mx.cummin(a, axis=0, reverse=True),
    lambda a: mx.cummax(a, axis=0, inclusive=False)])
def test_second_order_through_permutations(fn):
    x, v = mx.array([3.0, 1.0, 2.0, 5.0]), mx.array([1.0, -2.0, 0.5, 1.5])
    f = lambda a: mx.sum(fn(a) ** 2)  # noqa: E731
    hvp = mx.grad(lambda a: mx.sum(mx.grad(f)(a) * v))(x)
    # f is 0.5 * a^T D a locally (D diagonal: 2 where an element is used, by its multiplicity)
    d = mx.grad(f)(mx.ones_like(x) * 0 + x) / x
    close(hvp, d * v)


def test_cummax_vjp_is_a_scatter_add():
    g = mx.grad(lambda a: mx.sum(mx.cummax(a) ** 2))(mx.array([3.0, 1.0, 2.0, 5.0]))
    assert g.tolist() == [18.0, 0.0, 0.0, 10.0]  # exact: 3 * (2 * 3) and 2 * 5


def test_vmap_dict_in_axes_and_one_output_axes():
    tree = {"a": mx.ones((2, 4)), "b": (mx.ones((4, 2)), mx.ones((4, 2)))}
    out = mx.vmap(lambda t: t["a"] + t["b"][0].T * t["b"][1].T,
                  in_axes={"a": 0, "b": (1, 1)})(tree)
    assert out.shape == (2, 4)
    with pytest.raises(ValueError, match=r"^\[vmap\]"):
        mx.vmap(lambda t: t["a"], in_axes={"a": 0, "b": ((0, 0), 0)})(tree)
    with pytest.raises(ValueError, match=r"^\[vmap\] in_axes has 1 entries"):
        mx.vmap(lambda t, u: t["a"], in_axes={"a": 0, "b": 0})(tree, tree)
    a = mx.ones((2, 3, 4))
    assert mx.vmap(lambda x: x.sum(-1), in_axes=(1,), out_axes=(1,))(a).shape == (2, 3)
    with pytest.raises(ValueError, match=r"^\[vmap\]"):
        mx.vmap(lambda x: x, out_axes=(0, 1))(a)


def test_vmap_of_in_place_updates():
    def scatter(a, idx):
        a[idx] = mx.array(1.0)
        return a
    assert mx.vmap(scatter)(mx.zeros((3, 4)), mx.array([0, 1, 2])).tolist() == \
        mx.eye(3, 4).tolist()

    def add_at(a):
        return a.at[mx.array(0)].add(mx.array(1.0))
    a = mx.array([[1.0, 2.0, 3.0], [2.0, 3.0, 4.0]])
    assert mx.vmap(add_at, in_axes=(1,), out_axes=1)(a).tolist() == [[2, 3, 4], [2, 3, 4]]

    def masked(x, m, src):
        x[m] = src
        return x
    out = mx.vmap(masked, in_axes=(0, 0, None))(
        mx.array([[0, 0, 0], [5, 5, 5]]), mx.array([[True, False, True], [False, True, True]]),
        mx.array([9, 8]))
    assert out.tolist() == [[9, 0, 8], [5, 9, 8]]
