#!/usr/bin/env bash
# One device call for gemm_hopper's policies: GPU tests, compute-sanitizer memcheck + racecheck, benchmarks.
# Usage (device machine, repo root; the carried wheels installed first): bash tests/gpu/run_gemm_policies.sh [tests] [bench]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
for what in "$@"; do
  if [[ $what == tests ]]; then
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_policies.py tests/gpu/test_gpu_kernels.py \
      -k "policy or policies or gemm_hopper" 2>&1 | tee "$OUT/pytest_policies.log" | grep -vE "^(tests|E |  )" | tail -15
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_policies.py > "$OUT/sanitize_$tool.log" 2>&1
      echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
      grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_$tool.log"
    done
  fi
  if [[ $what == sweep ]]; then
    python3 benchmarks/gemm.py --only none --policies --out "$OUT" 2>&1 | tail -80
  fi
  if [[ $what == bench ]]; then
    python3 benchmarks/gemm.py --policies --out "$OUT" 2>&1 | tail -100
  fi
  if [[ $what == ablation ]]; then
    python3 benchmarks/ablation.py --out "$OUT" 2>&1 | tail -14
  fi
  if [[ $what == launch ]]; then
    python3 benchmarks/launch_overhead.py --out "$OUT" 2>&1 | tail -14
  fi
done
# G2 (issue 15 items 1-3): skinny / small / ragged shapes. `shapes` sweeps the candidates (JSON
# gemm-shapes-sweep-<device>.json under $OUT), `newtests` runs the GPU tests and sanitizers of the added variants.
for what in "$@"; do
  if [[ $what == shapes ]]; then
    python3 benchmarks/gemm.py --only none --policies --no-b2b --precompile 16 --sweep-out bf16,f32 \
      --name gemm-shapes-sweep-skinny --out "$OUT" --variants "^(64x32|64x64_s8_wait1_1consumer$|64x64_s8_wait1_1consumer_splitk2|128x64_s8|64x128_s6_wait1_1consumer|128x128_s4_wait1_splitk4)" \
      --shapes 16,4096,4096 64,4096,4096 128,4096,4096 256,4096,4096 128,14336,4096 1024,1024,1024 2>&1 | grep -v "^  precompiled" | tail -120
    python3 benchmarks/gemm.py --only none --policies --no-b2b --precompile 16 --sweep-out bf16 \
      --name gemm-shapes-sweep-ragged --out "$OUT" --variants "^(128x256_s4_wait0|128x256_s4_persistent|128x256_s3_wait0_epi|128x128_s5_wait0_epi|128x128_s6_wait0|128x64_s6_wait1|64x128_s6_wait1_1consumer_epi)$" \
      --shapes 2051,2045,1000 3000,5000,4096 8192,8192,1024 1024,1024,1024 2>&1 | tail -60
  fi
  if [[ $what == newtests ]]; then
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_policies.py \
      -k "narrow or 64x64_s8 or staged or sass" 2>&1 | tee "$OUT/pytest_new.log" | grep -vE "^(tests|E |  )" | tail -8
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_policies.py --new > "$OUT/sanitize_new_$tool.log" 2>&1
      echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_new_$tool.log" | tail -1)"
      grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_new_$tool.log"
    done
  fi
done
# `table`: the policy table through gemm_hopper.launch on the G2 shapes (JSON gemm-shapes-<device>.json) with the
# decode candidates swept beside it, then the policy-table GPU tests.
for what in "$@"; do
  if [[ $what == table ]]; then
    python3 benchmarks/gemm.py --only bf16out,f32out --policies --no-b2b --precompile 16 --sweep-out bf16,f32 \
      --name gemm-shapes --out "$OUT" --variants "^64x(128_s[48]_wait1|128_s6_wait0|256_s4_wait1)_1consumer$" \
      --shapes 16,4096,4096 64,4096,4096 128,4096,4096 256,4096,4096 128,14336,4096 1024,1024,1024 \
      2051,2045,1000 3000,5000,4096 8192,8192,1024 4096,4096,4096 --sweep-shapes 16,4096,4096 64,4096,4096 \
      128,4096,4096 1024,1024,1024 2>&1 | tail -130
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_policies.py -k "policy_table or staged_epilogue_128x256" \
      2>&1 | tee "$OUT/pytest_table.log" | grep -vE "^(tests|E |  )" | tail -6
  fi
done
# `decode_ab`: the decode class (64x128, one consumer) against the old skinny policy (128x128 split-K 4) at
# M = 16 / 64 / 128, twice in one call (the first two calls disagreed on the decode rows: 14.8 vs 25.2 us).
for what in "$@"; do
  if [[ $what == decode_ab ]]; then
    for rep in 1 2; do
      python3 benchmarks/gemm.py --only none --policies --no-b2b --precompile 16 --sweep-out bf16,f32 \
        --name gemm-decode-ab$rep --out "$OUT" --variants "^(128x128_s4_wait1_splitk4|64x128_s6_wait1_1consumer)$" \
        --shapes 16,4096,4096 64,4096,4096 128,4096,4096 2>&1 | grep sweep
    done
  fi
done
# `tma_store`: GPU tests + sanitizers of the TMA store epilogue (EPILOGUE=2), then it against the staged (1) and
# register (0) epilogues on the large / small / ragged shapes (JSON gemm-tma-store-sweep-<device>.json).
for what in "$@"; do
  if [[ $what == tma_store ]]; then
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_policies.py -k "tma_store or staged_epilogue or sass or store_bulk" \
      2>&1 | tee "$OUT/pytest_tma_store.log" | grep -vE "^(tests|E |  )" | tail -6
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_policies.py --new > "$OUT/sanitize_tma_$tool.log" 2>&1
      echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_tma_$tool.log" | tail -1)"
      grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_tma_$tool.log"
    done
    python3 benchmarks/gemm.py --only none --policies --no-b2b --precompile 16 --sweep-out bf16 \
      --name gemm-tma-store-sweep --out "$OUT" \
      --variants "^(128x256_s4_wait0|128x256_s3_wait0_(epi|tma)|128x128_s5_wait0_(epi|tma)|64x128_s6_wait1_1consumer(_epi|_tma)?)$" \
      --shapes 8192,8192,1024 3000,5000,4096 4096,4096,4096 1024,1024,1024 2>&1 | grep sweep
  fi
done
# `fixup` (G5): split-K reduced in the kernel (gemm_splitk): the sweep of the fix-ups against the split-K passes and
# the table through launch (JSON gemm-fixup-<device>.json; kernels precompiled, so the tests after it find them
# cached), the GPU tests, compute-sanitizer memcheck + racecheck on the fix-up variants.
for what in "$@"; do
  if [[ $what == fixup ]]; then
    python3 benchmarks/gemm.py --only bf16out,f32out --policies --no-b2b --precompile 16 --sweep-out bf16,f32 \
      --name gemm-fixup --out "$OUT" \
      --variants "fix|^64x128_s6_wait1_1consumer(_splitk4)?$|^128x128_s4_wait1_splitk[24]$" \
      --shapes 16,4096,4096 64,4096,4096 128,4096,4096 256,4096,4096 128,14336,4096 1024,1024,1024 2051,2045,1000 \
      --sweep-shapes 16,4096,4096 64,4096,4096 128,4096,4096 256,4096,4096 1024,1024,1024 2>&1 \
      | grep -v "^  precompiled" | tail -150
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_policies.py -k "fix_up or policy_table" \
      2>&1 | tee "$OUT/pytest_fixup.log" | grep -vE "^(tests|E |  )" | tail -8
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_policies.py --fixup > "$OUT/sanitize_fixup_$tool.log" 2>&1
      echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_fixup_$tool.log" | tail -1)"
      grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_fixup_$tool.log"
    done
  fi
done
# `fixup3` (G5): FIXUP=3 (slots + splitk_sum) against the split-K passes, the small class's 4 stages, then the table
# with the policy (JSON gemm-fixup3-<device>.json), GPU tests and sanitizers of the fix-ups.
for what in "$@"; do
  if [[ $what == fixup3 ]]; then
    python3 benchmarks/gemm.py --only bf16out,f32out --policies --no-b2b --precompile 16 --sweep-out bf16,f32 \
      --name gemm-fixup3 --out "$OUT" \
      --variants "fix3|^64x128_s6_wait1_1consumer(_splitk[24])?$|^128x128_s4_wait1_splitk[24]$|^64x128_s4_wait1_1consumer(_epi)?$" \
      --shapes 16,4096,4096 64,4096,4096 128,4096,4096 256,4096,4096 128,14336,4096 1024,1024,1024 2051,2045,1000 \
      3000,5000,4096 --sweep-shapes 16,4096,4096 64,4096,4096 128,4096,4096 256,4096,4096 1024,1024,1024 2>&1 \
      | grep -v "^  precompiled" | tail -150
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_policies.py -k "fix_up or policy_table" \
      2>&1 | tee "$OUT/pytest_fixup3.log" | grep -vE "^(tests|E |  )" | tail -8
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_policies.py --fixup > "$OUT/sanitize_fixup3_$tool.log" 2>&1
      echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_fixup3_$tool.log" | tail -1)"
      grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_fixup3_$tool.log"
    done
  fi
done
# `g6` (issue 15 item 1): FIXUP=3 against the split-K passes, and two blocks per SM (MIN_BLOCKS=2, 4 stages, the
# split doubled) on the decode / skinny / small shapes (JSON gemm-g6-skinny-<device>.json), then the new variants'
# GPU tests (SASS, registers, occupancy) and compute-sanitizer memcheck + racecheck on them.
for what in "$@"; do
  if [[ $what == g6 ]]; then
    python3 benchmarks/gemm.py --only none --policies --no-b2b --precompile 16 --sweep-out bf16,f32 \
      --name gemm-g6-skinny --out "$OUT" \
      --variants "^64x128_s6_wait1_1consumer(_splitk4(_fix3)?)?$|^128x128_s4_wait1_splitk4(_fix3)?$|mb2|splitk8|^64x128_s4_wait1_1consumer_epi$" \
      --sweep-shapes 16,4096,4096 64,4096,4096 128,4096,4096 256,4096,4096 1024,1024,1024 2>&1 \
      | grep -v "^  precompiled" | tail -220
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_policies.py -k "mb2 or two_blocks or n_by_k" \
      2>&1 | tee "$OUT/pytest_g6.log" | grep -vE "^(tests|E |  )" | tail -8
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_policies.py --g6 > "$OUT/sanitize_g6_$tool.log" 2>&1
      echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_g6_$tool.log" | tail -1)"
      grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_g6_$tool.log"
    done
  fi
done
# `g6table`: the policy table after G6's change (decode FIXUP=3; skinny 64 x 128 s4 MIN_BLOCKS=2 split 2 FIXUP=3) through
# launch (JSON gemm-g6-table-<device>.json) with the candidates at 128 / 64 x 4096 x 4096 swept beside it, the policy
# GPU tests, compute-sanitizer on the new variants and the policy's skinny / decode rows.
for what in "$@"; do
  if [[ $what == g6table ]]; then
    python3 benchmarks/gemm.py --only bf16out,f32out --policies --no-b2b --precompile 16 --sweep-out bf16,f32 \
      --name gemm-g6-table --out "$OUT" \
      --variants "^64x128_s6_wait1_1consumer_splitk[24](_fix3)?$|^128x128_s4_wait1_splitk4$|^64x128_s4_wait1_1consumer_mb2_splitk2(_fix3)?$" \
      --shapes 16,4096,4096 64,4096,4096 100,4096,4096 128,4096,4096 256,4096,4096 16,14336,4096 16,4096,14336 \
      128,14336,4096 1024,1024,1024 --sweep-shapes 128,4096,4096 64,4096,4096 2>&1 | grep -v "^  precompiled" | tail -100
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_gemm_policies.py \
      -k "policy_table or back_to_back or fix3 or mb2 or two_blocks" 2>&1 | tee "$OUT/pytest_g6table.log" \
      | grep -vE "^(tests|E |  )" | tail -8
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool python3 tests/gpu/sanitize_gemm_policies.py --g6 > "$OUT/sanitize_g6t_$tool.log" 2>&1
      echo "== $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_g6t_$tool.log" | tail -1)"
      grep -m5 -E "Error|Hazard|Invalid" "$OUT/sanitize_g6t_$tool.log"
    done
  fi
done
# `g6wide`: 256 rows (64 x 128 tiles read B four times over): 128 x 128 tiles split 2 with FIXUP=3 (B read twice)
# against the policy (JSON gemm-g6-wide-<device>.json).
for what in "$@"; do
  if [[ $what == g6wide ]]; then
    python3 benchmarks/gemm.py --only none --policies --no-b2b --precompile 16 --sweep-out bf16,f32 \
      --name gemm-g6-wide --out "$OUT" \
      --variants "^128x128_s[456]_wait[01]_splitk2(_fix3)?$|^64x128_s6_wait1_1consumer$" \
      --sweep-shapes 256,4096,4096 200,4096,4096 2>&1 | grep -v "^  precompiled" | tail -60
  fi
done
# `g6rows`: FIXUP=3 storing only the slot rows below M (SLOT_ROWS=1) against the policy (JSON gemm-g6-rows-<device>.json),
# then compute-sanitizer memcheck on it (a small ragged launch).
for what in "$@"; do
  if [[ $what == g6rows ]]; then
    python3 benchmarks/gemm.py --only none --policies --no-b2b --precompile 16 --sweep-out bf16,f32 \
      --name gemm-g6-rows --out "$OUT" --variants "_fix3_rows$" \
      --sweep-shapes 16,4096,4096 200,4096,4096 2>&1 | grep -v "^  precompiled" | tail -20
    compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_policies.py --rows > "$OUT/sanitize_rows_memcheck.log" 2>&1
    echo "== memcheck: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitize_rows_memcheck.log" | tail -1)"
    grep -m5 -E "Error|Invalid" "$OUT/sanitize_rows_memcheck.log"
  fi
done
