#!/usr/bin/env bash
# G10's second device call (issue 15): the lowering's swap-AB on the GPU, compute-sanitizer on the new swap forms,
# ncu on the 2x1-cluster swap form against the policy and cuBLAS at 32 x 4096 x 4096 (why the cluster loses), then
# fp8 (gemm_fp8's TMA-store forms against torch._scaled_mm; the register-budget form alone, under its own timeout:
# it never returned in call 1).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
timeout 70 python3 -m pytest -q -n 3 -p no:cacheprovider tests/gpu/test_gpu_lower_gemm_policy.py -k swap 2>&1 \
  | tee "$OUT/g10-pytest2.log" | grep -vE "^(tests|E |  )|Warning" | tail -6
echo "== pytest done at +$(( $(date +%s) - t0 )) s"
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small.py > "$OUT/g10-sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g10-sanitize_$tool.log" | tail -1) at +$(( $(date +%s) - t0 )) s"
  grep -m5 -E "Error|Hazard|Invalid|Traceback" "$OUT/g10-sanitize_$tool.log"
done
for who in ours swap16_64_s16_cl2 cublas; do
  timeout 40 ncu --cache-control none -k regex:"gemm_|nvjet" --launch-skip 20 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --csv python3 benchmarks/gemm_small_sweep.py --ncu-target $who --shape 32,4096,4096 \
    > "$OUT/g10-ncu-$who.csv" 2>&1
  echo "== ncu $who rc=$? at +$(( $(date +%s) - t0 )) s"
done
OUT="$OUT/fp8a" timeout 80 bash tests/gpu/run_gemm_large.sh sweep --only fp8 --batches 15 --deadline 45 \
  --variants '^s3_tma$' --fp8-shapes 4096,4096,4096 8192,8192,8192 4096,14336,4096 2>&1 | grep -E "^fp8|==" | tail -12
echo "== fp8 a done at +$(( $(date +%s) - t0 )) s"
OUT="$OUT/fp8b" timeout 40 bash tests/gpu/run_gemm_large.sh sweep --only fp8 --batches 15 --deadline 5 \
  --variants '^s3_tma_r96$' --fp8-shapes 4096,4096,4096 2>&1 | grep -E "^fp8|==" | tail -6
echo "== fp8 b rc=$? done at +$(( $(date +%s) - t0 )) s"
