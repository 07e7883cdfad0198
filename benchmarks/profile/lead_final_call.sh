#!/usr/bin/env bash
# Lead's last call of the fourth 2026-11-25 session (issue 15): the GPU tests G37's call did not reach (the small
# class with K_WAYS from 32 k-tiles, TMA-only), then lead_turn_call2.sh (the f32 pieces' store order off / on, then
# the closing table with the better arm).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 100 python3 -m pytest -v -n 14 -p no:cacheprovider tests/gpu/test_gpu_gemm_small_class.py \
  tests/gpu/test_gpu_gemm_tma_only.py > "$OUT/tests-final.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests-final.log" | tail -8
OUT="$OUT" bash benchmarks/profile/lead_turn_call2.sh
