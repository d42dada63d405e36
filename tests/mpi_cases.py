"""The multi-process cases of tests/test_distributed_mpi.py, run by every rank under `mpirun`:
`python tests/mpi_cases.py OUT_DIR CASE...` writes OUT_DIR/rank<r>.json, {case: "ok" or the
traceback}. Every rank runs the same cases in the same order (the collectives must match up)."""
import json
import os
import sys
import traceback

import numpy as np

import braze.core as mx
import braze.nn as nn
import braze.optimizers as optim
from braze.utils import tree_flatten

WORLD = mx.distributed.init(strict=True)
R, N = WORLD.rank(), WORLD.size()

DTYPES = [mx.bool_, mx.int8, mx.uint8, mx.int16, mx.uint16, mx.int32, mx.uint32, mx.int64,
          mx.uint64, mx.float16, mx.bfloat16, mx.float32, mx.float64, mx.complex64]


def _stack(dt, shape, n=N, seed=0):
    """The same (n,) + shape values on every rank; rank r contributes row r."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 10, (n,) + shape)
    if dt == mx.complex64:
        v = v + 1j * rng.integers(0, 3, (n,) + shape)
    return v.astype(dt.np_dtype if dt != mx.bool_ else np.bool_)


def _eq(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_array_equal(got, want, err_msg=what)


def _reduced(stack, fn):
    """NumPy's reduction over ranks in the dtype, half precision through float32 (as braze)."""
    if stack.dtype in (np.float16, mx.bfloat16.np_dtype):
        return fn(stack.astype(np.float32), axis=0).astype(stack.dtype)
    if stack.dtype == np.bool_ and fn is np.sum:
        return np.any(stack, axis=0)
    return fn(stack, axis=0).astype(stack.dtype)


def case_collectives(group=WORLD):
    """Every collective x every MLX dtype against NumPy, in one mx.eval per dtype."""
    r, n = group.rank(), group.size()
    for dt in DTYPES:
        st = _stack(dt, (6, 3), n)
        x = mx.array(st[r], dtype=dt)
        outs = [mx.distributed.all_sum(x, group=group), mx.distributed.all_max(x, group=group),
                mx.distributed.all_min(x, group=group), mx.distributed.all_gather(x, group=group),
                mx.distributed.sum_scatter(mx.array(st.reshape(n * 6, 3), dtype=dt),
                                         group=group),
                mx.distributed.all_gather(x[0, 0], group=group)]
        mx.eval(outs)
        _eq(outs[0], _reduced(st, np.sum), f"all_sum {dt}")
        _eq(outs[1], _reduced(st, np.max), f"all_max {dt}")
        _eq(outs[2], _reduced(st, np.min), f"all_min {dt}")
        _eq(outs[3], st.reshape(n * 6, 3), f"all_gather {dt}")
        summed = _reduced(np.stack([st.reshape(n * 6, 3)] * n), np.sum)
        _eq(outs[4], summed[r * 6:(r + 1) * 6], f"sum_scatter {dt}")
        _eq(outs[5], st[:, 0, 0], f"all_gather 0-d {dt}")


def case_complex_order():
    """MLX orders complex numbers by real part, then imaginary part."""
    x = mx.array([1 + 5j, 2 + 0j, 3 + (1j if R == 0 else 2j)], mx.complex64)
    _eq(mx.distributed.all_max(x), np.array([1 + 5j, 2, 3 + 2j], np.complex64), "max")
    _eq(mx.distributed.all_min(x), np.array([1 + 5j, 2, 3 + 1j], np.complex64), "min")


def case_half_precision_sum():
    """float16 sums are rounded once (MLX's error bound), bfloat16 likewise."""
    for dt, tol in ((mx.float16, 5e-3), (mx.bfloat16, 1e-1)):
        st = np.random.default_rng(1).uniform(0, 10, (N, 1000)).astype(np.float32)
        y = mx.distributed.all_sum(mx.array(st[R]).astype(dt))
        z = st.astype(dt.np_dtype).astype(np.float64).sum(0)
        assert np.max(np.abs(np.asarray(y).astype(np.float64) - z) / z) <= tol, dt


def case_split():
    sub = WORLD.split(R % 2)
    assert sub.size() == (N + 1 - R % 2) // 2 and sub.rank() == R // 2, (sub.size(), sub.rank())
    _eq(mx.distributed.all_sum(mx.array(R), group=sub),
        np.array(sum(range(R % 2, N, 2)), np.int32), "sum in subgroup")
    rev = WORLD.split(0, key=N - 1 - R)
    assert rev.rank() == N - 1 - R
    _eq(mx.distributed.all_gather(mx.array([R]), group=rev),
        np.arange(N)[::-1].astype(np.int32), "gather in key order")
    case_collectives(sub if sub.size() > 1 else WORLD)


def case_send_recv():
    """A ring: each rank sends to the next and receives from the previous in one mx.eval,
    together with unrelated work; then MLX's ping-pong between pairs."""
    nxt, prv = (R + 1) % N, (R - 1) % N
    for dt in (mx.float32, mx.bfloat16, mx.bool_, mx.int64):
        x = mx.full((3, 2), R + 1).astype(dt)
        s = mx.distributed.send(x, nxt)
        y = mx.distributed.recv_like(x, prv)
        other = mx.ones((5, 5)) + 2
        mx.eval(s, y, other)
        _eq(y, np.full((3, 2), prv + 1).astype(dt.np_dtype), f"ring {dt}")
        _eq(s, np.asarray(x), "send returns its input")
    pairs = WORLD.split(R // 2)
    if pairs.size() == 2:
        peer, sending = 1 - pairs.rank(), pairs.rank() == 0
        x = mx.ones(10)
        for _ in range(6):
            if sending:
                mx.eval(mx.distributed.send(2 * x, peer, group=pairs))
            else:
                x = mx.distributed.recv(x.shape, x.dtype, peer, group=pairs)
                mx.eval(x)
            sending = not sending
        _eq(x, np.full(10, 64.0 if pairs.rank() == 0 else 32.0, np.float32), "ping-pong")


def case_transforms():
    """MLX's rules: all_sum's vjp is the identity, all_gather's slices this rank's part,
    jvp and vmap apply the collective again."""
    x = mx.array(np.arange(6, dtype=np.float32).reshape(3, 2) + R)
    w = mx.array(np.full((3, 2), R + 1.0, np.float32))
    g = mx.grad(lambda x: mx.sum(mx.distributed.all_sum(x) * w))(x)
    _eq(g, np.asarray(w), "vjp all_sum")
    c = mx.arange(N * 3 * 2, dtype=mx.float32).reshape(N * 3, 2)
    g = mx.grad(lambda x: mx.sum(mx.distributed.all_gather(x) * c))(x)
    _eq(g, np.asarray(c)[R * 3:(R + 1) * 3], "vjp all_gather")
    g = mx.grad(lambda s: mx.sum(mx.distributed.all_gather(s) * c[:N, 0]))(mx.array(1.0))
    _eq(g, np.asarray(c)[R, 0], "vjp all_gather 0-d")
    g = mx.grad(lambda x: mx.sum(mx.distributed.sum_scatter(x) * R))(mx.ones((N * 2,)))
    _eq(g, np.repeat(np.arange(N, dtype=np.float32), 2), "vjp sum_scatter")
    _, t = mx.jvp(lambda x: mx.distributed.all_sum(x * x), [x], [mx.ones_like(x)])
    _eq(t[0], 2 * np.sum([np.arange(6, dtype=np.float32).reshape(3, 2) + k for k in range(N)],
                         0).astype(np.float32), "jvp all_sum")
    for fn in (mx.distributed.all_sum, mx.distributed.all_gather):
        for axis in (0, 1):
            got = mx.vmap(fn, in_axes=axis)(x)
            want = mx.stack([fn(x[:, i] if axis else x[i]) for i in range(x.shape[axis])])
            _eq(got, np.asarray(want), f"vmap {fn.__name__} axis {axis}")
    got = mx.vmap(mx.distributed.all_gather)(mx.arange(3.0))
    _eq(got, np.repeat(np.arange(3.0, dtype=np.float32)[:, None], N, 1), "vmap gather 0-d")


def _model():
    mx.random.seed(3)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))


def _data():
    rng = np.random.default_rng(0)
    return (mx.array(rng.standard_normal((8 * N, 4)).astype(np.float32)),
            mx.array(rng.integers(0, 3, 8 * N).astype(np.int32)))


def _train(model, xs, ys, group, steps=4):
    opt = optim.SGD(learning_rate=0.5, momentum=0.9)

    def loss_fn(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    grad_fn = nn.value_and_grad(model, loss_fn)
    state = [model.state, opt.state]

    @mx.compile(inputs=state, outputs=state)
    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt.update(model, nn.average_gradients(grads, group=group))
        return loss

    losses = [step(xs, ys).item() for _ in range(steps)]
    return losses, tree_flatten(model.parameters())


def case_data_parallel():
    """A compiled data-parallel step on this rank's shard matches one process training on the
    full batch (run here with the single-process group)."""
    xs, ys = _data()
    part = slice(R * 8, (R + 1) * 8)
    losses, params = _train(_model(), xs[part], ys[part], WORLD)
    ref_losses, ref = _train(_model(), xs, ys, _singleton())
    for (k, a), (_, b) in zip(params, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6,
                                   err_msg=k)
    mean = np.asarray(mx.distributed.all_sum(mx.array(losses))) / N
    np.testing.assert_allclose(mean, ref_losses, rtol=1e-5)


def _singleton():
    from braze._src import distributed as D
    return D.Group._make(D.SingletonBackend())


def case_donation():
    """MLX's test_donation: all_sum(x) * s holds no more memory than all_sum(x)."""
    x = mx.random.normal((1024,))
    scale = mx.array(2.0)
    mx.eval(x, scale)
    mx.reset_peak_memory()
    y = mx.distributed.all_sum(x)
    mx.eval(y)
    only = mx.get_peak_memory()
    del y
    mx.reset_peak_memory()
    y = mx.distributed.all_sum(x) * scale
    mx.eval(y)
    assert mx.get_peak_memory() == only, (mx.get_peak_memory(), only)
    del x, y
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    y = mx.distributed.all_sum(mx.ones((2048,)) * (R + 1))  # reduced in its input's buffer
    mx.eval(y)
    _eq(y, np.full(2048, N * (N + 1) / 2, np.float32), "donated all_sum")
    assert mx.get_peak_memory() - base < 2 * 2048 * 4, mx.get_peak_memory() - base  # one buffer


def case_shard_linear():
    """MLX's test_shard_linear, smaller: sharded layers give the full layer's outputs and
    this rank's slices of its gradients."""
    mx.random.seed(0xF0F0)
    x = mx.random.normal((4, 64))
    part = slice(R * 64 // N, (R + 1) * 64 // N)
    lin = nn.Linear(64, 64)
    for layer in (lin, lin.to_quantized(group_size=32, bits=4)):
        y = layer(x)
        a2s = nn.layers.distributed.shard_linear(layer, "all-to-sharded")
        s2a = nn.layers.distributed.shard_linear(layer, "sharded-to-all")
        np.testing.assert_allclose(np.asarray(a2s(x)), np.asarray(y[:, part]), rtol=1e-4,
                                   atol=1e-5)
        np.testing.assert_allclose(np.asarray(s2a(x[:, part])), np.asarray(y), rtol=1e-4,
                                   atol=1e-5)
    mod = nn.Sequential(*[nn.Linear(32, 32) for _ in range(4)])
    smod = nn.Sequential(*[nn.layers.distributed.shard_linear(
        m, "all-to-sharded" if i % 2 == 0 else "sharded-to-all") for i, m in
        enumerate(mod.layers)])
    xs, ys = mx.random.normal((4, 32)), mx.random.normal((4, 32))

    def loss(model, x, y):
        return (model(x) * y).sum()

    l1, g1 = nn.value_and_grad(mod, loss)(mod, xs, ys)
    l2, g2 = nn.value_and_grad(smod, loss)(smod, xs, ys)
    np.testing.assert_allclose(l1.item(), l2.item(), rtol=1e-4)
    p = slice(R * 32 // N, (R + 1) * 32 // N)
    for i, (a, b) in enumerate(zip(g1["layers"], g2["layers"])):
        w = a["weight"][p] if i % 2 == 0 else a["weight"][:, p]
        bias = a["bias"][p] if i % 2 == 0 else a["bias"]
        np.testing.assert_allclose(np.asarray(b["weight"]), np.asarray(w), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.asarray(b["bias"]), np.asarray(bias), rtol=1e-4,
                                   atol=1e-5)


def case_average_gradients():
    """MLX's bucketing: one all_sum per `all_reduce_size` bytes, through mx.distributed.all_sum
    (a replaced one is called)."""
    calls, original = [], mx.distributed.all_sum

    def counting(x, **kwargs):
        calls.append(x.shape)
        return original(x, **kwargs)

    mx.distributed.all_sum = counting
    try:
        grads = [mx.ones(10) * (R + 1) for _ in range(10)]
        for size, n_calls in ((32 << 20, 1), (4 * 50, 2), (0, 10)):
            calls.clear()
            avg = nn.average_gradients(grads, all_reduce_size=size)
            assert len(calls) == n_calls, (size, calls)
            for g in avg:
                _eq(g, np.full(10, (N + 1) / 2, np.float32), f"average {size}")
    finally:
        mx.distributed.all_sum = original


def case_clip_grad_norm_sharded():
    grads = {"a": mx.ones((4, 3)) * 3.0, "b": mx.ones((5,)) * 3.0}
    want = np.sqrt(N * 17) * 3.0
    clipped, norm = nn.utils.clip_grad_norm_sharded(grads, max_norm=1e9)
    np.testing.assert_allclose(norm.item(), want, rtol=1e-5)
    _eq(clipped["a"], np.asarray(grads["a"]), "unclipped")
    clipped, norm = nn.utils.clip_grad_norm_sharded(grads, max_norm=1.0)
    np.testing.assert_allclose(np.asarray(clipped["b"]), 3.0 / (want + 1e-6), rtol=1e-5)


def case_errors():
    def raises(fn, match):
        try:
            fn()
        except ValueError as e:
            assert match in str(e), str(e)
        else:
            raise AssertionError(f"no error: {match}")

    raises(lambda: mx.distributed.send(mx.ones(2), N), f"[send] Invalid dst={N}")
    raises(lambda: mx.distributed.recv((2,), mx.float32, -1), "[recv] Invalid src=-1")
    raises(lambda: mx.distributed.sum_scatter(mx.ones((N + 1,))), "[sum_scatter] Invalid")
    raises(lambda: mx.compile(mx.distributed.all_sum, shapeless=True)(mx.ones(3)),
           "cannot infer its output shape")


def main():
    out_dir, cases = sys.argv[1], sys.argv[2:]
    results = {}
    for name in cases:
        try:
            globals()["case_" + name]()
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()
    with open(os.path.join(out_dir, f"rank{R}.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
