"""`python -m braze.launch -n 4 train.py ARGS...`: start a braze program on N processes per
host through `mpirun` (MLX's `mlx.launch --backend mpi`).

Each local rank gets an equal share of the cores: `BRAZE_NUM_THREADS`, `NUMBA_NUM_THREADS` and
`OMP_NUM_THREADS` are set to cores // N (at least 1) unless already set. `--hosts a,b` or
`--hostfile` (MLX's JSON: a list of {"ssh": hostname, ...}) spread the ranks over machines, N
per host; `--env K=V` and `--mpi-arg ARG` go to every rank and to mpirun. A script ending in
.py runs with this interpreter (`--python` for another one).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from typing import List, Optional

THREAD_VARS = ("BRAZE_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS")

_NO_MPI = ("braze.launch: {what} not found. Install MPI for braze with "
           "`pip install 'braze[mpi]'` (mpi4py and the MPICH wheel, which brings mpirun).")


def find_mpirun() -> Optional[str]:
    """mpirun beside this interpreter (a venv's, from the mpich wheel) or on PATH."""
    return shutil.which("mpirun", path=os.path.dirname(sys.executable)) or shutil.which("mpirun")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_env(local_ranks: int, environ=None) -> dict:
    """The thread counts for `local_ranks` processes sharing this machine's cores (variables
    the caller set are kept)."""
    environ = os.environ if environ is None else environ
    share = str(max(1, _cores() // local_ranks))
    return {v: environ.get(v, share) for v in THREAD_VARS}


def _hosts(args) -> List[str]:
    if args.hostfile:
        with open(args.hostfile) as f:
            data = json.load(f)
        try:
            return [h["ssh"] for h in data]
        except (TypeError, KeyError):
            raise SystemExit(f"braze.launch: {args.hostfile}: expected MLX's hostfile, a JSON "
                             'list of {"ssh": hostname, ...}') from None
    return [h.strip() for h in args.hosts.split(",") if h.strip()]


def _is_open_mpi(mpirun: str) -> bool:
    out = subprocess.run([mpirun, "--version"], capture_output=True, text=True)
    return "Open MPI" in out.stdout + out.stderr


def _open_mpi_flags(local_ranks: int) -> List[str]:
    """Open MPI refuses root and more ranks than cores unless told (MPICH allows both)."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    return (["--allow-run-as-root"] if root else []) + \
        (["--oversubscribe"] if local_ranks > _cores() else [])


def build_command(mpirun: str, hosts: List[str], n: int, env: dict, open_mpi: bool,
                  hostfile: Optional[str], mpi_args: List[str], command: List[str]) -> List[str]:
    """The mpirun command line: n ranks per host; `env` exported to remote ranks too."""
    cmd = [mpirun, "-n", str(n * len(hosts))]
    if open_mpi:
        cmd += _open_mpi_flags(n * max(Counter(hosts).values()))
    if hostfile:
        cmd += ["--hostfile" if open_mpi else "-f", hostfile]
    for k, v in env.items():
        cmd += ["-x", f"{k}={v}"] if open_mpi else ["-genv", k, v]
    return cmd + mpi_args + command


def _hostfile_text(hosts: List[str], open_mpi: bool) -> str:
    counts = Counter(hosts)
    fmt = "{} slots={}" if open_mpi else "{}:{}"
    return "".join(fmt.format(h, c) + "\n" for h, c in counts.items())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m braze.launch",
                                description="Launch a braze program on several processes "
                                            "through mpirun.")
    p.add_argument("-n", "--repeat-hosts", type=int, default=1, dest="n",
                   help="processes per host (default 1)")
    p.add_argument("--hosts", default="127.0.0.1", help="comma-separated hosts")
    p.add_argument("--hostfile", help="MLX's JSON hostfile (a list of {\"ssh\": host})")
    p.add_argument("--backend", default="mpi", choices=["mpi"], help="only mpi in braze")
    p.add_argument("--env", action="append", default=[], help="K=V for every rank")
    p.add_argument("--mpi-arg", action="append", default=[], help="an argument for mpirun")
    p.add_argument("--python", default=sys.executable, help="interpreter for .py scripts")
    p.add_argument("--print-python", action="store_true", help="print the interpreter, exit")
    p.add_argument("--verbose", action="store_true", help="print the mpirun command")
    return p


def main(argv=None) -> int:
    parser = _parser()
    args, command = parser.parse_known_args(argv)
    if args.print_python:
        print(args.python)
        return 0
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("No script is provided")
    if args.n < 1:
        parser.error(f"-n must be at least 1, got {args.n}")
    mpirun = find_mpirun()
    if mpirun is None:
        raise SystemExit(_NO_MPI.format(what="mpirun"))
    if importlib.util.find_spec("mpi4py") is None:
        raise SystemExit(_NO_MPI.format(what="mpi4py"))
    if command[0].endswith(".py"):
        command = [args.python] + command
    hosts = _hosts(args)
    env = thread_env(args.n * max(Counter(hosts).values()))
    env.update(e.split("=", 1) for e in args.env if "=" in e)
    open_mpi = _is_open_mpi(mpirun)
    local = hosts == ["127.0.0.1"] or hosts == ["localhost"]
    with tempfile.NamedTemporaryFile("w", suffix=".hosts") as hf:
        hf.write(_hostfile_text(hosts, open_mpi))
        hf.flush()
        mpi_args = [a for arg in args.mpi_arg for a in arg.split()]
        cmd = build_command(mpirun, hosts, args.n, env, open_mpi, None if local else hf.name,
                            mpi_args, command)
        if args.verbose:
            print("braze.launch:", " ".join(cmd), flush=True)
        try:
            return subprocess.run(cmd, env={**os.environ, **env}).returncode
        except KeyboardInterrupt:
            return 130


if __name__ == "__main__":
    sys.exit(main())
