"""The cpu backend's Numba Threefry gives NumPy's bits (and so MLX's) for every layout
`random_bits` uses, and the backend installs it."""
import numpy as np
import pytest

import braze.core as mx
from braze._src.prims import random as R

pytest.importorskip("numba")

from braze._src.backends.cpu import CpuBackend  # noqa: E402
from braze._src.backends.cpu.threefry import fill_words  # noqa: E402
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


@pytest.mark.parametrize("nk, shape, width", [
    (1, (1,), 4), (1, (5,), 4), (1, (7,), 1), (1, (3,), 2), (3, (6,), 4), (2, (9,), 1),
    (1, (64, 16), 4), (4, (33,), 2), (1, (1 << 17,), 4), (3, (40001,), 1)])
@pytest.mark.parametrize("fill_words_max", [None, 1 << 30])
def test_words_filled_in_one_kernel_are_the_counter_path_bits(nk, shape, width, fill_words_max,
                                                              monkeypatch):
    """`random_bits` with the fused fill (the cpu backend's) against NumPy's counters and
    Threefry, for one and several keys, odd and even word counts, each width, and draws
    large enough to split across threads (the fill made to take every draw)."""
    if fill_words_max is not None:
        monkeypatch.setattr(R, "FILL_WORDS", fill_words_max)
    rng = np.random.default_rng(nk * 7 + width)
    keys = rng.integers(0, 2**32, (nk, 2), dtype=np.uint64).astype(np.uint32)
    prev = R._THREEFRY[0], R._FILL[0]
    try:
        R.set_threefry(R.threefry2x32)
        want = R.random_bits(keys, shape, width)
        R.set_threefry(native, fill_words)
        got = R.random_bits(keys, shape, width)
    finally:
        R.set_threefry(*prev)
    assert got.dtype == want.dtype and got.shape == want.shape == (nk,) + shape
    np.testing.assert_array_equal(got, want)


def test_backend_installs_it_and_bits_are_unchanged():
    prev = R._THREEFRY[0], R._FILL[0]
    try:
        R.set_threefry(R.threefry2x32)
        key = mx.random.key(42)
        want = [np.array(mx.random.bits((3, 5), 4, key=key)),
                np.array(mx.random.uniform(shape=(2, 3, 7), key=key))]
        CpuBackend()
        assert R._THREEFRY[0] is native and R._FILL[0] is fill_words
        got = [np.array(mx.random.bits((3, 5), 4, key=key)),
               np.array(mx.random.uniform(shape=(2, 3, 7), key=key))]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    finally:
        R.set_threefry(*prev)


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
