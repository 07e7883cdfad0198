#!/usr/bin/env bash
# G33 device call 4 (issue 15, the bf16 small class, rotated input sets): the policy with SMALL_KWAYS from 32 k-tiles
# against the relaxed cluster it replaced at 32-63 k-tiles, alternated twice (`--plan g33c`); the small class's GPU
# tests with the new rows.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g33-call4.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$LOG"
timeout 120 python3 benchmarks/gemm_small_class.py --plan g33c --name gemm-g33-call4 --precompile 16 --out "$OUT" 2>&1 \
  | grep -v Warning | grep -v "^ *$" | grep -v _warn_once | tee -a "$LOG"
echo "== sweep $(el)" | tee -a "$LOG"
timeout 100 python3 -m pytest -v -n 8 -p no:cacheprovider tests/gpu/test_gpu_gemm_small_class.py > "$OUT/g33-pytest4.log" 2>&1
echo "== pytest rc=$? $(el): $(tail -1 "$OUT/g33-pytest4.log")" | tee -a "$LOG"
grep -E "FAILED|Error" "$OUT/g33-pytest4.log" | head -8 | tee -a "$LOG"
true
