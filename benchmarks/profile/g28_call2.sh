#!/usr/bin/env bash
# G28 call 2: the persistent 128 x 128 form under compute-sanitizer (call 1's script refused its N % 8 != 0 shape),
# then call 1's timing sweep alone on the GPU; logs under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/g28.log"
( compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_small.py p128x128_s6 > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log" ) &
m=$!
( compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8_small.py p128x128_s6 > "$OUT/racecheck.log" 2>&1; echo "rc=$?" >> "$OUT/racecheck.log" ) &
r=$!
wait $m; wait $r
for f in memcheck racecheck; do
  echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok' "$OUT/$f.log" | tr '\n' ' ')" | tee -a "$OUT/g28.log"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/$f.log" | tee -a "$OUT/g28.log"
done
echo "== sanitizers done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
python3 benchmarks/gemm_fp8_small.py --tag=-g28-call1 --out "$OUT" 2>&1 | grep -v "^  " | tee -a "$OUT/g28.log"
echo "== bench done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
