"""braze's BLAS thread policy (prims/linalg.py `blas_matmul`): BLAS limited to one thread, large
products split across braze's own threads by a chunking that depends on the shape and the
thread count only, so results are the same every call; the user's BLAS settings respected."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import braze.core as mx
from braze._src import config, threads
from braze._src.prims import linalg

pytest.importorskip("threadpoolctl")


def _products(rng, dtype):
    shapes = [((600, 300), (300, 200)),  # rows
              ((40, 512), (512, 1200)),  # columns (few rows)
              ((24, 3000), (3000, 16)),  # the contraction (few rows and columns)
              ((3, 300, 200), (3, 200, 160)),  # a batch of split products
              ((64, 40, 32), (64, 32, 48))]  # a batch of small ones, shared out whole
    for sa, sb in shapes:
        yield (rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_split_products_match_numpy_and_repeat_exactly(dtype):
    rng = np.random.default_rng(0)
    with config.override(num_threads=2, blas_threads=0):
        prev = linalg.SPLIT_MACS
        linalg.SPLIT_MACS = 1 << 16  # split these small products too
        try:
            for a, b in _products(rng, dtype):
                before = threads.POOL.launches
                first = linalg._matmul(a, b)
                assert threads.POOL.launches > before  # the work was shared out
                np.testing.assert_allclose(first, np.matmul(a.astype(np.complex128),
                                                            b.astype(np.complex128)),
                                           rtol=1e-4, atol=1e-3)
                for _ in range(4):  # the chunking never depends on timing
                    assert np.array_equal(linalg._matmul(a, b), first)
        finally:
            linalg.SPLIT_MACS = prev


def test_batch_of_small_products_is_exactly_numpys():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 40, 32), np.float32), rng.standard_normal((64, 32, 48),
                                                                             np.float32)
    with config.override(num_threads=2, blas_threads=0):
        prev = linalg.SPLIT_MACS
        linalg.SPLIT_MACS = 1 << 16
        try:
            assert np.array_equal(linalg._matmul(a, b), np.matmul(a, b))
        finally:
            linalg.SPLIT_MACS = prev


def test_broadcast_operand_is_not_copied_or_changed():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    x = mx.array(rng.standard_normal((4, 300, 256)).astype(np.float32))
    keep = w.copy()
    got = mx.matmul(x, mx.array(w))
    np.testing.assert_allclose(np.asarray(got), np.asarray(x) @ w, rtol=1e-4, atol=1e-3)
    assert np.array_equal(w, keep)


_PROBE = """
import json, numpy as np
from threadpoolctl import threadpool_info
import braze.core as mx
from braze._src import threads
a = mx.array(np.ones((512, 512), np.float32))
before = threads.POOL.launches
mx.eval(a @ a)
blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"blas": blas, "split": threads.POOL.launches > before}))
"""


def _probe(**env):
    e = {k: v for k, v in os.environ.items()
         if k not in linalg.USER_BLAS_VARS + ("BRAZE_BLAS_THREADS", "BRAZE_NUM_THREADS")}
    e.update(env, BRAZE_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", _PROBE], env=e, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_default_policy_one_blas_thread_and_braze_splits():
    r = _probe()
    assert r["blas"] and all(n == 1 for n in r["blas"])
    assert r["split"]


def test_knob_gives_blas_its_threads_and_braze_does_not_split():
    r = _probe(BRAZE_BLAS_THREADS="2")
    assert r["blas"] and all(n == 2 for n in r["blas"])
    assert not r["split"]


def test_user_blas_setting_is_left_alone():
    r = _probe(OPENBLAS_NUM_THREADS="2")
    assert r["blas"] and all(n == 2 for n in r["blas"])
    assert not r["split"]
