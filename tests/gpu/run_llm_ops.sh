#!/usr/bin/env bash
# One device call for the fused LLM ops (repo root, carry=[".whl"]); logs/JSON to $OUT. Steps in order, each
# run only while the call's time budget ($BUDGET seconds from the start, default 200) has room:
#   bash tests/gpu/run_llm_ops.sh [steps]     steps: a comma list of
#     bench     benchmarks/llm_ops.py (every op, its variants, eager and torch.compile peers, copy bandwidth)
#     tests     tests/gpu/test_gpu_llm_ops.py (5 processes), and test_gpu_kernels.py's reductions (softmax, rmsnorm,
#               column reductions: the renderer's cross-warp reductions)
#     sanitize  compute-sanitizer memcheck + racecheck on tests/gpu/sanitize_llm_moe.py --rotary (the fused ops)
#     ncu       one launch of each op's default under ncu (SpeedOfLight, Occupancy, WarpStateStats)
#   default: bench,tests,sanitize,ncu
set -uo pipefail
steps=",${1:-bench,tests,sanitize,ncu},"
T0=$SECONDS; BUDGET=${BUDGET:-200}
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=${TILEPY_HIP_CACHE:-/tmp/thc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
has() { [[ $steps == *",$1,"* ]] && (( SECONDS - T0 < BUDGET - ${2:-20} )); }
left() { echo $(( BUDGET - (SECONDS - T0) )); }
if has bench 60; then
  timeout $(( $(left) - 15 )) python3 benchmarks/llm_ops.py --out "$OUT" > "$OUT/bench.log" 2>&1
  echo "== bench rc=$? at $((SECONDS - T0)) s"; grep -vE "^\s*$" "$OUT/bench.log" | grep -E "of copy|copy [0-9]|Error|error" | cut -c1-330
fi
if has tests 30; then
  for k in "layer_norm or silu" "merge or rmsnorm" "rotary and True" "rotary and False"; do
    timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_llm_ops.py -k "$k" \
      > "$OUT/tests_${k// /_}.log" 2>&1 &
  done
  timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_kernels.py \
    -k "softmax or rmsnorm or column_reductions or elementwise" > "$OUT/tests_reductions.log" 2>&1 &
  wait
  echo "== tests at $((SECONDS - T0)) s"; for f in "$OUT"/tests_*.log; do echo "$(basename "$f"): $(tail -1 "$f")"; done
  grep -h -E "^(FAILED|ERROR)" "$OUT"/tests_*.log | head -10
fi
if has sanitize 25; then
  for tool in memcheck racecheck; do
    timeout $(( ($(left) - 5) / 2 )) compute-sanitizer --tool $tool python3 tests/gpu/sanitize_llm_moe.py --rotary \
      > "$OUT/san_$tool.log" 2>&1
    echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | tail -1)"
    grep -m5 -E "Error|Hazard|Invalid" "$OUT/san_$tool.log"
  done
fi
if has ncu 20; then
  timeout $(( $(left) - 3 )) ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
    -k regex:'layer_norm|merge_attn|rotary' --launch-skip 0 --launch-count 4 \
    python3 benchmarks/profile/llm_ops_kernels.py > "$OUT/ncu.txt" 2>&1
  echo "== ncu rc=$?"; grep -E "^  [a-z_]+|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occ|Duration|Warp Cycles Per Issued" "$OUT/ncu.txt" | head -60
fi
echo "== done at $((SECONDS - T0)) s"
