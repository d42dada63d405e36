"""The compile passes run in time linear in the graph, and produce the same fused graphs as the
quadratic versions they replaced.

`GOLDEN` holds, per program, digests of the traced tape and of the tape after every pass, as
the earlier (quadratic) fuse / fuse_rows produced them. The traced digest guards the input: when
a change to the ops or transforms makes a program trace differently, its case is skipped (the
passes see another graph); regenerate with `BRAZE_REGEN_GOLDEN=1 python -m pytest -q -s
tests/test_compile_passes_linear.py` only after checking the fused graphs by hand.
"""
import dataclasses
import hashlib
import json
import os
import re
import sys
import time

import pytest

import braze.core as mx
import braze.nn as nn
from braze._src.compile import pipeline
from braze._src.compile import simplify as S


# -- programs --------------------------------------------------------------------------------
def chain(x, y):
    for i in range(300):
        k = i % 4
        x = mx.sin(x) if k == 0 else x * 0.999 if k == 1 else x + 0.5 if k == 2 else x + y
    return x


def diamond(x, y):
    a = mx.exp(x)
    b = a * 2.0
    c = a + y
    d = mx.sin(b) * mx.cos(c)
    e = d + x[:, None] * 2.0  # a broadcast to a bigger shape
    return d, e, mx.sum(e, axis=0), c * 3.0


def multi(x, y):
    q, r = mx.divmod(x * 3.0 + 1.0, y + 2.0)
    s = mx.maximum(q, r) * 0.5
    return s, q + 1.0, mx.logsumexp(s, axis=-1), mx.softmax(r * 2.0, axis=-1)


def _mlp_loss(params, x):
    for w, b in params:
        x = nn.gelu(x @ w + b)
    return mx.mean(x * x)


def mlp(params, x):
    return mx.value_and_grad(_mlp_loss)(params, x)


def _transformer():
    mx.random.seed(0)
    model = nn.TransformerEncoder(2, 32, 4)
    mx.eval(model.parameters())
    mask = nn.MultiHeadAttention.create_additive_causal_mask(8)
    grad = nn.value_and_grad(model, lambda m, x: mx.mean(m(x, mask) ** 2))
    return (lambda x: grad(model, x)), {"inputs": model.state}


def norms(x, w):
    ln = nn.LayerNorm(16)
    rms = nn.RMSNorm(16)
    h = ln(x) * w + rms(x)
    return mx.mean(h, axis=-1, keepdims=True) - h, mx.var(h, axis=-1)


def _programs():
    mx.random.seed(1)
    v = mx.random.normal((8, 16))
    params = [(mx.random.normal((16, 16)) * 0.25, mx.zeros((16,))) for _ in range(6)]
    tf, tf_kw = _transformer()
    return {
        "chain": (chain, (mx.ones((64,)), mx.full((64,), 0.5)), {}),
        "diamond": (diamond, (mx.ones((16,)), mx.full((16,), 0.5)), {}),
        "multi": (multi, (v, mx.abs(v)), {}),
        "mlp_value_and_grad": (mlp, (params, v), {}),
        "transformer_value_and_grad": (tf, (mx.random.normal((2, 8, 32)),), tf_kw),
        "norms": (norms, (v, mx.ones((16,))), {}),
        "norms_shapeless": (norms, (v, mx.ones((16,))), {"shapeless": True}),
    }


# -- structure digests ----------------------------------------------------------------------
def _fingerprint(tape) -> str:
    """The tape's structure: node kinds, parameters, dtypes, shapes, edges (by position) and
    each fused kernel's IR, with nothing that depends on object identity."""
    ref = {id(x): f"in{k}" for k, x in enumerate(tape.inputs)}
    rows = []
    for j, a in enumerate(tape.nodes):
        ref[id(a)] = f"n{j}"
    for a in tape.nodes:
        ir = getattr(a._prim, "ir", None)
        # the IR as printed, less its key (a digest of how the IR spells primitives)
        text = re.sub(r" \(key \w+\)", "", str(ir)) if ir is not None else repr(a._prim)
        rows.append([text, a.dtype.name,
                     list(a.shape), a._idx if a._siblings is not None else None,
                     [_ref(x, ref) for x in a._inputs]])
    rows.append([_ref(o, ref) for o in tape.outputs])
    return json.dumps(rows, default=str)


def _ref(x, ref):
    r = ref.get(id(x))
    if r is not None:
        return r
    if x._prim is None and x._data is not None:
        data = x._data.tobytes().hex() if x.size == 1 else None
        return ["const", x.dtype.name, list(x.shape), data]
    return "?"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _stages(fn, args, kw, monkeypatch):
    """{stage name: digest} for the traced tape and the tape after every pass."""
    out = {}
    stage = ["traced"]
    wrapped = []

    def hook(p):
        def run(tape):
            if stage[0] == "traced":
                out["traced"] = _digest(_fingerprint(tape))
            res = p.run(tape)
            stage[0] = p.name
            out[p.name] = _digest(_fingerprint(res))
            return res
        return dataclasses.replace(p, run=run)

    for p in pipeline.PASSES:
        wrapped.append(hook(p))
    monkeypatch.setattr(pipeline, "PASSES", tuple(wrapped))
    c = mx.compile(fn, **kw)
    mx.eval(c(*args))
    return out


GOLDEN_PATH = os.path.join(os.path.dirname(__file__), "compile_passes_golden.json")


def _golden():
    with open(GOLDEN_PATH) as f:
        return json.load(f)


@pytest.mark.parametrize("name", sorted(_golden()))
def test_fused_graphs_unchanged(name, monkeypatch):
    fn, args, kw = _programs()[name]
    got = _stages(fn, args, kw, monkeypatch)
    want = _golden()[name]
    if got["traced"] != want["traced"]:
        pytest.skip(f"{name} traces to a different graph now; the passes see other input")
    assert got == want


def test_regenerate_golden(monkeypatch):
    if not os.environ.get("BRAZE_REGEN_GOLDEN"):
        pytest.skip("set BRAZE_REGEN_GOLDEN=1 to rewrite the golden digests")
    res = {}
    for name, (fn, args, kw) in _programs().items():
        res[name] = _stages(fn, args, kw, monkeypatch)
        monkeypatch.undo()
    with open(GOLDEN_PATH, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
        f.write("\n")


# -- linear time ----------------------------------------------------------------------------
_PASS_FILES = {os.path.join(os.path.dirname(S.__file__), f)
               for f in ("simplify.py", "fuse_rows.py", "fuse.py", "tape.py", "trace.py",
                         "pipeline.py")}


def _work(fn, args, kw=None) -> int:
    """Python lines the compile passes execute on the first call (a deterministic measure of
    their work, unlike wall time on a shared machine)."""
    count = [0]

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename in _PASS_FILES else None

    c = mx.compile(fn, **(kw or {}))
    saved = sys.gettrace()  # a coverage tool's tracer, if any, comes back afterwards
    sys.settrace(calls)
    try:
        c(*args)
    finally:
        sys.settrace(saved)
    return count[0]


def _long_chain(n):
    """n iterations of sin, then `* c + d` (3n/2 ops): each scalar's broadcast (merged by
    CSE) feeds n/2 nodes, which the earlier fuse rescanned at each of its ~n splits."""
    def f(x):
        for i in range(n):
            x = x * 1.0001 + 0.5 if i % 2 else mx.sin(x)
        return x
    return f


def test_long_chain_passes_work_linearly():
    small = _work(_long_chain(1000), (mx.ones((8,)),))
    big = _work(_long_chain(2000), (mx.ones((8,)),))  # 3000 ops
    assert big / small < 2.3, (small, big)  # the quadratic passes: 3.0


def test_mlp_value_and_grad_passes_work_linearly():
    def case(layers):
        params = [(mx.ones((8, 8)) * 0.1, mx.zeros((8,))) for _ in range(layers)]
        return _work(mlp, (params, mx.ones((4, 8))))
    small, big = case(25), case(50)
    assert big / small < 2.3, (small, big)


def test_long_chain_compiles_fast():
    f = mx.compile(_long_chain(2000))
    t0 = time.perf_counter()
    f(mx.ones((8,)))
    assert time.perf_counter() - t0 < 5.0
    assert f.stats()["fused_kernels"] > 100
