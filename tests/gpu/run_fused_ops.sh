#!/usr/bin/env bash
# One device call for the fused ops' variants (issue 16): the llm_ops rows of layer_norm / fused_add_rmsnorm
# (WARP_SUMS) and both rotary styles (the streaming kernels, KVEC / EARLY_K), fp32 attention's d128 error study
# (its variants against eager, V = I rows, the variants' times), the D = 64 decode row (BN 256 rings), then, side
# by side, the streaming rotary GPU tests and compute-sanitizer memcheck + racecheck on
# tests/gpu/sanitize_fused_ops.py and tests/gpu/sanitize_attention_fp32.py. Run from the repo root with the
# kernels precompiled by the same NVRTC 13.0 (`TILEPY_HIP_CACHE=build/a5_thc python
# tests/gpu/precompile_fused_ops.py`) and libcst's wheel in $WHL (default build/a3_whl); carry both.
#   bash tests/gpu/run_fused_ops.sh [steps]   steps: a comma list of bench (OPS: the llm_ops rows), errors, decode,
#   check (the stream tests and the sanitizers above), rows (GPU tests: layer_norm / rmsnorm / per-warp rows, the
#   decode cases, the lowered d 64 SDPA decode), sandec (memcheck + racecheck on sanitize_attention.py --decode),
#   fused (the rotary stream / HALVES GPU tests and the fused ops' sanitizers alone), a6check (PAIRED attention,
#   layer_norm_ring and rotary_ring: their GPU tests, memcheck + racecheck), a6bench (every llm_ops row, then
#   benchmarks/attention.py --sweep on d64s512 / d128s512), a6final (the new defaults' GPU tests, the attention
#   table without decode rows, the layer_norm / rotary rows), a6cs (rotary_ring CS_SMEM: GPU tests, sanitizers,
#   the rotary rows without the torch.compile peer), a7 (the renderer's compile-time vector paths, shared loads /
#   stores and gathers: the rotary, gather, embedding_bag, shared-view and renderer GPU tests with memcheck /
#   racecheck on the rings, then the rotary_ring rows (plain and CS_SMEM) against eager / torch.compile / copy and
#   level1/196 (EmbeddingBag) in the suite), a7b (gathers, embedding_bag, masked rotary GPU tests, memcheck on
#   sanitize_slow7.py, the ring rows without the torch.compile peer, level1/196);
#   default: bench,errors,decode,check
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site ${WHL:-build/a3_whl}/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=${TILEPY_HIP_CACHE:-$PWD/build/a5_thc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$SECONDS
steps=",${1:-bench,errors,decode,check},"
has() { [[ $steps == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if has bench; then
  timeout 150 python3 benchmarks/llm_ops.py --ops ${OPS:-layer_norm,fused_add_rmsnorm,rotary_neox,rotary_gptj} \
    --out "$OUT" > "$OUT/bench.log" 2>&1
  echo "== llm_ops rc=$? at $((SECONDS - T0)) s"; grep -E "of copy|copy [0-9]|Error" "$OUT/bench.log" | cut -c1-1500
fi
if has errors; then
  timeout 90 python3 benchmarks/attention_fp32.py --errors --error-dims 128 --variant-times --out "$OUT" \
    > "$OUT/errors.log" 2>&1
  echo "== fp32 errors rc=$? at $((SECONDS - T0)) s"; cut -c1-700 "$OUT/errors.log" | tail -20
fi
if has decode; then
  timeout 45 python3 - > "$OUT/decode64.log" 2>&1 <<'PY'
import json, os, sys, torch
sys.path.insert(0, "benchmarks")
import attention as AB
g = torch.Generator(device="cuda").manual_seed(64)
r = AB.decode_row(8, 32, 8, 16384, 64, 1, g)
print(json.dumps(r))
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "decode": [r]},
          open(os.path.join(os.environ.get("OUT", "/tmp/out"), "attention-decode-d64-bn256.json"), "w"), indent=1)
PY
  echo "== decode64 rc=$? at $((SECONDS - T0)) s"; tail -c 1200 "$OUT/decode64.log"; echo
fi
if has check; then   # side by side: correctness only, no timing
  timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_llm_ops.py -k "stream" > "$OUT/tests.log" 2>&1 &
  for tool in memcheck racecheck; do
    for s in fused_ops attention_fp32; do
      timeout 150 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_$s.py > "/tmp/san_${tool}_$s.log" 2>&1 &
    done
  done
  wait
  echo "== tests at $((SECONDS - T0)) s"; tail -3 "$OUT/tests.log"; grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head
  for f in /tmp/san_*.log; do
    echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1) $(tail -1 "$f" | cut -c1-200)"
    grep -m5 -E "Error|Hazard|Invalid" "$f"
  done > "$OUT/sanitize.log"
  cat "$OUT/sanitize.log"
fi
if has rows || has sandec; then   # side by side: correctness only
  has rows && timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_llm_ops.py \
    tests/gpu/test_gpu_attention.py tests/gpu/test_gpu_lower_sdpa.py \
    -k "layer_norm or rmsnorm or per_warp or decode and not attention_fwd and not 8192 and not 4100" > "$OUT/rows.log" 2>&1 &
  for tool in $(has sandec && echo memcheck racecheck); do
    timeout 200 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_attention.py --decode > "/tmp/dec_$tool.log" 2>&1 &
  done
  wait
  if has rows; then echo "== rows tests at $((SECONDS - T0)) s"; tail -3 "$OUT/rows.log"; grep -E "^(FAILED|ERROR)" "$OUT/rows.log" | head; fi
  for f in /tmp/dec_*.log; do
    [ -f "$f" ] && echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1) $(tail -1 "$f" | cut -c1-200)"
  done | tee "$OUT/sanitize_decode.log"
fi
if has fused; then   # the rotary GPU tests (stream, HALVES) and the fused ops' sanitizers alone, side by side
  timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_llm_ops.py -k "stream or halves" > "$OUT/fused.log" 2>&1 &
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_fused_ops.py > "/tmp/fused_$tool.log" 2>&1 &
  done
  wait
  echo "== fused tests at $((SECONDS - T0)) s"; tail -3 "$OUT/fused.log"; grep -E "^(FAILED|ERROR)" "$OUT/fused.log" | head
  for tool in memcheck racecheck; do
    echo "== fused_$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "/tmp/fused_$tool.log" | tail -1) $(tail -1 "/tmp/fused_$tool.log" | cut -c1-200)"
  done | tee -a "$OUT/fused.log"
fi
if has a6check; then   # PAIRED attention, layer_norm_ring, rotary_ring: GPU tests and memcheck + racecheck, side by side
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_llm_ops.py tests/gpu/test_gpu_attention.py \
    -k "ring or cfg5 or cfg6 or cfg7" > "$OUT/a6_tests.log" 2>&1 &
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_fused_ops.py --ring > "/tmp/a6_${tool}_ring.log" 2>&1 &
    timeout 120 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_attention.py --paired > "/tmp/a6_${tool}_paired.log" 2>&1 &
  done
  wait
  echo "== a6 tests at $((SECONDS - T0)) s"; tail -3 "$OUT/a6_tests.log"; grep -E "^(FAILED|ERROR)" "$OUT/a6_tests.log" | head
  for f in /tmp/a6_*.log; do
    echo "== $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1) $(tail -1 "$f" | cut -c1-200)"
    grep -m3 -E "Error|Hazard|Invalid" "$f"
  done | tee "$OUT/a6_sanitize.log"
fi
if has a6bench; then   # every llm_ops row (with the ring variants), then the attention sweep's short rows (PAIRED)
  timeout 170 python3 benchmarks/llm_ops.py --out "$OUT" > "$OUT/a6_llm_ops.log" 2>&1
  echo "== llm_ops rc=$? at $((SECONDS - T0)) s"; grep -E "of copy|copy [0-9]|Error" "$OUT/a6_llm_ops.log" | cut -c1-1800
  timeout 70 python3 benchmarks/attention.py --sweep --sweep-rows d64s512,d128s512 --out "$OUT" > "$OUT/a6_sweep.log" 2>&1
  echo "== sweep rc=$? at $((SECONDS - T0)) s"; cut -c1-200 "$OUT/a6_sweep.log" | tail -40
fi
if has a6final; then   # the new defaults' GPU tests (rings, PAIRED policy, lowered short SDPA), then the tables
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_llm_ops.py tests/gpu/test_gpu_attention.py \
    tests/gpu/test_gpu_lower_sdpa.py -k "layer_norm or rotary or rmsnorm or attention_matches or launch_follows or \
    one_tile or repeated or unaligned or lowered_sdpa_matches and attention_fwd" > "$OUT/a6_final_tests.log" 2>&1
  echo "== final tests rc=$? at $((SECONDS - T0)) s"; tail -3 "$OUT/a6_final_tests.log"
  grep -E "^(FAILED|ERROR)" "$OUT/a6_final_tests.log" | head
  timeout 120 python3 benchmarks/attention.py --no-decode --out "$OUT" > "$OUT/a6_attention.log" 2>&1
  echo "== attention rc=$? at $((SECONDS - T0)) s"; cut -c1-160 "$OUT/a6_attention.log" | tail -28
  timeout 80 python3 benchmarks/llm_ops.py --ops layer_norm,rotary_neox,rotary_gptj --out "$OUT" > "$OUT/a6_llm.log" 2>&1
  echo "== llm_ops rc=$? at $((SECONDS - T0)) s"; grep -E "of copy|copy [0-9]|Error" "$OUT/a6_llm.log" | cut -c1-300
fi
if has a6cs; then   # rotary_ring CS_SMEM: its GPU tests and memcheck / racecheck side by side, then the rotary rows
  timeout 40 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_llm_ops.py -k "rotary_ring" > "$OUT/a6cs_tests.log" 2>&1 &
  for tool in memcheck racecheck; do
    timeout 40 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_fused_ops.py --ring > "/tmp/a6cs_$tool.log" 2>&1 &
  done
  wait
  echo "== tests at $((SECONDS - T0)) s"; tail -1 "$OUT/a6cs_tests.log"; grep -E "^(FAILED|ERROR)" "$OUT/a6cs_tests.log" | head -5
  for tool in memcheck racecheck; do echo "== $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/a6cs_$tool.log | tail -1)"; done
  timeout 40 python3 benchmarks/llm_ops.py --no-compile --ops rotary_neox,rotary_gptj --out "$OUT" > "$OUT/a6cs_bench.log" 2>&1
  echo "== bench rc=$? at $((SECONDS - T0)) s"; grep -E "of copy|copy [0-9]" "$OUT/a6cs_bench.log" | cut -c1-2500
fi
if has a7; then   # correctness side by side (GPU tests, sanitizers), then the timings alone
  timeout 130 python3 -m pytest -q -n 6 -p no:cacheprovider tests/gpu/test_gpu_llm_ops.py -k "rotary" \
    tests/gpu/test_gpu_gather_kernels.py tests/gpu/test_gpu_lower_slow7.py tests/gpu/test_gpu_shared_views.py \
    tests/gpu/test_gpu_kernels.py > "$OUT/a7_tests.log" 2>&1 &
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_fused_ops.py --ring > "/tmp/a7_$tool.log" 2>&1 &
  done
  wait
  echo "== tests at $((SECONDS - T0)) s"; tail -1 "$OUT/a7_tests.log"; grep -E "^(FAILED|ERROR)" "$OUT/a7_tests.log" | head -8
  for tool in memcheck racecheck; do echo "== $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/a7_$tool.log | tail -1) $(tail -1 /tmp/a7_$tool.log | cut -c1-150)"; done | tee "$OUT/a7_sanitize.log"
  timeout 110 python3 benchmarks/llm_ops.py --ring-only --ops rotary_neox,rotary_gptj --out "$OUT" > "$OUT/a7_bench.log" 2>&1
  echo "== bench rc=$? at $((SECONDS - T0)) s"; grep -E "of copy|copy [0-9]|Error" "$OUT/a7_bench.log" | cut -c1-1500
  timeout 70 python3 benchmarks/suite.py tests/problems/level1/196_embedding_bag_mean.py --jobs 4 --runs 10 \
    --out "$OUT/a7_suite196.json" > "$OUT/a7_suite.log" 2>&1
  echo "== suite 196 rc=$? at $((SECONDS - T0)) s"; grep -E "^(level|built)" "$OUT/a7_suite.log" | cut -c1-300
fi
if has a7b; then   # after the masked-gather change: gathers, embedding_bag and masked rotary on the GPU, memcheck
  # on L7's gather kernels, the ring rows again (no torch.compile peer), level1/196
  timeout 70 python3 -m pytest -q -n 6 -p no:cacheprovider tests/gpu/test_gpu_gather_kernels.py \
    tests/gpu/test_gpu_lower_slow7.py tests/gpu/test_gpu_llm_ops.py -k "not conv and (rotary and not stream and not \
    halves or embedding or gather or scatter or pool or atomics or recomputed)" > "$OUT/a7b_tests.log" 2>&1 &
  timeout 60 compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_slow7.py > "/tmp/a7b_memcheck.log" 2>&1 &
  wait
  echo "== tests at $((SECONDS - T0)) s"; tail -1 "$OUT/a7b_tests.log"; grep -E "^(FAILED|ERROR)" "$OUT/a7b_tests.log" | head -8
  echo "== memcheck slow7: $(grep -E '^ok' /tmp/a7b_memcheck.log | tr '\n' ' ') $(grep -E 'ERROR SUMMARY' /tmp/a7b_memcheck.log | tail -1)" | tee "$OUT/a7b_sanitize.log"
  timeout 60 python3 benchmarks/llm_ops.py --ring-only --no-compile --ops rotary_neox,rotary_gptj --out "$OUT" > "$OUT/a7b_bench.log" 2>&1
  echo "== bench rc=$? at $((SECONDS - T0)) s"; grep -E "of copy|copy [0-9]|Error" "$OUT/a7b_bench.log" | cut -c1-1500
  timeout 50 python3 benchmarks/suite.py tests/problems/level1/196_embedding_bag_mean.py --jobs 4 --runs 10 \
    --out "$OUT/a7b_suite196.json" > "$OUT/a7b_suite.log" 2>&1
  echo "== suite 196 rc=$? at $((SECONDS - T0)) s"; grep -E "^(level|built)" "$OUT/a7b_suite.log" | cut -c1-300
fi
echo "== done at $((SECONDS - T0)) s"
