#!/usr/bin/env bash
# An interpreter for ../shared/tools/mlx_tests.py (--python) that runs MLX's MPI tests on
# MLX_MPI_RANKS ranks (default 8): `-m pytest ...` goes through mpirun, anything else (the
# tool's probes) runs once. Only rank 0 reports to the tool; mpirun fails if any rank fails.
set -euo pipefail
PY="${MLX_MPI_PYTHON:-$(command -v python)}"
if [ "${1:-}" = "--rank" ]; then
  shift
  [ "${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}}" != 0 ] && export MLX_TESTS_EVENTS=/dev/null
  exec "$PY" "$@"
fi
if [ "${1:-}" = "-m" ] && [ "${2:-}" = "pytest" ]; then
  MPIRUN="$(dirname "$PY")/mpirun"
  [ -x "$MPIRUN" ] || MPIRUN=mpirun
  export MLX_MPI_PYTHON="$PY"
  exec "$MPIRUN" -n "${MLX_MPI_RANKS:-8}" "$0" --rank "$@"
fi
exec "$PY" "$@"
