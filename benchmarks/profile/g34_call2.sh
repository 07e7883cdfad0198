#!/bin/bash
# G34 device call 2: the G34 policy (two row tiles at 25-32 / 81-96 rows, HALF_SUM on the cluster's split, STORE_T on
# 256 rows) against the table before it, and two unsplit row tiles at the other rows (where SWAP_ROWS2's bounds go),
# 24-256 x 4096 x 4096 rotated, twice in turn; 16 / 64 / 128 x 4096 x 14336 twice; first the GPU tests of the policy
# through launch (G34 and G30's) and of G34's forms.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LOG="$OUT/g34-call2.log"
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$LOG"
timeout 90 python3 -m pytest -q -v -p no:cacheprovider tests/gpu/test_gemm_fp8_swap.py \
    -k "g34 or g30_policy or exact_bm or skinny_policy" > "$OUT/g34-call2-pytest.log" 2>&1
step "pytest rc=$?"
tail -3 "$OUT/g34-call2-pytest.log"
timeout 150 python3 benchmarks/profile/g34_trace.py --plan g34-call2 --repeat 2 --out "$OUT" \
    --rows 24 40 48 64 80 96 112 136 160 192 200 224 256 --name g34-call2-trace >> "$LOG" 2>&1
step "trace rc=$?"
timeout 50 python3 benchmarks/profile/g34_trace.py --plan g34-call2 --repeat 2 --out "$OUT" --nk 4096,14336 \
    --rows 16 64 128 --name g34-call2-k14336-trace >> "$LOG" 2>&1
step "trace k14336 rc=$?"
grep -v Warn "$LOG" | grep -v "_warn_once" | grep -v "scaled_mm_fast" | cut -c1-130
