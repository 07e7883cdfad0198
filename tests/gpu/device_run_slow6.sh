#!/usr/bin/env bash
# One device call for issue 12's slow problems (L6): GPU tests of the lowerings they take, compute-sanitizer
# (memcheck, racecheck) on the new kernels at small sizes, the gathered-rows tile sweep, and the suite on the
# problems (rows into $OUT/suite-slow.json). Usage on the device machine (repo root):
#   bash tests/gpu/device_run_slow6.sh
set -uo pipefail
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 150 python3 benchmarks/suite.py tests/problems/level1/109_adaptive_avgpool2d.py \
  tests/problems/level1/175_multihead_attention.py tests/problems/level1/196_embedding_bag_mean.py \
  tests/problems/level1/088_matmul_bf16.py tests/problems/level2/054_linear_gelu_layernorm_bf16.py \
  tests/problems/level2/065_embedding_mha_residual_layernorm.py --runs 10 --out "$OUT/suite-slow.json" \
  2>&1 | grep -E "^(level|built)"
timeout 90 python3 -m pytest -q -n 6 -p no:cacheprovider tests/gpu/test_gpu_lower_slow.py \
  tests/gpu/test_gpu_lower_gemm_policy.py -k "not fp32 and not skinny" 2>&1 | tee "$OUT/pytest.log" | grep -vE "^(tests|E |  )" | tail -6
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_lower_slow.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E '^ok' "$OUT/sanitize_$tool.log" | tr '\n' ' ') $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
done
timeout 50 python3 benchmarks/gather_rows_tiles.py --out "$OUT/gather-rows-tiles.json" 2>&1 | tail -16
