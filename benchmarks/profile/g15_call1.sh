#!/usr/bin/env bash
# G15 device call 1 (issue 15, large bf16): where the per-tile time goes at 8192 x 8192 x 1024 and 4096 x 14336 x 4096.
# (1) the diagnostic copies of gemm_persistent (benchmarks/profile/g15_epilogue_diag.py), (2) the policy against
# cuBLAS over K at 8192 x 8192 (per-tile cost = the intercept of time per tile over k-tiles), (3) ncu of the policy and
# cuBLAS's kernel at 8192 x 8192 x 1024 (stall reasons per SASS instruction of ours). Everything streams into $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/g15-call1.log"
t0=$(date +%s)
el() { echo "+$(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee "$LOG"
python3 benchmarks/gemm_large_sweep.py --only bf16 --precompile 16 --precompile-only --variants '^pers_g32$' \
  --shapes 8192,8192,512 8192,8192,1024 8192,8192,2048 8192,8192,4096 4096,14336,4096 2>&1 | tee -a "$LOG"
echo "== build $(el)" | tee -a "$LOG"
timeout 100 python3 benchmarks/profile/g15_epilogue_diag.py --out "$OUT" --shapes 8192,8192,1024 4096,14336,4096 \
  2>&1 | tee -a "$LOG"
echo "== diag $(el)" | tee -a "$LOG"
timeout 90 python3 benchmarks/gemm_large_sweep.py --only bf16 --tag g15-kscan --out "$OUT" --batches 15 --profile \
  --variants '^pers_g32$' --shapes 8192,8192,512 8192,8192,1024 8192,8192,2048 8192,8192,4096 4096,14336,4096 \
  2>&1 | grep -v Warning | tee -a "$LOG"
echo "== kscan $(el)" | tee -a "$LOG"
timeout 120 ncu -k regex:'gemm_persistent|nvjet' --launch-skip 2 --launch-count 2 --section SpeedOfLight \
  --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  -f -o /tmp/g15ncu python3 benchmarks/profile/g15_ncu_driver.py 8192 8192 1024 > "$OUT/ncu-run.log" 2>&1
echo "== ncu rc=$? $(el)" | tee -a "$LOG"
tail -5 "$OUT/ncu-run.log" | tee -a "$LOG"
ncu -i /tmp/g15ncu.ncu-rep --page details --csv > "$OUT/ncu-details.csv" 2>&1
ncu -i /tmp/g15ncu.ncu-rep --page source --csv --print-source sass -k regex:gemm_persistent > /tmp/g15src.csv 2>&1
echo "== source page rc=$? $(wc -l < /tmp/g15src.csv) lines $(el)" | tee -a "$LOG"
python3 - "$OUT/ncu-top-sass.txt" <<'PY' 2>&1 | tee -a "$LOG"
import csv, sys
rows = list(csv.reader(open("/tmp/g15src.csv", errors="replace")))
hdr_i = next((i for i, r in enumerate(rows) if any("Source" == c or "Address" in c for c in r)), None)
out = open(sys.argv[1], "w")
if hdr_i is None:
    out.write("no header found; first lines:\n" + "\n".join(",".join(r)[:300] for r in rows[:20]))
    sys.exit()
hdr = rows[hdr_i]
out.write(" | ".join(hdr) + "\n")
col = next((i for i, c in enumerate(hdr) if "Warp Stall Sampling (All" in c), None)
body = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr)]
def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0
tot = sum(num(r[col]) for r in body) if col is not None else 0
out.write(f"total samples {tot}\n")
if col is not None:
    for r in sorted(body, key=lambda r: -num(r[col]))[:40]:
        out.write(f"{num(r[col]) / max(tot, 1):6.1%}  " + " | ".join(c[:90] for c in r) + "\n")
    out.write("\n-- in address order, instructions with >= 0.3% of samples --\n")
    for r in body:
        if num(r[col]) >= 0.003 * tot:
            out.write(f"{num(r[col]) / max(tot, 1):6.1%}  " + " | ".join(c[:90] for c in r) + "\n")
print("top-sass written", len(body), "instrs")
PY
grep -E '"(Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc Active|L2 Hit Rate|DRAM Throughput|Warp Cycles Per Issued Instruction|SM Frequency)"' "$OUT/ncu-details.csv" | cut -c1-200 | tee -a "$LOG"
echo "== done $(el)" | tee -a "$LOG"
