#!/usr/bin/env bash
# The cuda backend's check on a machine with an NVIDIA GPU (issue 18), in one run of at most
# ~10 minutes. Results go under $OUT (default ./gpu_check_out):
#
#   summary.txt        one line per step: its status and seconds
#   env.txt            which python and packages (or pip installing the extras), nvidia-smi,
#                      the driver's view of the device (cuda-bindings), NVRTC's version
#   pytest.txt         the cuda tests, `gpu`-marked ones included (they load and run kernels)
#   nvrtc_latency.txt  NVRTC build times for the device's architecture (target <= 0.2 s)
#   bench_cpu.txt      compile_bench on the cpu backend (the baseline, 16 Mi elements)
#   bench_cuda.txt     the same with BRAZE_BACKEND=cuda: until the launch layer exists the
#                      backend is not available and braze says so (the file records it)
#   results.jsonl      the latency and benchmark rows as JSON lines
# (seven files: the device tool brings back at most eight)
#
# Every step has its own timeout and a failing step does not stop the others; the script's exit
# status is 0 when every step passed. Usage, from the repository root:
#   OUT=/path/to/results bash benchmarks/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
FAILED=0

step() {  # step NAME TIMEOUT_S LOGFILE COMMAND...
  local name="$1" limit="$2" log="$3"
  shift 3
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1 || rc=$?
  local status="ok"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status="TIMEOUT"; elif [ "$rc" -ne 0 ]; then status="FAILED($rc)"; fi
  [ "$status" = "ok" ] || FAILED=1
  printf '%-16s %-12s %4ss  %s\n' "$name" "$status" "$((SECONDS - t0))" "$log" | tee -a "$SUMMARY"
}

# -- environment ---------------------------------------------------------------------------
# The GPU machine reaches no package registry, but its python3 holds what braze needs (numpy,
# numba, ml_dtypes, pytest, cuda-bindings, nvidia-cuda-nvrtc, nvidia-cuda-runtime, torch): use
# it with this checkout on PYTHONPATH. Elsewhere (a machine with a registry), install the
# extras into .venv. GPU_CHECK_PYTHON names another interpreter.
PY="${GPU_CHECK_PYTHON:-python3}"
if "$PY" -c "import numpy, numba, ml_dtypes, pytest, cuda.bindings.nvrtc" > /dev/null 2>&1; then
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  step install 30 "$OUT/env.txt" "$PY" -c "import braze, cuda.bindings; print(braze.__file__)"
else
  [ -x .venv/bin/python ] || python3 -m venv .venv
  PY="$PWD/.venv/bin/python"
  step install 240 "$OUT/env.txt" "$PY" -m pip install -q -e ".[test,cuda]"
fi
"$PY" -m pip list 2> /dev/null | grep -i -E "^(numpy|numba|ml.dtypes|cuda-[a-z]+|nvidia-cuda-[a-z]+|torch) " \
  >> "$OUT/env.txt"

step device 60 "$OUT/device.tmp" bash -c '
  nvidia-smi || echo "nvidia-smi: not found"
  "$0" - <<EOF
from cuda.bindings import driver, nvrtc
print("nvrtc", nvrtc.nvrtcVersion())
print("cuInit", driver.cuInit(0))
err, n = driver.cuDeviceGetCount()
print("devices", err, n)
for i in range(n if err == driver.CUresult.CUDA_SUCCESS else 0):
    _, dev = driver.cuDeviceGet(i)
    _, name = driver.cuDeviceGetName(64, dev)
    A = driver.CUdevice_attribute
    _, ma = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, mi = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    print(i, name.split(b"\0")[0].decode(), f"sm_{ma}{mi}")
EOF' "$PY"
cat "$OUT/device.tmp" >> "$OUT/env.txt" && rm -f "$OUT/device.tmp"

# the device's architecture for NVRTC (sm_90a on an H100/H200)
ARCH=$("$PY" - <<'EOF' 2>/dev/null || echo sm_90a
from cuda.bindings import driver
driver.cuInit(0)
_, dev = driver.cuDeviceGet(0)
A = driver.CUdevice_attribute
_, ma = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
_, mi = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
print(f"sm_{ma}{mi}" + ("a" if ma >= 9 else ""))
EOF
)
echo "arch $ARCH" | tee -a "$SUMMARY"
export BRAZE_CUDA_ARCH="$ARCH"

# -- tests: render, compile, and (marked gpu) load and run on the device ----------------------
step pytest 240 "$OUT/pytest.txt" "$PY" -m pytest -q -rs -p no:cacheprovider \
  tests/test_cuda_render.py tests/test_cuda_compile.py \
  tests/test_bad_input.py -k "cuda or gpu or golden or corpus or backend"
step nvrtc_latency 60 "$OUT/nvrtc_latency.txt" "$PY" benchmarks/cuda_compile_latency.py \
  --arch "$ARCH" --json "$OUT/results.jsonl"

# -- the benchmark suite: cpu baseline, then the cuda backend (with the peers that are here) --
BENCH=("$PY" benchmarks/compile_bench.py --sizes "${GPU_CHECK_SIZES:-16Mi}" --no-progress
  --no-latency)
step bench_cpu 150 "$OUT/bench_cpu.txt" env BRAZE_BACKEND=cpu "${BENCH[@]}" \
  --variants braze.c,torch.c --json "$OUT/results.jsonl"
step bench_cuda 150 "$OUT/bench_cuda.txt" env BRAZE_BACKEND=cuda "${BENCH[@]}" \
  --variants braze.c,torch.c --json "$OUT/results.jsonl"
if grep -q "Backend 'cuda' is not available" "$OUT/bench_cuda.txt" 2>/dev/null; then
  echo "bench_cuda: the cuda backend is not available (no launch layer yet): cpu numbers" \
    | tee -a "$SUMMARY"
fi

echo "results in $OUT" | tee -a "$SUMMARY"
exit "$FAILED"
