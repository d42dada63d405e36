"""Every layer's forward pass against a NumPy reference written here (float64), gradients
through layers against finite differences, bad input, and (when MLX is installed) the same
layers against mlx.nn with identical weights."""
import math

import numpy as np
import pytest

import braze.core as mx
import braze.nn as nn
from braze.utils import tree_flatten

from op_table.conv import conv_loop, conv_transpose_loop

RNG = np.random.default_rng(0)


def r(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def P(a):
    """A layer parameter as float64 NumPy."""
    return np.asarray(a).astype(np.float64)


def close(got, want, tol=1e-5):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def np_layer_norm(x, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# -- linear family ----------------------------------------------------------------------------
def test_linear_identity_bilinear():
    x = r(2, 3, 5)
    lin = nn.Linear(5, 4)
    close(lin(mx.array(x)), x @ P(lin.weight).T + P(lin.bias))
    nb = nn.Linear(5, 4, bias=False)
    assert "bias" not in nb
    close(nb(mx.array(x)), x @ P(nb.weight).T)
    assert nn.Identity(1, 2, foo=3)(mx.array(x)) is not None
    close(nn.Identity()(mx.array(x)), x)
    bl = nn.Bilinear(5, 2, 3)
    assert bl.weight.shape == (3, 2, 5)
    x2 = r(2, 3, 2)
    want = np.einsum("abi,oji,abj->abo", x, P(bl.weight), x2) + P(bl.bias)
    close(bl(mx.array(x), mx.array(x2)), want)


def test_embedding_and_as_linear():
    emb = nn.Embedding(7, 3)
    idx = np.array([[0, 6], [3, 3]])
    close(emb(mx.array(idx)), P(emb.weight)[idx])
    x = r(2, 3)
    close(emb.as_linear(mx.array(x)), x @ P(emb.weight).T)


def test_sequential_calls_in_order():
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), lambda y: y * 2, nn.Linear(4, 1))
    x = r(5, 3)
    h = np.maximum(x @ P(seq.layers[0].weight).T + P(seq.layers[0].bias), 0) * 2
    close(seq(mx.array(x)), h @ P(seq.layers[3].weight).T + P(seq.layers[3].bias))


# -- dropout ----------------------------------------------------------------------------------
def test_dropout_training_and_eval():
    x = mx.ones((200, 50))
    d = nn.Dropout(0.25)
    y = np.asarray(d(x))
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    d.eval()
    assert np.array_equal(np.asarray(d(x)), np.ones((200, 50)))
    assert nn.Dropout(0.0)(x) is x
    with pytest.raises(ValueError, match="not in"):
        nn.Dropout(1.0)
    d2 = nn.Dropout2d(0.5)
    y2 = np.asarray(d2(mx.ones((4, 5, 6, 8))))
    # whole channels are dropped: constant over the two spatial axes
    assert (y2 == y2[:, :1, :1, :]).all()
    with pytest.raises(ValueError, match="Dropout2d"):
        d2(mx.ones((2, 3)))
    y3 = np.asarray(nn.Dropout3d(0.5)(mx.ones((2, 3, 4, 5, 6))))
    assert (y3 == y3[:, :1, :1, :1, :]).all()


def test_dropout_uses_the_random_state():
    d = nn.Dropout(0.5)
    mx.random.seed(4)
    a = np.asarray(d(mx.ones((64,))))
    mx.random.seed(4)
    b = np.asarray(d(mx.ones((64,))))
    assert np.array_equal(a, b)


# -- normalization ----------------------------------------------------------------------------
def test_layer_norm_rms_norm():
    x = r(2, 4, 6, scale=3.0)
    ln = nn.LayerNorm(6)
    ln.weight = mx.array(r(6))
    ln.bias = mx.array(r(6))
    close(ln(mx.array(x)), np_layer_norm(x.astype(np.float64)) * P(ln.weight) + P(ln.bias))
    close(nn.LayerNorm(6, affine=False)(mx.array(x)), np_layer_norm(x.astype(np.float64)))
    assert "bias" not in nn.LayerNorm(6, bias=False)
    rms = nn.RMSNorm(6, eps=1e-3)
    rms.weight = mx.array(r(6))
    xd = x.astype(np.float64)
    close(rms(mx.array(x)), xd / np.sqrt((xd**2).mean(-1, keepdims=True) + 1e-3) * P(rms.weight))
    # half precision is normalised in float32 and returned in the input dtype (float32
    # parameters promote the result, as in MLX)
    half = nn.LayerNorm(6)
    half.set_dtype(mx.float16)
    y = half(mx.array(x, dtype=mx.float16))
    assert y.dtype == mx.float16
    close(y, np_layer_norm(x.astype(np.float64)), tol=1e-2)


def test_group_norm_both_layouts():
    x = r(2, 3, 4, 6).astype(np.float64)
    gn = nn.GroupNorm(3, 6)
    gn.weight = mx.array(r(6))
    gn.bias = mx.array(r(6))
    # MLX layout: channel c is in group c % 3
    want = np.empty_like(x)
    for g in range(3):
        sel = x[..., g::3]
        mu = sel.mean(axis=(1, 2, 3), keepdims=True)
        var = sel.var(axis=(1, 2, 3), keepdims=True)
        want[..., g::3] = (sel - mu) / np.sqrt(var + 1e-5)
    close(gn(mx.array(x.astype(np.float32))), want * P(gn.weight) + P(gn.bias), tol=1e-4)
    # PyTorch layout: contiguous groups of 2 channels
    pt = nn.GroupNorm(3, 6, affine=False, pytorch_compatible=True)
    want = np.empty_like(x)
    for g in range(3):
        sel = x[..., 2 * g:2 * g + 2]
        mu = sel.mean(axis=(1, 2, 3), keepdims=True)
        want[..., 2 * g:2 * g + 2] = (sel - mu) / np.sqrt(sel.var(axis=(1, 2, 3),
                                                                  keepdims=True) + 1e-5)
    close(pt(mx.array(x.astype(np.float32))), want, tol=1e-4)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(4, 6)


def test_instance_norm():
    x = r(2, 5, 3).astype(np.float64)
    inn = nn.InstanceNorm(3, affine=True)
    mu = x.mean(1, keepdims=True)
    close(inn(mx.array(x.astype(np.float32))), (x - mu) / np.sqrt(x.var(1, keepdims=True) + 1e-5),
          tol=1e-4)


def test_batch_norm_train_eval_and_running_stats():
    x = r(8, 3, 4, scale=2.0).astype(np.float64)
    bn = nn.BatchNorm(4, momentum=0.2)
    assert "running_mean" in bn.state and "running_mean" not in bn.trainable_parameters()
    y = bn(mx.array(x.astype(np.float32)))
    mu, var = x.mean((0, 1)), x.var((0, 1))
    close(y, (x - mu) / np.sqrt(var + 1e-5), tol=1e-4)
    rm = 0.8 * 0 + 0.2 * mu
    rv = 0.8 * 1 + 0.2 * x.var((0, 1), ddof=1)
    close(bn.running_mean, rm, tol=1e-5)
    close(bn.running_var, rv, tol=1e-5)
    bn.eval()
    x2 = r(5, 4).astype(np.float64)
    close(bn(mx.array(x2.astype(np.float32))), (x2 - rm) / np.sqrt(rv + 1e-5), tol=1e-4)
    close(bn.running_mean, rm, tol=1e-5)  # unchanged in eval mode
    # unfreezing (directly or from a parent) keeps the running statistics frozen
    bn.unfreeze()
    assert "running_var" not in bn.trainable_parameters()
    parent = nn.Sequential(bn)
    parent.freeze()
    parent.unfreeze()
    assert list(bn.trainable_parameters()) == ["weight", "bias"]
    with pytest.raises(ValueError, match="more than one value"):
        nn.BatchNorm(4)(mx.ones((1, 4)))
    nt = nn.BatchNorm(4, track_running_stats=False, affine=False)
    assert list(nt.parameters()) == []
    nt.eval()
    close(nt(mx.array(x.astype(np.float32))), (x - mu) / np.sqrt(var + 1e-5), tol=1e-4)


# -- attention and transformers -------------------------------------------------------------
def np_mha(m, q, k, v, mask=None):
    h = m.num_heads

    def proj(lin, x):
        y = x @ P(lin.weight).T
        return y + P(lin.bias) if "bias" in lin else y

    def heads(x):
        B, L, D = x.shape
        return x.reshape(B, L, h, D // h).transpose(0, 2, 1, 3)

    Q, K, V = heads(proj(m.query_proj, q)), heads(proj(m.key_proj, k)), \
        heads(proj(m.value_proj, v))
    s = Q @ K.transpose(0, 1, 3, 2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s + mask
    o = np_softmax(s) @ V
    B, _, L, _ = o.shape
    return proj(m.out_proj, o.transpose(0, 2, 1, 3).reshape(B, L, -1))


def test_multi_head_attention_and_causal_mask():
    m = nn.MultiHeadAttention(8, 2)
    assert "bias" not in m.query_proj
    q, kv = r(2, 4, 8), r(2, 6, 8)
    close(m(mx.array(q), mx.array(kv), mx.array(kv)), np_mha(m, q, kv, kv), tol=1e-4)
    mask = nn.MultiHeadAttention.create_additive_causal_mask(4)
    want_mask = np.where(np.arange(4)[:, None] < np.arange(4)[None], np.finfo(np.float32).min,
                         0.0)
    close(mask, want_mask)
    mb = nn.MultiHeadAttention(8, 4, value_dims=12, value_output_dims=5, bias=True)
    y = mb(mx.array(q), mx.array(q), mx.array(q), mask=mask)
    assert y.shape == (2, 4, 5)
    close(y, np_mha(mb, q, q, q, want_mask), tol=1e-4)
    # boolean masks keep where True
    bm = mx.array(np.tril(np.ones((4, 4), bool)))
    close(m(mx.array(q), mx.array(q), mx.array(q), mask=bm), np_mha(m, q, q, q, want_mask),
          tol=1e-4)
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiHeadAttention(7, 2)


def np_encoder_layer(layer, x, mask):
    def ln(mod, y):
        return np_layer_norm(y) * P(mod.weight) + P(mod.bias)

    def mlp(y):
        y = np.maximum(y @ P(layer.linear1.weight).T + P(layer.linear1.bias), 0)
        return y @ P(layer.linear2.weight).T + P(layer.linear2.bias)

    if layer.norm_first:
        y = ln(layer.ln1, x)
        x = x + np_mha(layer.attention, y, y, y, mask)
        return x + mlp(ln(layer.ln2, x))
    x = ln(layer.ln1, x + np_mha(layer.attention, x, x, x, mask))
    return ln(layer.ln2, x + mlp(x))


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_encoder(norm_first):
    enc = nn.TransformerEncoder(2, 8, 2, mlp_dims=16, norm_first=norm_first)
    x = r(2, 5, 8)
    mask = nn.MultiHeadAttention.create_additive_causal_mask(5)
    y = x.astype(np.float64)
    for layer in enc.layers:
        y = np_encoder_layer(layer, y, P(mask))
    want = np_layer_norm(y) * P(enc.ln.weight) + P(enc.ln.bias)
    close(enc(mx.array(x), mask), want, tol=1e-4)


def test_transformer_shapes_parameters_and_decoder_uses_memory():
    t = nn.Transformer(dims=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=2,
                       mlp_dims=12)
    names = [k for k, _ in tree_flatten(t.parameters())]
    assert "decoder.layers.1.cross_attention.key_proj.weight" in names
    assert "encoder.ln.bias" in names and t.encoder.layers[0].linear1.weight.shape == (12, 8)
    src, tgt = r(2, 6, 8), r(2, 4, 8)
    mask = nn.MultiHeadAttention.create_additive_causal_mask(4)
    y = t(mx.array(src), mx.array(tgt), None, mask, None)
    assert y.shape == (2, 4, 8)
    y2 = t(mx.array(src * 2), mx.array(tgt), None, mask, None)
    assert not np.allclose(np.asarray(y), np.asarray(y2))
    # causal: changing the last target position leaves earlier outputs unchanged
    tgt2 = tgt.copy()
    tgt2[:, -1] += 1
    y3 = t(mx.array(src), mx.array(tgt2), None, mask, None)
    np.testing.assert_allclose(np.asarray(y3)[:, :-1], np.asarray(y)[:, :-1], rtol=1e-4,
                               atol=1e-5)


# -- positional encodings --------------------------------------------------------------------
def np_rope(x, dims, traditional, base, scale, offset):
    L = x.shape[-2]
    pos = (np.arange(L) + offset) * scale
    inv = base ** (-np.arange(0, dims, 2) / dims)
    th = pos[:, None] * inv[None]
    c, s = np.cos(th), np.sin(th)
    out = x.astype(np.float64).copy()
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2] = a * c - b * s
        out[..., 1:dims:2] = a * s + b * c
    else:
        h = dims // 2
        a, b = x[..., :h], x[..., h:dims]
        out[..., :h] = a * c - b * s
        out[..., h:dims] = a * s + b * c
    return out


@pytest.mark.parametrize("traditional", [False, True])
def test_rope(traditional):
    x = r(2, 3, 5, 8)
    rope = nn.RoPE(6, traditional=traditional, base=500.0, scale=0.5)
    close(rope(mx.array(x), offset=2), np_rope(x, 6, traditional, 500.0, 0.5, 2), tol=1e-4)


def test_sinusoidal_positional_encoding():
    pe = nn.SinusoidalPositionalEncoding(8, min_freq=1e-3, max_freq=0.5)
    x = np.arange(6, dtype=np.float32)
    freqs = np.exp(np.linspace(np.log(0.5), np.log(1e-3), 4))
    arg = x[:, None] * freqs[None]
    close(pe(mx.array(x)), np.concatenate([np.sin(arg), np.cos(arg)], -1) * math.sqrt(2 / 8),
          tol=1e-5)
    pe2 = nn.SinusoidalPositionalEncoding(4, cos_first=True, scale=1.0, full_turns=True)
    f2 = np.exp(np.linspace(0, np.log(1e-4), 2)) * 2 * np.pi
    arg = x[:, None] * f2[None]
    close(pe2(mx.array(x)), np.concatenate([np.cos(arg), np.sin(arg)], -1), tol=1e-4)
    with pytest.raises(ValueError, match="even"):
        nn.SinusoidalPositionalEncoding(5)


# -- recurrent -------------------------------------------------------------------------------
def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def test_rnn_gru_lstm_against_numpy_recurrences():
    x = r(2, 4, 3).astype(np.float64)
    h0 = r(2, 5).astype(np.float64)
    rnn = nn.RNN(3, 5)
    h, want = h0, []
    for t in range(4):
        h = np.tanh(x[:, t] @ P(rnn.Wxh).T + P(rnn.bias) + h @ P(rnn.Whh).T)
        want.append(h)
    close(rnn(mx.array(x.astype(np.float32)), mx.array(h0.astype(np.float32))),
          np.stack(want, 1), tol=1e-5)
    gru = nn.GRU(3, 5)
    Wx, Wh, b, bhn = P(gru.Wx), P(gru.Wh), P(gru.b), P(gru.bhn)
    h, want = h0, []
    for t in range(4):
        gx = x[:, t] @ Wx.T + b
        gh = h @ Wh.T
        rr = _sigmoid(gx[:, :5] + gh[:, :5])
        z = _sigmoid(gx[:, 5:10] + gh[:, 5:10])
        n = np.tanh(gx[:, 10:] + rr * (gh[:, 10:] + bhn))
        h = (1 - z) * n + z * h
        want.append(h)
    close(gru(mx.array(x.astype(np.float32)), mx.array(h0.astype(np.float32))),
          np.stack(want, 1), tol=1e-5)
    lstm = nn.LSTM(3, 5)
    Wx, Wh, b = P(lstm.Wx), P(lstm.Wh), P(lstm.bias)
    h, c, hs, cs = np.zeros((2, 5)), np.zeros((2, 5)), [], []
    for t in range(4):
        g = x[:, t] @ Wx.T + b + h @ Wh.T
        i, f, gg, o = _sigmoid(g[:, :5]), _sigmoid(g[:, 5:10]), np.tanh(g[:, 10:15]), \
            _sigmoid(g[:, 15:])
        c = f * c + i * gg
        h = o * np.tanh(c)
        hs.append(h)
        cs.append(c)
    got_h, got_c = lstm(mx.array(x.astype(np.float32)))
    close(got_h, np.stack(hs, 1), tol=1e-5)
    close(got_c, np.stack(cs, 1), tol=1e-5)
    assert nn.RNN(3, 5, bias=False).bias is None
    with pytest.raises(ValueError, match=r"\[LSTM\]"):
        lstm(mx.ones((2, 4, 4)))


# -- convolution, pooling, upsampling ------------------------------------------------------------
def test_conv_layers_against_loop_reference():
    x1 = r(2, 9, 4)
    c1 = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)
    assert c1.weight.shape == (6, 3, 2) and np.all(np.asarray(c1.bias) == 0)
    c1.bias = mx.array(r(6))
    close(c1(mx.array(x1)), conv_loop(x1, P(c1.weight), stride=2, padding=1,
                                      kernel_dilation=2, groups=2) + P(c1.bias), tol=1e-4)
    x2 = r(2, 7, 6, 3)
    c2 = nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=(1, 0))
    assert c2.weight.shape == (5, 3, 2, 3)
    close(c2(mx.array(x2)), conv_loop(x2, P(c2.weight), stride=(2, 1), padding=(1, 0))
          + P(c2.bias), tol=1e-4)
    c3 = nn.Conv3d(3, 2, 2, bias=False)
    x3 = r(1, 3, 4, 3, 3)
    close(c3(mx.array(x3)), conv_loop(x3, P(c3.weight)), tol=1e-4)
    ct = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)
    close(ct(mx.array(x2)), conv_transpose_loop(x2, P(ct.weight), stride=2, padding=1,
                                                output_padding=1) + P(ct.bias), tol=1e-4)
    ct1 = nn.ConvTranspose1d(4, 2, 3, stride=3)
    close(ct1(mx.array(x1)), conv_transpose_loop(x1, P(ct1.weight), stride=3) + P(ct1.bias),
          tol=1e-4)


def test_conv_default_initialisation_bound():
    c = nn.Conv2d(6, 300, 3, groups=2)
    bound = 1 / math.sqrt(3 * 9)
    w = np.asarray(c.weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound


def np_pool(x, k, s, p, fn, fill):
    nd = x.ndim - 2
    x = np.pad(x.astype(np.float64), [(0, 0)] + [(p, p)] * nd + [(0, 0)], constant_values=fill)
    out_sp = [(n - k) // s + 1 for n in x.shape[1:-1]]
    out = np.empty([x.shape[0]] + out_sp + [x.shape[-1]])
    for o in np.ndindex(*out_sp):
        win = x[(slice(None),) + tuple(slice(i * s, i * s + k) for i in o)]
        out[(slice(None),) + o] = fn(win.reshape(x.shape[0], -1, x.shape[-1]), axis=1)
    return out


@pytest.mark.parametrize("k,s,p", [(2, None, 0), (3, 2, 1), (3, 1, 0), (2, 3, 1)])
def test_pooling(k, s, p):
    x2 = r(2, 7, 8, 3)
    x1 = r(2, 9, 3)
    st = k if s is None else s
    close(nn.MaxPool2d(k, s, p)(mx.array(x2)), np_pool(x2, k, st, p, np.max, -np.inf))
    close(nn.AvgPool2d(k, s, p)(mx.array(x2)), np_pool(x2, k, st, p, np.mean, 0.0))
    close(nn.MaxPool1d(k, s, p)(mx.array(x1)), np_pool(x1, k, st, p, np.max, -np.inf))
    close(nn.AvgPool1d(k, s, p)(mx.array(x1)), np_pool(x1, k, st, p, np.mean, 0.0))


def test_pool3d_and_pool_errors():
    x = r(1, 4, 4, 4, 2)
    close(nn.MaxPool3d(2)(mx.array(x)), np_pool(x, 2, 2, 0, np.max, -np.inf))
    close(nn.AvgPool3d(3, 1)(mx.array(x)), np_pool(x, 3, 1, 0, np.mean, 0.0))
    with pytest.raises(ValueError, match="kernel_size"):
        nn.MaxPool2d((2, 2, 2))
    with pytest.raises(ValueError, match="positive"):
        nn.AvgPool2d(0)
    with pytest.raises(ValueError, match="MaxPool2d"):
        nn.MaxPool2d(2)(mx.ones((2, 4, 3)))


def test_upsample():
    x = r(1, 3, 4, 2).astype(np.float64)
    near = nn.Upsample(2)(mx.array(x.astype(np.float32)))
    close(near, x.repeat(2, axis=1).repeat(2, axis=2))
    # linear, align_corners=False: sample at (i + 0.5) / 2 - 0.5, clamped
    lin = np.asarray(nn.Upsample((2, 1), mode="linear")(mx.array(x.astype(np.float32))))
    pos = np.clip((np.arange(6) + 0.5) / 2 - 0.5, 0, 2)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, 2)
    w = (pos - lo)[None, :, None, None]
    close(lin, x[:, lo] * (1 - w) + x[:, hi] * w)
    # align_corners=True: endpoints coincide
    ac = np.asarray(nn.Upsample(2, mode="linear", align_corners=True)(
        mx.array(x.astype(np.float32))))
    np.testing.assert_allclose(ac[:, 0, 0], x[:, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(ac[:, -1, -1], x[:, -1, -1], rtol=1e-6)
    cub = nn.Upsample(2, mode="cubic")(mx.array(x.astype(np.float32)))
    assert cub.shape == (1, 6, 8, 2)
    # cubic convolution (a = -0.75), 4 taps with clamped indices, along the width only
    v = r(7).astype(np.float64)
    a = -0.75

    def kernel(d):
        d = abs(d)
        if d <= 1:
            return (a + 2) * d**3 - (a + 3) * d**2 + 1
        return a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a if d < 2 else 0.0

    want = []
    for i in range(14):
        pos = (i + 0.5) / 2 - 0.5
        base = math.floor(pos)
        want.append(sum(kernel(pos - t) * v[min(max(t, 0), 6)]
                        for t in range(base - 1, base + 3)))
    cr = nn.Upsample((1, 2), mode="cubic")(mx.array(v.astype(np.float32)[None, None, :, None]))
    close(np.asarray(cr)[0, 0, :, 0], np.array(want), tol=1e-5)
    with pytest.raises(ValueError, match="unsupported"):
        nn.Upsample(2, mode="area")


# -- activations ----------------------------------------------------------------------------------
X = r(3, 8, scale=3.0)
XD = X.astype(np.float64)


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _softplus(v):
    return np.log1p(np.exp(-np.abs(v))) + np.maximum(v, 0)


ERF = np.vectorize(math.erf)
ACTIVATIONS = {
    "relu": lambda v: np.maximum(v, 0),
    "relu2": lambda v: np.maximum(v, 0) ** 2,
    "relu6": lambda v: np.clip(v, 0, 6),
    "leaky_relu": lambda v: np.where(v > 0, v, 0.01 * v),
    "elu": lambda v: np.where(v > 0, v, np.expm1(v)),
    "selu": lambda v: 1.0507 * np.where(v > 0, v, 1.67326 * np.expm1(v)),
    "celu": lambda v: np.where(v > 0, v, np.expm1(v)),
    "gelu": lambda v: 0.5 * v * (1 + ERF(v / math.sqrt(2))),
    "gelu_approx": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                    * (v + 0.044715 * v**3))),
    "gelu_fast_approx": lambda v: v * _sig(1.702 * v),
    "silu": lambda v: v * _sig(v),
    "sigmoid": _sig,
    "tanh": np.tanh,
    "softplus": _softplus,
    "softsign": lambda v: v / (1 + np.abs(v)),
    "softshrink": lambda v: np.where(np.abs(v) > 0.5, v - np.sign(v) * 0.5, 0),
    "hard_shrink": lambda v: np.where(np.abs(v) > 0.5, v, 0),
    "mish": lambda v: v * np.tanh(_softplus(v)),
    "log_sigmoid": lambda v: -_softplus(-v),
    "log_softmax": lambda v: v - np.log(np.exp(v).sum(-1, keepdims=True)),
    "softmax": np_softmax,
    "softmin": lambda v: np_softmax(-v),
    "hardswish": lambda v: v * np.clip(v + 3, 0, 6) / 6,
    "hard_tanh": lambda v: np.clip(v, -1, 1),
    "glu": lambda v: v[..., :4] * _sig(v[..., 4:]),
    "step": lambda v: (v >= 0).astype(np.float64),
}
CLASSES = {"relu": "ReLU", "relu2": "ReLU2", "relu6": "ReLU6", "leaky_relu": "LeakyReLU",
           "elu": "ELU", "selu": "SELU", "celu": "CELU", "silu": "SiLU", "sigmoid": "Sigmoid",
           "tanh": "Tanh", "softplus": "Softplus", "softsign": "Softsign",
           "softshrink": "Softshrink", "hard_shrink": "HardShrink", "mish": "Mish",
           "log_sigmoid": "LogSigmoid", "log_softmax": "LogSoftmax", "softmax": "Softmax",
           "softmin": "Softmin", "hardswish": "Hardswish", "hard_tanh": "HardTanh",
           "glu": "GLU", "step": "Step"}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_functions_and_classes(name):
    want = ACTIVATIONS[name](XD)
    close(getattr(nn, name)(mx.array(X)), want, tol=2e-5)
    if name in CLASSES:
        close(getattr(nn, CLASSES[name])()(mx.array(X)), want, tol=2e-5)


def test_parameterised_activations_and_prelu():
    close(nn.leaky_relu(mx.array(X), 0.2), np.where(XD > 0, XD, 0.2 * XD))
    close(nn.LeakyReLU(0.3)(mx.array(X)), np.where(XD > 0, XD, 0.3 * XD))
    close(nn.elu(mx.array(X), alpha=2.0), np.where(XD > 0, XD, 2 * np.expm1(XD)), tol=1e-5)
    close(nn.CELU(0.5)(mx.array(X)), np.maximum(XD, 0) + 0.5 * np.expm1(np.minimum(XD, 0) / 0.5),
          tol=1e-5)
    close(nn.hard_tanh(mx.array(X), -0.5, 2.0), np.clip(XD, -0.5, 2.0))
    close(nn.step(mx.array(X), 1.0), (XD >= 1).astype(float))
    p = nn.PReLU(8, init=0.1)
    assert p.weight.shape == (8,)
    close(p(mx.array(X)), np.where(XD > 0, XD, 0.1 * XD), tol=1e-6)
    close(nn.softmax(mx.array(X), axis=0), np_softmax(XD, 0), tol=1e-6)
    for approx, fn in (("none", "gelu"), ("precise", "gelu_approx"), ("tanh", "gelu_approx"),
                       ("fast", "gelu_fast_approx")):
        close(nn.GELU(approx)(mx.array(X)), ACTIVATIONS[fn](XD), tol=2e-5)
    with pytest.raises(ValueError, match="approximation"):
        nn.GELU("bogus")


def test_activations_are_shapeless_compiled_and_differentiable():
    for shape in [(3,), (2, 5), (4, 1, 3)]:
        v = r(*shape)
        close(nn.silu(mx.array(v)), v * _sig(v.astype(np.float64)))
    g = mx.grad(lambda v: nn.gelu(v).sum())(mx.array(X))
    d = 0.5 * (1 + ERF(XD / math.sqrt(2))) + XD * np.exp(-XD**2 / 2) / math.sqrt(2 * math.pi)
    close(g, d, tol=1e-4)


# -- gradients through layers vs finite differences ------------------------------------------------
def _fd_check(model, x, n=8, eps=1e-6, tol=1e-5):
    """Gradient of sum(sin(model(x))) wrt every parameter and x against central differences
    (float64 model and input)."""
    model.set_dtype(mx.float64)
    xa = mx.array(x, dtype=mx.float64)
    cot = RNG.standard_normal(model(xa).shape)

    def loss(x):
        return mx.sum(model(x) * mx.array(cot, dtype=mx.float64))

    _, grads = nn.value_and_grad(model, loss)(xa)
    gx = np.asarray(mx.grad(loss)(xa))
    flat = dict(tree_flatten(model.trainable_parameters()))
    gflat = dict(tree_flatten(grads))
    targets = [(k, v, gflat[k]) for k, v in flat.items()]
    for k, v, g in targets:
        base = np.asarray(v).copy()
        for j in RNG.permutation(base.size)[:n]:
            vals = []
            for sgn in (1, -1):
                pert = base.copy().reshape(-1)
                pert[j] += sgn * eps
                model.update(tree_unflatten_one(k, mx.array(pert.reshape(base.shape),
                                                            dtype=mx.float64)))
                vals.append(loss(xa).item())
            model.update(tree_unflatten_one(k, mx.array(base, dtype=mx.float64)))
            fd = (vals[0] - vals[1]) / (2 * eps)
            np.testing.assert_allclose(np.asarray(g).reshape(-1)[j], fd, rtol=tol, atol=tol,
                                       err_msg=k)
    for j in RNG.permutation(x.size)[:n]:
        xp, xm = x.astype(np.float64).reshape(-1).copy(), x.astype(np.float64).reshape(-1).copy()
        xp[j] += eps
        xm[j] -= eps
        fd = (loss(mx.array(xp.reshape(x.shape), dtype=mx.float64)).item()
              - loss(mx.array(xm.reshape(x.shape), dtype=mx.float64)).item()) / (2 * eps)
        np.testing.assert_allclose(gx.reshape(-1)[j], fd, rtol=tol, atol=tol, err_msg="input")


def tree_unflatten_one(key, value):
    from braze.utils import tree_unflatten
    return tree_unflatten([(key, value)])


@pytest.mark.parametrize("make,shape", [
    (lambda: nn.Sequential(nn.Linear(4, 5), nn.GELU(), nn.LayerNorm(5), nn.Linear(5, 3)),
     (3, 4)),
    (lambda: nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, stride=2), nn.SiLU(), nn.AvgPool2d(2),
                           nn.GroupNorm(1, 3)), (2, 6, 6, 2)),
    (lambda: nn.Sequential(nn.Conv1d(3, 4, 2, groups=1), nn.MaxPool1d(2), nn.RMSNorm(4)),
     (2, 7, 3)),
    (lambda: nn.TransformerEncoder(1, 4, 2, mlp_dims=6), (2, 3, 4)),
    (lambda: nn.Bilinear(3, 3, 2), (4, 3)),
])
def test_gradients_through_layers_match_finite_differences(make, shape):
    model = make()
    if isinstance(model, nn.TransformerEncoder):
        enc = model
        model = nn.Sequential(lambda x: enc(x, None))
        model.enc = enc
    if isinstance(model, nn.Bilinear):
        bl = model
        model = nn.Sequential(lambda x: bl(x, x * 2))
        model.bl = bl
    _fd_check(model, r(*shape))


def test_batch_norm_gradient_in_training_mode():
    _fd_check(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm(4)), r(6, 3))


# -- bad input -------------------------------------------------------------------------------------
def _unchanged(model, fn, exc, *needles):
    before = {k: np.asarray(v).copy() for k, v in tree_flatten(model.parameters())}
    with pytest.raises(exc) as e:
        fn()
    for n in needles:
        assert n in str(e.value), (n, str(e.value))
    for k, v in tree_flatten(model.parameters()):
        np.testing.assert_array_equal(np.asarray(v), before[k])


def test_wrong_feature_sizes_name_the_layer_and_shapes():
    lin = nn.Linear(4, 2)
    _unchanged(lin, lambda: lin(mx.ones((3, 5))), ValueError, "[Linear]", "4", "(3, 5)")
    bl = nn.Bilinear(4, 3, 2)
    _unchanged(bl, lambda: bl(mx.ones((2, 4)), mx.ones((2, 4))), ValueError, "[Bilinear]",
               "(2, 4)")
    conv = nn.Conv2d(3, 4, 3)
    _unchanged(conv, lambda: conv(mx.ones((1, 5, 5, 2))), ValueError, "[Conv2d]",
               "(1, 5, 5, 2)")
    _unchanged(conv, lambda: conv(mx.ones((5, 5, 3))), ValueError, "[Conv2d]")
    ln = nn.LayerNorm(6)
    _unchanged(ln, lambda: ln(mx.ones((2, 5))), ValueError, "[LayerNorm]", "(2, 5)")
    bn = nn.BatchNorm(3)
    _unchanged(bn, lambda: bn(mx.ones((4, 5))), ValueError, "[BatchNorm]", "(4, 5)")
    rms = nn.RMSNorm(3)
    _unchanged(rms, lambda: rms(mx.ones((4, 5))), ValueError, "[RMSNorm]")
    emb = nn.Embedding(4, 3)
    _unchanged(emb, lambda: emb(mx.ones((2,))), ValueError, "[Embedding]", "float32")
    mha = nn.MultiHeadAttention(8, 2)
    _unchanged(mha, lambda: mha(mx.ones((1, 2, 6)), mx.ones((1, 2, 8)), mx.ones((1, 2, 8))),
               ValueError, "[Linear]", "(1, 2, 6)")
    seq = nn.Sequential(nn.Linear(4, 3), nn.Linear(4, 2))
    _unchanged(seq, lambda: seq(mx.ones((1, 4))), ValueError, "[Linear]", "(1, 3)")


# -- optional: identical to mlx.nn with the same weights ------------------------------------------
MLX_LAYERS = [
    ("Linear", lambda n: n.Linear(6, 3), [(2, 6)]),
    ("Conv2d", lambda n: n.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), [(2, 7, 6, 4)]),
    ("ConvTranspose1d", lambda n: n.ConvTranspose1d(6, 3, 3, stride=2, padding=1), [(2, 5, 6)]),
    ("GroupNorm", lambda n: n.GroupNorm(2, 6), [(2, 3, 6)]),
    ("MaxPool2d", lambda n: n.MaxPool2d(3, 2, 1), [(2, 7, 6, 4)]),
    ("Upsample", lambda n: n.Upsample((1.5, 2), mode="cubic"), [(1, 4, 3, 2)]),
    ("RoPE", lambda n: n.RoPE(4, traditional=True), [(2, 5, 6)]),
    ("TransformerEncoder", lambda n: n.TransformerEncoder(2, 6, 3, norm_first=False),
     [(2, 4, 6)]),
]


@pytest.mark.parametrize("name,make,shapes", MLX_LAYERS, ids=[m[0] for m in MLX_LAYERS])
def test_matches_mlx_nn(name, make, shapes):
    M = pytest.importorskip("mlx.core")
    MN = pytest.importorskip("mlx.nn")
    from mlx.utils import tree_flatten as mtf

    ours, theirs = make(nn), make(MN)
    ours.load_weights([(k, mx.array(np.array(v))) for k, v in mtf(theirs.parameters())])
    xs = [r(*s) for s in shapes]
    if name == "TransformerEncoder":
        a = ours(mx.array(xs[0]), None)
        b = theirs(M.array(xs[0]), None)
    else:
        a, b = ours(*[mx.array(x) for x in xs]), theirs(*[M.array(x) for x in xs])
    np.testing.assert_allclose(np.asarray(a), np.array(b), rtol=1e-4, atol=1e-5)


# -- quantized layers -------------------------------------------------------------------------
def test_nn_quantize_replaces_linear_and_embedding():
    m = nn.Sequential(nn.Embedding(5, 64), nn.ReLU(), nn.Linear(64, 32))
    nn.quantize(m, class_predicate=lambda _, m: isinstance(m, nn.Linear))
    assert isinstance(m.layers[0], nn.Embedding)
    assert isinstance(m.layers[2], nn.QuantizedLinear)
    nn.quantize(m, mode="mxfp4")
    assert isinstance(m.layers[0], nn.QuantizedEmbedding)
    assert m.layers[0].scales.dtype == mx.uint8 and m.layers[0].get("biases") is None
    y = m(mx.array([0, 3, 4]))
    assert y.shape == (3, 32)
    with pytest.raises(ValueError, match="bool or a dict"):
        nn.quantize(nn.Sequential(nn.Linear(64, 8)), class_predicate=lambda *_: 3)
    with pytest.raises(ValueError, match="Quantized input"):
        nn.quantize(nn.Sequential(nn.Embedding(5, 64)), mode="mxfp8", quantize_input=True)


def test_quantized_linear_matches_dequantized_weights():
    lin = nn.Linear(64, 8)
    for mode, gs, bits in (("affine", 32, 8), ("nvfp4", None, None), ("mxfp8", None, None)):
        q = lin.to_quantized(group_size=gs, bits=bits, mode=mode)
        parts = [q.weight, q.scales] + ([q.biases] if mode == "affine" else [])
        w = mx.dequantize(*parts, group_size=q.group_size, bits=q.bits, mode=mode,
                          dtype=mx.float32)
        x = mx.random.normal((3, 64), key=mx.random.key(0))
        np.testing.assert_allclose(np.array(q(x)), np.array(x @ w.T + lin.bias), rtol=1e-5,
                                   atol=1e-5)
        assert list(q.trainable_parameters()) == ["bias"]  # MLX: the copied bias trains
    qlin = lin.to_quantized()
    qlin.unfreeze(keys=["scales"])
    assert "scales" in qlin.trainable_parameters()


def test_quantized_embedding_lookup_and_as_linear():
    emb = nn.Embedding(16, 64)
    q = nn.QuantizedEmbedding.from_embedding(emb, bits=8)
    idx = mx.array([1, 5, 5, 0])
    assert float(mx.abs(emb(idx) - q(idx)).max()) <= float(q.scales.max())
    x = mx.random.normal((2, 64), key=mx.random.key(1))
    np.testing.assert_allclose(np.array(q.as_linear(x)), np.array(emb.as_linear(x)), atol=0.05)


def test_qqlinear_train_and_eval_forms():
    lin = nn.Linear(32, 4, bias=False)
    qq = lin.to_quantized(mode="mxfp8", quantize_input=True)
    assert isinstance(qq, nn.QQLinear) and qq.weight.dtype == mx.float32
    x = mx.random.normal((2, 32), key=mx.random.key(2))
    y_train = qq(x)
    g = mx.grad(lambda w: mx.qqmm(x, w, mode="mxfp8").sum())(qq.weight)
    assert g.shape == qq.weight.shape
    qq.eval()
    assert qq.weight.dtype == mx.uint32 and qq.scales.dtype == mx.uint8
    np.testing.assert_allclose(np.array(qq(x)), np.array(y_train), rtol=1e-6, atol=1e-6)
    qq.train()
    assert qq.weight.dtype == mx.bfloat16 and "scales" not in qq  # MLX: dequantize default
    with pytest.raises(ValueError, match="nvfp4"):
        lin.to_quantized(mode="mxfp4", quantize_input=True)


def test_sharded_linear_layers_on_one_process():
    lin = nn.Linear(64, 32)
    x = mx.random.normal((3, 64), key=mx.random.key(3))
    for sharding in ("all-to-sharded", "sharded-to-all"):
        s = nn.layers.distributed.shard_linear(lin, sharding)
        np.testing.assert_allclose(np.array(s(x)), np.array(lin(x)), rtol=1e-5, atol=1e-5)
        q = lin.to_quantized(bits=4)
        sq = nn.layers.distributed.shard_linear(q, sharding)
        assert sq.weight.shape == q.weight.shape
        np.testing.assert_allclose(np.array(sq(x)), np.array(q(x)), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="not supported"):
        nn.layers.distributed.shard_linear(lin, "rows")
    m = nn.Linear(64, 32)
    nn.layers.distributed.shard_inplace(m, "all-to-sharded")
    assert m.weight.shape == (32, 64)
