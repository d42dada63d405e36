"""The programs of `programs.py` written the natural PyTorch way: `nn.Module`s in NCHW,
`loss.backward()` and a `torch.optim` step; `torch.compile(model)` for the compiled variant
(`BENCH_TORCH_COMPILE=1`). The decoder keeps a static KV cache written with `index_copy_`
and attends with `F.scaled_dot_product_attention` (`enable_gqa`), as gpt-fast does, so the
compiled model sees one shape for prefill and one for decode.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _programs_sizes import DECODE, LLM_SIZES, PREFILL, QUICK_DECODE

COMPILE = os.environ.get("BENCH_TORCH_COMPILE") == "1"
LIB = "torch.c" if COMPILE else "torch"


class Program:
    def __init__(self, unit, phases, per_unit):
        self.unit, self.phases, self.per_unit = unit, phases, per_unit


def _maybe_compile(model, **kw):
    return torch.compile(model, **kw) if COMPILE else model


def _train_program(model, optimizer, loss_fn, batch):
    fwd = _maybe_compile(model)

    def unit():
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(fwd, *batch)
        loss.backward()
        optimizer.step()
        loss.item()
        return {"step": time.perf_counter() - t0}
    return Program(unit, ("step",), {"step": 1})


def _ce(model, x, y):
    return F.cross_entropy(model(x), y)


def make_mlp(quick=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.from_numpy(rng.random((256, 784), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 256))
    return _train_program(model, opt, _ce, (x, y))


class Block(nn.Module):
    def __init__(self, in_dims, dims, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_dims, dims, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(dims)
        self.conv2 = nn.Conv2d(dims, dims, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(dims)
        self.pad = dims // 4 if stride != 1 else 0

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        sc = x if not self.pad else F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(out + sc)


class ResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layers = nn.Sequential(Block(16, 16), Block(16, 32, 2), Block(32, 64, 2))
        self.linear = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.linear(x.mean(dim=(2, 3)))


def make_cnn(quick=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = ResNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.from_numpy(rng.random((32, 3, 32, 32), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 32))
    return _train_program(model, opt, _ce, (x, y))


class TBlock(nn.Module):
    def __init__(self, dims, heads, dropout):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dims), nn.LayerNorm(dims)
        self.qkv = nn.Linear(dims, 3 * dims, bias=False)
        self.out = nn.Linear(dims, dims, bias=False)
        self.mlp = nn.Sequential(nn.Linear(dims, 4 * dims), nn.GELU(), nn.Linear(4 * dims, dims))
        self.dropout = nn.Dropout(dropout)

    def attn(self, x, cos, sin):
        B, L, D = x.shape
        q, k, v = (t.view(B, L, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).split(D, dim=-1))
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, L, D))

    def forward(self, x, cos, sin):
        x = x + self.dropout(self.attn(self.norm1(x), cos, sin))
        return x + self.dropout(self.mlp(self.norm2(x)))


def _rope_tables(length, head_dim, base=10000.0, offset=0):
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    ang = torch.arange(offset, offset + length, dtype=torch.float32)[:, None] * inv[None]
    return torch.cos(ang), torch.sin(ang)


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class TransformerLM(nn.Module):
    def __init__(self, vocab, dims=128, heads=4, layers=2, dropout=0.1):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dims)
        self.blocks = nn.ModuleList([TBlock(dims, heads, dropout) for _ in range(layers)])
        self.norm = nn.LayerNorm(dims)
        self.out_proj = nn.Linear(dims, vocab)
        self.head_dim = dims // heads

    def forward(self, tokens):
        cos, sin = _rope_tables(tokens.shape[1], self.head_dim)
        x = self.embedding(tokens)
        for b in self.blocks:
            x = b(x, cos, sin)
        return self.out_proj(self.norm(x))


def make_transformer(quick=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    vocab = 96
    model = TransformerLM(vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    tokens = torch.from_numpy(rng.integers(0, vocab, (32, 65)))
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def loss_fn(model, x, y):
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    fwd = _maybe_compile(model)

    def unit():
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(fwd, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
        return {"step": time.perf_counter() - t0}
    return Program(unit, ("step",), {"step": 1})


def _flow_mlp(n_layers, d_in, d_hidden, d_out):
    dims = [d_in] + [d_hidden] * n_layers
    mods = []
    for i, o in zip(dims[:-1], dims[1:]):
        mods += [nn.Linear(i, o), nn.GELU()]
    return nn.Sequential(*mods, nn.Linear(d_hidden, d_out))


class RealNVP(nn.Module):
    def __init__(self, n_transforms, d_params, d_hidden, n_layers):
        super().__init__()
        masks = torch.stack([(torch.arange(d_params) % 2 == i % 2).float()
                             for i in range(n_transforms)])
        self.register_buffer("masks", masks)
        self.s_nets = nn.ModuleList([_flow_mlp(n_layers, d_params, d_hidden, d_params)
                                     for _ in range(n_transforms)])
        self.t_nets = nn.ModuleList([_flow_mlp(n_layers, d_params, d_hidden, d_params)
                                     for _ in range(n_transforms)])

    def forward(self, x):  # log_prob
        log_det = torch.zeros(x.shape[0])
        for i in reversed(range(len(self.s_nets))):
            mask = self.masks[i]
            z = x * mask
            s = torch.tanh(self.s_nets[i](z)) * (1 - mask)
            t = self.t_nets[i](z) * (1 - mask)
            x = z + (1 - mask) * (x - t) * torch.exp(-s)
            log_det = log_det - s.sum(-1)
        return -0.5 * (x.square() + math.log(2 * math.pi)).sum(-1) + log_det


def make_flow(quick=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = RealNVP(6, 2, 128, 4)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    n = 256
    theta = rng.uniform(0.0, math.pi, n)
    upper = rng.random(n) < 0.5
    pts = np.where(upper[:, None], np.stack([np.cos(theta), np.sin(theta)], 1),
                   np.stack([1 - np.cos(theta), 0.5 - np.sin(theta)], 1))
    x = torch.from_numpy((pts + rng.normal(0, 0.05, pts.shape)).astype(np.float32))
    return _train_program(model, opt, lambda m, x: -m(x).mean(), (x,))


# -- Llama-style decoder (gpt-fast style static cache) ----------------------------------------
class Attention(nn.Module):
    def __init__(self, dims, heads, kv_heads, max_len):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dims // heads
        self.q_proj = nn.Linear(dims, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dims, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dims, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dims, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, kv_heads, max_len, self.head_dim),
                             persistent=False)
        self.register_buffer("v_cache", torch.zeros(1, kv_heads, max_len, self.head_dim),
                             persistent=False)

    def forward(self, x, cos, sin, mask, pos):
        B, L, _ = x.shape
        q = self.q_proj(x).view(B, L, self.heads, -1).transpose(1, 2)
        k = self.k_proj(x).view(B, L, self.kv_heads, -1).transpose(1, 2)
        v = self.v_proj(x).view(B, L, self.kv_heads, -1).transpose(1, 2)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask,
                                           enable_gqa=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, L, -1))


class DecoderLayer(nn.Module):
    def __init__(self, dims, heads, kv_heads, hidden, max_len):
        super().__init__()
        self.self_attn = Attention(dims, heads, kv_heads, max_len)
        self.gate_proj = nn.Linear(dims, hidden, bias=False)
        self.up_proj = nn.Linear(dims, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dims, bias=False)
        self.input_layernorm = nn.RMSNorm(dims, eps=1e-5)
        self.post_attention_layernorm = nn.RMSNorm(dims, eps=1e-5)

    def forward(self, x, cos, sin, mask, pos):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, pos)
        y = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Llama(nn.Module):
    def __init__(self, dims, layers, heads, kv_heads, hidden, vocab, max_len):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dims)
        self.layers = nn.ModuleList([DecoderLayer(dims, heads, kv_heads, hidden, max_len)
                                     for _ in range(layers)])
        self.norm = nn.RMSNorm(dims, eps=1e-5)
        self.lm_head = nn.Linear(dims, vocab, bias=False)
        cos, sin = _rope_tables(max_len, dims // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        causal = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, tokens, pos):
        h = self.embed_tokens(tokens)
        cos, sin = self.cos[pos], self.sin[pos]
        mask = self.causal[pos][None, None]
        for layer in self.layers:
            h = layer(h, cos, sin, mask, pos)
        return self.lm_head(self.norm(h))


def make_llm(size="tiny", dtype="float32", quick=False):
    torch.manual_seed(0)
    cfg = LLM_SIZES[size]
    n_decode = QUICK_DECODE if quick else DECODE
    model = Llama(**cfg, max_len=PREFILL + n_decode + 1).eval()
    if dtype != "float32":
        model = model.to(getattr(torch, dtype))
    fwd = _maybe_compile(model, dynamic=False)  # one static graph for prefill, one for decode
    prompt = torch.from_numpy(np.random.default_rng(0).integers(0, cfg["vocab"], PREFILL))

    @torch.inference_mode()
    def unit():
        t0 = time.perf_counter()
        logits = fwd(prompt[None], torch.arange(PREFILL))
        y = logits[:, -1].argmax(-1)
        y.item()
        t1 = time.perf_counter()
        for i in range(n_decode):
            logits = fwd(y[:, None], torch.tensor([PREFILL + i]))
            y = logits[:, -1].argmax(-1)
            y.item()
        t2 = time.perf_counter()
        return {"prefill": t1 - t0, "decode": t2 - t1}

    return Program(unit, ("prefill", "decode"), {"prefill": PREFILL, "decode": n_decode})


def make(program, size="tiny", dtype="float32", quick=False):
    if program == "llm":
        return make_llm(size, dtype, quick)
    return {"mlp": make_mlp, "cnn": make_cnn, "transformer": make_transformer,
            "flow": make_flow}[program](quick)
