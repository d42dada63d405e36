"""The programs of `programs.py`, written once against MLX's API.

The library is chosen the way a user swaps it, by the import: `BENCH_LIB=mlx` imports
`mlx.core` / `mlx.nn` / `mlx.optimizers`, anything else `braze.core` / `braze.nn` /
`braze.optimizers`. Nothing below names the library again. The code follows the MLX examples
(mnist, cifar ResNet, transformer_lm, normalizing_flow) and mlx-lm's Llama (`KVCache` with
`cache[..., a:b, :] = k` updates, `mx.fast.scaled_dot_product_attention`, `nn.RoPE` with
an offset), on synthetic data and random weights.

Each `make_*` returns a `Program`: `unit()` runs one unit of work and waits for it (one
training step, or for an LLM one prefill + decode), returning a dict of seconds per phase.
"""
from __future__ import annotations

import math
import os
import time
from functools import partial

import numpy as np
from _programs_sizes import DECODE, LLM_SIZES, PREFILL, QUICK_DECODE

if os.environ.get("BENCH_LIB") == "mlx":
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim
else:
    import braze.core as mx
    import braze.nn as nn
    import braze.optimizers as optim

LIB = "mlx" if os.environ.get("BENCH_LIB") == "mlx" else "braze"


class Program:
    def __init__(self, unit, phases, per_unit):
        self.unit = unit          # () -> {phase: seconds}
        self.phases = phases      # e.g. ("step",) or ("prefill", "decode")
        self.per_unit = per_unit  # {phase: work items (steps or tokens) per unit}


def _train_program(step, state, batch):
    def unit():
        t0 = time.perf_counter()
        loss = step(*batch)
        mx.eval(loss, state)
        return {"step": time.perf_counter() - t0}
    return Program(unit, ("step",), {"step": 1})


# -- MLP (mlx-examples mnist, wider) ----------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, num_layers, input_dim, hidden_dim, output_dim):
        super().__init__()
        dims = [input_dim] + [hidden_dim] * num_layers + [output_dim]
        self.layers = [nn.Linear(i, o) for i, o in zip(dims[:-1], dims[1:])]

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = nn.relu(layer(x))
        return self.layers[-1](x)


def make_mlp(quick=False):
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    model = MLP(2, 784, 512, 10)
    mx.eval(model.parameters())
    optimizer = optim.SGD(learning_rate=0.1, momentum=0.9)

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        optimizer.update(model, grads)
        return loss

    x = mx.array(rng.random((256, 784), dtype=np.float32))
    y = mx.array(rng.integers(0, 10, 256).astype(np.int32))
    return _train_program(step, state, (x, y))


# -- ResNet (mlx-examples cifar, one block per stage) -----------------------------------------
class ShortcutA(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def __call__(self, x):
        return mx.pad(x[:, ::2, ::2, :], pad_width=[(0, 0), (0, 0), (0, 0),
                                                     (self.dims // 4, self.dims // 4)])


class Block(nn.Module):
    def __init__(self, in_dims, dims, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_dims, dims, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm(dims)
        self.conv2 = nn.Conv2d(dims, dims, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm(dims)
        self.shortcut = ShortcutA(dims) if stride != 1 else None

    def __call__(self, x):
        out = nn.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = out + (x if self.shortcut is None else self.shortcut(x))
        return nn.relu(out)


class ResNet(nn.Module):
    def __init__(self, blocks_per_stage=1, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm(16)
        layers, in_dims = [], 16
        for dims, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(blocks_per_stage):
                layers.append(Block(in_dims, dims, stride if i == 0 else 1))
                in_dims = dims
        self.layers = layers
        self.linear = nn.Linear(64, num_classes)

    def __call__(self, x):
        x = nn.relu(self.bn1(self.conv1(x)))
        for layer in self.layers:
            x = layer(x)
        return self.linear(mx.mean(x, axis=[1, 2]))


def make_cnn(quick=False):
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    model = ResNet()
    mx.eval(model.parameters())
    optimizer = optim.Adam(learning_rate=1e-3)

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        optimizer.update(model, grads)
        return loss

    x = mx.array(rng.random((32, 32, 32, 3), dtype=np.float32))  # NHWC, as MLX convolves
    y = mx.array(rng.integers(0, 10, 32).astype(np.int32))
    return _train_program(step, state, (x, y))


# -- Transformer LM (examples/transformer_lm.py) ----------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, dims, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dims, 3 * dims, bias=False)
        self.out = nn.Linear(dims, dims, bias=False)
        self.rope = nn.RoPE(dims // num_heads)

    def __call__(self, x, mask):
        B, L, D = x.shape
        q, k, v = mx.split(self.qkv(x), 3, axis=-1)
        q, k, v = (t.reshape(B, L, self.num_heads, -1).transpose(0, 2, 1, 3) for t in (q, k, v))
        q, k = self.rope(q), self.rope(k)
        scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(0, 1, 3, 2)
        weights = mx.softmax(scores + mask, axis=-1)
        return self.out((weights @ v).transpose(0, 2, 1, 3).reshape(B, L, D))


class TBlock(nn.Module):
    def __init__(self, dims, num_heads, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(dims)
        self.attn = CausalSelfAttention(dims, num_heads)
        self.norm2 = nn.LayerNorm(dims)
        self.mlp = nn.Sequential(nn.Linear(dims, 4 * dims), nn.GELU(), nn.Linear(4 * dims, dims))
        self.dropout = nn.Dropout(dropout)

    def __call__(self, x, mask):
        x = x + self.dropout(self.attn(self.norm1(x), mask))
        return x + self.dropout(self.mlp(self.norm2(x)))


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, dims=128, num_heads=4, num_layers=2, dropout=0.1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dims)
        self.blocks = [TBlock(dims, num_heads, dropout) for _ in range(num_layers)]
        self.norm = nn.LayerNorm(dims)
        self.out_proj = nn.Linear(dims, vocab_size)

    def __call__(self, tokens):
        mask = nn.MultiHeadAttention.create_additive_causal_mask(tokens.shape[1])
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.out_proj(self.norm(x))


def make_transformer(quick=False):
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    vocab = 96
    model = TransformerLM(vocab, 128, 4, 2, 0.1)
    mx.eval(model.parameters())
    optimizer = optim.AdamW(learning_rate=3e-3, weight_decay=0.01)

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        optimizer.update(model, grads)
        return loss

    tokens = rng.integers(0, vocab, (32, 65)).astype(np.int32)
    x, y = mx.array(tokens[:, :-1]), mx.array(tokens[:, 1:])
    return _train_program(step, state, (x, y))


# -- RealNVP (mlx-examples normalizing_flow) --------------------------------------------------
class FlowMLP(nn.Module):
    def __init__(self, n_layers, d_in, d_hidden, d_out):
        super().__init__()
        dims = [d_in] + [d_hidden] * n_layers + [d_out]
        self.layers = [nn.Linear(i, o) for i, o in zip(dims[:-1], dims[1:])]

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = nn.gelu(layer(x))
        return self.layers[-1](x)


class RealNVP(nn.Module):
    def __init__(self, n_transforms, d_params, d_hidden, n_layers):
        super().__init__()
        self.mask_list = [(mx.arange(d_params) % 2 == i % 2).astype(mx.float32)
                          for i in range(n_transforms)]
        self.s_nets = [FlowMLP(n_layers, d_params, d_hidden, d_params)
                       for _ in range(n_transforms)]
        self.t_nets = [FlowMLP(n_layers, d_params, d_hidden, d_params)
                       for _ in range(n_transforms)]

    def log_prob(self, x):
        log_det = mx.zeros(x.shape[0])
        for mask, s_net, t_net in reversed(list(zip(self.mask_list, self.s_nets, self.t_nets))):
            z = x * mask
            s = mx.tanh(s_net(z)) * (1 - mask)
            t = t_net(z) * (1 - mask)
            x = z + (1 - mask) * (x - t) * mx.exp(-s)
            log_det = log_det - mx.sum(s, axis=-1)
        base = -0.5 * mx.sum(mx.square(x) + math.log(2 * math.pi), axis=-1)
        return base + log_det


def make_flow(quick=False):
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    model = RealNVP(n_transforms=6, d_params=2, d_hidden=128, n_layers=4)
    model.freeze(keys=["mask_list"])
    mx.eval(model.parameters())
    optimizer = optim.Adam(learning_rate=3e-4)

    def loss_fn(model, x):
        return -mx.mean(model.log_prob(x))

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x):
        loss, grads = loss_and_grad(model, x)
        optimizer.update(model, grads)
        return loss

    # two moons
    n = 256
    theta = rng.uniform(0.0, math.pi, n)
    upper = rng.random(n) < 0.5
    pts = np.where(upper[:, None], np.stack([np.cos(theta), np.sin(theta)], 1),
                   np.stack([1 - np.cos(theta), 0.5 - np.sin(theta)], 1))
    x = mx.array((pts + rng.normal(0, 0.05, pts.shape)).astype(np.float32))
    return _train_program(step, state, (x,))


# -- Llama-style decoder (mlx-lm) -------------------------------------------------------------


class KVCache:
    """mlx-lm's KVCache: buffers grown in steps of 256, written with slice assignment."""

    step = 256

    def __init__(self):
        self.keys = None
        self.values = None
        self.offset = 0

    def update_and_fetch(self, keys, values):
        prev = self.offset
        if self.keys is None or (prev + keys.shape[2]) > self.keys.shape[2]:
            B, n_kv_heads, _, k_head_dim = keys.shape
            v_head_dim = values.shape[3]
            n_steps = (self.step + keys.shape[2] - 1) // self.step
            new_k = mx.zeros((B, n_kv_heads, n_steps * self.step, k_head_dim), keys.dtype)
            new_v = mx.zeros((B, n_kv_heads, n_steps * self.step, v_head_dim), values.dtype)
            if self.keys is not None:
                if prev % self.step != 0:
                    self.keys = self.keys[..., :prev, :]
                    self.values = self.values[..., :prev, :]
                self.keys = mx.concatenate([self.keys, new_k], axis=2)
                self.values = mx.concatenate([self.values, new_v], axis=2)
            else:
                self.keys, self.values = new_k, new_v
        self.offset += keys.shape[2]
        self.keys[..., prev:self.offset, :] = keys
        self.values[..., prev:self.offset, :] = values
        return self.keys[..., :self.offset, :], self.values[..., :self.offset, :]


class Attention(nn.Module):
    def __init__(self, dims, heads, kv_heads):
        super().__init__()
        self.n_heads, self.n_kv_heads = heads, kv_heads
        head_dim = dims // heads
        self.scale = head_dim ** -0.5
        self.q_proj = nn.Linear(dims, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(dims, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(dims, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, dims, bias=False)
        self.rope = nn.RoPE(head_dim, traditional=False, base=10000)

    def __call__(self, x, mask=None, cache=None):
        B, L, _ = x.shape
        queries, keys, values = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        queries = queries.reshape(B, L, self.n_heads, -1).transpose(0, 2, 1, 3)
        keys = keys.reshape(B, L, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        values = values.reshape(B, L, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        queries = self.rope(queries, offset=cache.offset)
        keys = self.rope(keys, offset=cache.offset)
        keys, values = cache.update_and_fetch(keys, values)
        output = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=self.scale,
                                                      mask=mask)
        return self.o_proj(output.transpose(0, 2, 1, 3).reshape(B, L, -1))


class SwiGLU(nn.Module):
    def __init__(self, dims, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dims, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dims, bias=False)
        self.up_proj = nn.Linear(dims, hidden, bias=False)

    def __call__(self, x):
        return self.down_proj(nn.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, dims, heads, kv_heads, hidden):
        super().__init__()
        self.self_attn = Attention(dims, heads, kv_heads)
        self.mlp = SwiGLU(dims, hidden)
        self.input_layernorm = nn.RMSNorm(dims, eps=1e-5)
        self.post_attention_layernorm = nn.RMSNorm(dims, eps=1e-5)

    def __call__(self, x, mask=None, cache=None):
        h = x + self.self_attn(self.input_layernorm(x), mask, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class Llama(nn.Module):
    def __init__(self, dims, layers, heads, kv_heads, hidden, vocab):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dims)
        self.layers = [DecoderLayer(dims, heads, kv_heads, hidden) for _ in range(layers)]
        self.norm = nn.RMSNorm(dims, eps=1e-5)
        self.lm_head = nn.Linear(dims, vocab, bias=False)

    def __call__(self, inputs, cache):
        h = self.embed_tokens(inputs)
        mask = "causal" if h.shape[1] > 1 else None
        for layer, c in zip(self.layers, cache):
            h = layer(h, mask, c)
        return self.lm_head(self.norm(h))


def make_llm(size="tiny", dtype="float32", quick=False):
    mx.random.seed(0)
    cfg = LLM_SIZES[size]
    model = Llama(**cfg)
    if dtype != "float32":
        model.set_dtype(getattr(mx, dtype))
    mx.eval(model.parameters())
    prompt = mx.array(np.random.default_rng(0).integers(0, cfg["vocab"], PREFILL)
                      .astype(np.int32))
    n_decode = QUICK_DECODE if quick else DECODE

    def unit():
        cache = [KVCache() for _ in model.layers]
        t0 = time.perf_counter()
        logits = model(prompt[None], cache)
        y = mx.argmax(logits[:, -1, :], axis=-1)
        mx.eval(y)
        t1 = time.perf_counter()
        for _ in range(n_decode):
            logits = model(y[:, None], cache)
            y = mx.argmax(logits[:, -1, :], axis=-1)
            mx.eval(y)
        t2 = time.perf_counter()
        return {"prefill": t1 - t0, "decode": t2 - t1}

    return Program(unit, ("prefill", "decode"), {"prefill": PREFILL, "decode": n_decode})


def make(program, size="tiny", dtype="float32", quick=False):
    if program == "llm":
        return make_llm(size, dtype, quick)
    return {"mlp": make_mlp, "cnn": make_cnn, "transformer": make_transformer,
            "flow": make_flow}[program](quick)
