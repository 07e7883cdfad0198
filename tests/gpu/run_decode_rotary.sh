#!/usr/bin/env bash
# One device call for split-KV decoding and the rotary embedding (repo root, carry=[".whl"]); logs/JSON to $OUT:
#   bash tests/gpu/run_decode_rotary.sh [steps]     steps: a comma list of
#     build     the decode kernels compiled in parallel (tests/gpu/precompile_attention.py --decode)
#     tests     the decode tests of tests/gpu/test_gpu_attention.py; rtests: the rotary tests of test_gpu_llm_ops.py
#     sanitize  memcheck + racecheck: sanitize_attention.py --decode; rsanitize: sanitize_llm_moe.py --rotary
#     sass      the decode kernels' SASS: HGMMA, local memory (LDL / STL)
#     bench     benchmarks/attention.py --decode; rbench: benchmarks/llm_ops.py --ops rotary_neox,rotary_gptj
#     moe       tests/gpu/test_gpu_moe.py and benchmarks/moe.py at $MOE_TOKENS tokens (default 16,128)
#   default: build,tests,rtests,sanitize,rsanitize,sass,bench,rbench
set -uo pipefail
steps=",${1:-build,tests,rtests,sanitize,rsanitize,sass,bench,rbench},"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=${TILEPY_HIP_CACHE:-/tmp/thc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
has() { [[ $steps == *",$1,"* ]]; }
if has build; then
  timeout 120 python3 tests/gpu/precompile_attention.py 16 --decode > "$OUT/build.log" 2>&1
  echo "== build: rc=$? $(tail -1 "$OUT/build.log")"; grep FAILED "$OUT/build.log" | head -5
fi
if has tests; then
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_attention.py -k decode 2>&1 | tail -4
fi
if has rtests; then
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_llm_ops.py -k rotary 2>&1 | tail -4
fi
if has sanitize; then
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_attention.py --decode \
      > "$OUT/san_decode_$tool.log" 2>&1
    echo "== decode $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_decode_$tool.log" | tail -1)"
    grep -m5 -E "Error|Hazard|Invalid" "$OUT/san_decode_$tool.log"
  done
fi
if has rsanitize; then
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_llm_moe.py --rotary \
      > "$OUT/san_rotary_$tool.log" 2>&1
    echo "== rotary $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_rotary_$tool.log" | tail -1)"
    grep -m5 -E "Error|Hazard|Invalid" "$OUT/san_rotary_$tool.log"
  done
fi
if has sass; then
  timeout 60 python3 - <<'PY'
import re, tilepy_hip
from stdlib_kernels import attention as A, llm_ops as L
for kern in (A.attention_decode, A.attention_decode_bf16):
    for d, qlen in ((128, 1), (64, 4)):
        ck = tilepy_hip.compile(kern, target="sm_90a", HEAD_DIM=d, BN=128, STAGES=A.DECODE_STAGES[d], CONSUMERS=1,
                                QLEN=qlen, CAUSAL=qlen > 1)
        s = ck.sass() or ""
        print(kern.name, d, qlen, ck.resources.get("registers"), {op: len(re.findall(rf"\b{op}\b", s))
                                                                 for op in ("HGMMA", "UTMALDG", "LDL", "STL")})
for kern in (L.rotary_neox, L.rotary_gptj):
    ck = tilepy_hip.compile(kern, target="sm_90a", SPLIT=True, BHQ=8, BHK=8, THREADS=64)
    s = ck.sass() or ""
    print(kern.name, "SPLIT 8 heads", ck.resources, {op: len(re.findall(rf"\b{op}\b", s)) for op in ("LDL", "STL")})
PY
fi
if has bench; then
  timeout 150 python3 benchmarks/attention.py --decode --out "$OUT" 2>&1 | grep -E "decode|wrote|Error"
fi
if has rbench; then
  timeout 200 python3 benchmarks/llm_ops.py --ops rotary_neox,rotary_gptj --out "$OUT" 2>&1 | tail -4
fi
if has moe; then
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_moe.py 2>&1 | tail -3
  timeout 150 python3 benchmarks/moe.py --tokens "${MOE_TOKENS:-16,128}" --suffix small --out "$OUT" 2>&1 | tail -6
fi
