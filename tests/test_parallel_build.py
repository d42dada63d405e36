"""Kernels built ahead of need by worker processes (`BRAZE_BUILD_WORKERS`, cpu/prebuild.py).

Each case runs a program in a fresh interpreter with its own kernel cache, so that every
kernel is new: serially (workers off) and with workers, and compares results bit for bit,
the kernel sources written to the cache, and where the kernels came from.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

PROGRAM = textwrap.dedent("""
    import json, sys
    import numpy as np
    import braze.core as mx
    from braze._src.backends import kernel_cache as KC
    from braze._src.backends.cpu import prebuild
    if len(sys.argv) > 2 and sys.argv[2] == "fail":
        prebuild.WORKER = [sys.executable, "-c", "import sys; sys.exit(3)"]

    def f(x, w):
        outs = []
        for i in range(4):
            y = mx.exp(x * (i + 1)) + mx.sin(x) * i
            y = mx.tanh(y @ w) - mx.maximum(y, 0.25 * i)
            outs.append(mx.softmax(y, axis=-1).sum(axis=-1))
        return mx.stack(outs)

    x = mx.array(np.linspace(-1, 1, 48 * 48, dtype=np.float32).reshape(48, 48))
    w = mx.array(np.cos(np.arange(48 * 48, dtype=np.float32)).reshape(48, 48) / 8)
    out = mx.compile(f)(x, w)
    mx.eval(out)
    s = KC.stats()
    print(json.dumps({"out": np.asarray(out).tobytes().hex(), "builds": s["builds"],
                      "disk": s["disk_loads"], "workers": len(prebuild.POOL._workers)}))
""")


def _run(tmp_path, name, workers, *extra):
    cache = tmp_path / name
    env = dict(os.environ, BRAZE_CACHE_DIR=str(cache), BRAZE_BUILD_WORKERS=str(workers))
    p = subprocess.run([sys.executable, "-c", PROGRAM, "x", *extra], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), cache


def _sources(cache):
    return {p.name: p.read_bytes() for p in cache.rglob("k_*.py")}


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("serial"), "cache", 0)


def test_workers_build_the_same_kernels_bit_for_bit(tmp_path, serial):
    (ref, ref_cache), (got, cache) = serial, _run(tmp_path, "par", 2)
    assert got["out"] == ref["out"]
    assert ref["disk"] == 0 and ref["builds"] >= 4 and ref["workers"] == 0
    # most kernels came from the workers (loaded from the disk cache they wrote)
    assert got["disk"] >= 2 and got["workers"] >= 1
    assert got["disk"] + got["builds"] == ref["builds"]
    # every kernel the serial run built is in the parallel run's cache, byte for byte
    # (a mispredicted variant may add files, never change one)
    ref_src, src = _sources(ref_cache), _sources(cache)
    assert ref_src and all(src.get(k) == v for k, v in ref_src.items())
    # and a second run loads every kernel
    again, _ = _run(tmp_path, "par", 2)
    assert again["out"] == ref["out"] and again["builds"] == 0


def test_failing_workers_fall_back_to_building_in_process(tmp_path, serial):
    got, cache = _run(tmp_path, "fail", 2, "fail")
    assert got["out"] == serial[0]["out"]
    assert got["disk"] == 0 and got["builds"] == serial[0]["builds"]
    assert _sources(cache) == _sources(serial[1])


def test_no_workers_without_a_usable_disk_cache(tmp_path, serial):
    bad = tmp_path / "open"
    bad.mkdir()
    os.chmod(bad, 0o777)  # writable by others: the cache is refused, nothing is prebuilt
    env = dict(os.environ, BRAZE_CACHE_DIR=str(bad), BRAZE_BUILD_WORKERS="2")
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", PROGRAM, "x"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["out"] == serial[0]["out"] and got["workers"] == 0 and got["disk"] == 0


def test_prefetch_hints_and_predictions_are_deterministic():
    import braze.core as mx
    from braze._src import config
    from braze._src.compile import compiled

    seen = []

    class Probe:
        def prefetch(self, regions):
            seen.append(regions)

    def f(x):
        return mx.exp(mx.sin(x) * 3).sum(axis=-1) + mx.cos(x).mean()

    orig = compiled.backend
    try:
        compiled.backend = Probe
        with config.override(build_workers=2):
            for _ in range(2):
                mx.compile(f)(mx.ones((8, 16)))  # a fresh wrapper: traces again
    finally:
        compiled.backend = orig
    assert len(seen) == 2 and len(seen[0]) >= 2
    plain = [[(ir.key, s, lk) for ir, s, lk in r] for r in seen]
    assert plain[0] == plain[1]

    from braze._src.backends.cpu import prebuild
    be = orig()
    for ir, shapes, likely in seen[0]:
        e = be.entry(ir)
        v = prebuild.predict(be, ir, e, shapes, likely)
        assert v is not None and v == prebuild.predict(be, ir, e, shapes, likely)
