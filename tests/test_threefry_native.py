"""The cpu backend's Numba Threefry gives NumPy's bits (and so MLX's) for every layout
`random_bits` uses, and the backend installs it."""
import numpy as np
import pytest

import braze.core as mx
from braze._src.prims import random as R

pytest.importorskip("numba")

from braze._src.backends.cpu import CpuBackend  # noqa: E402
from braze._src.backends.cpu.threefry import threefry2x32 as native  # noqa: E402


@pytest.mark.parametrize("nk, h", [(1, 1), (1, 7), (3, 5), (1, 4097), (5, 33)])
def test_native_threefry_matches_numpy(nk, h):
    rng = np.random.default_rng(nk * 100 + h)
    keys = rng.integers(0, 2**32, (nk, 2), dtype=np.uint64).astype(np.uint32)
    x0 = rng.integers(0, 2**32, (nk, h), dtype=np.uint64).astype(np.uint32)
    x1 = rng.integers(0, 2**32, (nk, h), dtype=np.uint64).astype(np.uint32)
    a0, a1, b0, b1 = x0.copy(), x1.copy(), x0.copy(), x1.copy()
    R.threefry2x32(keys[:, :1], keys[:, 1:], a0, a1)
    native(keys[:, :1], keys[:, 1:], b0, b1)
    np.testing.assert_array_equal(b0, a0)
    np.testing.assert_array_equal(b1, a1)


def test_backend_installs_it_and_bits_are_unchanged():
    prev = R._THREEFRY[0]
    try:
        R.set_threefry(R.threefry2x32)
        key = mx.random.key(42)
        want = [np.array(mx.random.bits((3, 5), 4, key=key)),
                np.array(mx.random.uniform(shape=(2, 3, 7), key=key))]
        CpuBackend()
        assert R._THREEFRY[0] is native
        got = [np.array(mx.random.bits((3, 5), 4, key=key)),
               np.array(mx.random.uniform(shape=(2, 3, 7), key=key))]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    finally:
        R.set_threefry(prev)


EAGER = """
import sys, json
import numpy as np
import braze.core as mx
from braze._src.prims import random as R
k = mx.random.key(3)
out, native_after = [], None
for i in range(12):
    out.append(np.array(mx.random.bits((5,), key=mx.random.split(k, 12)[i])).tolist())
    if native_after is None and R._THREEFRY[0] is not R.threefry2x32:
        native_after = i + 1
big = np.array(mx.random.uniform(shape=(1 << 15,), key=k))
print(json.dumps({"bits": out, "native_after": native_after, "big": float(big.sum()),
                  "numba": "numba" in sys.modules}))
"""


def _eager(env_extra, code=EAGER):
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, **env_extra)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_eager_random_switches_to_the_native_threefry():
    """A program that draws eagerly (no compiled call ever builds the cpu backend) runs the
    NumPy Threefry (~50 us a call) for its first few draws only, then the backend's; a short
    script stays without Numba. Bits: those of the numpy backend, which never switches."""
    cpu = _eager({"BRAZE_BACKEND": "cpu"})
    ref = _eager({"BRAZE_BACKEND": "numpy"})
    assert ref["native_after"] is None and not ref["numba"]
    assert cpu["native_after"] is not None and cpu["native_after"] <= 1 + R.NUMPY_DRAWS
    assert cpu["bits"] == ref["bits"] and cpu["big"] == ref["big"]
    short = _eager({"BRAZE_BACKEND": "cpu"}, "import sys, braze.core as mx\n"
                   "import numpy as np\nnp.array(mx.random.bits((4,)))\n"
                   "import json; print(json.dumps({'numba': 'numba' in sys.modules}))")
    assert not short["numba"]
    big = _eager({"BRAZE_BACKEND": "cpu"}, "import braze.core as mx, json\n"
                 "from braze._src.prims import random as R\n"
                 "mx.eval(mx.random.uniform(shape=(1 << 16,)))\n"
                 "print(json.dumps({'native': R._THREEFRY[0] is not R.threefry2x32}))")
    assert big["native"]  # a large first draw switches at once
