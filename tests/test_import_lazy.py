"""`import braze.core` imports none of the heavy optional modules (issue 15: cold start).

ml_dtypes is imported when bfloat16's NumPy dtype is first needed, numba when the cpu backend
first builds or loads a kernel, scipy and mpi4py when the ops that use them run. Each check
runs in a fresh interpreter, since this process has long imported all of them. The import
time itself is measured by `benchmarks/cold_start.py`, not asserted here.
"""
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("numba", "llvmlite", "ml_dtypes", "scipy", "mpi4py")


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _loaded(after: str) -> set:
    code = (textwrap.dedent(after)
            + f"\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    return set(_run(code).split())


@pytest.mark.parametrize("stmt", ["import braze.core",
                                  "import braze.core as mx, braze.nn, braze.optimizers"])
def test_import_loads_no_heavy_module(stmt):
    assert _loaded(stmt) == set()


def test_float32_programs_do_not_import_ml_dtypes():
    loaded = _loaded("""
        import braze.core as mx, braze.nn as nn
        x = mx.ones((8, 8))
        mx.eval(nn.Linear(8, 8)(x).sum(), mx.sort(x), x.astype(mx.float16) + 1)
        print(mx.bfloat16, mx.bfloat16 == mx.bfloat16, mx.bfloat16.size, mx.bfloat16.itemsize)
        mx.compile(lambda a: mx.exp(a) * 2)(x).item
    """)
    assert "ml_dtypes" not in loaded


def test_bfloat16_works_when_first_used():
    out = _run("""
        import pickle, sys
        import numpy as np
        import braze.core as mx
        d = mx.bfloat16
        assert "ml_dtypes" not in sys.modules
        assert pickle.loads(pickle.dumps(d)) is d and str(d) == "braze.core.bfloat16"
        a = mx.array([1.5, 2.0, 3.0]).astype(d)
        v = np.asarray(a)
        import ml_dtypes
        assert v.dtype == np.dtype(ml_dtypes.bfloat16) and d.np_dtype == v.dtype
        assert mx.finfo(d).eps == float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
        print(v.astype(np.float32).tolist())
    """)
    assert out == "[1.5, 2.0, 3.0]"


def test_user_bfloat16_arrays_are_recognised_before_braze_reads_the_dtype():
    # the caller imports ml_dtypes and hands over its arrays: braze has not resolved
    # bfloat16.np_dtype yet, so every NumPy-dtype lookup must resolve it on a miss
    out = _run("""
        import ml_dtypes, numpy as np
        import braze.core as mx
        x = np.array([1, 2, 3], dtype=ml_dtypes.bfloat16)
        print(mx.array(x).dtype, mx.asarray(x).dtype, mx.array(x[0]).dtype,
              mx.array([1.0], dtype=ml_dtypes.bfloat16).dtype, (mx.array(x) * 2).tolist())
    """)
    assert out == ("braze.core.bfloat16 braze.core.bfloat16 braze.core.bfloat16 "
                   "braze.core.bfloat16 [2.0, 4.0, 6.0]")


def test_bfloat16_files_round_trip_in_a_fresh_process(tmp_path):
    out = _run(f"""
        import braze.core as mx
        a = mx.arange(4).astype(mx.bfloat16)
        for name in ("a.npy", "a.safetensors"):
            p = {str(tmp_path)!r} + "/" + name
            if name.endswith(".npy"):
                mx.save(p, a)
            else:
                mx.save_safetensors(p, {{"a": a}})
        print(mx.load({str(tmp_path)!r} + "/a.npy").tolist())
    """)
    assert out == "[0.0, 1.0, 2.0, 3.0]"
    out = _run(f"""
        import sys
        import braze.core as mx
        b = mx.load({str(tmp_path)!r} + "/a.safetensors")["a"]
        print(b.dtype, b.tolist())
    """)
    assert out == "braze.core.bfloat16 [0.0, 1.0, 2.0, 3.0]"


def test_primitive_classes_are_dataclasses_when_first_used():
    # prims.base.lazy_dataclass: a primitive class becomes a frozen dataclass when it is first
    # instantiated, unpickled, copied or asked for its fields; it then is what
    # dataclass(frozen=True) makes
    out = _run("""
        import copy, dataclasses, pickle
        import braze.core as mx
        from braze._src.prims import base
        from braze._src.prims.base import REGISTRY
        assert base._PENDING  # most primitive classes are not made at import
        T, E, A = REGISTRY["Transpose"], REGISTRY["Eye"], REGISTRY["Arange"]
        assert T in base._PENDING
        assert [f.name for f in dataclasses.fields(T)] == ["axes"] and T not in base._PENDING
        t = T((1, 0))
        assert t == T((1, 0)) and t != T((0, 1)) and hash(t) == hash(T((1, 0)))
        assert repr(t) == "Transpose(axes=(1, 0))" and T.__match_args__ == ("axes",)
        try:
            t.axes = (0, 1)
            raise SystemExit("not frozen")
        except dataclasses.FrozenInstanceError:
            pass
        # a subclass of a base made first (Eye, Arange share _NoInputs) is still right
        assert E(2, 3, 0, mx.float32).n == 2 and A(0, 3, 1, mx.int32).stop == 3
        assert copy.deepcopy(t) == t
        print(pickle.dumps(REGISTRY["Sort"](1)).hex())
    """)
    out = _run(f"""
        import pickle
        import braze.core as mx
        from braze._src.prims import base
        S = base.REGISTRY["Sort"]
        assert S in base._PENDING
        s = pickle.loads(bytes.fromhex({out!r}))  # made without __init__
        assert S not in base._PENDING and s == S(1) and s != S(0) and repr(s) == "Sort(axis=1)"
        base.realize_all()
        assert not base._PENDING
        print(mx.sort(mx.array([3, 1, 2])).tolist())
    """)
    assert out == "[1, 2, 3]"
