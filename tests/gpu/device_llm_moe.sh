#!/usr/bin/env bash
# One device call for the fused LLM ops and the MoE layer: GPU tests, compute-sanitizer memcheck + racecheck,
# the grouped GEMMs' SASS (HGMMA, no local memory in the loop), then benchmarks/llm_ops.py and benchmarks/moe.py.
# Usage on the device machine (repo root): bash tests/gpu/device_llm_moe.sh [tests|sanitize|sass|bench|all] [moe args]
set -uo pipefail
what=${1:-all}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=${TILEPY_HIP_CACHE:-/tmp/thc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
if [[ $what == all || $what == tests ]]; then
  python3 -m pytest -q -p no:cacheprovider --maxfail=20 tests/gpu/test_gpu_llm_ops.py tests/gpu/test_gpu_moe.py \
    > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; grep -E "passed|failed|error" "$OUT/pytest.log" | tail -3
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20
fi
if [[ $what == all || $what == sanitize ]]; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool python3 tests/gpu/sanitize_llm_moe.py > "$OUT/sanitize_$tool.log" 2>&1
    echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
    grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
  done
fi
if [[ $what == all || $what == sass ]]; then
  python3 - <<'PY' 2>&1 | tee "$OUT/sass.txt"
import re, tilepy_hip
from stdlib_kernels import moe
for table in ("PRESETS", "SMALL_M"):
    for name in ("gemm13", "gemm2"):
        ck = tilepy_hip.compile(getattr(moe, "moe_" + name), target="sm_90a", **getattr(moe, table)[name])
        s = ck.sass()
        print(table, name, ck.resources, {op: len(re.findall(op, s)) for op in ("HGMMA", "UTMALDG", "LDL", "STL")})
PY
fi
if [[ $what == all || $what == bench ]]; then
  python3 benchmarks/llm_ops.py --out "$OUT" 2>&1 | tail -9
  python3 benchmarks/moe.py --out "$OUT" ${2:-} 2>&1 | tail -12
fi
