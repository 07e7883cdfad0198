#!/bin/bash
# G24 device call 3: the skinny policy with the exact-BM rows (BM the rows' own instruction N, K_WAYS=2) through launch:
# its GPU tests and test_gemm_fp8.py (the policy's classes), then the policy against G21's table at the rows it
# changes, alternated twice.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/steps.log"
BENCH="benchmarks/gemm_fp8_skinny.py --kways --repeat 2 --jobs 8 --only policy policy_g21"
timeout 60 python3 $BENCH --rows 24 48 96 192 --nk 4096,4096 --build-only > "$OUT/bench.log" 2>&1 &
timeout 60 python3 -m pytest -v -n 6 -p no:cacheprovider tests/gpu/test_gemm_fp8.py tests/gpu/test_gemm_fp8_swap.py \
    -k "exact_bm_policy or policy or test_gemm_fp8.py" > "$OUT/pytest.log" 2>&1 &
wait; step "build + pytest done: $(tail -1 "$OUT/pytest.log")"
timeout 30 python3 $BENCH --name gemm-fp8-skinny-g24-call3 --rows 24 48 96 192 --nk 4096,4096 --out "$OUT" \
    >> "$OUT/bench.log" 2>&1
step "bench done"
grep -E "FAILED|ERROR|passed|failed" "$OUT/pytest.log" | tail -8; grep -E "x [0-9]|skipped|fail" "$OUT/bench.log" | cut -c1-112
