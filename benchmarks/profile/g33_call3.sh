#!/usr/bin/env bash
# G33 device call 3 (issue 15, the bf16 small class): the role-relative thread index in [0, size)
# (tilepy_hip.render.walk.role_tid) against the signed one it replaced, by source edit, alternated twice
# (gemm_small_fixed.py --plan d); the small class's policy and K_WAYS below 64 k-tiles against cuBLAS with it
# (gemm_small_class.py --plan g33b, rotated); GPU tests of the GEMM forms whose generated code it changes; memcheck.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g33-call3.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout 100 python3 benchmarks/gemm_small_fixed.py --plan d --ks 1024,2048,4096,8192 --out "$OUT" --name gemm-g33-rt \
  2>&1 | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== ablation $(el)" | tee -a "$LOG"
timeout 110 python3 benchmarks/gemm_small_class.py --plan g33b --name gemm-g33-call3 --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 170 python3 -m pytest -v -n 8 -p no:cacheprovider tests/gpu/test_gpu_gemm_small_class.py \
  tests/gpu/test_gpu_gemm_kways_cluster.py tests/gpu/test_gpu_gemm_cluster.py tests/gpu/test_gpu_gemm_tma_only.py \
  tests/gpu/test_gpu_gemm_small.py tests/gpu/test_gemm_fp8_swap.py > "$OUT/g33-pytest3.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/g33-pytest3.log")" | tee -a "$LOG"
grep -E "FAILED|Error" "$OUT/g33-pytest3.log" | head -8 | tee -a "$LOG"
timeout 60 compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_kways_cluster.py > "$OUT/g33-memcheck3.log" 2>&1
echo "== memcheck: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/g33-memcheck3.log" | tail -1) $(el)" | tee -a "$LOG"
true
