#!/bin/bash
# G38 device call 2: (1) gemm_fp32 with a role's thread index signed (HEAD) against G33's unsigned form (the closing
# table's), in alternating processes (signed, unsigned, signed, unsigned), rotated: SGEMM, the whole "kn" call, the GEMM
# alone; (2) benchmarks/gemm.py's fp32 rows (the table's own measurement) on HEAD; (3) the G38 GPU tests (the wide
# split's launch test rewritten: the flag off by default). Into $OUT.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
step() { echo "== $1 at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"; }
SH="1024,1024,1024 2051,2045,1000"
timeout 80 python3 benchmarks/profile/g38_split.py --build-only --shapes $SH > "$OUT/build.log" 2>&1 &
timeout 80 python3 benchmarks/profile/g38_split.py --build-only --shapes $SH --role-tid unsigned >> "$OUT/build.log" 2>&1 &
timeout 100 python3 -m pytest -v -n 3 -p no:cacheprovider tests/gpu/test_gpu_gemm_fp32_split.py > "$OUT/pytest.log" 2>&1 &
wait; step "builds and tests done"
for i in 1 2; do
  for rt in signed unsigned; do
    timeout 60 python3 benchmarks/profile/g38_split.py --rounds 1 --shapes $SH --forms sgemm,whole_t,gemm \
        --role-tid $rt --tag=-call2-$rt$i --out "$OUT" >> "$OUT/bench.log" 2>&1
    step "$rt $i rc=$?"
  done
done
timeout 90 python3 benchmarks/gemm.py --only fp32 --shapes 1024,1024,1024 2051,2045,1000 \
    --name gemm-fp32-g38-call2 --out "$OUT" > "$OUT/gemm.log" 2>&1
step "gemm.py rc=$?"
grep -E "passed|failed|FAILED|Error" "$OUT/pytest.log" | tail -8
grep -E "built|Error" "$OUT/build.log" | head -12; grep -vE "^\s*$" "$OUT/bench.log"; cat "$OUT/gemm.log"
