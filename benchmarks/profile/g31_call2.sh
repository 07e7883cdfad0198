#!/usr/bin/env bash
# G31 device call 2: TMA_ONLY against the fallback again (off, on, off, on in one process, rotated, bf16 and f32 out) at
# the shapes call 1 left open (1024^3 bf16 lost 0.5 us; 3000 x 5000 f32 one outlier) and the relaxed 64 x 128 cluster
# at 32 / 64 k-tiles (1024 x 1024 x 2048, 2048 x 512 x 4096), 640^3; the GPU tests after launch's fix for a B that
# gemm_cluster's TMA-only multicast cannot read; memcheck + racecheck of tests/gpu/sanitize_gemm_tma_only.py.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g31-call2.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${BENCH_S:-150} python3 benchmarks/profile/g31_gemm.py --order ${ORDER:-off,on,off,on} --name gemm-g31c2 --out "$OUT" \
  --shapes 1024,1024,1024 1024,1024,2048 2048,512,4096 640,640,640 3000,5000,4096 2>&1 | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== bench $(el)" | tee -a "$LOG"
timeout 70 python3 -m pytest -v -n 8 -p no:cacheprovider tests/gpu/test_gpu_gemm_tma_only.py \
  > "$OUT/g31-pytest2.log" 2>&1 &
for t in memcheck racecheck; do
  for s in tma_only; do
    ( timeout 70 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_$s.py > "$OUT/$t-$s.tmp" 2>&1;
      echo "$t $s rc=$?" >> "$OUT/$t-$s.tmp" ) &
  done
done
wait
echo "== pytest rc: $(tail -1 "$OUT/g31-pytest2.log") $(el)" | tee -a "$LOG"
grep -E "FAILED|Error" "$OUT/g31-pytest2.log" | head -8 | tee -a "$LOG"
cat "$OUT"/*.tmp > "$OUT/g31-sanitize2.log"; rm -f "$OUT"/*.tmp
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/g31-sanitize2.log" | tee -a "$LOG"
echo "== done $(el)" | tee -a "$LOG"
true
