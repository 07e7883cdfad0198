#!/usr/bin/env bash
# One device call for gemm_persistent (launch's PERSISTENT=1): the persistent GPU tests with compute-sanitizer
# memcheck + racecheck beside them, then the benchmark alone on the GPU (8192^3 and 4096^3, bf16 out, against
# cuBLAS in the same run; its kernels built first in parallel); logs under $OUT.
# Usage on the device machine (repo root, wheels installed, PYTHONPATH set): bash tests/gpu/run_gemm_persistent.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/persistent.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$LOG"
t0=$(date +%s)
# the GPU tests (three processes: their kernels build in parallel) beside memcheck + racecheck, then the benchmark
# alone on the GPU (its kernels built first in parallel processes)
( compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_persistent.py > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log" ) &
m=$!
( compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_persistent.py > "$OUT/racecheck.log" 2>&1; echo "rc=$?" >> "$OUT/racecheck.log" ) &
r=$!
T=tests/gpu/test_gpu_gemm_policies.py
python3 -m pytest -q -p no:cacheprovider $T -k "persistent and not 128_s5 and not grid3" > "$OUT/pytest1.log" 2>&1 &
p1=$!
python3 -m pytest -q -p no:cacheprovider $T -k "persistent_128_s5" > "$OUT/pytest2.log" 2>&1 &
p2=$!
python3 -m pytest -q -p no:cacheprovider $T -k "persistent_grid3" > "$OUT/pytest3.log" 2>&1
wait $p1; wait $p2
cat "$OUT"/pytest[123].log > "$OUT/pytest.log"; rm -f "$OUT"/pytest[123].log
grep -E "passed|failed|^E  |^FAILED" "$OUT/pytest.log" | head -30 | tee -a "$LOG"
echo "== pytest done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
wait $m; wait $r
for f in memcheck racecheck; do
  echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rel err|rc=' "$OUT/$f.log" | tr '\n' ' ')" | tee -a "$LOG"
  grep -m5 -E "Error|Hazard|Invalid" "$OUT/$f.log" | tee -a "$LOG"
done
echo "== sanitizers done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
V='^128x256_s4_persistent$|^128x256_s4_persistent_regs$|^128x128_s5_persistent$'
python3 benchmarks/gemm.py --only none --policies --variants "$V" --shapes 8192,8192,8192 4096,4096,4096 \
  --precompile 16 --no-b2b --name gemm-persistent-flat --out "$OUT" 2>&1 | tee -a "$LOG" | grep -E "sweep|precompiled|wrote"
echo "== bench done at +$(( $(date +%s) - t0 )) s" | tee -a "$LOG"
