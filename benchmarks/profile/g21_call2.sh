#!/bin/bash
# G21 device call 2: the skinny policy after call 1 (a split of 2 summed in the kernel: CLUSTER_K=2 over 64-column
# tiles, or 128-column ones where their split is 2; no clusters of 4) through launch: the fp8 GPU tests, then the policy
# against the slots it replaces, alternated twice, over more row counts and K = 14336.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/steps.log"
BENCH="benchmarks/gemm_fp8_skinny.py --cluster --repeat 2 --jobs 6 --only policy slots"
timeout 50 python3 $BENCH --rows 16 24 32 48 64 96 128 192 256 --nk 4096,4096 4096,14336 --build-only \
    > "$OUT/bench.log" 2>&1 &
timeout 50 python3 -m pytest -v -n 5 -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py tests/gpu/test_gemm_fp8.py \
    > "$OUT/pytest.log" 2>&1 &
wait; step "build + pytest done: $(tail -1 "$OUT/pytest.log")"
timeout 22 python3 $BENCH --name gemm-fp8-skinny-g21-call2 --rows 16 24 32 48 64 96 128 192 256 --nk 4096,4096 \
    --out "$OUT" >> "$OUT/bench.log" 2>&1
step "bench 4096x4096 done"
timeout 13 python3 $BENCH --name gemm-fp8-skinny-g21-call2-k14336 --rows 16 64 128 256 --nk 4096,14336 --out "$OUT" \
    >> "$OUT/bench.log" 2>&1
step "bench 4096x14336 done"
grep -E "FAILED|ERROR|passed|failed" "$OUT/pytest.log" | tail -12; grep -E "x [0-9]" "$OUT/bench.log" | cut -c1-125
