#!/usr/bin/env bash
# Lead, 2026-11-25 second session: issue 15's table with rotated input sets (timing.input_sets), then the skinny /
# small / fp8-skinny rows the helpers work on. Usage (device, repo root): bash benchmarks/profile/lead_rotation.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 benchmarks/gemm.py --precompile 14 --name gemm-rotated --out "$OUT" > "$OUT/gemm-rotated.log" 2>&1
echo "gemm rc=$?"; grep -vE "^\s*$" "$OUT/gemm-rotated.log" | tail -45
timeout 150 python3 benchmarks/gemm.py --precompile 14 --only bf16out,fp8 --name gemm-rotated-extra --out "$OUT" \
  --shapes 32,4096,4096 64,4096,4096 96,4096,4096 512,512,512 1024,1024,4096 > "$OUT/gemm-rotated-extra.log" 2>&1
echo "extra rc=$?"; grep -vE "^\s*$" "$OUT/gemm-rotated-extra.log" | tail -20
