"""braze.launch: the mpirun command it builds, the threads it gives each rank, its error without
MPI, and a real two-process launch (skipped without mpi4py/mpirun)."""
import importlib.util
import os
import subprocess
import sys

import pytest

from braze import launch


def test_threads_are_divided_among_local_ranks(monkeypatch):
    monkeypatch.setattr(launch, "_cores", lambda: 8)
    assert launch.thread_env(4, {}) == {v: "2" for v in launch.THREAD_VARS}
    assert launch.thread_env(16, {})["NUMBA_NUM_THREADS"] == "1"
    assert launch.thread_env(2, {"BRAZE_NUM_THREADS": "3"})["BRAZE_NUM_THREADS"] == "3"


def test_command_for_mpich_and_open_mpi(monkeypatch):
    monkeypatch.setattr(launch, "_open_mpi_flags", lambda local_ranks: [])
    env = {"BRAZE_NUM_THREADS": "1"}
    cmd = launch.build_command("mpirun", ["a", "b"], 2, env, False, "hf", ["-v"], ["py", "t.py"])
    assert cmd == ["mpirun", "-n", "4", "-f", "hf", "-genv", "BRAZE_NUM_THREADS", "1", "-v",
                   "py", "t.py"]
    cmd = launch.build_command("mpirun", ["a"], 3, env, True, None, [], ["t"])
    assert cmd == ["mpirun", "-n", "3", "-x", "BRAZE_NUM_THREADS=1", "t"]
    assert launch._hostfile_text(["a", "a", "b"], False) == "a:2\nb:1\n"
    assert launch._hostfile_text(["a"], True) == "a slots=1\n"
    monkeypatch.undo()
    monkeypatch.setattr(launch, "_cores", lambda: 2)
    assert "--oversubscribe" in launch._open_mpi_flags(4)
    assert "--oversubscribe" not in launch._open_mpi_flags(2)


def test_clear_error_without_mpi(monkeypatch):
    monkeypatch.setattr(launch, "find_mpirun", lambda: None)
    with pytest.raises(SystemExit, match=r"mpirun not found.*braze\[mpi\]"):
        launch.main(["-n", "2", "train.py"])
    with pytest.raises(SystemExit):
        launch.main(["-n", "2"])  # no script


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or launch.find_mpirun() is None,
                    reason="needs mpi4py and mpirun")
def test_launch_two_processes(tmp_path):
    script = tmp_path / "show.py"
    script.write_text(
        "import os, sys\nimport braze.core as mx\ng = mx.distributed.init()\n"
        "total = mx.distributed.all_sum(mx.array(1)).item()\n"
        "open(sys.argv[1] + str(g.rank()), 'w').write(' '.join(map(str, [g.size(), total,"
        " os.environ['NUMBA_NUM_THREADS'], os.environ['FOO']])))\n")
    out = subprocess.run([sys.executable, "-m", "braze.launch", "-n", "2", "--env", "FOO=bar",
                          str(script), str(tmp_path / "rank")], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, NUMBA_NUM_THREADS="1"))
    assert out.returncode == 0, out.stderr
    for r in range(2):  # (output lines of two ranks may interleave: files instead)
        assert (tmp_path / f"rank{r}").read_text() == "2 2 1 bar"
