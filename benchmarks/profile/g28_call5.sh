#!/usr/bin/env bash
# G28 call 5: gemm_fp8_cluster (the small forms on 2x1 clusters, B multicast): GPU tests of its forms beside
# compute-sanitizer memcheck + racecheck, then the forms against the policy and _scaled_mm, alternated and rotated.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/g28.log"
# (call 5 also ran c64x128_s8_w1 and c128x128_s5_w1, wait_group 1 in the cluster: lost, removed since)
C="c64x128_s8_w0 c64x64_s6_w0 c128x128_s5_w0"
python3 benchmarks/gemm_fp8_small.py --forms $C --shapes 64,64,64 --rounds 1 --out /tmp/warm 2>&1 | grep "^  c" | tee -a "$OUT/g28.log"
( compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_small.py $C > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log" ) &
m=$!
( compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8_small.py $C > "$OUT/racecheck.log" 2>&1; echo "rc=$?" >> "$OUT/racecheck.log" ) &
r=$!
python3 -m pytest -v -p no:cacheprovider tests/gpu/test_gemm_fp8_small.py -k "c64 or c128" > "$OUT/pytest.log" 2>&1
tail -2 "$OUT/pytest.log" | tee -a "$OUT/g28.log"
grep -E "FAILED|^E  " "$OUT/pytest.log" | head -20 | tee -a "$OUT/g28.log"
wait $m; wait $r
for f in memcheck racecheck; do
  echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=|^ok' "$OUT/$f.log" | tr '\n' ' ')" | tee -a "$OUT/g28.log"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/$f.log" | tee -a "$OUT/g28.log"
done
echo "== checks done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
python3 benchmarks/gemm_fp8_small.py --forms $C --tag=-g28-call5 --out "$OUT" --shapes 512,512,512 640,640,640 \
  768,768,768 1024,1024,1024 1024,1024,4096 2048,512,2048 2048,1024,4096 1024,2048,2048 2>&1 | tee -a "$OUT/g28.log" \
  | grep -E "^[0-9]|^    "
echo "== bench done at +$(( $(date +%s) - t0 )) s" | tee -a "$OUT/g28.log"
