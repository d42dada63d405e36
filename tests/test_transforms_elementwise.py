"""Transforms of the elementwise primitives beyond the op table: higher derivatives against
analytic formulas, gradients at edge points (ties, zeros, NaN in a branch not taken), complex
gradients, and vmap with unbatched and scalar operands, nested vmap and vmap of grad.

Values marked "as MLX" were checked against mlx.core 0.32."""
import math

import numpy as np
import pytest

import braze.core as mx


def f64(values):
    return mx.array(np.asarray(values, dtype=np.float64), dtype=mx.float64)


def npa(a):
    return np.asarray(a)


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(npa(a), b, rtol=rtol, atol=atol, equal_nan=True)


X = np.array([-1.3, -0.4, 0.2, 0.7, 1.9])
XP = np.array([0.3, 0.8, 1.5, 2.2, 4.0])  # positive
XU = np.array([-0.8, -0.3, 0.1, 0.5, 0.9])  # in (-1, 1)


def second(fn):
    """x -> the elementwise second derivative of the elementwise function fn."""
    return mx.grad(lambda x: mx.sum(mx.grad(lambda y: mx.sum(fn(y)))(x)))


# -- higher derivatives -------------------------------------------------------------------------
def _sig(x):
    return 1 / (1 + np.exp(-x))


SECOND = [
    ("sin", mx.sin, X, lambda x: -np.sin(x)),
    ("cos", mx.cos, X, lambda x: -np.cos(x)),
    ("exp", mx.exp, X, np.exp),
    ("tanh", mx.tanh, X, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
    ("sigmoid", mx.sigmoid, X, lambda x: _sig(x) * (1 - _sig(x)) * (1 - 2 * _sig(x))),
    ("log", mx.log, XP, lambda x: -1 / x**2),
    ("log2", mx.log2, XP, lambda x: -1 / (x**2 * math.log(2))),
    ("sqrt", mx.sqrt, XP, lambda x: -0.25 * x**-1.5),
    ("rsqrt", mx.rsqrt, XP, lambda x: 0.75 * x**-2.5),
    ("erf", mx.erf, X, lambda x: -4 * x / math.sqrt(math.pi) * np.exp(-x * x)),
    ("arctan", mx.arctan, X, lambda x: -2 * x / (1 + x * x) ** 2),
    ("arcsin", mx.arcsin, XU, lambda x: x * (1 - x * x) ** -1.5),
    ("arctanh", mx.arctanh, XU, lambda x: 2 * x / (1 - x * x) ** 2),
    ("square", mx.square, X, lambda x: np.full_like(x, 2.0)),
    ("cube", lambda x: mx.power(x, 3.0), XP, lambda x: 6 * x),
    ("reciprocal", mx.reciprocal, XP, lambda x: 2 / x**3),
    ("tan", mx.tan, XU, lambda x: 2 * np.tan(x) / np.cos(x) ** 2),
    ("log1p", mx.log1p, XP, lambda x: -1 / (1 + x) ** 2),
    ("expm1", mx.expm1, X, np.exp),
    ("sinh", mx.sinh, X, np.sinh),
    ("logaddexp", lambda x: mx.logaddexp(x, 0.5 * x), X,
     lambda x: 0.25 * np.exp(1.5 * x) / (np.exp(x) + np.exp(0.5 * x)) ** 2),
]


@pytest.mark.parametrize("name,fn,x,want", SECOND, ids=[s[0] for s in SECOND])
def test_second_derivative(name, fn, x, want):
    close(second(fn)(f64(x)), want(x), rtol=1e-9)


def test_erfinv_second_derivative():
    # y = erfinv(x): y' = sqrt(pi)/2 e^{y^2}, y'' = 2 y y'^2
    x = f64(XU)
    y = npa(mx.erfinv(x))
    d1 = math.sqrt(math.pi) / 2 * np.exp(y * y)
    close(mx.grad(lambda v: mx.sum(mx.erfinv(v)))(x), d1, rtol=1e-9)
    close(second(mx.erfinv)(x), 2 * y * d1 * d1, rtol=1e-9)


def test_third_derivative_of_exp_and_sin():
    x = f64(X)
    g3 = mx.grad(lambda v: mx.sum(second(mx.exp)(v)))
    close(g3(x), np.exp(X))
    s3 = mx.grad(lambda v: mx.sum(second(mx.sin)(v)))
    close(s3(x), -np.cos(X))


def test_mixed_partials():
    a, b = f64(XP), f64(X)
    # d2/da db (a * b) = 1 ; d2/da db arctan2(a, b) = (a^2 - b^2) / (a^2 + b^2)^2
    close(mx.grad(lambda b_: mx.sum(mx.grad(lambda a_: mx.sum(a_ * b_))(a)))(b), np.ones(5))
    want = (XP**2 - X**2) / (XP**2 + X**2) ** 2
    got = mx.grad(lambda b_: mx.sum(mx.grad(lambda a_: mx.sum(mx.arctan2(a_, b_)))(a)))(b)
    close(got, want)
    # d2/da db a^b = a^(b-1) (1 + b log a)
    got = mx.grad(lambda b_: mx.sum(mx.grad(lambda a_: mx.sum(mx.power(a_, b_)))(a)))(b)
    close(got, XP ** (X - 1) * (1 + X * np.log(XP)))
    # d2/db2 a / b = 2 a / b^3
    got = second(lambda b_: a / b_)(f64(XP))
    close(got, 2 * XP / XP**3)


def test_forward_over_reverse_and_reverse_over_forward():
    x = f64(X)
    t = f64(np.ones(5))
    g = mx.grad(lambda v: mx.sum(mx.tanh(v)))
    _, (hvp,) = mx.jvp(lambda v: g(v), [x], [t])
    want = -2 * np.tanh(X) * (1 - np.tanh(X) ** 2)
    close(hvp, want)
    jv = lambda v: mx.jvp(mx.tanh, [v], [t])[1][0]  # noqa: E731
    close(mx.grad(lambda v: mx.sum(jv(v)))(x), want)


# -- gradients at edge points --------------------------------------------------------------------
def test_maximum_minimum_ties_go_to_the_second_argument():
    # as MLX: maximum's cotangent goes to a where a > b, to b elsewhere (ties included)
    a, b = f64([1.0, 2.0, 3.0]), f64([1.0, 1.0, 4.0])
    ga, gb = mx.grad(lambda x, y: mx.sum(mx.maximum(x, y)), argnums=(0, 1))(a, b)
    close(ga, [0, 1, 0])
    close(gb, [1, 0, 1])
    ga, gb = mx.grad(lambda x, y: mx.sum(mx.minimum(x, y)), argnums=(0, 1))(a, b)
    close(ga, [0, 0, 1])
    close(gb, [1, 1, 0])
    # the jvp follows the same rule
    _, (t,) = mx.jvp(lambda x, y: mx.maximum(x, y), [a, b], [f64([10, 10, 10]), f64([1, 1, 1])])
    close(t, [1, 10, 1])


def test_clip_gradient_at_and_between_bounds():
    x = f64([-5.0, 0.0, 0.5, 1.0, 3.0])
    g = mx.grad(lambda v: mx.sum(mx.clip(v, 0.0, 1.0)))(x)
    close(g, [0, 0, 1, 0, 0])  # ties with the bounds give the bound (a constant) the gradient


def test_abs_sign_and_piecewise_constant_ops_at_zero():
    x = f64([0.0, -0.0, 1.5, -2.0])
    close(mx.grad(lambda v: mx.sum(mx.abs(v)))(x), [0, 0, 1, -1])  # as MLX: sign(0) = 0
    for fn in (mx.sign, mx.floor, mx.ceil, mx.trunc, mx.round, lambda v: mx.round(v, 1),
               mx.stop_gradient, lambda v: mx.floor_divide(v, 0.7)):
        close(mx.grad(lambda v: mx.sum(fn(v) * v))(x), npa(fn(x)))  # only the factor v counts
        _, (t,) = mx.jvp(fn, [x], [f64(np.ones(4))])
        close(t, np.zeros(4))


def test_divmod_and_remainder_gradients():
    a, b = f64([3.5, -2.5, 7.0]), f64([2.0, 2.0, -3.0])
    # as MLX: divmod has zero gradients for both outputs
    ga, gb = mx.grad(lambda x, y: mx.sum(mx.divmod(x, y)[1]), argnums=(0, 1))(a, b)
    close(ga, np.zeros(3))
    close(gb, np.zeros(3))
    ga, gb = mx.grad(lambda x, y: mx.sum(mx.remainder(x, y)), argnums=(0, 1))(a, b)
    close(ga, np.ones(3))
    close(gb, -np.floor(npa(a) / npa(b)))


def test_sqrt_and_log_at_zero():
    x = f64([0.0, 4.0])
    close(mx.grad(lambda v: mx.sum(mx.sqrt(v)))(x), [math.inf, 0.25])  # as MLX
    close(mx.grad(lambda v: mx.sum(mx.log(v)))(x), [math.inf, 0.25])


def test_power_at_zero_base():
    # as MLX: d/db a^b = log(a) a^b, taken as 0 where a^b == 0
    a = f64([0.0, 0.0, 0.0, 0.0, 2.0, -1.0])
    b = f64([2.0, 0.0, -1.0, 1.0, 0.5, 2.0])
    ga, gb = mx.grad(lambda x, y: mx.sum(mx.power(x, y)), argnums=(0, 1))(a, b)
    close(ga, [0, math.nan, -math.inf, 1, 0.5 * 2**-0.5, -2])
    close(gb, [0, -math.inf, -math.inf, 0, math.log(2) * 2**0.5, math.nan])


def test_logaddexp_gradient_tails():
    a, b = f64([1000.0, -1000.0, 0.0, -math.inf]), f64([0.0, 0.0, 0.0, 0.0])
    ga, gb = mx.grad(lambda x, y: mx.sum(mx.logaddexp(x, y)), argnums=(0, 1))(a, b)
    close(ga, [1, 0, 0.5, 0])
    close(gb, [0, 1, 0.5, 1])


def test_where_nan_in_the_branch_not_taken():
    c = mx.array([True, False, True])
    x = f64([1.0, 2.0, 3.0])
    y = f64([math.nan, math.inf, math.nan])
    gx, gy = mx.grad(lambda u, v: mx.sum(mx.where(c, u, v) * 2), argnums=(0, 1))(x, y)
    close(gx, [2, 0, 2])
    close(gy, [0, 2, 0])
    assert not np.isnan(npa(gx)).any() and not np.isnan(npa(gy)).any()
    # a condition computed from the input gets no gradient; NaN values (log of a negative) in
    # the branch not taken stay out of the gradient
    x = f64([1.0, 2.5, 3.0])
    g = mx.grad(lambda u: mx.sum(mx.where(u > 1.5, u * u, mx.log(2 - u))))(x)
    close(g, [-1, 5, 6])
    # the double-where idiom keeps a gradient finite where the inner function is not defined
    z = f64([-1.0, 0.0, 4.0])

    def safe_sqrt(u):
        pos = u > 0
        return mx.where(pos, mx.sqrt(mx.where(pos, u, 1.0)), 0.0)
    close(mx.grad(lambda u: mx.sum(safe_sqrt(u)))(z), [0, 0, 0.25])
    # as MLX: without it the zero cotangent meets 1 / sqrt(-1) and gives NaN
    g = mx.grad(lambda u: mx.sum(mx.where(u > 0, mx.sqrt(u), 0.0)))(z)
    assert np.isnan(npa(g)[0]) and npa(g)[2] == 0.25


def test_where_jvp():
    c = mx.array([True, False])
    x, y = f64([1.0, 2.0]), f64([3.0, 4.0])
    _, (t,) = mx.jvp(lambda u, v: mx.where(c, u, v), [x, y], [f64([10, 20]), f64([30, 40])])
    close(t, [10, 40])
    _, (t,) = mx.jvp(lambda u: mx.where(c, u, y), [x], [f64([10, 20])])
    close(t, [10, 0])


def test_nan_to_num_gradient():
    x = f64([1.0, math.nan, math.inf, -math.inf, -2.0])
    close(mx.grad(lambda v: mx.sum(mx.nan_to_num(v) * 3))(x), [3, 0, 0, 0, 3])


def test_float16_gradients_keep_dtype():
    for fn in (mx.exp, mx.tanh, mx.sigmoid, mx.sqrt, lambda v: mx.power(v, 2.0),
               lambda v: mx.maximum(v, 1.0), lambda v: mx.logaddexp(v, v)):
        x = mx.array([0.5, 1.5, 2.0], dtype=mx.float16)
        g = mx.grad(lambda v: mx.sum(fn(v)))(x)
        assert g.dtype == mx.float16


# -- complex gradients (as MLX: the cotangent of a holomorphic f is g * conj(f'(z))) ------------
Z = np.array([1 + 2j, 3 - 1j], dtype=np.complex64)
G = np.array([1 + 1j, 2 + 0j], dtype=np.complex64)


@pytest.mark.parametrize("name,deriv", [
    ("exp", np.exp), ("sin", np.cos), ("square", lambda z: 2 * z), ("log", lambda z: 1 / z),
    ("sqrt", lambda z: 0.5 / np.sqrt(z)), ("negative", lambda z: -np.ones_like(z)),
    ("tanh", lambda z: 1 - np.tanh(z) ** 2), ("cosh", np.sinh)])
def test_complex_holomorphic(name, deriv):
    fn = getattr(mx, name)
    _, (v,) = mx.vjp(fn, [mx.array(Z)], [mx.array(G)])
    np.testing.assert_allclose(npa(v), G * np.conj(deriv(Z)), rtol=1e-5)
    _, (t,) = mx.jvp(fn, [mx.array(Z)], [mx.array(G)])
    np.testing.assert_allclose(npa(t), G * deriv(Z), rtol=1e-5)


def test_complex_binary_and_non_holomorphic():
    z, w, g = mx.array(Z), mx.array(Z + 1), mx.array(G)
    _, (va, vb) = mx.vjp(lambda a, b: a * b, [z, w], [g])
    np.testing.assert_allclose(npa(va), G * np.conj(Z + 1), rtol=1e-6)
    np.testing.assert_allclose(npa(vb), G * np.conj(Z), rtol=1e-6)
    _, (va, vb) = mx.vjp(lambda a, b: a / b, [z, w], [g])
    np.testing.assert_allclose(npa(va), G / np.conj(Z + 1), rtol=1e-6)
    np.testing.assert_allclose(npa(vb), -G * np.conj(Z / (Z + 1) ** 2), rtol=1e-6)
    r = mx.array(np.array([1.0, 2.0], dtype=np.float32))
    for name, want in (("real", [1, 2]), ("imag", [1j, 2j]), ("abs", [1, 2] * Z / np.abs(Z))):
        _, (v,) = mx.vjp(getattr(mx, name), [z], [r])
        assert v.dtype == mx.complex64
        np.testing.assert_allclose(npa(v), want, rtol=1e-6)
    _, (v,) = mx.vjp(mx.conj, [z], [g])
    np.testing.assert_allclose(npa(v), np.conj(G))
    _, (t,) = mx.jvp(mx.abs, [z], [g])  # d|z| = Re(conj(z) dz) / |z|
    np.testing.assert_allclose(npa(t), np.real(np.conj(Z) * G) / np.abs(Z), rtol=1e-6)
    _, (t,) = mx.jvp(mx.imag, [z], [g])
    np.testing.assert_allclose(npa(t), np.imag(G))


# -- vmap -------------------------------------------------------------------------------------
RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((3, 4))


def loop(fn, *args, axes):
    """Reference: apply fn per example (batch size 3) and stack along axis 0."""
    n = next(a.shape[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = []
    for i in range(n):
        xs = [mx.array(a if ax is None else np.take(a, i, axis=ax)) for a, ax in zip(args, axes)]
        outs.append(npa(fn(*xs)))
    return np.stack(outs)


@pytest.mark.parametrize("axes", [(0, None), (None, 0), (1, None), (0, 1), (1, 0)])
def test_vmap_binary_with_unbatched_operand(axes):
    a = A if axes[0] != 1 else A.T.copy()
    b = B[0] if axes[1] is None else (B if axes[1] == 0 else B.T.copy())
    if axes[0] is None:
        a = A[0]
    for fn in (mx.add, mx.multiply, mx.maximum, mx.arctan2, mx.logaddexp):
        got = mx.vmap(fn, in_axes=axes)(mx.array(a), mx.array(b))
        np.testing.assert_allclose(npa(got), loop(fn, a, b, axes=axes), rtol=1e-6)


def test_vmap_with_python_and_0d_scalars():
    x = mx.array(A)
    got = mx.vmap(lambda v: v * 2.0 + 1)(x)
    np.testing.assert_allclose(npa(got), A * 2 + 1, rtol=1e-6)
    s = mx.array(3.0)
    got = mx.vmap(lambda v, k: mx.power(v, k), in_axes=(0, None))(mx.array(np.abs(A)), s)
    np.testing.assert_allclose(npa(got), np.abs(A) ** 3, rtol=1e-5)
    # a batch of scalars against an unbatched vector: per-example broadcasting inside the op
    ks = mx.array(np.array([1.0, 2.0, 3.0]))
    got = mx.vmap(lambda k, v: k * v, in_axes=(0, None))(ks, mx.array(B[0]))
    np.testing.assert_allclose(npa(got), np.array([1, 2, 3])[:, None] * B[0], rtol=1e-6)
    got = mx.vmap(lambda k: mx.exp(k) - k)(ks)
    np.testing.assert_allclose(npa(got), np.exp([1, 2, 3]) - [1, 2, 3], rtol=1e-6)


def test_vmap_where_with_unbatched_condition():
    cond = RNG.random(4) < 0.5
    got = mx.vmap(mx.where, in_axes=(None, 0, 0))(mx.array(cond), mx.array(A), mx.array(B))
    np.testing.assert_array_equal(npa(got), np.where(cond, A, B).astype(np.float32))
    # condition batched on axis 1, x unbatched, y a scalar
    conds = RNG.random((4, 3)) < 0.5
    got = mx.vmap(lambda c, v: mx.where(c, v, -1.0), in_axes=(1, None))(
        mx.array(conds), mx.array(A[0]))
    np.testing.assert_array_equal(npa(got), np.where(conds.T, A[0], -1).astype(np.float32))
    # only the condition is batched
    got = mx.vmap(lambda c: mx.where(c, mx.array(A[0]), mx.array(B[0])))(mx.array(conds.T))
    np.testing.assert_array_equal(npa(got), np.where(conds.T, A[0], B[0]).astype(np.float32))


def test_vmap_divmod_two_outputs_and_unary_axis_kept():
    a, b = np.abs(A) * 7, np.abs(B) + 0.5
    q, r = mx.vmap(mx.divmod, in_axes=(1, 0), out_axes=0)(mx.array(a.T.copy()), mx.array(b))
    np.testing.assert_allclose(npa(q), np.floor(a / b), rtol=1e-6)
    np.testing.assert_allclose(npa(r), np.remainder(a, b).astype(np.float32), rtol=1e-5,
                               atol=1e-5)
    got = mx.vmap(mx.sin, in_axes=1, out_axes=1)(mx.array(A))
    np.testing.assert_allclose(npa(got), np.sin(A), rtol=1e-6)


def test_nested_vmap():
    c = RNG.standard_normal((2, 3, 4))
    d = RNG.standard_normal((4, 2))

    def f(x, y):
        return mx.tanh(x) * y + mx.maximum(x, y)

    # outer over c's axis 0 and d's axis 1; inner over x's axis 0, y unbatched
    got = mx.vmap(mx.vmap(f, in_axes=(0, None)), in_axes=(0, 1))(mx.array(c), mx.array(d))
    want = np.stack([np.stack([npa(f(mx.array(c[i, j]), mx.array(d[:, i])))
                               for j in range(3)]) for i in range(2)])
    np.testing.assert_allclose(npa(got), want, rtol=1e-6)
    # both levels batched on trailing axes of the same input
    got = mx.vmap(mx.vmap(lambda x: mx.sigmoid(x) + 1, in_axes=1), in_axes=2)(mx.array(c))
    assert got.shape == (4, 3, 2)
    np.testing.assert_allclose(npa(got), np.transpose(_sig(c) + 1, (2, 1, 0)), rtol=1e-6)


def test_vmap_of_grad_and_grad_of_vmap():
    x = f64(A)
    per_example = mx.vmap(mx.grad(lambda v: mx.sum(mx.sin(v) * v)))(x)
    close(per_example, np.cos(A) * A + np.sin(A))
    g = mx.grad(lambda v: mx.sum(mx.vmap(lambda r: mx.exp(r) * r)(v)))(x)
    close(g, np.exp(A) * (A + 1))
    # per-example second derivative
    h = mx.vmap(second(mx.tanh))(x)
    close(h, -2 * np.tanh(A) * (1 - np.tanh(A) ** 2))
