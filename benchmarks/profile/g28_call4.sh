#!/usr/bin/env bash
# G28 call 4: the adopted policy (gemm_fp8.small_form) on the GPU: its forms and the policy through launch under
# pytest (with tests/gpu/test_gemm_fp8.py, whose shapes it now reaches) beside compute-sanitizer memcheck + racecheck of
# every form of sanitize_gemm_fp8_small.py and the policy; then the policy alone against _scaled_mm, alternated and rotated; logs under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/g28.log"
python3 benchmarks/gemm_fp8_small.py --forms none --shapes 64,64,64 --rounds 1 --out /tmp/warm > /dev/null 2>&1
( compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_small.py > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log" ) &
m=$!
( compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8_small.py > "$OUT/racecheck.log" 2>&1; echo "rc=$?" >> "$OUT/racecheck.log" ) &
r=$!
python3 -m pytest -v -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py tests/gpu/test_gemm_fp8.py > "$OUT/pytest.log" 2>&1
tail -3 "$OUT/pytest.log" | tee -a "$OUT/g28.log"
grep -E "FAILED|^E  " "$OUT/pytest.log" | head -20 | tee -a "$OUT/g28.log"
echo "== pytest done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
wait $m; wait $r
for f in memcheck racecheck; do
  echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok' "$OUT/$f.log" | tr '\n' ' ')" | tee -a "$OUT/g28.log"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/$f.log" | tee -a "$OUT/g28.log"
done
echo "== sanitizers done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
python3 benchmarks/gemm_fp8_small.py --forms none --more --tag=-g28-call4 --out "$OUT" 2>&1 | tee -a "$OUT/g28.log" \
  | grep -E "^[0-9]|policy"
echo "== bench done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
