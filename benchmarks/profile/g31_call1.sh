#!/usr/bin/env bash
# G31 device call 1: gemm_hopper.launch's TMA_ONLY forms (gemm_hopper / gemm_splitk / gemm_cluster without the
# operands' per-element fallback) against the same policy without it, rotated, alternated on / off / on in one process
# (g31_gemm.py), bf16 and f32 out; then the GPU tests of the forms and compute-sanitizer memcheck + racecheck of the
# small-class and large sanitizer scripts (the policy's constexprs through launch: TMA_ONLY=1).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g31-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout ${BENCH_S:-150} python3 benchmarks/profile/g31_gemm.py --order ${ORDER:-on,off,on} --name gemm-g31 --out "$OUT" \
  --shapes 512,512,512 768,768,768 1024,1024,1024 2048,2048,1024 1000,1000,4096 16,14336,4096 \
  2051,2045,1000 3000,5000,4096 2>&1 | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== bench $(el)" | tee -a "$LOG"
timeout 70 python3 -m pytest -v -n 8 -p no:cacheprovider tests/gpu/test_gpu_gemm_tma_only.py \
  > "$OUT/g31-pytest.log" 2>&1 &
for t in memcheck racecheck; do
  for s in small_class tma_only; do
    ( timeout 70 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_$s.py > "$OUT/$t-$s.tmp" 2>&1;
      echo "$t $s rc=$?" >> "$OUT/$t-$s.tmp" ) &
  done
done
wait
echo "== pytest rc: $(tail -1 "$OUT/g31-pytest.log") $(el)" | tee -a "$LOG"
grep -E "FAILED|Error" "$OUT/g31-pytest.log" | head -8 | tee -a "$LOG"
cat "$OUT"/*.tmp > "$OUT/g31-sanitize.log"; rm -f "$OUT"/*.tmp
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/g31-sanitize.log" | tee -a "$LOG"
echo "== done $(el)" | tee -a "$LOG"
true
