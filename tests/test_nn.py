"""nn.Module's API, weight files (npz, safetensors), nn.value_and_grad, nn.init and
nn.utils."""
import json
import struct
from functools import partial

import ml_dtypes
import numpy as np
import pytest

import braze.core as mx
import braze.nn as nn
from braze._src import io as nnio
from braze.utils import tree_flatten, tree_map


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(3, 4), nn.BatchNorm(4), {"head": nn.Linear(4, 2)}]
        self.act = nn.Sequential(nn.ReLU(), nn.Dropout(0.5))
        self.width = 4  # not an array: a plain attribute
        self._hidden = mx.zeros((2,))  # underscore: not a parameter

    def __call__(self, x):
        x = self.layers[1](self.layers[0](x))
        return self.layers[2]["head"](self.act(x))


def keys(tree):
    return [k for k, _ in tree_flatten(tree)]


def snapshot(model):
    return {k: np.array(v) for k, v in tree_flatten(model.parameters())}


def assert_same(model, snap):
    now = snapshot(model)
    assert now.keys() == snap.keys()
    for k in snap:
        np.testing.assert_array_equal(now[k], snap[k], err_msg=k)


# -- structure --------------------------------------------------------------------------------
def test_parameters_and_attribute_access():
    m = Net()
    assert keys(m.parameters()) == [
        "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
        "layers.1.running_mean", "layers.1.running_var", "layers.2.head.weight",
        "layers.2.head.bias"]
    assert m.layers[0].weight.shape == (4, 3)
    assert m.layers[2]["head"].bias.shape == (2,)
    assert m.width == 4 and "width" not in m
    assert "_hidden" in m and "_hidden" not in m.parameters()
    assert m.state is m
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        m.nothing
    # assigning an array turns a plain attribute into an entry and back
    m.width = mx.ones((1,))
    assert "width" in m
    m.width = 5
    assert "width" not in m and m.width == 5
    del m.act
    assert "act" not in m


def test_trainable_parameters_and_freeze():
    m = Net()
    # BatchNorm's running statistics are frozen from the start
    assert keys(m.trainable_parameters()) == [
        "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
        "layers.2.head.weight", "layers.2.head.bias"]
    m.freeze(keys="bias")
    assert keys(m.trainable_parameters()) == ["layers.0.weight", "layers.1.weight",
                                              "layers.2.head.weight"]
    m.unfreeze()
    assert "layers.1.running_mean" not in keys(m.trainable_parameters())
    m.freeze()
    assert keys(m.trainable_parameters()) == []
    m.unfreeze(keys=["weight"])
    assert keys(m.trainable_parameters()) == ["layers.0.weight", "layers.1.weight",
                                              "layers.2.head.weight"]
    m.unfreeze()
    m.layers[0].freeze(recurse=False)
    assert "layers.0.weight" not in keys(m.trainable_parameters())
    with pytest.raises(KeyError, match="nope"):
        m.freeze(keys="nope", strict=True)
    with pytest.raises(KeyError, match="nope"):
        m.layers[0].unfreeze(keys="nope", strict=True, recurse=False)


def test_children_leaf_modules_and_named_modules():
    m = Net()
    children = tree_flatten(m.children(), is_leaf=nn.Module.is_module)
    assert [k for k, _ in children] == ["layers.0", "layers.1", "layers.2.head", "act"]
    assert all(isinstance(v, nn.Module) for _, v in children)
    leaves = [k for k, _ in tree_flatten(m.leaf_modules(), is_leaf=nn.Module.is_module)]
    # as in MLX: a Sequential's children flatten to nothing (modules are dicts), so it is a leaf
    assert leaves == ["layers.0", "layers.1", "layers.2.head", "act"]
    names = [k for k, _ in m.named_modules()]
    assert names == ["", "act", "act.layers.1", "act.layers.0", "layers.2.head", "layers.1",
                     "layers.0"]
    assert m.modules()[0] is m and len(m.modules()) == 7
    seen = []
    m.apply_to_modules(lambda k, mod: seen.append(type(mod).__name__))
    assert sorted(seen) == sorted(["Net", "Sequential", "Dropout", "ReLU", "Linear",
                                   "BatchNorm", "Linear"])


def test_train_eval():
    m = Net()
    assert m.training and m.act.layers[1].training
    m.eval()
    assert not m.training and not m.act.layers[1].training and not m.layers[1].training
    m.train()
    assert m.layers[1].training


def test_update_partial_and_strict_errors_leave_model_unchanged():
    m = Net()
    new = mx.ones((4, 3))
    m.update({"layers": [{"weight": new}]})
    assert m.layers[0].weight is new
    snap = snapshot(m)
    bad = [
        ({"layers": [{"weight": mx.zeros((4, 3))}, {}, {"head": {"wieght": mx.zeros(2)}}]},
         "layers.2.head.wieght"),
        ({"nope": mx.zeros(1)}, "nope"),
        ({"layers": [{"weight": 3.0}]}, "float"),
        ({"layers": [{}, {}, {}, {"weight": mx.zeros(1)}]}, "out of bounds"),
    ]
    for tree, needle in bad:
        with pytest.raises(ValueError, match=needle):
            m.update(tree)
        assert_same(m, snap)
    # strict=False ignores unknown keys
    m.update({"nope": mx.zeros(1), "layers": [{"bias": mx.zeros(4)}]}, strict=False)
    assert "nope" not in m
    np.testing.assert_array_equal(np.array(m.layers[0].bias), np.zeros(4))


def test_update_modules_apply_and_set_dtype():
    m = Net()
    lin = nn.Linear(4, 2)
    m.update_modules({"layers": [{}, {}, {"head": lin}]})
    assert m.layers[2]["head"] is lin
    with pytest.raises(ValueError, match="nope"):
        m.update_modules({"nope": nn.ReLU()})
    assert m.layers[2]["head"] is lin
    m.apply(lambda p: p * 0)
    assert all(float(mx.sum(mx.abs(v)).item()) == 0 for _, v in tree_flatten(m.parameters()))
    m.set_dtype(mx.float16)
    assert all(v.dtype == mx.float16 for _, v in tree_flatten(m.parameters()))
    m.apply(lambda p: p.astype(mx.float32), filter_fn=lambda mod, k, v: k != "bias"
            and nn.Module.valid_parameter_filter(mod, k, v))
    assert m.layers[0].weight.dtype == mx.float32 and m.layers[0].bias.dtype == mx.float16


def test_repr():
    r = repr(nn.Sequential(nn.Linear(2, 3), nn.ReLU()))
    assert "Linear(input_dims=2, output_dims=3, bias=True)" in r and "(layers.1): ReLU()" in r


def test_module_is_a_pytree():
    m = nn.Linear(3, 2)
    doubled = tree_map(lambda p: p * 2, m.parameters())
    np.testing.assert_allclose(np.array(doubled["weight"]), 2 * np.array(m.weight))


# -- weights on disk ------------------------------------------------------------------------------
@pytest.mark.parametrize("ext", ["npz", "safetensors"])
def test_save_load_round_trip(tmp_path, ext):
    a, b = Net(), Net()
    a.layers[1].running_mean = mx.arange(4).astype(mx.float32)
    path = str(tmp_path / f"w.{ext}")
    a.save_weights(path)
    b.load_weights(path)
    assert_same(b, snapshot(a))


@pytest.mark.parametrize("ext", ["npz", "safetensors"])
def test_round_trip_bfloat16_and_other_dtypes(tmp_path, ext):
    arrays = {
        "bf": mx.array(np.array([[1.5, -2.25], [3.0, 1e-3]]), dtype=mx.bfloat16),
        "f16": mx.array([1.0, 2.5], dtype=mx.float16),
        "f64": mx.array([1.0, 1e-300], dtype=mx.float64),
        "i8": mx.array([-3, 4], dtype=mx.int8),
        "u32": mx.array([7], dtype=mx.uint32),
        "b": mx.array([True, False]),
        "scalar": mx.array(3.0),
    }
    path = tmp_path / f"t.{ext}"
    if ext == "npz":
        nnio.savez(path, **arrays)
    else:
        nnio.save_safetensors(path, arrays, metadata={"format": "mlx"})
    back = nnio.load(str(path))
    assert back.keys() == arrays.keys()
    for k, v in arrays.items():
        assert back[k].dtype == v.dtype, k
        assert back[k].shape == v.shape, k
        np.testing.assert_array_equal(np.asarray(back[k]), np.asarray(v), err_msg=k)
    if ext == "safetensors":
        _, meta = nnio.load(str(path), return_metadata=True)
        assert meta == {"format": "mlx"}


def test_safetensors_layout_follows_the_published_format(tmp_path):
    path = tmp_path / "x.safetensors"
    nnio.save_safetensors(path, {"b": mx.array([1.0, 2.0]),
                                 "a": mx.array([[1, 2]], dtype=mx.bfloat16)})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0
    header = json.loads(raw[8:8 + n])
    assert header["a"] == {"dtype": "BF16", "shape": [1, 2], "data_offsets": [0, 4]}
    assert header["b"] == {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}
    data = raw[8 + n:]
    assert len(data) == 12
    np.testing.assert_array_equal(np.frombuffer(data[4:12], "<f4"), [1.0, 2.0])
    np.testing.assert_array_equal(
        np.frombuffer(data[0:4], "<u2").view(ml_dtypes.bfloat16).astype(np.float32), [1, 2])


def test_safetensors_written_by_hand_is_read(tmp_path):
    """A file assembled here byte by byte (unsorted entries, padded header)."""
    x = np.arange(6, dtype="<i8").reshape(2, 3)
    y = np.array([0.5, -1.0], dtype="<f2")
    header = {"y": {"dtype": "F16", "shape": [2], "data_offsets": [48, 52]},
              "x": {"dtype": "I64", "shape": [2, 3], "data_offsets": [0, 48]},
              "__metadata__": {"k": "v"}}
    text = json.dumps(header).encode() + b"   "
    path = tmp_path / "hand.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + x.tobytes() + y.tobytes())
    out = nnio.load_safetensors(path)
    np.testing.assert_array_equal(np.asarray(out["x"]), x)
    assert out["x"].dtype == mx.int64
    np.testing.assert_array_equal(np.asarray(out["y"]), y)


@pytest.mark.parametrize("corrupt,needle", [
    (lambda raw, n: raw[:5], "too short"),
    (lambda raw, n: struct.pack("<Q", 10**9) + raw[8:], "exceeds"),
    (lambda raw, n: raw[:8] + b"x" + raw[9:], "invalid JSON"),
    (lambda raw, n: raw[:-1], "offsets"),
])
def test_safetensors_corrupt_files_raise_clear_errors(tmp_path, corrupt, needle):
    path = tmp_path / "c.safetensors"
    nnio.save_safetensors(path, {"a": mx.ones((3,))})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    path.write_bytes(corrupt(raw, n))
    with pytest.raises(ValueError, match=needle):
        nnio.load_safetensors(path)


def test_load_weights_errors_leave_model_unchanged(tmp_path):
    m = Net()
    snap = snapshot(m)
    good = tree_flatten(Net().parameters())
    wrong_shape = [(k, mx.zeros((5, 5)) if k == "layers.0.weight" else v) for k, v in good]
    with pytest.raises(ValueError, match=r"Expected shape \(4, 3\) but received shape "
                                         r"\(5, 5\) for parameter layers.0.weight"):
        m.load_weights(wrong_shape)
    assert_same(m, snap)
    with pytest.raises(ValueError, match="not in model: \nextra"):
        m.load_weights(good + [("extra", mx.zeros(1))])
    assert_same(m, snap)
    with pytest.raises(ValueError, match="Missing 1 parameters: \nlayers.0.bias"):
        m.load_weights([kv for kv in good if kv[0] != "layers.0.bias"])
    assert_same(m, snap)
    path = str(tmp_path / "wrong.safetensors")
    nnio.save_safetensors(path, dict(wrong_shape))
    with pytest.raises(ValueError, match="layers.0.weight"):
        m.load_weights(path)
    assert_same(m, snap)
    # strict=False loads what fits by name (shapes unchecked, as in MLX)
    m.load_weights([("layers.0.bias", mx.ones((4,))), ("extra", mx.ones(1))], strict=False)
    np.testing.assert_array_equal(np.array(m.layers[0].bias), np.ones(4))
    with pytest.raises(ValueError, match="Unsupported file extension"):
        m.save_weights(str(tmp_path / "w.pt"))
    with pytest.raises(FileNotFoundError):
        m.load_weights(str(tmp_path / "missing.npz"))


def test_weights_interoperate_with_mlx(tmp_path):
    mlx = pytest.importorskip("mlx.core")
    a = {"w": mx.array(np.arange(6.0).reshape(2, 3), dtype=mx.bfloat16),
         "i": mx.array([1, 2], dtype=mx.int32)}
    p1 = str(tmp_path / "ours.safetensors")
    nnio.save_safetensors(p1, a)
    theirs = mlx.load(p1)
    assert theirs["w"].dtype == mlx.bfloat16
    np.testing.assert_array_equal(np.array(theirs["w"].astype(mlx.float32)),
                                  np.arange(6.0).reshape(2, 3))
    p2 = str(tmp_path / "theirs.npz")
    mlx.savez(p2, w=theirs["w"], i=theirs["i"])
    back = nnio.load(p2)
    assert back["w"].dtype == mx.bfloat16
    np.testing.assert_array_equal(np.asarray(back["i"]), [1, 2])


# -- value_and_grad ------------------------------------------------------------------------------
def test_value_and_grad_matches_finite_differences():
    mx.random.seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    model.set_dtype(mx.float64)
    x = mx.array(np.random.default_rng(0).standard_normal((5, 3)), dtype=mx.float64)
    y = mx.array(np.random.default_rng(1).standard_normal((5, 2)), dtype=mx.float64)

    def loss(x, y):
        return nn.losses.mse_loss(model(x), y)

    before = model.layers[0].weight
    value, grads = nn.value_and_grad(model, loss)(x, y)
    assert model.layers[0].weight is before  # the model's own arrays are put back
    assert keys(grads) == keys(model.trainable_parameters())
    np.testing.assert_allclose(value.item(), loss(x, y).item())
    w = np.array(model.layers[0].weight)
    g = np.array(grads["layers"][0]["weight"])
    eps = 1e-6
    for idx in [(0, 0), (2, 1), (3, 2)]:
        wp, wm = w.copy(), w.copy()
        wp[idx] += eps
        wm[idx] -= eps
        model.layers[0].weight = mx.array(wp, dtype=mx.float64)
        fp = loss(x, y).item()
        model.layers[0].weight = mx.array(wm, dtype=mx.float64)
        fm = loss(x, y).item()
        np.testing.assert_allclose(g[idx], (fp - fm) / (2 * eps), rtol=1e-6, atol=1e-9)


def test_value_and_grad_skips_frozen_parameters():
    model = nn.Linear(3, 2)
    model.freeze(keys="bias")
    _, grads = nn.value_and_grad(model, lambda x: model(x).sum())(mx.ones((1, 3)))
    assert list(grads) == ["weight"]
    np.testing.assert_allclose(np.array(grads["weight"]), np.ones((2, 3)))


def test_checkpoint_gives_the_same_gradients():
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 1))
    x = mx.array(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    plain = nn.value_and_grad(model, lambda x: model(x).sum())(x)[1]
    ck = nn.checkpoint(model)
    ckd = nn.value_and_grad(model, lambda x: ck(x).sum())(x)[1]
    for (k, a), (_, b) in zip(tree_flatten(plain), tree_flatten(ckd)):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, err_msg=k)


def test_compiled_training_step_equals_uncompiled():
    """Forward, backward and an SGD update compiled with the model and random state captured
    (Dropout draws from the random state) match the uncompiled step, step for step."""
    def make():
        mx.random.seed(3)
        return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.25), nn.Linear(16, 3))

    rng = np.random.default_rng(0)
    x = mx.array(rng.standard_normal((8, 6)).astype(np.float32))
    y = mx.array(rng.integers(0, 3, 8).astype(np.int32))

    def stepper(model):
        vg = nn.value_and_grad(model, lambda x, y: nn.losses.cross_entropy(
            model(x), y, reduction="mean"))

        def step(x, y):
            loss, g = vg(x, y)
            model.update(tree_map(lambda p, d: p - 0.5 * d, model.trainable_parameters(), g))
            return loss
        return step

    m1 = make()
    plain = stepper(m1)
    losses1 = []
    mx.random.seed(7)
    for _ in range(4):
        losses1.append(plain(x, y).item())
    p1 = snapshot(m1)

    m2 = make()
    state = [m2.state, mx.random.state]
    compiled = partial(mx.compile, inputs=state, outputs=state)(stepper(m2))
    losses2 = []
    mx.random.seed(7)
    for _ in range(4):
        losses2.append(compiled(x, y).item())
    np.testing.assert_allclose(losses2, losses1, rtol=1e-5)
    for k, v in snapshot(m2).items():
        np.testing.assert_allclose(v, p1[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_average_gradients_single_process_is_identity():
    g = {"w": mx.ones((2,)), "b": [mx.zeros((1,))]}
    out = nn.average_gradients(g)
    np.testing.assert_array_equal(np.array(out["w"]), np.ones(2))


# -- init ------------------------------------------------------------------------------------------
def test_init_constant_identity_and_shapes():
    a = mx.zeros((3, 3))
    np.testing.assert_array_equal(np.array(nn.init.constant(0.5)(a)), np.full((3, 3), 0.5))
    np.testing.assert_array_equal(np.array(nn.init.identity()(a)), np.eye(3))
    with pytest.raises(ValueError, match="square"):
        nn.init.identity()(mx.zeros((2, 3)))
    with pytest.raises(ValueError, match="at least 2 dimensional"):
        nn.init.glorot_uniform()(mx.zeros((3,)))
    with pytest.raises(ValueError, match="Invalid mode"):
        nn.init.he_normal()(a, mode="fan_middle")
    assert nn.init.normal(dtype=mx.float16)(a).dtype == mx.float16


@pytest.mark.parametrize("name,kw,check", [
    ("uniform", dict(low=-2.0, high=1.0), lambda s, sh: (s.min() >= -2 and s.max() < 1
                                                        and abs(s.mean() + 0.5) < 0.05)),
    ("normal", dict(mean=1.0, std=2.0), lambda s, sh: abs(s.mean() - 1) < 0.1
     and abs(s.std() - 2) < 0.1),
    ("glorot_uniform", {}, lambda s, sh: abs(s).max() <= np.sqrt(6 / (sh[0] + sh[1]))
     and abs(s.std() - np.sqrt(2 / (sh[0] + sh[1]))) < 0.01),
    ("glorot_normal", {}, lambda s, sh: abs(s.std() - np.sqrt(2 / (sh[0] + sh[1]))) < 0.01),
    ("he_uniform", {}, lambda s, sh: abs(s).max() <= np.sqrt(3 / sh[1])
     and abs(s.std() - np.sqrt(1 / sh[1])) < 0.01),
    ("he_normal", {}, lambda s, sh: abs(s.std() - np.sqrt(1 / sh[1])) < 0.01),
])
def test_init_distributions(name, kw, check):
    shape = (200, 50)
    s = np.array(getattr(nn.init, name)(**kw)(mx.zeros(shape)))
    assert s.shape == shape
    assert check(s, shape), (s.mean(), s.std(), s.min(), s.max())


def test_init_orthogonal_and_sparse():
    q = np.array(nn.init.orthogonal()(mx.zeros((4, 6))))
    np.testing.assert_allclose(q @ q.T, np.eye(4), atol=1e-5)
    s = np.array(nn.init.sparse(0.5)(mx.zeros((10, 8))))
    assert ((s == 0).sum(axis=1) == 4).all()


def test_linear_default_initialisation_bounds():
    m = nn.Linear(64, 300)
    w, b = np.array(m.weight), np.array(m.bias)
    bound = 1 / np.sqrt(64)
    assert w.shape == (300, 64) and b.shape == (300,)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.01
    e = np.array(nn.Embedding(400, 100).weight)
    assert abs(e.std() - 0.1) < 0.01


def test_weight_files_through_the_mx_namespace(tmp_path):
    # MLX scripts call mx.save_safetensors / mx.savez / mx.load directly
    w = {"a": mx.arange(6, dtype=mx.bfloat16).reshape(2, 3), "b": mx.ones((2,))}
    mx.save_safetensors(str(tmp_path / "w.safetensors"), w)
    mx.savez(str(tmp_path / "w.npz"), **w)
    for name in ("w.safetensors", "w.npz"):
        back = mx.load(str(tmp_path / name))
        assert set(back) == {"a", "b"}
        assert back["a"].dtype == mx.bfloat16 and back["a"].shape == (2, 3)
        assert mx.array_equal(back["a"], w["a"]).item() and mx.array_equal(back["b"], w["b"]).item()
