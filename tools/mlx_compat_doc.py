"""Write docs/mlx-compatibility.md from two runs of MLX's own test files.

    python ../shared/tools/mlx_tests.py --impl mlx --json /tmp/mlx.json
    python ../shared/tools/mlx_tests.py --json /tmp/braze.json
    python tools/mlx_compat_doc.py /tmp/mlx.json /tmp/braze.json > docs/mlx-compatibility.md

Every test braze does not pass is listed with its reason from `REASONS` below (a deliberate
difference with its why, or a gap); a failing test without one is listed as "not explained",
so a new failure cannot hide.
"""
from __future__ import annotations

import json
import sys

# test id -> why braze does not pass it (deliberate difference or known gap)
REASONS = {
    "test_array.py::TestDtypes::test_dtypes":
        "deliberate: the test compares `str(mx.bool_)` with 'mlx.core.bool'; braze's dtypes "
        "name braze's module ('braze.core.bool').",
    "test_array.py::TestArray::test_buffer_protocol":
        "Python < 3.12: a pure-Python class can export a buffer only through PEP 688's "
        "`__buffer__` (3.12+), so `memoryview(a)` raises TypeError (`np.asarray(a)` shares the "
        "memory on every version). On 3.13 the test passes up to its last check: MLX gives "
        "bfloat16 buffers the format string 'bfloat16', which Python code cannot create "
        "(braze raises a ValueError naming the dtype).",
    "test_array.py::TestArray::test_buffer_protocol_ref_counting":
        "Python < 3.12: `memoryview(a)` needs `__buffer__` (PEP 688); passes on 3.13.",
    "test_array.py::TestArray::test_from_dlpack_cpu_strided":
        "Python < 3.12: the test reads the result through `memoryview`; DLPack itself works "
        "(tests/test_interop.py); passes on 3.13.",
    "test_vmap.py::TestVmap::test_vmap_pad":
        "deliberate: the test expects vmap of `pad` with batched `constant_values` to raise; "
        "braze vectorizes it (tests/test_transforms_shape.py checks the values against a loop).",
}


def _rows(mlx, braze):
    for name in sorted(set(mlx["files"]) | set(braze["files"])):
        m, b = mlx["files"].get(name, {}), braze["files"].get(name, {})
        yield name, m, b


def _count(f, key):
    return f.get(key, 0) if f else 0


def main(mlx_path, braze_path):
    mlx, braze = (json.load(open(p)) for p in (mlx_path, braze_path))
    out = ["# braze and MLX's own test suite", "",
           f"MLX's Python test files (ml-explore/mlx @ {braze['commit'][:12]}, "
           "`python/tests/test_*.py`) run unchanged against braze and against real MLX "
           f"{mlx.get('impl_version', '')} (`mlx[cpu]`) on the same machine, "
           f"{braze['date'][:10]}, by `../shared/tools/mlx_tests.py`. Skipped tests need a "
           "Metal or CUDA device (or a package that is not installed) and skip on both; "
           "MLX's MPI tests (`mpi_test_distributed.py`) run under mpirun on 8 ranks and pass "
           "13/13 (command in docs/distributed.md).", "",
           "The table is Python 3.11 (what CI runs). On Python 3.12+, where a Python class can "
           "export a buffer (PEP 688), test_array.py passes 77 of MLX's 79 (measured with "
           "Python 3.13.0 on the same commit); the two left are explained below.", "",
           "Regenerate: see `tools/mlx_compat_doc.py`.", "",
           "| file | MLX passed | braze passed | MLX failed | braze failed | skipped (MLX / braze) "
           "|",
           "|---|---|---|---|---|---|"]
    tot = [0, 0, 0, 0]
    for name, m, b in _rows(mlx, braze):
        vals = [_count(m, "passed"), _count(b, "passed"),
                _count(m, "failed") + _count(m, "errors"),
                _count(b, "failed") + _count(b, "errors")]
        tot = [t + v for t, v in zip(tot, vals)]
        mark = "" if vals[1] >= vals[0] else " **(below MLX)**"
        out.append(f"| {name}{mark} | {vals[0]} | {vals[1]} | {vals[2]} | {vals[3]} | "
                   f"{_count(m, 'skipped')} / {_count(b, 'skipped')} |")
    out.append(f"| **total** | {tot[0]} | {tot[1]} | {tot[2]} | {tot[3]} | |")
    out += ["", "## Tests braze does not pass", ""]
    missing = 0
    for name, m, b in _rows(mlx, braze):
        for tid, res in sorted(b.get("tests", {}).items()):
            if res["outcome"] in ("passed", "skipped"):
                continue
            mres = m.get("tests", {}).get(tid, {}).get("outcome", "absent")
            why = REASONS.get(tid)
            missing += why is None
            out.append(f"- `{tid}` (MLX: {mres}): {why or 'not explained: ' + res['msg'][:160]}")
    out += ["", "## Tests MLX itself does not pass here", ""]
    for name, m, b in _rows(mlx, braze):
        for tid, res in sorted(m.get("tests", {}).items()):
            if res["outcome"] not in ("passed", "skipped"):
                bres = b.get("tests", {}).get(tid, {}).get("outcome", "absent")
                out.append(f"- `{tid}` (braze: {bres}): {res['msg'][:160]}")
    print("\n".join(out))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
