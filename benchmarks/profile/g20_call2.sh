#!/bin/bash
# G20 device call 2: the policies taken after call 1 (fp8 skinny class -> gemm_fp8_swap; gemm_fp32 launch's 64-wide
# unsplit tiles) through launch, with the GPU tests of everything G20 touched (the fp8 / fp32 swap forms, the fp8 and
# fp32 suites whose skinny / nk cases now take them, the lowered weight split) and memcheck on launch_policy's form.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/steps.log"
timeout 80 python3 benchmarks/gemm_fp32_swap.py --rows 128 --nk 4096,4096 --confirm --precompile 6 --build-only \
    > "$OUT/fp32_bench.log" 2>&1 &
b=$!
timeout 100 python3 -m pytest -v -n 6 -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py tests/gpu/test_gemm_fp8.py \
    tests/gpu/test_gpu_gemm_fp32_swap.py tests/gpu/test_gpu_lower_weight_split.py \
    "tests/gpu/test_gpu_gemm_fp32.py::test_gemm_fp32_error_no_worse_than_sgemm" \
    "tests/gpu/test_gpu_gemm_fp32.py::test_policy_split_k_through_launch" > "$OUT/pytest.log" 2>&1 &
pt=$!
wait $b; step "fp32 build done"
wait $pt; step "pytest done: $(tail -1 "$OUT/pytest.log")"
timeout 30 python3 benchmarks/gemm_fp8.py --shapes 16,4096,4096 128,4096,4096 16,14336,4096 --out "$OUT" \
    > "$OUT/fp8_bench.log" 2>&1
step "fp8 bench done"
timeout 35 python3 benchmarks/gemm_fp32_swap.py --rows 128 --nk 4096,4096 --confirm --out "$OUT" >> "$OUT/fp32_bench.log" 2>&1
step "fp32 bench done"
timeout 30 compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp32_swap.py >> "$OUT/steps.log" 2>&1
step "memcheck rc=$?"
grep -E "FAILED|ERROR|passed|failed" "$OUT/pytest.log" | tail -15
