#!/usr/bin/env bash
# Lead's final call (issue 15): the f32 pieces' per-lane store order (tilepy_hip/render/tiles.py bank_turn) off / on in
# alternate processes, twice, ours paired with torch.mm(out_dtype=f32) replay by replay; then the closing table
# (tests/gpu/device_run_closing_bench.sh) with the turn as the better arm left it.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for r in 0 1; do
  for turn in 0 1; do
    TILEPY_HIP_BANK_TURN=$turn timeout 60 python3 benchmarks/gemm_f32out_large.py --forms policy --rounds 1 \
      --shapes 8192,8192,1024 4096,14336,4096 --tag="-lead-turn$turn-r$r" --out "$OUT" 2>&1 \
      | grep -E "round|WRONG|failed|regs" | sed "s/^/turn$turn r$r /"
  done
done
best=$(python3 - "$OUT" <<'PY'
import json, glob, statistics, sys
arms = {}
for f in glob.glob(sys.argv[1] + "/gemm-f32out-large-lead-turn*-r*.json"):
    arm = f.split("-lead-turn")[1][0]
    rows = json.load(open(f))["rows"] if "rows" in json.load(open(f)) else json.load(open(f))
    for shape, row in rows.items():
        if isinstance(row, dict) and "forms" in row and "ratio_median" in row["forms"].get("policy", {}):
            arms.setdefault(arm, []).append(row["forms"]["policy"]["ratio_median"])
for a, v in sorted(arms.items()):
    print(f"turn{a}: ratios {['%.3f' % x for x in v]} median {statistics.median(v):.3f}", file=sys.stderr)
print(1 if "1" in arms and "0" in arms and statistics.median(arms["1"]) > statistics.median(arms["0"]) else 0)
PY
)
echo "closing table with TILEPY_HIP_BANK_TURN=$best"
TILEPY_HIP_BANK_TURN=$best OUT="$OUT" bash tests/gpu/device_run_closing_bench.sh 170 0
