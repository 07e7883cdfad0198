#!/usr/bin/env bash
# G8's second device call: the second sweep (benchmarks/gemm_small_sweep.py --plan 2) and compute-sanitizer memcheck
# + racecheck (and the SASS check) on the new configurations (tests/gpu/sanitize_gemm_small.py).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 tests/gpu/sanitize_gemm_small.py --sass 2>&1 | tail -12
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_small.py > "$OUT/g8-sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/g8-sanitize_$tool.log" | tail -1)"
  grep -m5 -E "Error|Hazard|Invalid" "$OUT/g8-sanitize_$tool.log"
done
python3 benchmarks/gemm_small_sweep.py --plan 2 --name gemm-g8-small2 --precompile 16 --out "$OUT" 2>&1 | tee "$OUT/g8-sweep2.log" | grep -v "^ *$"
