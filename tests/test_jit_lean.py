"""braze's own Numba functions and its kernels load from the disk cache without Numba's
registry start (`_src/jit.py`): a process that only runs cached machine code never imports
the typing/lowering registries (about 0.3-0.5 s), and what it computes is unchanged."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("numba")

_PROGRAM = """
import json, sys
import numpy as np
import braze.core as mx
from braze._src import memory
pool = bool(memory._pool_state())              # four cached cfuncs
x = mx.random.normal((1000,), key=mx.random.key(3))  # the cached logf loop of erfinv
f = mx.compile(lambda a, b: mx.exp(a) * b + 1.0)  # a generated kernel, disk cache
y = f(x, mx.full((1000,), 2.0))
s = mx.compile(lambda a: mx.softmax(a, axis=-1))(x.reshape(10, 100))  # a row kernel (scratch)
q = x[:256].reshape(1, 4, 4, 16)
o = mx.fast.scaled_dot_product_attention(q, q, q, scale=0.25, mask="causal")  # NRT scratch
mx.eval(y, s, o)
print(json.dumps({"pool": pool, "refreshed": "numba.np.linalg" in sys.modules,
                  "x": np.asarray(x).tolist(), "y": np.asarray(y).tolist(),
                  "s": np.asarray(s).tolist(), "o": np.asarray(o).tolist()}))
"""


def _run(tmp_path):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(tmp_path), BRAZE_BACKGROUND_BUILDS="0")
    out = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_cached_functions_load_without_the_registry_start(tmp_path):
    first = _run(tmp_path)  # builds (and so starts the registries) where nothing is cached
    second = _run(tmp_path)
    assert second["pool"] == first["pool"]
    assert not second["refreshed"], "a process loading cached code started Numba's registries"
    for k in ("x", "y", "s", "o"):
        assert second[k] == first[k], k
    x = np.asarray(second["x"], np.float64)
    np.testing.assert_allclose(second["y"], np.exp(x) * 2 + 1, rtol=1e-6)
    r = x.reshape(10, 100)
    e = np.exp(r - r.max(-1, keepdims=True))
    np.testing.assert_allclose(second["s"], e / e.sum(-1, keepdims=True), rtol=1e-5)
    q = x[:256].reshape(4, 4, 16)
    w = np.einsum("hid,hjd->hij", q, q) * 0.25 + np.triu(np.full((4, 4), -np.inf), 1)
    w = np.exp(w - w.max(-1, keepdims=True))
    want = np.einsum("hij,hjd->hid", w / w.sum(-1, keepdims=True), q)
    np.testing.assert_allclose(np.asarray(second["o"])[0], want, rtol=1e-4, atol=1e-6)


def test_lean_njit_compiles_what_is_not_cached(tmp_path):
    """A function the cache does not hold compiles as ever (the compiler starts the
    registries itself), with or without an explicit signature."""
    from braze._src import jit

    def twice(v):
        return v * 2

    lazy = jit.njit(twice, cache=False)
    assert lazy(21) == 42
    eager = jit.njit(twice, signature="float64(float64)", cache=False)
    assert eager(1.5) == 3.0
    with pytest.raises(TypeError):
        eager("no")  # compilation disabled after the signature, as numba.njit(sig) does
