#!/usr/bin/env bash
# Lead (issue 15, f32 out on the large class): the renderer's per-lane order of the f32 pieces' shared stores
# (tilepy_hip/render/tiles.py bank_turn) on the H100: GPU tests of the kernels it changes, compute-sanitizer on the
# persistent f32-out kernel, SASS counts, then the f32-out policy against torch.mm(out_dtype=f32) with the turn off /
# on in alternate processes (twice), each process pairing ours with the peer replay by replay.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_gpu_gemm_large.py \
  tests/gpu/test_gpu_gemm_policies.py ${EXTRA_TESTS:-} > "$OUT/tests.log" 2>&1; tail -3 "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_persistent.py > "$OUT/san-$tool.log" 2>&1
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san-$tool.log" | tail -1)"
done
for r in 0 1; do
  for turn in 0 1; do
    TILEPY_HIP_BANK_TURN=$turn timeout 100 python3 benchmarks/gemm_f32out_large.py --forms policy --rounds 1 \
      --tag="-lead-turn$turn-r$r" --out "$OUT" 2>&1 | grep -E "round|WRONG|failed|regs" | sed "s/^/turn$turn r$r /"
  done
done
