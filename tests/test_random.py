"""mx.random: keys, the per-thread state, MLX equality, transforms and compile.

MLX is the oracle for bits (through split/permutation), uniform, normal, randint and bernoulli:
the live comparisons skip when MLX is absent; `test_recorded_mlx_values` always runs, against
values recorded from MLX 0.32.4 as plain literals.
"""
import threading

import numpy as np
import pytest

import braze.core as mx
from braze._src.prims.base import bind
from braze._src.prims.random import RandomBits

try:
    import mlx.core as mlx
except Exception:  # pragma: no cover - CI does not install MLX
    mlx = None

needs_mlx = pytest.mark.skipif(mlx is None, reason="MLX is not installed")
K = mx.random.key


def _np(a):
    return np.array(a)


# -- recorded MLX values (always run) ----------------------------------------------------------
def test_recorded_mlx_values():
    assert _np(K(2**40 + 3)).tolist() == [256, 3]
    assert _np(K(5)).dtype == np.uint32
    assert _np(mx.random.split(K(0))).tolist() == [[4146024105, 967050713],
                                                   [2718843009, 1272950319]]
    assert _np(mx.random.split(K(42), 3)).tolist() == [
        [3134548294, 3733159049], [3746501087, 894150801], [801545058, 2363201431]]
    # bits: the (3, 2) split stream is the 6-word bit stream
    assert _np(mx.random.bits((6,), key=K(42))).tolist() == [
        3134548294, 3733159049, 3746501087, 894150801, 801545058, 2363201431]
    u = _np(mx.random.uniform(shape=(6,), key=K(1)))
    assert u.dtype == np.float32
    np.testing.assert_array_equal(u, np.float32([
        0.8307938575744629, 0.16604094207286835, 0.8430485725402832, 0.6428885459899902,
        0.5686540603637695, 0.6144446730613708]))
    np.testing.assert_array_equal(_np(mx.random.uniform(-3, 5, shape=(4,), key=K(11))),
                                  np.float32([3.4593505859375, -2.5518345832824707,
                                              0.6418991088867188, -2.691906690597534]))
    np.testing.assert_array_equal(
        _np(mx.random.uniform(shape=(4,), dtype=mx.float16, key=K(12))),
        np.float16([0.09478759765625, 0.2393798828125, 0.5751953125, 0.136962890625]))
    # normal goes through erfinv, which braze computes with MLX's float algorithm: bit-identical
    np.testing.assert_array_equal(_np(mx.random.normal((6,), key=K(2))), np.float32([
        -0.15508517622947693, 1.5718884468078613, 0.5495364665985107, 0.17252156138420105,
        -0.6050856709480286, 1.6838229894638062]))
    np.testing.assert_array_equal(
        _np(mx.random.normal((4,), loc=1.5, scale=0.5, key=K(13))),
        np.float32([1.7330353260040283, 1.2325775623321533, 1.2179163694381714,
                    1.2626045942306519]))
    r = _np(mx.random.randint(-5, 10, (8,), key=K(3)))
    assert r.dtype == np.int32 and r.tolist() == [-1, 7, 7, 2, -4, -5, 7, 0]
    r = _np(mx.random.randint(0, 200, (6,), dtype=mx.uint8, key=K(14)))
    assert r.dtype == np.uint8 and r.tolist() == [161, 167, 25, 155, 118, 174]
    assert _np(mx.random.bernoulli(0.3, (10,), key=K(4))).tolist() == [
        False, False, False, False, False, True, False, True, False, False]
    assert _np(mx.random.permutation(10, key=K(5))).tolist() == [7, 0, 9, 5, 6, 1, 4, 2, 8, 3]
    mx.random.seed(42)
    np.testing.assert_array_equal(_np(mx.random.uniform(shape=(3,))), np.float32(
        [0.2851702570915222, 0.6119449138641357, 0.17565257847309113]))
    np.testing.assert_array_equal(_np(mx.random.uniform(shape=(3,))), np.float32(
        [0.7514417171478271, 0.11111767590045929, 0.8281057476997375]))
    assert _np(mx.random.state[0]).tolist() == [3164236999, 3984487275]


# -- live MLX comparisons ----------------------------------------------------------------------
SEEDS = [0, 1, 7, 42, 2**32 + 5, 2**64 - 1]


@needs_mlx
@pytest.mark.parametrize("seed", SEEDS)
def test_bits_match_mlx(seed):
    mk = mlx.random.key(seed)
    assert _np(K(seed)).tolist() == np.array(mk).tolist()
    for num in (0, 1, 2, 3, 5, 8, 33):
        np.testing.assert_array_equal(_np(mx.random.split(K(seed), num)),
                                      np.array(mlx.random.split(mk, num)))
        # the same stream through bits: (num, 2) words
        np.testing.assert_array_equal(_np(mx.random.bits((2 * num,), key=K(seed))).reshape(-1, 2),
                                      np.array(mlx.random.split(mk, num)))
    for n in (1, 2, 3, 17, 100):
        np.testing.assert_array_equal(_np(mx.random.permutation(n, key=K(seed))),
                                      np.array(mlx.random.permutation(n, key=mk)))


@needs_mlx
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", [(), (1,), (3,), (4, 5), (7, 3, 2)])
def test_uniform_matches_mlx(seed, shape):
    mk = mlx.random.key(seed)
    np.testing.assert_array_equal(_np(mx.random.uniform(shape=shape, key=K(seed))),
                                  np.array(mlx.random.uniform(shape=shape, key=mk)))
    np.testing.assert_array_equal(
        _np(mx.random.uniform(-2.5, 7, shape=shape, key=K(seed))),
        np.array(mlx.random.uniform(-2.5, 7, shape=shape, key=mk)))
    lo = np.linspace(-3, 0, 5, dtype=np.float32)
    hi = np.float32(4)
    np.testing.assert_array_equal(
        _np(mx.random.uniform(mx.array(lo), hi, shape=(2, 5), key=K(seed))),
        np.array(mlx.random.uniform(mlx.array(lo), hi, shape=(2, 5), key=mk)))
    for dt, mdt in ((mx.float16, mlx.float16), (mx.bfloat16, mlx.bfloat16)):
        a = _np(mx.random.uniform(shape=shape, dtype=dt, key=K(seed)).astype(mx.float32))
        b = np.array(mlx.random.uniform(shape=shape, dtype=mdt, key=mk).astype(mlx.float32))
        np.testing.assert_array_equal(a, b)


@needs_mlx
@pytest.mark.parametrize("seed", SEEDS)
def test_normal_matches_mlx(seed):
    mk = mlx.random.key(seed)
    a = _np(mx.random.normal((4000,), key=K(seed)))
    b = np.array(mlx.random.normal((4000,), key=mk))
    np.testing.assert_array_equal(a, b)  # bit-identical: MLX's float erfinv, exactly
    a = _np(mx.random.normal((3, 4), loc=2.0, scale=0.25, key=K(seed)))
    b = np.array(mlx.random.normal((3, 4), loc=2.0, scale=0.25, key=mk))
    np.testing.assert_array_equal(a, b)
    a = _np(mx.random.normal((5,), dtype=mx.float16, key=K(seed)).astype(mx.float32))
    b = np.array(mlx.random.normal((5,), dtype=mlx.float16, key=mk).astype(mlx.float32))
    np.testing.assert_array_equal(a, b)


@needs_mlx
@pytest.mark.parametrize("seed", SEEDS)
def test_randint_matches_mlx(seed):
    mk = mlx.random.key(seed)
    cases = [(-5, 10, mx.int32, mlx.int32), (0, 1, mx.int32, mlx.int32),
             (0, 1000, mx.int32, mlx.int32), (-2**31, 2**31 - 1, mx.int32, mlx.int32),
             (-2.5, 3.7, mx.int32, mlx.int32), (2**24, 2**24 + 10, mx.int32, mlx.int32),
             (3, 3, mx.int32, mlx.int32), (0, 10, mx.uint8, mlx.uint8),
             (-100, 100, mx.int8, mlx.int8), (0, 300, mx.int16, mlx.int16),
             (0, 2, mx.bool_, mlx.bool_), (0, 7, mx.uint32, mlx.uint32),
             (-7, 7, mx.int64, mlx.int64)]
    for lo, hi, dt, mdt in cases:
        a = _np(mx.random.randint(lo, hi, (500,), dtype=dt, key=K(seed)))
        b = np.array(mlx.random.randint(lo, hi, (500,), dtype=mdt, key=mk))
        assert a.dtype == b.dtype, (lo, hi, dt)
        np.testing.assert_array_equal(a, b, err_msg=f"randint({lo}, {hi}, {dt})")
    lo = np.arange(-4, 4, dtype=np.int32)
    np.testing.assert_array_equal(
        _np(mx.random.randint(mx.array(lo), 9, (3, 8), key=K(seed))),
        np.array(mlx.random.randint(mlx.array(lo), 9, (3, 8), key=mk)))


@needs_mlx
@pytest.mark.parametrize("seed", SEEDS)
def test_bernoulli_matches_mlx(seed):
    mk = mlx.random.key(seed)
    for p in (0.0, 0.1, 0.5, 0.999, 1.0):
        np.testing.assert_array_equal(_np(mx.random.bernoulli(p, (300,), key=K(seed))),
                                      np.array(mlx.random.bernoulli(p, (300,), key=mk)))
    p = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(_np(mx.random.bernoulli(mx.array(p), key=K(seed))),
                                  np.array(mlx.random.bernoulli(mlx.array(p), key=mk)))
    np.testing.assert_array_equal(
        _np(mx.random.bernoulli(mx.array(0.3, dtype=mx.float16), (50,), key=K(seed))),
        np.array(mlx.random.bernoulli(mlx.array(0.3, dtype=mlx.float16), (50,), key=mk)))
    np.testing.assert_array_equal(_np(mx.random.bernoulli(key=K(seed))),
                                  np.array(mlx.random.bernoulli(key=mk)))


@needs_mlx
def test_other_samplers_match_mlx():
    """Composites MLX computes the same way: same values, up to erfinv/log ulps."""
    for seed in (0, 3, 11):
        mk, k = mlx.random.key(seed), K(seed)
        np.testing.assert_allclose(_np(mx.random.gumbel((200,), key=k)),
                                   np.array(mlx.random.gumbel((200,), key=mk)), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(_np(mx.random.laplace((200,), loc=1.0, scale=2.0, key=k)),
                                   np.array(mlx.random.laplace((200,), loc=1.0, scale=2.0,
                                                               key=mk)), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(_np(mx.random.truncated_normal(-1.0, 2.0, (200,), key=k)),
                                   np.array(mlx.random.truncated_normal(-1.0, 2.0, (200,),
                                                                        key=mk)),
                                   rtol=1e-4, atol=1e-5)
        logits = np.log(np.float32([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]))
        np.testing.assert_array_equal(
            _np(mx.random.categorical(mx.array(logits), num_samples=50, key=k)),
            np.array(mlx.random.categorical(mlx.array(logits), num_samples=50, key=mk)))
        x = np.arange(24).reshape(4, 6)
        np.testing.assert_array_equal(
            _np(mx.random.permutation(mx.array(x), axis=1, key=k)),
            np.array(mlx.random.permutation(mlx.array(x), axis=1, key=mk)))


@needs_mlx
@pytest.mark.parametrize("case", ["row", "num_samples", "shape", "axis0", "neg_inf", "all_neg_inf",
                                  "pos_inf", "float16", "vector", "batched"])
def test_categorical_of_one_distribution_matches_mlx(case):
    """MLX samples one distribution with an output shape by inverse CDF (the uniform draw times
    the total weight, searched in the cumulative weights), not Gumbel-max: an LLM's
    `categorical(logits[:, -1, :])` must give MLX's token for the same key."""
    v = np.linspace(-1, 1, 100, dtype=np.float32)
    logits, kw = {
        "row": (v[None], {}),
        "num_samples": (v, {"num_samples": 7}),
        "shape": (v, {"shape": (4, 2)}),
        "axis0": (v[:, None], {"axis": 0}),
        "neg_inf": (np.where(v > 0.5, -np.inf, v)[None], {"num_samples": 20}),
        "all_neg_inf": (np.full((1, 5), -np.inf, np.float32), {"num_samples": 20}),
        "pos_inf": (np.where((v > 0.2) & (v < 0.3), np.inf, v)[None], {"num_samples": 20}),
        "float16": (v.astype(np.float16)[None], {"num_samples": 9}),
        "vector": (v, {}),  # no output shape: Gumbel-max
        "batched": (np.stack([v, -v]), {}),  # two distributions: Gumbel-max
    }[case]
    for seed in (0, 5, 11):
        got = mx.random.categorical(mx.array(logits), key=K(seed), **kw)
        want = mlx.random.categorical(mlx.array(logits), key=mlx.random.key(seed), **kw)
        assert got.dtype == mx.uint32 and got.shape == tuple(want.shape)
        np.testing.assert_array_equal(_np(got), np.array(want))


def test_categorical_of_one_distribution_under_vmap_and_compile():
    """As in MLX: under vmap the one distribution's cumulative weights are batched, which
    searchsorted refuses (MLX's error); compiled, the same samples as eager."""
    rng = np.random.default_rng(1)
    logits = mx.array(rng.standard_normal((4, 30)).astype(np.float32))
    k = K(7)
    with pytest.raises(ValueError, match=r"^\[searchsorted\] Cannot vmap over the sorted"):
        mx.vmap(lambda r: mx.random.categorical(r[None], num_samples=3, key=k))(logits)
    f = mx.compile(lambda r: mx.random.categorical(r, shape=(2, 3), key=k))
    np.testing.assert_array_equal(_np(f(logits[1])),
                                  _np(mx.random.categorical(logits[1], shape=(2, 3), key=k)))


def test_categorical_of_one_distribution_recorded_mlx_value():
    logits = mx.array(np.linspace(-1, 1, 100, dtype=np.float32)[None])
    assert _np(mx.random.categorical(logits, key=K(5))).tolist() == [81]  # MLX 0.32.4


@needs_mlx
def test_global_sequence_matches_mlx():
    for s in (0, 42, 123456789):
        mx.random.seed(s)
        mlx.random.seed(s)
        for _ in range(3):
            np.testing.assert_array_equal(_np(mx.random.uniform(shape=(4,))),
                                          np.array(mlx.random.uniform(shape=(4,))))
            np.testing.assert_array_equal(_np(mx.random.randint(0, 100, (4,))),
                                          np.array(mlx.random.randint(0, 100, (4,))))
            np.testing.assert_array_equal(_np(mx.random.state[0]),
                                          np.array(mlx.random.state[0]))


# -- the bit layout ----------------------------------------------------------------------------
def test_bits_widths_share_one_stream():
    """Widths 1 and 2 read the byte stream MLX writes: the words of the same-size uint32 draw
    (MLX's layout depends only on the byte count), truncated to the bytes asked for."""
    k = K(9)
    for nbytes in (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 31, 64):
        words = -(-nbytes // 4)
        stream = _np(mx.random.bits((words,), 4, key=k)).astype("<u4").view(np.uint8)
        b1 = _np(mx.random.bits((nbytes,), 1, key=k))
        assert b1.dtype == np.uint8
        np.testing.assert_array_equal(b1, stream[:nbytes])
        if nbytes % 2 == 0:
            b2 = _np(mx.random.bits((nbytes // 2,), 2, key=k))
            assert b2.dtype == np.uint16
            np.testing.assert_array_equal(b2.view(np.uint8), stream[:nbytes])


def test_bits_shapes_and_batched_keys():
    k = K(3)
    assert mx.random.bits((), key=k).shape == ()
    assert mx.random.bits((2, 0, 3), key=k).shape == (2, 0, 3)
    assert mx.random.bits((2, 3), key=k).dtype == mx.uint32
    keys = mx.random.split(k, 5)
    prim = RandomBits((3, 2), 2)
    batched = bind(prim, (keys,))
    assert batched.shape == (5, 3, 2) and batched.dtype == mx.uint16
    for i in range(5):
        np.testing.assert_array_equal(_np(batched)[i],
                                      _np(mx.random.bits((3, 2), 2, key=keys[i])))
    # keys as a non-contiguous view
    kt = mx.transpose(mx.stack([keys[:, 1], keys[:, 0]]))[:, ::-1]
    np.testing.assert_array_equal(_np(bind(prim, (kt,))), _np(batched))


# -- the key and the state ---------------------------------------------------------------------
def test_key_and_split():
    k = K(1)
    assert k.shape == (2,) and k.dtype == mx.uint32
    s = mx.random.split(k)
    assert s.shape == (2, 2) and s.dtype == mx.uint32
    assert mx.random.split(k, 4).shape == (4, 2)
    assert mx.random.split(k, 0).shape == (0, 2)
    # split is pure
    np.testing.assert_array_equal(_np(mx.random.split(k)), _np(s))
    # subkeys differ from each other and from the key
    a = _np(s)
    assert not np.array_equal(a[0], a[1]) and not np.array_equal(a[0], _np(k))


def test_key_makes_draws_pure_and_global_draws_advance():
    k = K(10)
    a = _np(mx.random.uniform(shape=(5,), key=k))
    b = _np(mx.random.uniform(shape=(5,), key=k))
    np.testing.assert_array_equal(a, b)
    mx.random.seed(3)
    before = _np(mx.random.state[0])
    x = _np(mx.random.normal((5,), key=k))
    np.testing.assert_array_equal(_np(mx.random.state[0]), before)  # key= does not advance
    y = _np(mx.random.normal((5,)))
    z = _np(mx.random.normal((5,)))
    assert not np.array_equal(y, z)
    assert not np.array_equal(_np(mx.random.state[0]), before)
    del x
    # the global draw is split(state) -> (new state, subkey)
    mx.random.seed(3)
    sub = mx.random.split(mx.random.state[0])
    np.testing.assert_array_equal(_np(mx.random.normal((5,))),
                                  _np(mx.random.normal((5,), key=sub[1])))
    np.testing.assert_array_equal(_np(mx.random.state[0]), _np(sub[0]))


def test_seed_reproduces():
    mx.random.seed(7)
    a = [_np(mx.random.uniform(shape=(3,))) for _ in range(3)]
    mx.random.seed(7)
    b = [_np(mx.random.uniform(shape=(3,))) for _ in range(3)]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    mx.random.seed(8)
    assert not np.array_equal(_np(mx.random.uniform(shape=(3,))), a[0])


def test_state_sentinel():
    s = mx.random.state
    assert len(s) == 1
    mx.random.seed(5)
    assert _np(s[0]).tolist() == [0, 5]
    assert s[-1] is s[0]
    (only,) = list(s)
    assert only is s[0]
    with pytest.raises(IndexError):
        s[1]
    with pytest.raises(TypeError):
        s["a"]
    with pytest.raises(TypeError):
        s[0] = K(1)
    assert "random" in repr(s)
    # the capture protocol
    k = K(77)
    s.__braze_update__(k)
    assert s.__braze_capture__() is k and s[0] is k
    with pytest.raises(TypeError):
        s.__braze_update__(3)


def test_per_thread_keys():
    mx.random.seed(42)
    main_key = _np(mx.random.state[0])
    seen = {}

    def worker():
        seen["same_object"] = mx.random.state is mx.random.state
        seen["start"] = _np(mx.random.state[0])
        mx.random.uniform()
        seen["advanced"] = _np(mx.random.state[0])
        mx.random.seed(42)
        seen["a"] = _np(mx.random.uniform(shape=(3,)))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    from braze._src.random import _INITIAL_SEED
    assert seen["start"].tolist() == _np(K(_INITIAL_SEED)).tolist()  # a fresh thread's key
    assert not np.array_equal(seen["advanced"], seen["start"])
    np.testing.assert_array_equal(_np(mx.random.state[0]), main_key)  # untouched by the thread
    mx.random.seed(42)
    np.testing.assert_array_equal(_np(mx.random.uniform(shape=(3,))), seen["a"])


def test_reset_thread_state():
    from braze._src.random import _INITIAL_SEED, reset_thread_state
    mx.random.seed(1)
    reset_thread_state()
    assert _np(mx.random.state[0]).tolist() == _np(K(_INITIAL_SEED)).tolist()


def test_failed_draw_does_not_advance_the_key():
    mx.random.seed(2)
    before = _np(mx.random.state[0])
    with pytest.raises(ValueError):
        mx.random.uniform(mx.zeros((4,)), 1, shape=(3,))
    with pytest.raises(ValueError):
        mx.random.normal((2,), dtype=mx.int32)
    np.testing.assert_array_equal(_np(mx.random.state[0]), before)


# -- dtypes, shapes, signatures ----------------------------------------------------------------
def test_signatures_and_defaults():
    import inspect
    sig = inspect.signature
    assert list(sig(mx.random.uniform).parameters)[:5] == ["low", "high", "shape", "dtype", "key"]
    assert list(sig(mx.random.normal).parameters)[:5] == ["shape", "dtype", "loc", "scale", "key"]
    assert list(sig(mx.random.randint).parameters)[:5] == ["low", "high", "shape", "dtype", "key"]
    assert list(sig(mx.random.bernoulli).parameters)[:3] == ["p", "shape", "key"]
    assert list(sig(mx.random.categorical).parameters)[:5] == [
        "logits", "axis", "shape", "num_samples", "key"]
    assert list(sig(mx.random.laplace).parameters)[:5] == ["shape", "dtype", "loc", "scale", "key"]
    assert list(sig(mx.random.multivariate_normal).parameters)[:5] == [
        "mean", "cov", "shape", "dtype", "key"]
    assert list(sig(mx.random.truncated_normal).parameters)[:5] == [
        "lower", "upper", "shape", "dtype", "key"]
    assert list(sig(mx.random.permutation).parameters)[:3] == ["x", "axis", "key"]
    assert list(sig(mx.random.split).parameters)[:2] == ["key", "num"]
    for f in (mx.random.uniform, mx.random.normal, mx.random.randint, mx.random.bernoulli,
              mx.random.truncated_normal, mx.random.gumbel, mx.random.categorical,
              mx.random.laplace, mx.random.permutation, mx.random.multivariate_normal,
              mx.random.split, mx.random.bits):
        assert "stream" in sig(f).parameters
    k = K(0)
    assert mx.random.uniform(key=k).shape == () and mx.random.uniform(key=k).dtype == mx.float32
    assert mx.random.normal(key=k).shape == ()
    assert mx.random.randint(0, 5, key=k).dtype == mx.int32
    assert mx.random.bernoulli(key=k).shape == () and mx.random.bernoulli(key=k).dtype == mx.bool_
    assert mx.random.gumbel(key=k).shape == ()
    assert mx.random.laplace(key=k).shape == ()
    assert mx.random.truncated_normal(mx.zeros((2, 1)), mx.ones((3,)), key=k).shape == (2, 3)
    assert mx.random.uniform(shape=(2,), dtype=None, key=k).dtype == mx.float32
    assert mx.random.uniform(shape=(2,), stream=mx.cpu, key=k).shape == (2,)


def test_dtypes():
    k = K(4)
    for dt in (mx.float16, mx.bfloat16, mx.float32, mx.float64):
        for f in (lambda: mx.random.uniform(shape=(10,), dtype=dt, key=k),
                  lambda: mx.random.normal((10,), dtype=dt, key=k),
                  lambda: mx.random.gumbel((10,), dtype=dt, key=k),
                  lambda: mx.random.laplace((10,), dtype=dt, key=k),
                  lambda: mx.random.truncated_normal(-1, 1, (10,), dtype=dt, key=k)):
            a = f()
            assert a.dtype == dt and a.shape == (10,)
            assert np.all(np.isfinite(_np(a.astype(mx.float32))))
    u16 = _np(mx.random.uniform(shape=(10000,), dtype=mx.float16, key=k))
    assert u16.max() < 1.0  # never rounds up to high
    c = mx.random.normal((1000,), dtype=mx.complex64, key=k)
    assert c.dtype == mx.complex64 and c.shape == (1000,)
    cv = _np(c)
    assert abs(np.var(cv) - 1.0) < 0.15  # total variance 1: 1/2 per component
    for dt in (mx.uint8, mx.int8, mx.int16, mx.uint32, mx.int64, mx.bool_):
        assert mx.random.randint(0, 2, (4,), dtype=dt, key=k).dtype == dt


def test_categorical_shapes():
    k = K(6)
    logits = mx.zeros((3, 5))
    assert mx.random.categorical(logits, key=k).shape == (3,)
    assert mx.random.categorical(logits, axis=0, key=k).shape == (5,)
    assert mx.random.categorical(logits, shape=(4, 3), key=k).shape == (4, 3)
    assert mx.random.categorical(logits, num_samples=7, key=k).shape == (3, 7)
    assert mx.random.categorical(logits, axis=0, num_samples=2, key=k).shape == (5, 2)
    assert mx.random.categorical(logits, key=k).dtype == mx.uint32
    # a certain category is always drawn
    sure = mx.array(np.float32([-np.inf, -np.inf, 0.0, -np.inf]))
    assert np.all(_np(mx.random.categorical(sure, num_samples=100, key=k)) == 2)


def test_permutation_of_an_array():
    k = K(8)
    x = mx.arange(20).reshape(4, 5)
    p0 = _np(mx.random.permutation(x, key=k))
    assert sorted(p0[:, 0].tolist()) == [0, 5, 10, 15]
    np.testing.assert_array_equal(np.sort(p0, axis=0), _np(x))
    p1 = _np(mx.random.permutation(x, axis=1, key=k))
    np.testing.assert_array_equal(np.sort(p1, axis=1), _np(x))
    p = _np(mx.random.permutation(50, key=k))
    assert sorted(p.tolist()) == list(range(50))


def test_multivariate_normal_shapes():
    k = K(12)
    mean = mx.zeros((3,))
    cov = mx.eye(3)
    assert mx.random.multivariate_normal(mean, cov, key=k).shape == (3,)
    assert mx.random.multivariate_normal(mean, cov, (5,), key=k).shape == (5, 3)
    assert mx.random.multivariate_normal(mx.zeros((2, 3)), cov, key=k).shape == (2, 3)
    assert mx.random.multivariate_normal(mean, mx.broadcast_to(cov, (4, 3, 3)),
                                         key=k).shape == (4, 3)
    # identity covariance: the standard normal of the same key
    np.testing.assert_allclose(_np(mx.random.multivariate_normal(mean, cov, (5,), key=k)),
                               _np(mx.random.normal((5, 3), key=k)), rtol=1e-5, atol=1e-6)


# -- transforms --------------------------------------------------------------------------------
def test_vmap_over_keys_matches_a_loop():
    keys = mx.random.split(K(1), 4)
    samplers = [
        lambda k: mx.random.uniform(shape=(3,), key=k),
        lambda k: mx.random.normal((2, 2), key=k),
        lambda k: mx.random.randint(0, 9, (3,), key=k),
        lambda k: mx.random.bernoulli(0.4, (5,), key=k),
        lambda k: mx.random.bits((3,), 1, key=k),
        lambda k: mx.random.gumbel((3,), key=k),
        lambda k: mx.random.split(k, 3),
        lambda k: mx.random.permutation(6, key=k),
        lambda k: mx.random.categorical(mx.zeros((2, 4)), key=k),
    ]
    for f in samplers:
        got = _np(mx.vmap(f)(keys))
        want = np.stack([_np(f(keys[i])) for i in range(4)])
        np.testing.assert_array_equal(got, want)
    # keys batched along axis 1
    got = _np(mx.vmap(samplers[0], in_axes=1)(mx.transpose(keys)))
    np.testing.assert_array_equal(got, np.stack([_np(samplers[0](keys[i])) for i in range(4)]))


def test_vmap_with_an_unbatched_key():
    k = K(2)
    x = mx.arange(3, dtype=mx.float32)
    got = mx.vmap(lambda x: x + mx.random.uniform(shape=(2,), key=k))(x)
    u = _np(mx.random.uniform(shape=(2,), key=k))
    np.testing.assert_array_equal(_np(got), _np(x)[:, None] + u[None])


def test_vmap_over_parameters():
    k = K(3)
    locs = mx.array([0.0, 10.0, 20.0])
    got = _np(mx.vmap(lambda m: mx.random.normal((4,), loc=m, key=k))(locs))
    z = _np(mx.random.normal((4,), key=k))
    np.testing.assert_allclose(got, _np(locs)[:, None] + z[None], rtol=1e-6)


def test_grad_through_parameters():
    k = K(0)
    z = mx.random.normal((6,), key=k)
    g_loc, g_scale = mx.grad(
        lambda m, s: mx.random.normal((6,), loc=m, scale=s, key=k).sum(), argnums=(0, 1))(
        mx.array(1.0), mx.array(2.0))
    assert g_loc.item() == pytest.approx(6.0)
    assert g_scale.item() == pytest.approx(z.sum().item(), rel=1e-5)
    u = mx.random.uniform(shape=(5,), key=k)
    g_lo, g_hi = mx.grad(lambda lo, hi: mx.random.uniform(lo, hi, (5,), key=k).sum(),
                         argnums=(0, 1))(mx.array(-1.0), mx.array(3.0))
    assert g_hi.item() == pytest.approx(u.sum().item(), rel=1e-5)
    assert g_lo.item() == pytest.approx(5 - u.sum().item(), rel=1e-5)
    # jvp agrees
    _, (t,) = mx.jvp(lambda m: mx.random.normal((3,), loc=m, key=k), [mx.array(0.5)],
                     [mx.array(1.0)])
    np.testing.assert_allclose(_np(t), np.ones(3))
    # the key gets no gradient (RandomBits is not differentiable)
    assert mx.grad(lambda x: (mx.random.uniform(key=k) * x))(mx.array(2.0)).item() == \
        pytest.approx(mx.random.uniform(key=k).item())
    # gradients through laplace / truncated_normal / multivariate_normal parameters
    g = mx.grad(lambda m: mx.random.multivariate_normal(m, mx.eye(2), (4,), key=k).sum())(
        mx.zeros((2,)))
    np.testing.assert_allclose(_np(g), [4.0, 4.0])


# -- compile -----------------------------------------------------------------------------------
def test_compile_rng_declared_state():
    """MLX test_compile_rng: inputs=outputs=mx.random.state gives new samples per call, the
    same sequence as the uncompiled function."""
    def fun(x):
        return x + mx.random.uniform(shape=(3,))

    cf = mx.compile(fun, inputs=mx.random.state, outputs=mx.random.state)
    x = mx.zeros((3,))
    mx.random.seed(0)
    a, b = _np(cf(x)), _np(cf(x))
    assert not np.allclose(a, b)
    mx.random.seed(0)
    np.testing.assert_array_equal(_np(fun(x)), a)
    np.testing.assert_array_equal(_np(fun(x)), b)
    # nested in a list with other state
    state = [{"count": mx.array(0)}, mx.random.state]

    def step(x):
        state[0]["count"] = state[0]["count"] + 1
        return x + mx.random.normal((3,))

    cs = mx.compile(step, inputs=state, outputs=state)
    mx.random.seed(1)
    outs = [_np(cs(x)) for _ in range(3)]
    assert state[0]["count"].item() == 3
    assert state[1] is mx.random.state
    mx.random.seed(1)
    for o in outs:
        np.testing.assert_array_equal(o, _np(x + mx.random.normal((3,))))


def test_compile_undeclared_random_use_advances_the_key():
    """braze improves on MLX: without declaring the state, the key still advances."""
    def fun(x):
        return x * mx.random.normal((4,))

    cf = mx.compile(fun)
    x = mx.ones((4,))
    mx.random.seed(5)
    a, b = _np(cf(x)), _np(cf(x))
    assert not np.array_equal(a, b)
    mx.random.seed(5)
    np.testing.assert_array_equal(_np(fun(x)), a)
    np.testing.assert_array_equal(_np(fun(x)), b)


def test_compile_with_explicit_keys_is_pure():
    cf = mx.compile(lambda k: mx.random.uniform(shape=(3,), key=k))
    k = K(4)
    np.testing.assert_array_equal(_np(cf(k)), _np(cf(k)))
    np.testing.assert_array_equal(_np(cf(k)), _np(mx.random.uniform(shape=(3,), key=k)))
    assert not np.array_equal(_np(cf(K(5))), _np(cf(k)))


def test_compile_rng_across_threads():
    """MLX test_compile_rng_across_threads: each thread advances its own key; seeding
    reproduces; a different seed differs."""
    fun = mx.compile(lambda: mx.random.uniform(shape=(4,)), inputs=mx.random.state,
                     outputs=mx.random.state)
    res = {}

    def worker(name, s):
        assert mx.random.state is state_obj
        mx.random.seed(s)
        res[name] = [_np(fun()) for _ in range(2)]

    state_obj = mx.random.state
    threads = [threading.Thread(target=worker, args=(n, s))
               for n, s in (("a", 42), ("b", 42), ("c", 1234))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(res["a"][0], res["b"][0])
    np.testing.assert_array_equal(res["a"][1], res["b"][1])
    assert not np.array_equal(res["a"][0], res["a"][1])
    assert not np.array_equal(res["a"][0], res["c"][0])
    mx.random.seed(42)
    np.testing.assert_array_equal(_np(fun()), res["a"][0])


def test_compile_dropout_like_training_step():
    state = {"w": mx.ones((8,))}

    def step(x):
        mask = mx.random.bernoulli(0.5, x.shape)
        state["w"] = state["w"] + mx.where(mask, x, 0)
        return state["w"].sum()

    cs = mx.compile(step, inputs=[state, mx.random.state], outputs=[state, mx.random.state])
    mx.random.seed(0)
    vals = [cs(mx.ones((8,))).item() for _ in range(4)]
    state["w"] = mx.ones((8,))
    mx.random.seed(0)
    assert [step(mx.ones((8,))).item() for _ in range(4)] == vals


def test_clear_streams_resets_the_threads_key():
    import threading

    mx.random.seed(123)
    mx.random.uniform(shape=(3,))
    mx.clear_streams()
    here = np.asarray(mx.random.state[0]).tolist()
    seen = []
    t = threading.Thread(target=lambda: seen.append(np.asarray(mx.random.state[0]).tolist()))
    t.start()
    t.join()
    assert here == seen[0]  # back to the key every thread starts from


# -- issue 13: empty ranges sample as MLX does, never raise -----------------------------------
def test_reversed_ranges_follow_mlx():
    mx.random.seed(3)
    assert mx.random.randint(5, 2, (4,)).tolist() == [5, 5, 5, 5]  # clipped up to low
    assert mx.random.truncated_normal(1.0, -1.0, (3,)).tolist() == [1.0, 1.0, 1.0]
    u = np.asarray(mx.random.uniform(5, 2, (8,)))
    assert ((u > 2) & (u <= 5)).all()  # MLX's low + (high - low) * [0, 1)


def test_categorical_without_samples_is_empty():
    out = mx.random.categorical(mx.zeros((20,)), num_samples=0)
    assert out.shape == (0,) and out.dtype == mx.uint32
    assert mx.random.categorical(mx.zeros((3, 4)), shape=(0, 3)).shape == (0, 3)


def _lazy_prims(a):
    seen, stack, out = set(), [a], []
    while stack:
        x = stack.pop()
        if id(x) in seen or x._data is not None:
            continue
        seen.add(id(x))
        out.append(x._prim.name)
        stack.extend(x._inputs)
    return out


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_eager_normal_is_one_fused_tail_with_the_uncompiled_bits(dtype):
    """An eager normal draw runs its elementwise part (erfinv among it) as one compiled kernel;
    the values are those of the same draw with compile disabled, loc and scale included.
    uniform's defaults leave out `* 1 + 0`. Inside a transform the graph is the ops' own.
    (Only once the native backend runs the Threefry: a script's first draws import no Numba.)"""
    from braze._src.compile.compiled import backend
    from braze._src.prims import random as rp
    backend()  # the cpu backend installs its Threefry when it is built
    k = K(5)
    a = mx.random.normal((3, 7), dtype=dtype, key=k)
    names = _lazy_prims(a)
    if rp._THREEFRY[0] is not rp.threefry2x32:
        assert sum(n.startswith("Compiled") for n in names) == 1 and "ErfInv" not in names
    b = mx.random.normal((3, 7), dtype=dtype, loc=1.5, scale=0.5, key=k)
    mx.disable_compile()
    try:
        want_a = mx.random.normal((3, 7), dtype=dtype, key=k)
        want_b = mx.random.normal((3, 7), dtype=dtype, loc=1.5, scale=0.5, key=k)
    finally:
        mx.enable_compile()
    for got, want in [(a, want_a), (b, want_b)]:
        np.testing.assert_array_equal(_np(got.astype(mx.float32)), _np(want.astype(mx.float32)))
    u = mx.random.uniform(shape=(4,), key=k)
    assert "Multiply" not in _lazy_prims(u) and "Add" not in _lazy_prims(u)
    np.testing.assert_array_equal(_np(u), _np(mx.random.uniform(0.0, 1.0, (4,), key=k)))
    g = mx.grad(lambda s: mx.sum(mx.random.normal((3,), scale=s, key=k)))(mx.array(2.0))
    np.testing.assert_allclose(_np(g), _np(mx.sum(mx.random.normal((3,), key=k))), rtol=1e-6)
