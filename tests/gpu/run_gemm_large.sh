#!/usr/bin/env bash
# One device call for the large-shape GEMM work (G7, issue 15): build every kernel in parallel, the GPU tests
# with compute-sanitizer memcheck + racecheck beside them, then the sweep (alone on the GPU); logs under $OUT.
# Usage on the device machine (repo root, wheels installed, PYTHONPATH set):
#   bash tests/gpu/run_gemm_large.sh [sweep|table] [extra args for benchmarks/gemm_large_sweep.py]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
MODE=${1:-sweep}; shift || true
LOG="$OUT/large-$MODE.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$LOG"
t0=$(date +%s)
python3 benchmarks/gemm_large_sweep.py --precompile 16 --precompile-only "$@" 2>&1 | tee -a "$LOG"
echo "== build done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
( compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_large.py > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log" ) &
m=$!
( compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_large.py > "$OUT/racecheck.log" 2>&1; echo "rc=$?" >> "$OUT/racecheck.log" ) &
r=$!
python3 -m pytest -q -x -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py tests/gpu/test_gemm_fp8.py > "$OUT/pytest.log" 2>&1
tail -3 "$OUT/pytest.log" | tee -a "$LOG"; grep -E "^(FAILED|ERROR)|^E  " "$OUT/pytest.log" | head -20 | tee -a "$LOG"
echo "== pytest done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
wait $m; wait $r
for f in memcheck racecheck; do
  echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=' "$OUT/$f.log" | tr '\n' ' ')" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/$f.log" | tee -a "$LOG"
done
echo "== sanitizers done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
python3 benchmarks/gemm_large_sweep.py --tag "$MODE" --out "$OUT" "$@" 2>&1 | tee -a "$LOG"
echo "== bench done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
