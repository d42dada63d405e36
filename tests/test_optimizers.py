"""braze.optimizers: every optimizer against a hand-written NumPy reference, state layout,
the Optimizer API (init / update / apply_gradients / learning_rate / schedules), compiled
steps, clip_grad_norm and bad input. MLX is an optional extra oracle."""
import math
import zlib

import numpy as np
import pytest

import braze.core as mx
import braze.optimizers as optim
from braze.utils import tree_flatten, tree_map

# ---------------------------------------------------------------------------------------------
# NumPy references. Each is (init_state(p) -> dict, step(g, p, s, t) -> new p) per parameter,
# t = 1-based step. braze (like MLX) holds the learning rate as a float32 array, and the few
# terms MLX computes from the uint64 step counter (b ** t, t ** decay, rsqrt(t)) are float32
# too; `f32` reproduces that rounding so float64 runs can be compared tightly.
# ---------------------------------------------------------------------------------------------


def f32(x):
    return np.float64(np.float32(x))


def f32pow(b, t):
    return np.float64(np.power(np.float32(b), np.float32(t)))


def ref_sgd(learning_rate, momentum=0.0, weight_decay=0.0, dampening=0.0, nesterov=False):
    lr = f32(learning_rate)

    def init(p):
        return {"v": np.zeros_like(p)}

    def step(g, p, s, t):
        if weight_decay:
            g = g + weight_decay * p
        if momentum <= 0:
            return p - lr * g
        v = momentum * s["v"] + ((1 - dampening) * g if dampening > 0 else g)
        s["v"] = v
        upd = g + momentum * v if nesterov else v
        return p - lr * upd

    return init, step


def ref_adam(learning_rate, betas=(0.9, 0.999), eps=1e-8, bias_correction=False, weight_decay=0.0):
    lr = f32(learning_rate)
    b1, b2 = betas

    def init(p):
        return {"m": np.zeros_like(p), "v": np.zeros_like(p)}

    def step(g, p, s, t):
        if weight_decay:
            p = p * (1 - lr * weight_decay)
        m = b1 * s["m"] + (1 - b1) * g
        v = b2 * s["v"] + (1 - b2) * g * g
        s["m"], s["v"] = m, v
        if bias_correction:
            c1 = lr / np.float64(np.float32(1) - np.float32(f32pow(b1, t)))
            c2 = 1 / np.sqrt(np.float64(np.float32(1) - np.float32(f32pow(b2, t))))
            return p - c1 * m / (np.sqrt(v) * f32(c2) + eps)
        return p - lr * m / (np.sqrt(v) + eps)

    return init, step


def ref_adamax(learning_rate, betas=(0.9, 0.999), eps=1e-8):
    lr = f32(learning_rate)
    b1, b2 = betas

    def init(p):
        return {"m": np.zeros_like(p), "v": np.zeros_like(p)}

    def step(g, p, s, t):
        m = b1 * s["m"] + (1 - b1) * g
        v = np.maximum(b2 * s["v"], np.abs(g))
        s["m"], s["v"] = m, v
        return p - lr * m / (v + eps)

    return init, step


def ref_adagrad(learning_rate, eps=1e-8):
    lr = f32(learning_rate)

    def init(p):
        return {"v": np.zeros_like(p)}

    def step(g, p, s, t):
        s["v"] = s["v"] + g * g
        return p - lr * g / (np.sqrt(s["v"]) + eps)

    return init, step


def ref_rmsprop(learning_rate, alpha=0.99, eps=1e-8):
    lr = f32(learning_rate)

    def init(p):
        return {"v": np.zeros_like(p)}

    def step(g, p, s, t):
        s["v"] = alpha * s["v"] + (1 - alpha) * g * g
        return p - lr * g / (np.sqrt(s["v"]) + eps)

    return init, step


def ref_adadelta(learning_rate, rho=0.9, eps=1e-6):
    lr = f32(learning_rate)

    def init(p):
        return {"v": np.zeros_like(p), "u": np.zeros_like(p)}

    def step(g, p, s, t):
        v = rho * s["v"] + (1 - rho) * g * g
        d = np.sqrt(s["u"] + eps) / np.sqrt(v + eps) * g
        s["u"] = rho * s["u"] + (1 - rho) * d * d
        s["v"] = v
        return p - lr * d

    return init, step


def ref_lion(learning_rate, betas=(0.9, 0.99), weight_decay=0.0):
    lr = f32(learning_rate)
    b1, b2 = betas

    def init(p):
        return {"m": np.zeros_like(p)}

    def step(g, p, s, t):
        c = b1 * s["m"] + (1 - b1) * g
        s["m"] = b2 * s["m"] + (1 - b2) * g
        if weight_decay > 0:
            p = (1 - lr * weight_decay) * p
        return p - lr * np.sign(c)

    return init, step


def ref_adafactor(learning_rate=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8,
                  beta_1=None, weight_decay=0.0, scale_parameter=True, relative_step=True,
                  warmup_init=False):
    def rms(x):
        return np.sqrt(np.mean(x * x))

    def init(p):
        s = {}
        if p.ndim >= 2:
            s["exp_avg_sq_row"] = np.zeros(p.shape[:-1], p.dtype)
            s["exp_avg_sq_col"] = np.zeros(p.shape[:-2] + p.shape[-1:], p.dtype)
        else:
            s["exp_avg_sq"] = np.zeros_like(p)
        if beta_1 is not None:
            s["exp_avg"] = np.zeros_like(p)
        return s

    def step(g, p, s, t):
        if relative_step:
            min_step = f32(1e-6 * np.float32(t)) if warmup_init else 1e-2
            rel = f32(min(min_step, 1 / math.sqrt(t)))
        else:
            rel = f32(learning_rate)
        p_rms = rms(p)
        alpha = rel * (max(eps[1], p_rms) if scale_parameter else 1.0)
        beta2 = 1.0 - f32pow(t, decay_rate)
        upd = g * g + eps[0]
        if g.ndim >= 2:
            row = beta2 * s["exp_avg_sq_row"] + (1 - beta2) * upd.mean(-1)
            col = beta2 * s["exp_avg_sq_col"] + (1 - beta2) * upd.mean(-2)
            s["exp_avg_sq_row"], s["exp_avg_sq_col"] = row, col
            r = 1 / np.sqrt(row / row.mean(-1, keepdims=True))
            c = 1 / np.sqrt(col)
            upd = r[..., :, None] * c[..., None, :] * g
        else:
            s["exp_avg_sq"] = beta2 * s["exp_avg_sq"] + (1 - beta2) * upd
            upd = g / np.sqrt(s["exp_avg_sq"])
        upd = upd / max(1.0, rms(upd) / clip_threshold)
        upd = alpha * upd
        if beta_1 is not None:
            s["exp_avg"] = beta_1 * s["exp_avg"] + (1 - beta_1) * upd
            upd = s["exp_avg"]
        if weight_decay:
            p = p - weight_decay * alpha * p
        return p - upd

    return init, step


# (id, braze optimizer factory, reference factory, kwargs)
CASES = [
    ("sgd", optim.SGD, ref_sgd, dict(learning_rate=0.1)),
    ("sgd-wd", optim.SGD, ref_sgd, dict(learning_rate=0.1, weight_decay=0.05)),
    ("sgd-mom", optim.SGD, ref_sgd, dict(learning_rate=0.1, momentum=0.9)),
    ("sgd-mom-damp-wd", optim.SGD, ref_sgd,
     dict(learning_rate=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    ("sgd-nesterov", optim.SGD, ref_sgd, dict(learning_rate=0.1, momentum=0.9, nesterov=True)),
    ("adam", optim.Adam, ref_adam, dict(learning_rate=0.01)),
    ("adam-bc", optim.Adam, ref_adam,
     dict(learning_rate=0.01, betas=(0.8, 0.99), eps=1e-6, bias_correction=True)),
    ("adamw", optim.AdamW, ref_adam, dict(learning_rate=0.01, weight_decay=0.01)),
    ("adamw-bc", optim.AdamW, ref_adam,
     dict(learning_rate=0.02, weight_decay=0.1, bias_correction=True)),
    ("adamax", optim.Adamax, ref_adamax, dict(learning_rate=0.02)),
    ("adagrad", optim.Adagrad, ref_adagrad, dict(learning_rate=0.1)),
    ("rmsprop", optim.RMSprop, ref_rmsprop, dict(learning_rate=0.01, alpha=0.9)),
    ("adadelta", optim.AdaDelta, ref_adadelta, dict(learning_rate=1.0, rho=0.95)),
    ("lion", optim.Lion, ref_lion, dict(learning_rate=0.01)),
    ("lion-wd", optim.Lion, ref_lion, dict(learning_rate=0.01, weight_decay=0.1)),
    ("adafactor", optim.Adafactor, ref_adafactor, dict()),
    ("adafactor-warmup", optim.Adafactor, ref_adafactor, dict(warmup_init=True)),
    ("adafactor-lr-beta1-wd", optim.Adafactor, ref_adafactor,
     dict(learning_rate=0.05, relative_step=False, beta_1=0.9, weight_decay=0.1,
          scale_parameter=False, clip_threshold=0.5)),
]

SHAPES = {"w": (4, 3), "b": (3,), "blocks": [{"k": (2, 3, 2)}, {"k": (5,)}]}


def _tree(shapes, rng, dtype, scale=1.0):
    if isinstance(shapes, dict):
        return {k: _tree(v, rng, dtype, scale) for k, v in shapes.items()}
    if isinstance(shapes, list):
        return [_tree(v, rng, dtype, scale) for v in shapes]
    return (scale * rng.standard_normal(shapes)).astype(dtype)


def _to_mx(tree):
    if isinstance(tree, dict):
        return {k: _to_mx(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_to_mx(v) for v in tree]
    return mx.array(tree, dtype=mx.float64 if tree.dtype == np.float64 else mx.float32)


def _run_reference(ref, params, grads_seq):
    init, step = ref
    flat_p = [np.asarray(v, np.float64) for _, v in tree_flatten(params)]
    states = [init(p) for p in flat_p]
    for t, grads in enumerate(grads_seq, start=1):
        flat_g = [np.asarray(v, np.float64) for _, v in tree_flatten(grads)]
        flat_p = [step(g, p, s, t) for g, p, s in zip(flat_g, flat_p, states)]
    return flat_p, states


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy_reference(case, dtype):
    _, cls, ref, kwargs = case
    rng = np.random.default_rng(zlib.crc32(case[0].encode()))
    params = _tree(SHAPES, rng, dtype)
    grads_seq = [_tree(SHAPES, rng, dtype, 0.5) for _ in range(5)]

    opt = cls(**kwargs)
    p = _to_mx(params)
    for grads in grads_seq:
        p = opt.apply_gradients(_to_mx(grads), p)
        mx.eval(p, opt.state)

    want_p, want_states = _run_reference(ref(**kwargs), params, grads_seq)
    rtol, atol = (2e-5, 2e-6) if dtype == np.float32 else (1e-9, 1e-12)
    if dtype == np.float64 and kwargs.get("bias_correction"):
        rtol = 1e-6  # rsqrt(1 - b2**t) is a float32 term (from the uint64 step), as in MLX
    got = tree_flatten(p)
    assert [k for k, _ in got] == ["w", "b", "blocks.0.k", "blocks.1.k"]
    for (path, g), w in zip(got, want_p):
        assert g.dtype == (mx.float32 if dtype == np.float32 else mx.float64), path
        np.testing.assert_allclose(np.array(g), w, rtol=rtol, atol=atol, err_msg=path)
    # the moments too
    flat_state = [opt.state["w"], opt.state["b"], opt.state["blocks"][0]["k"],
                  opt.state["blocks"][1]["k"]]
    for got_s, want_s in zip(flat_state, want_states):
        assert sorted(got_s) == sorted(want_s)
        for k in want_s:
            np.testing.assert_allclose(np.array(got_s[k]), want_s[k], rtol=rtol, atol=atol,
                                       err_msg=k)
    assert opt.step.item() == 5


def test_schedule_drives_learning_rate_in_reference():
    """SGD with an exponential schedule: step t uses lr = sched(t - 1)."""
    sched = optim.exponential_decay(0.5, 0.7)
    opt = optim.SGD(learning_rate=sched)
    p = {"x": mx.array([1.0, -2.0])}
    want = np.array([1.0, -2.0])
    g = np.array([0.3, 0.4])
    for t in range(1, 5):
        p = opt.apply_gradients({"x": mx.array(g.astype(np.float32))}, p)
        want = want - f32(0.5 * 0.7 ** (t - 1)) * g
    np.testing.assert_allclose(np.array(p["x"]), want, rtol=1e-6)
    np.testing.assert_allclose(opt.learning_rate.item(), 0.5 * 0.7 ** 3, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# state layout and API
# ---------------------------------------------------------------------------------------------

def test_state_layout_after_init():
    params = {"weight": mx.zeros((3, 2)), "bias": mx.zeros((2,)),
              "layers": [{"w": mx.zeros((2, 2, 4))}]}
    opt = optim.Adam(learning_rate=1e-3)
    assert list(opt.state) == ["step", "learning_rate"]
    assert opt.state["step"].dtype == mx.uint64 and opt.state["step"].item() == 0
    assert isinstance(opt.learning_rate, mx.array)
    assert opt.learning_rate.dtype == mx.float32
    opt.init(params)
    assert list(opt.state) == ["step", "learning_rate", "weight", "bias", "layers"]
    assert sorted(opt.state["weight"]) == ["m", "v"]
    assert opt.state["weight"]["m"].shape == (3, 2)
    assert isinstance(opt.state["layers"], list)
    assert opt.state["layers"][0]["w"]["v"].shape == (2, 2, 4)

    sgd = optim.SGD(learning_rate=0.1)
    sgd.init(params)
    assert sorted(sgd.state["bias"]) == ["v"]

    af = optim.Adafactor(beta_1=0.9)
    af.init(params)
    assert "learning_rate" not in af.state  # relative step: no learning rate, as MLX
    assert af.state["weight"]["exp_avg_sq_row"].shape == (3,)
    assert af.state["weight"]["exp_avg_sq_col"].shape == (2,)
    assert af.state["layers"][0]["w"]["exp_avg_sq_row"].shape == (2, 2)
    assert af.state["layers"][0]["w"]["exp_avg_sq_col"].shape == (2, 4)
    assert sorted(af.state["bias"]) == ["exp_avg", "exp_avg_sq"]


def test_init_keeps_existing_state_and_adds_new_parameters():
    opt = optim.SGD(learning_rate=0.1, momentum=0.9)
    p = {"a": mx.array([1.0, 2.0])}
    p = opt.apply_gradients({"a": mx.array([1.0, 1.0])}, p)
    v_before = np.array(opt.state["a"]["v"])
    opt.init({"a": p["a"], "b": mx.zeros((3,))})
    np.testing.assert_array_equal(np.array(opt.state["a"]["v"]), v_before)
    assert opt.state["b"]["v"].shape == (3,)
    # a gradient for a parameter that joined later gets fresh state without init()
    out = opt.apply_gradients({"a": mx.ones((2,)), "c": mx.ones((2,))},
                              {"a": p["a"], "c": mx.zeros((2,))})
    assert sorted(out) == ["a", "c"]
    np.testing.assert_allclose(np.array(out["c"]), [-0.1, -0.1], rtol=1e-6)


def test_apply_gradients_with_parameter_superset():
    opt = optim.SGD(learning_rate=1.0)
    params = {"a": mx.array([1.0]), "frozen": mx.array([5.0]), "sub": {"x": mx.array([2.0])}}
    out = opt.apply_gradients({"sub": {"x": mx.array([0.5])}}, params)
    assert out == {"sub": {"x": out["sub"]["x"]}}
    assert out["sub"]["x"].item() == 1.5
    assert "frozen" not in opt.state  # state follows the gradients


class FakeModule(dict):
    """Stand-in for nn.Module: a dict of parameters with MLX's update()."""

    def __init__(self, **kw):
        super().__init__(kw)
        self.frozen = set()

    def parameters(self):
        return dict(self)

    def trainable_parameters(self):
        return {k: v for k, v in self.items() if k not in self.frozen}

    def update(self, parameters):
        for k, v in parameters.items():
            if k not in self:
                raise ValueError(f"unknown parameter {k}")
            self[k] = v
        return self


def test_update_model():
    model = FakeModule(w=mx.array([1.0, 2.0]), b=mx.array([0.5]))
    model.frozen.add("b")
    opt = optim.SGD(learning_rate=0.5)
    opt.update(model, {"w": mx.array([2.0, -2.0])})
    np.testing.assert_allclose(np.array(model["w"]), [0.0, 3.0])
    assert model["b"].item() == 0.5
    assert opt.step.item() == 1


def test_learning_rate_setter_and_state_roundtrip():
    opt = optim.Adam(learning_rate=0.1)
    opt.learning_rate = 0.01
    assert isinstance(opt.learning_rate, mx.array)
    assert abs(opt.learning_rate.item() - 0.01) < 1e-9
    p = {"x": mx.array([1.0, 2.0])}
    for _ in range(3):
        p = opt.apply_gradients({"x": mx.array([0.1, -0.2])}, p)
    saved = tree_map(lambda v: v, opt.state)  # a deep copy of the containers
    opt2 = optim.Adam(learning_rate=0.5)
    opt2.state = saved
    p1 = opt.apply_gradients({"x": mx.array([0.3, 0.3])}, p)
    p2 = opt2.apply_gradients({"x": mx.array([0.3, 0.3])}, p)
    np.testing.assert_array_equal(np.array(p1["x"]), np.array(p2["x"]))
    assert opt2.step.item() == 4


def test_negative_learning_rate_is_allowed_like_mlx():
    opt = optim.SGD(learning_rate=-0.1)
    out = opt.apply_gradients({"x": mx.array([1.0])}, {"x": mx.array([0.0])})
    assert abs(out["x"].item() - 0.1) < 1e-7


def test_empty_gradients_still_step():
    opt = optim.SGD(learning_rate=optim.step_decay(0.1, 0.9, 10))
    for _ in range(21):
        opt.update(FakeModule(), {})
    assert opt.step.item() == 21
    assert abs(opt.learning_rate.item() - 0.081) < 1e-6


def test_multi_optimizer():
    params = {"w": mx.array([1.0, 1.0]), "b": mx.array([1.0])}
    grads = {"w": mx.array([1.0, -1.0]), "b": mx.array([2.0])}
    opt = optim.MultiOptimizer([optim.SGD(learning_rate=0.1), optim.SGD(learning_rate=1.0)],
                               [lambda path, g: path.startswith("b")])
    out = opt.apply_gradients(grads, params)
    np.testing.assert_allclose(np.array(out["b"]), [0.8], rtol=1e-6)
    np.testing.assert_allclose(np.array(out["w"]), [0.0, 2.0], rtol=1e-6)
    assert len(opt.state["states"]) == 2
    assert "b" in opt.state["states"][0] and "w" in opt.state["states"][1]
    assert opt.learning_rate.item() == pytest.approx(0.1)
    opt.learning_rate = 0.5
    assert [o.learning_rate.item() for o in opt.optimizers] == [0.5, 0.5]
    with pytest.raises(ValueError, match="filters"):
        optim.MultiOptimizer([optim.SGD(0.1), optim.SGD(0.1)], [])
    with pytest.raises(ValueError, match="Invalid state"):
        opt.state = {"states": []}


def test_muon_runs_and_orthogonalises():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    g = rng.standard_normal((6, 4)).astype(np.float32)
    opt = optim.Muon(learning_rate=0.1, weight_decay=0.0, nesterov=False, momentum=0.0)
    out = opt.apply_gradients({"w": mx.array(g), "b": mx.array(g[0])},
                              {"w": mx.array(w), "b": mx.array(w[0])})
    upd = (w - np.array(out["w"])) / (0.1 * math.sqrt(6 / 4))
    sv = np.linalg.svd(upd, compute_uv=False)
    assert np.all((sv > 0.5) & (sv < 1.5))  # Newton-Schulz: singular values pushed near 1
    np.testing.assert_allclose(np.array(out["b"]), w[0] - 0.1 * g[0], rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# compiled steps
# ---------------------------------------------------------------------------------------------

COMPILE_CASES = [
    ("sgd-nesterov", lambda: optim.SGD(learning_rate=0.1, momentum=0.9, nesterov=True,
                                       weight_decay=1e-3)),
    ("adam-bc-cosine", lambda: optim.Adam(learning_rate=optim.cosine_decay(0.05, 3, 0.01),
                                          bias_correction=True)),
    ("adamw-join", lambda: optim.AdamW(learning_rate=optim.join_schedules(
        [optim.linear_schedule(0.0, 0.05, 2), optim.exponential_decay(0.05, 0.9)], [2]))),
    ("adafactor", lambda: optim.Adafactor()),
    ("lion", lambda: optim.Lion(learning_rate=0.01, weight_decay=0.1)),
]


@pytest.mark.parametrize("make_opt", [c[1] for c in COMPILE_CASES],
                         ids=[c[0] for c in COMPILE_CASES])
def test_compiled_step_equals_uncompiled(make_opt):
    rng = np.random.default_rng(3)
    X = mx.array(rng.standard_normal((8, 4)).astype(np.float32))
    Y = mx.array(rng.standard_normal((8, 2)).astype(np.float32))
    w0 = rng.standard_normal((4, 2)).astype(np.float32)

    def loss_fn(p, x, y):
        return mx.mean(mx.square(x @ p["w"] + p["b"] - y))

    def run(compiled):
        params = {"w": mx.array(w0), "b": mx.zeros((2,))}
        opt = make_opt()
        opt.init(params)
        state = [params, opt.state]

        def step(x, y):
            loss, grads = mx.value_and_grad(loss_fn)(params, x, y)
            params.update(opt.apply_gradients(grads, params))
            return loss

        fn = mx.compile(step, inputs=state, outputs=state) if compiled else step
        losses = []
        for _ in range(5):
            loss = fn(X, Y)
            mx.eval(loss, state)
            losses.append(loss.item())
        lr = opt.state.get("learning_rate")
        return (losses, np.array(params["w"]), np.array(params["b"]), opt.step.item(),
                None if lr is None else lr.item())

    eager, comp = run(False), run(True)
    np.testing.assert_allclose(comp[0], eager[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(comp[1], eager[1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(comp[2], eager[2], rtol=1e-6, atol=1e-7)
    assert comp[3] == eager[3] == 5
    assert comp[4] == eager[4]
    assert eager[0][-1] < eager[0][0]


def test_compiled_step_without_init_first():
    """State created by the first (traced) call is captured; results match eager."""
    def run(compiled):
        params = {"w": mx.ones((4, 2)), "b": mx.zeros((2,))}
        opt = optim.Adam(learning_rate=0.1)
        state = [params, opt.state]

        def step(x, y):
            loss, g = mx.value_and_grad(
                lambda p: mx.mean(mx.square(x @ p["w"] + p["b"] - y)))(params)
            params.update(opt.apply_gradients(g, params))
            return loss

        fn = mx.compile(step, inputs=state, outputs=state) if compiled else step
        out = []
        for _ in range(4):
            loss = fn(mx.ones((8, 4)), mx.zeros((8, 2)))
            mx.eval(loss, state)
            out.append(loss.item())
        return out, np.array(opt.state["w"]["v"])

    (l1, v1), (l2, v2) = run(False), run(True)
    np.testing.assert_allclose(l2, l1, rtol=1e-6)
    np.testing.assert_allclose(v2, v1, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# clip_grad_norm
# ---------------------------------------------------------------------------------------------

def test_clip_grad_norm():
    grads = {"a": mx.array([3.0, 0.0]), "b": [mx.array([[4.0]])]}
    clipped, norm = optim.clip_grad_norm(grads, max_norm=1.0)
    assert isinstance(norm, mx.array)
    assert norm.item() == pytest.approx(5.0)
    scale = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(np.array(clipped["a"]), [3 * scale, 0.0], rtol=1e-6)
    np.testing.assert_allclose(np.array(clipped["b"][0]), [[4 * scale]], rtol=1e-6)
    total = math.sqrt(sum(float(np.sum(np.array(v) ** 2)) for _, v in tree_flatten(clipped)))
    assert total == pytest.approx(1.0, rel=1e-5)

    same, norm2 = optim.clip_grad_norm(grads, max_norm=10.0)
    np.testing.assert_array_equal(np.array(same["a"]), [3.0, 0.0])
    assert norm2.item() == pytest.approx(5.0)


def test_clip_grad_norm_float16_and_dtypes():
    big = np.full((300,), 100.0, np.float16)  # squares overflow float16 but not float32
    clipped, norm = optim.clip_grad_norm({"g": mx.array(big)}, max_norm=1.0)
    assert norm.item() == pytest.approx(100.0 * math.sqrt(300), rel=1e-3)
    assert clipped["g"].dtype == mx.float16
    assert np.isfinite(np.array(clipped["g"]).astype(np.float32)).all()
    c64, _ = optim.clip_grad_norm({"g": mx.ones((4,), dtype=mx.float64)}, 1.0)
    assert c64["g"].dtype == mx.float64


def test_clip_grad_norm_bad_input():
    with pytest.raises(ValueError, match="max_norm"):
        optim.clip_grad_norm({"a": mx.ones((2,))}, -1.0)
    with pytest.raises(TypeError, match="max_norm"):
        optim.clip_grad_norm({"a": mx.ones((2,))}, "1")
    with pytest.raises(TypeError, match="'a.0.0'"):
        optim.clip_grad_norm({"a": [[1.0, 2.0]]}, 1.0)


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------

def test_gradient_without_parameter_names_the_path():
    opt = optim.SGD(learning_rate=0.1)
    with pytest.raises(ValueError, match=r"'layer\.bias' has no matching parameter"):
        opt.apply_gradients({"layer": {"bias": mx.zeros((2,))}},
                            {"layer": {"weight": mx.zeros((2,))}})


def test_gradient_shape_mismatch():
    opt = optim.Adam(learning_rate=0.1)
    with pytest.raises(ValueError, match=r"'w' has shape \(3,\) but the parameter has shape "
                                         r"\(2, 3\)"):
        opt.apply_gradients({"w": mx.zeros((3,))}, {"w": mx.zeros((2, 3))})


def test_gradient_tree_structure_mismatch():
    opt = optim.SGD(learning_rate=0.1)
    with pytest.raises(ValueError, match="list of length 2"):
        opt.apply_gradients({"l": [mx.zeros(1), mx.zeros(1)]}, {"l": [mx.zeros(1)]})
    with pytest.raises(ValueError, match="dict at 'l'"):
        opt.apply_gradients({"l": {"a": mx.zeros(1)}}, {"l": mx.zeros(1)})
    with pytest.raises(TypeError, match="gradient 'x' must be an array"):
        opt.apply_gradients({"x": None}, {"x": mx.zeros(1)})
    with pytest.raises(TypeError, match="gradients must be a dict"):
        opt.apply_gradients([mx.zeros(1)], [mx.zeros(1)])


def test_bad_gradients_leave_optimizer_unchanged():
    opt = optim.Adam(learning_rate=optim.exponential_decay(0.1, 0.5))
    params = {"a": mx.ones((2,)), "b": mx.ones((3,))}
    opt.apply_gradients({"a": mx.ones((2,)), "b": mx.ones((3,))}, params)
    before = {k: np.array(v) for k, v in tree_flatten(opt.state)}
    with pytest.raises(ValueError, match="'b' has shape"):
        opt.apply_gradients({"a": mx.ones((2,)), "b": mx.ones((4,))}, params)
    after = {k: np.array(v) for k, v in tree_flatten(opt.state)}
    assert before.keys() == after.keys()
    for k in before:
        np.testing.assert_array_equal(before[k], after[k], err_msg=k)
    fresh = optim.SGD(0.1, momentum=0.9)
    with pytest.raises(TypeError, match="gradient 'x' must be an array"):
        fresh.apply_gradients({"x": [1.0, 2.0][0]}, {"x": mx.zeros(1)})
    assert list(fresh.state) == ["step", "learning_rate"] and fresh.step.item() == 0


@pytest.mark.parametrize("make, match", [
    (lambda: optim.SGD(learning_rate="0.1"), "learning_rate must be a float"),
    (lambda: optim.SGD(learning_rate=mx.ones((3,))), "must be a scalar"),
    (lambda: optim.SGD(0.1, nesterov=True), "Nesterov"),
    (lambda: optim.SGD(0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov"),
    (lambda: optim.Adam(0.1, betas=(1.0, 0.9)), "beta1"),
    (lambda: optim.Adam(0.1, betas=(0.9, -0.1)), "beta2"),
    (lambda: optim.Adam(0.1, eps=-1.0), "epsilon"),
    (lambda: optim.AdamW(0.1, betas=(0.9,)), "two floats"),
    (lambda: optim.RMSprop(0.1, alpha=-0.5), "alpha"),
    (lambda: optim.RMSprop(0.1, eps=0.0), "epsilon"),
    (lambda: optim.Adagrad(0.1, eps=0.0), "epsilon"),
    (lambda: optim.AdaDelta(0.1, rho=-1.0), "rho"),
    (lambda: optim.Lion(0.1, betas=(0.9, 1.5)), "beta2"),
    (lambda: optim.Adafactor(relative_step=False), "learning_rate"),
])
def test_bad_hyperparameters(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_learning_rate_setter_rejects_non_numbers():
    opt = optim.SGD(0.1)
    with pytest.raises(TypeError, match="learning_rate"):
        opt.learning_rate = "fast"
    with pytest.raises(TypeError, match="state must be a dict"):
        opt.state = [1]


# ---------------------------------------------------------------------------------------------
# optional: MLX as an extra oracle
# ---------------------------------------------------------------------------------------------

MLX_CASES = [
    ("SGD", dict(learning_rate=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)),
    ("SGD", dict(learning_rate=0.1, momentum=0.9, dampening=0.2)),
    ("Adam", dict(learning_rate=0.01, bias_correction=True)),
    ("AdamW", dict(learning_rate=0.01)),
    ("Adagrad", dict(learning_rate=0.1)),
    ("RMSprop", dict(learning_rate=0.01)),
    ("Adamax", dict(learning_rate=0.01)),
    ("Lion", dict(learning_rate=0.01, weight_decay=0.1)),
    ("AdaDelta", dict(learning_rate=1.0)),
    ("Adafactor", dict()),
    ("Adafactor", dict(learning_rate=0.1, relative_step=False, beta_1=0.9, weight_decay=0.1)),
    ("Muon", dict(learning_rate=0.02)),
]


@pytest.mark.parametrize("name, kwargs", MLX_CASES, ids=[c[0] for c in MLX_CASES])
def test_matches_mlx(name, kwargs):
    mlx_core = pytest.importorskip("mlx.core")
    mlx_optim = pytest.importorskip("mlx.optimizers")
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    gs = [(rng.standard_normal((4, 3)).astype(np.float32),
           rng.standard_normal(3).astype(np.float32)) for _ in range(4)]
    results = []
    for lib, mod in ((mx, optim), (mlx_core, mlx_optim)):
        opt = getattr(mod, name)(**kwargs)
        p = {"w": lib.array(w), "b": lib.array(b)}
        for gw, gb in gs:
            p = opt.apply_gradients({"w": lib.array(gw), "b": lib.array(gb)}, p)
        results.append((np.array(p["w"]), np.array(p["b"]), sorted(opt.state)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)
    assert results[0][2] == results[1][2]


# ---------------------------------------------------------------------------------------------
# modules holding non-array attributes (names, configs, flags), as many model definitions do
# ---------------------------------------------------------------------------------------------

def _module_with_non_arrays(mx_, nn_):
    class Tagged(nn_.Module):
        def __init__(self):
            super().__init__()
            self.names = ["in", "out"]
            self.cfg = {"kind": "mlp", "sizes": [3, 2], "extra": None}
            self.flags = [True, 1.5]
            self.scale = 2.0
            self.lin = nn_.Linear(3, 2)
            self.blocks = [nn_.Linear(2, 2), "not a module"]

        def __call__(self, x):
            return self.blocks[0](self.lin(x)) * self.scale

    return Tagged()


def _train_tagged(mx_, nn_, optim_, make_opt, compiled):
    rng = np.random.default_rng(3)
    m = _module_with_non_arrays(mx_, nn_)
    m.update(tree_map(lambda p: mx_.array(rng.standard_normal(p.shape).astype(np.float32)),
                      m.parameters()))
    opt = make_opt(optim_)
    x = mx_.array(rng.standard_normal((5, 3)).astype(np.float32))
    lg = nn_.value_and_grad(m, lambda m, x: (m(x) ** 2).sum())
    state = [m.state, opt.state]

    def step(x):
        loss, g = lg(m, x)
        opt.update(m, g)
        return loss

    if compiled:
        step = mx_.compile(step, inputs=state, outputs=state)
    losses = []
    for _ in range(3):
        loss = step(x)
        mx_.eval(loss, state)
        losses.append(loss.item())
    assert m.names == ["in", "out"] and m.cfg == {"kind": "mlp", "sizes": [3, 2], "extra": None}
    assert m.flags == [True, 1.5] and m.scale == 2.0 and m.blocks[1] == "not a module"
    return losses, {k: np.array(v) for k, v in tree_flatten(m.parameters())}


_TAGGED_OPTS = [lambda o: o.SGD(learning_rate=0.002, momentum=0.5),
                lambda o: o.Adam(learning_rate=0.05)]


@pytest.mark.parametrize("make_opt", _TAGGED_OPTS, ids=["SGD", "Adam"])
def test_update_of_a_module_with_non_array_attributes(make_opt):
    import braze.nn as nn
    eager = _train_tagged(mx, nn, optim, make_opt, False)
    compiled = _train_tagged(mx, nn, optim, make_opt, True)
    np.testing.assert_allclose(eager[0], compiled[0], rtol=1e-5)
    assert eager[0][2] < eager[0][0]
    mlx_core = pytest.importorskip("mlx.core")
    import mlx.nn as mnn
    import mlx.optimizers as moptim
    want = _train_tagged(mlx_core, mnn, moptim, make_opt, False)
    np.testing.assert_allclose(eager[0], want[0], rtol=1e-5)
    assert eager[1].keys() == want[1].keys()
    for k in want[1]:
        np.testing.assert_allclose(eager[1][k], want[1][k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_gradient_subtrees_without_arrays_need_no_parameter():
    opt = optim.SGD(learning_rate=0.5)
    params = {"w": mx.ones((2,)), "name": "layer", "sizes": [3, 4]}
    out = opt.apply_gradients({"w": mx.ones((2,)), "name": {}, "sizes": [{}, {}]}, params)
    assert out["name"] == {} and out["sizes"] == [{}, {}]
    np.testing.assert_array_equal(np.array(out["w"]), [0.5, 0.5])
    with pytest.raises(ValueError, match="dict at 'l'"):  # a gradient array still needs one
        opt.apply_gradients({"l": {"a": mx.zeros(1)}}, {"l": "text"})
