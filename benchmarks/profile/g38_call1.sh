#!/bin/bash
# G38 device call 1: B's transposed split in register-transposed (32, 128) tiles (split_tf32_tw) against split_tf32_t:
# GPU tests and compute-sanitizer memcheck + racecheck (in parallel with the GEMMs' build), then the bench alone (where
# the whole "kn" call goes, rotated, two alternating rounds, SGEMM and device copies as peers). Into $OUT.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
SHAPES="1024,1024,1024:kn:policy 2051,2045,1000:kn:policy 1536,1536,1536:kn:policy 2048,2048,2048:kn:policy
4096,4096,4096:kn:policy"
timeout 90 python3 benchmarks/profile/g36_fp32.py --build-only --precompile 6 --shapes $SHAPES > "$OUT/build.log" 2>&1 &
timeout 120 python3 -m pytest -v -n 4 -p no:cacheprovider tests/gpu/test_gpu_gemm_fp32_split.py \
    tests/gpu/test_gpu_gemm_fp32_waves.py > "$OUT/pytest.log" 2>&1 &
for t in memcheck racecheck; do
  ( timeout 120 compute-sanitizer --tool $t python3 tests/gpu/sanitize_gemm_fp32_split.py; echo "rc=$?" ) \
      > "$OUT/${t}.log" 2>&1 &
done
wait; step "build, tests, sanitizers done"
timeout 100 python3 benchmarks/profile/g38_split.py --rounds 2 --tag=-call1 --out "$OUT" > "$OUT/bench.log" 2>&1
step "bench done rc=$?"
for f in "$OUT"/memcheck.log "$OUT"/racecheck.log; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rc=' "$f" | tr '\n' ' ')"; done
grep -E "passed|failed|FAILED|Error" "$OUT/pytest.log" | tail -12
grep -E "regs|FAILED|precompiled" "$OUT/build.log"; cat "$OUT/bench.log"
