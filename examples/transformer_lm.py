"""A small character-level Transformer language model, trained with a compiled step.

    python examples/transformer_lm.py                 # ~300 steps on stdlib docstrings
    python examples/transformer_lm.py --corpus zen    # memorise the Zen of Python
    python examples/transformer_lm.py --corpus my.txt --steps 1000

An MLX program with the imports changed (`import braze.core as mx`, `import braze.nn as nn`,
`import braze.optimizers as optim`). The model is a decoder-only Transformer: token embedding,
pre-norm blocks of causal self-attention with rotary positions (`nn.RoPE`) and a GELU MLP, and
an output projection tied to nothing. The training step (forward, `nn.value_and_grad`, AdamW
update) is compiled with `partial(mx.compile, inputs=state, outputs=state)` where
`state = [model.state, optimizer.state, mx.random.state]` (Dropout draws from the random key).
Samples are drawn with `mx.random.categorical`.

Corpora (no download): `stdlib` (default) -- the docstrings of a fixed list of standard-library
modules, about 150 KB of English; `zen` -- the Zen of Python (`import this`), under 1 KB, which
the model memorises; or the path of any text file.
"""
from __future__ import annotations

import argparse
import codecs
import contextlib
import importlib
import inspect
import io
import math
import time
from functools import partial

import numpy as np

import braze.core as mx
import braze.nn as nn
import braze.optimizers as optim
from braze.utils import tree_flatten

# --------------------------------------------------------------------------- corpus

STDLIB_MODULES = [
    "textwrap", "string", "functools", "itertools", "collections", "heapq", "bisect",
    "statistics", "fractions", "decimal", "random", "json", "csv", "pprint", "difflib",
    "calendar", "datetime", "enum", "dataclasses", "contextlib", "abc", "copy", "shutil",
    "pathlib", "glob", "fnmatch", "tempfile", "argparse", "logging", "zipfile", "tarfile",
    "gzip", "base64", "hashlib", "threading", "queue", "subprocess", "socket", "email",
    "urllib.parse", "http.client", "unittest", "doctest", "inspect", "typing",
]


def zen_of_python() -> str:
    with contextlib.redirect_stdout(io.StringIO()):  # `import this` prints the Zen
        import this
    return codecs.decode(this.s, "rot13") + "\n"


def stdlib_docstrings(max_chars: int) -> str:
    """Module, class and function docstrings of STDLIB_MODULES (printable ASCII only)."""
    parts, total = [], 0
    for name in STDLIB_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        objs = [mod] + [v for k, v in sorted(vars(mod).items())
                        if not k.startswith("_") and (inspect.isfunction(v) or inspect.isclass(v))
                        and getattr(v, "__module__", None) == mod.__name__]
        for obj in objs:
            doc = inspect.getdoc(obj)
            if not doc or len(doc) < 40:
                continue
            doc = "".join(c for c in doc if c == "\n" or 32 <= ord(c) < 127)
            parts.append(doc.strip() + "\n\n")
            total += len(parts[-1])
            if total >= max_chars:
                return "".join(parts)[:max_chars]
    return "".join(parts)


def load_corpus(name: str, max_chars: int) -> str:
    if name == "zen":
        return zen_of_python()
    if name == "stdlib":
        return stdlib_docstrings(max_chars)
    with open(name, encoding="utf-8", errors="replace") as f:
        return f.read()[:max_chars]


class CharTokenizer:
    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        return np.array([self.index[c] for c in text if c in self.index], dtype=np.int32)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


# --------------------------------------------------------------------------- model


class CausalSelfAttention(nn.Module):
    def __init__(self, dims: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dims, 3 * dims, bias=False)
        self.out = nn.Linear(dims, dims, bias=False)
        self.rope = nn.RoPE(dims // num_heads)

    def __call__(self, x, mask):
        B, L, D = x.shape
        h = self.num_heads
        q, k, v = mx.split(self.qkv(x), 3, axis=-1)
        # (B, L, D) -> (B, heads, L, D / heads)
        q, k, v = (t.reshape(B, L, h, -1).transpose(0, 2, 1, 3) for t in (q, k, v))
        q, k = self.rope(q), self.rope(k)
        scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(0, 1, 3, 2)
        weights = mx.softmax(scores + mask, axis=-1)
        y = (weights @ v).transpose(0, 2, 1, 3).reshape(B, L, D)
        return self.out(y)


class Block(nn.Module):
    def __init__(self, dims: int, num_heads: int, dropout: float):
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
    def __init__(self, vocab_size: int, dims: int = 128, num_heads: int = 4,
                 num_layers: int = 2, dropout: float = 0.1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dims)
        self.blocks = [Block(dims, num_heads, dropout) for _ in range(num_layers)]
        self.norm = nn.LayerNorm(dims)
        self.out_proj = nn.Linear(dims, vocab_size)

    def __call__(self, tokens):
        L = tokens.shape[1]
        mask = nn.MultiHeadAttention.create_additive_causal_mask(L)
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.out_proj(self.norm(x))


def loss_fn(model, inputs, targets):
    return nn.losses.cross_entropy(model(inputs), targets, reduction="mean")


def generate(model, tokenizer, prompt: str, length: int, context: int, temperature: float):
    """Sample `length` characters after `prompt` with mx.random.categorical (the model sees
    at most the last `context` characters)."""
    model.eval()
    ids = list(tokenizer.encode(prompt)) or [0]
    for _ in range(length):
        window = mx.array(np.array(ids[-context:], dtype=np.int32))[None]
        logits = model(window)[:, -1, :]
        ids.append(mx.random.categorical(logits * (1.0 / temperature)).item())
    model.train()
    return tokenizer.decode(ids)


# --------------------------------------------------------------------------- training


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="stdlib",
                   help="'stdlib' (default), 'zen', or the path of a text file")
    p.add_argument("--max-chars", type=int, default=150_000)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--dims", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--sample-length", type=int, default=300)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--prompt", default=None,
                   help="default: 'Return the ' for stdlib, else the start of the first line")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="cap BLAS threads via threadpoolctl if installed (0: library default)")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    limits = contextlib.nullcontext()
    if args.blas_threads > 0:  # small matmuls: BLAS threads only add overhead (braze/demo.py)
        try:
            from threadpoolctl import threadpool_limits
            limits = threadpool_limits(limits=args.blas_threads, user_api="blas")
        except ImportError:
            pass
    with limits:
        return train(args)


def train(args) -> dict:
    mx.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)

    text = load_corpus(args.corpus, args.max_chars)
    tok = CharTokenizer(text)
    data = tok.encode(text)
    n_val = max(len(data) // 10, args.context + 1) if len(data) > 20 * args.context else 0
    train, val = (data[:-n_val], data[-n_val:]) if n_val else (data, data)
    if len(train) <= args.context + 1:
        raise SystemExit(f"The corpus has {len(train)} characters; it needs more than "
                         f"--context {args.context}.")

    def batch(source):
        starts = rng.integers(0, len(source) - args.context - 1, size=args.batch_size)
        idx = starts[:, None] + np.arange(args.context + 1)
        chunk = source[idx]
        return mx.array(chunk[:, :-1]), mx.array(chunk[:, 1:])

    model = TransformerLM(tok.vocab_size, args.dims, args.heads, args.layers, args.dropout)
    mx.eval(model.parameters())
    n_params = sum(v.size for _, v in tree_flatten(model.trainable_parameters()))
    warmup = max(1, min(50, args.steps // 10))
    schedule = optim.join_schedules(
        [optim.linear_schedule(args.lr / warmup, args.lr, warmup),
         optim.cosine_decay(args.lr, max(1, args.steps - warmup), args.lr / 10)], [warmup])
    optimizer = optim.AdamW(learning_rate=schedule, weight_decay=0.01)
    optimizer.init(model.trainable_parameters())

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def train_step(inputs, targets):
        loss, grads = loss_and_grad(model, inputs, targets)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        optimizer.update(model, grads)
        return loss

    corpus_name = args.corpus if args.corpus in ("zen", "stdlib") else repr(args.corpus)
    print(f"Corpus {corpus_name}: {len(text):,} characters, vocabulary {tok.vocab_size}; "
          f"model: {args.layers} layers x {args.dims} dims x {args.heads} heads, "
          f"{n_params:,} parameters; context {args.context}, batch {args.batch_size}")
    losses, log = [], []
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        inputs, targets = batch(train)
        loss = train_step(inputs, targets)
        mx.eval(loss, state)
        losses.append(loss.item())
        if step % args.log_every == 0 or step == args.steps:
            model.eval()
            val_loss = float(np.mean([loss_fn(model, *batch(val)).item() for _ in range(4)]))
            model.train()
            dt = time.perf_counter() - t0
            train_loss = float(np.mean(losses[-args.log_every:]))
            log.append((step, train_loss, val_loss))
            print(f"step {step:>5}/{args.steps}  train loss {train_loss:.3f}  "
                  f"val loss {val_loss:.3f}  ({dt:.1f}s, {step / dt:.1f} steps/s)", flush=True)
    train_time = time.perf_counter() - t0
    stats = train_step.stats()
    print(f"Trained {args.steps} steps in {train_time:.1f}s; compiled step traced "
          f"{stats['traces']}x, {stats['hits']} cache hits, "
          f"{stats['primitives_before_fusion']} -> {stats['primitives_after_fusion']} "
          "primitives after fusion")

    prompt = args.prompt
    if prompt is None:
        prompt = "Return the " if args.corpus == "stdlib" else text.split("\n", 1)[0][:20]
    sample = generate(model, tok, prompt, args.sample_length, args.context, args.temperature)
    print(f"\nSample (temperature {args.temperature}, prompt {prompt!r}):\n{'-' * 60}\n"
          f"{sample}\n{'-' * 60}")
    return {"losses": losses, "log": log, "sample": sample, "train_time": train_time,
            "traces": stats["traces"]}


if __name__ == "__main__":
    main()
