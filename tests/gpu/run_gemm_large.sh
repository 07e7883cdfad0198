#!/usr/bin/env bash
# Device calls for the large-shape GEMM work (G7, issue 15); output streams (nothing waits on a pipe's end), logs
# and the JSON under $OUT. Usage on the device machine (repo root, wheels installed, PYTHONPATH set):
#   bash tests/gpu/run_gemm_large.sh sweep [args for benchmarks/gemm_large_sweep.py]   # build, then the sweep alone
#   bash tests/gpu/run_gemm_large.sh check                                             # GPU tests, then sanitizers
# The sweep of every variant on every shape (the defaults) takes ~3 min after ~40 s of set-up; a short one:
#   bash tests/gpu/run_gemm_large.sh sweep --variants '^(g16|g16_r88|s3_tma_r96)$' --batches 15 --deadline 25 \
#        --shapes 8192,8192,8192 4096,4096,4096 4096,4096,14336 4096,14336,4096 8192,8192,1024 \
#        --fp8-shapes 4096,4096,4096 8192,8192,8192 4096,14336,4096
# Run the sanitizers apart from other GPU work: under them kernels run for seconds and hold the GPU (the first call
# ran them beside pytest and neither finished in 5 minutes).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
MODE=${1:-sweep}; shift || true
LOG="$OUT/large-$MODE.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee "$LOG"
t0=$(date +%s)
if [ "$MODE" = sweep ]; then
  python3 benchmarks/gemm_large_sweep.py --precompile 16 --precompile-only "$@" 2>&1 | tee -a "$LOG"
  echo "== build done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
  python3 benchmarks/gemm_large_sweep.py --tag sweep --out "$OUT" "$@" 2>&1 | tee -a "$LOG"
  echo "== sweep done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
else
  timeout 300 python3 -m pytest -q -x -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py \
    tests/gpu/test_gemm_fp8.py 2>&1 | grep -v Warning | tee "$OUT/pytest.log" | tail -15
  echo "== pytest done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_large.py > "$OUT/$tool.log" 2>&1
    echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tr '\n' ' ') at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
    grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/$tool.log" | tee -a "$LOG"
  done
fi
