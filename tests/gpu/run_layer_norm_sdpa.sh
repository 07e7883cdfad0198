#!/usr/bin/env bash
# One device call for the fused row ops' register bound (layer_norm EVEN / MIN_BLOCKS, fused_add_rmsnorm), the
# D = 64 S = 512 attention policy rows, the D = 64 decode row and the lowered SDPA decode paths, then GPU tests and
# compute-sanitizer (memcheck, racecheck) on the row kernels; logs and JSON to $OUT. Run from the repo root with
# the kernels precompiled by the same NVRTC 13.0 into $TILEPY_HIP_CACHE (default build/a3_thc) and libcst's
# wheel in $WHL (default build/a3_whl; the device has no libcst); both paths carried into the call.
#   bash tests/gpu/run_layer_norm_sdpa.sh [steps]   steps: a comma list of bench (llm_ops layer_norm and
#   fused_add_rmsnorm rows), rbench (the rotary_neox row, KVEC variants included), sweep (attention d64 S512 policy variants), decode (the d64 decode row), tests (GPU tests:
#   lowered SDPA, layer_norm, rmsnorm), sanitize (memcheck + racecheck on the row kernels); default: all
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site ${WHL:-build/a3_whl}/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=${TILEPY_HIP_CACHE:-$PWD/build/a3_thc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$SECONDS
steps=",${1:-bench,sweep,decode,tests,sanitize},"
has() { [[ $steps == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
has bench && timeout 100 python3 benchmarks/llm_ops.py --ops layer_norm --out "$OUT" > "$OUT/bench_ln.log" 2>&1
echo "== llm_ops rc=$? at $((SECONDS - T0)) s"; grep -E "of copy|copy [0-9]|Error" "$OUT/bench_ln.log" | cut -c1-400
has rbench && timeout 90 python3 benchmarks/llm_ops.py --ops rotary_neox --out "$OUT" > "$OUT/bench_rot.log" 2>&1
echo "== rotary rc=$? at $((SECONDS - T0)) s"; grep -E "of copy|Error" "$OUT/bench_rot.log" | cut -c1-700
has sweep && timeout 90 python3 benchmarks/attention.py --sweep --sweep-rows d64s512 --out "$OUT" > "$OUT/sweep.log" 2>&1
echo "== sweep rc=$? at $((SECONDS - T0)) s"; grep -vE "^kernel" "$OUT/sweep.log" | tail -22 | cut -c1-200
has decode && timeout 40 python3 - > "$OUT/decode64.log" 2>&1 <<'PY'
import json, os, sys, torch
sys.path.insert(0, "benchmarks")
import attention as AB
g = torch.Generator(device="cuda").manual_seed(64)
r = AB.decode_row(8, 32, 8, 16384, 64, 1, g)
print(json.dumps(r))
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "decode": [r]},
          open(os.path.join(os.environ.get("OUT", "/tmp/out"), "attention-decode-d64.json"), "w"), indent=1)
PY
echo "== decode64 rc=$? at $((SECONDS - T0)) s"; tail -c 900 "$OUT/decode64.log"; echo
has tests && timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_lower_sdpa.py tests/gpu/test_gpu_llm_ops.py \
  -k "${TESTS_K:-lowered or layer_norm or rmsnorm or per_warp}" > "$OUT/tests.log" 2>&1
echo "== tests rc=$? at $((SECONDS - T0)) s"; tail -3 "$OUT/tests.log"; grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head
for tool in $(has sanitize && echo memcheck racecheck); do
  timeout 60 compute-sanitizer --tool $tool python3 - > "$OUT/san_$tool.log" 2>&1 <<'PY'
import torch
from stdlib_kernels import llm_ops as L
d, bf = torch.device("cuda"), torch.bfloat16
x, w, b = torch.randn(19, 512, device=d).to(bf), torch.randn(512, device=d).to(bf), torch.randn(512, device=d).to(bf)
for th, rows in ((0, 1), (256, 1), (0, 2)):
    L.launch_layer_norm(x, w, b, torch.empty_like(x), 1e-5, ROWS=rows, THREADS=th)
x, r, w, b = (torch.randn(*s, device=d).to(bf) for s in ((19, 4096), (19, 4096), (4096,), (4096,)))
L.launch_layer_norm(x, w, b, torch.empty_like(x), 1e-5)                     # EVEN, 4 blocks a SM in registers
L.launch_fused_add_rmsnorm(x, r, w, torch.empty_like(x), torch.empty_like(x), 1e-6)
for ws in (False, True):                                                      # WARP_SUMS: per-warp sums
    L.launch_layer_norm(x, w, b, torch.empty_like(x), 1e-5, ROWS=2, WARP_SUMS=ws)   # two rows a block
    L.launch_layer_norm(x, w, b, torch.empty_like(x), 1e-5, WARP_SUMS=ws)
    L.launch_fused_add_rmsnorm(x, r, w, torch.empty_like(x), torch.empty_like(x), 1e-6, WARP_SUMS=ws)
torch.cuda.synchronize()
print("ok")
PY
  echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | tail -1)"
done
echo "== done at $((SECONDS - T0)) s"
