#!/usr/bin/env bash
# One device call for L8's recurrent layers: rnn_step_tc's registers / SASS, the step alone timed (eager-launched
# and CUDA-graph replayed) at the corpus's LSTM / GRU sizes, the GPU tests, compute-sanitizer memcheck /
# racecheck, and the suite on the recurrent problems and EfficientNet's MBConv (rows into $OUT/suite-rnn8.json).
# Usage on the device machine (repo root): bash tests/gpu/device_run_rnn8.sh [SUITE_BUDGET_S]
set -uo pipefail
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/step.txt"
import re, torch, tilepy_hip
from stdlib_kernels import rnn
for cell, B, H, D, T in ((rnn.LSTM, 64, 512, 1, 128), (rnn.GRU, 32, 256, 2, 256)):
    p = rnn.policy_tc(B, H)
    G = rnn.GATES[cell]
    cs = dict(NB=B, T=T, CELL=cell, G=G, X_RB=1, X_RT=B, O_RB=1, O_RT=B, **p)
    ck = tilepy_hip.compile(rnn.rnn_step_tc, target="sm_90a", **cs)
    s = ck.sass() or ""
    print("rnn_step_tc", dict(cell=cell, B=B, H=H, D=D), p, "regs", ck.resources.get("registers"),
          {op: len(re.findall(rf"\b{op}\b", s)) for op in ("HMMA", "LDL", "STL", "LDG")})
    dev = "cuda"
    gx = torch.randn(T * B, D * G * H, device=dev)
    w = torch.randn(D * G * H, H, device=dev) * 0.05
    bi, bh = torch.randn(D * G * H, device=dev), torch.randn(D * G * H, device=dev)
    h0, c0 = torch.randn(D * B, H, device=dev), torch.randn(D * B, H, device=dev)
    out, cb = torch.empty(T * B, D * H, device=dev), torch.empty(2 * D * B, H, device=dev)
    grid = rnn.grid_tc(B, H, p, D)

    def steps(kern=rnn.rnn_step_tc, cs=cs, grid=grid):
        for s in range(T):
            f = s == 0
            tilepy_hip.launch(kern, grid, gx, h0 if f else out, c0 if f else cb, w, bi, bh, out, cb, s,
                              0 if f else 0, B if f else 0, 1, 0 if f else B, 0 if f else H,
                              0 if f else D * B * ((s - 1) % 2), D * B * (s % 2), **cs)
    pf = rnn.policy(B, H)
    fcs = dict(NB=B, T=T, CELL=cell, G=G, X_RB=1, X_RT=B, O_RB=1, O_RT=B, **pf)
    for name, kern, kcs, kgrid in (("tc", rnn.rnn_step_tc, cs, grid), ("fma", rnn.rnn_step, fcs, rnn.grid(B, H, pf, D))):
        for _ in range(2):
            steps(kern, kcs, kgrid)
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); steps(kern, kcs, kgrid); e1.record(); torch.cuda.synchronize()
        eager_us = e0.elapsed_time(e1) * 1e3 / T
        g = torch.cuda.CUDAGraph()
        st = torch.cuda.Stream()
        with torch.cuda.stream(st):
            steps(kern, kcs, kgrid)
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=st):
                steps(kern, kcs, kgrid)
        ts = []
        for _ in range(5):
            e0.record(); g.replay(); e1.record(); torch.cuda.synchronize()
            ts.append(e0.elapsed_time(e1) * 1e3 / T)
        print(f"  {name}: us per step eager-launched {eager_us:.1f}, graph-replayed median {sorted(ts)[2]:.1f}")
PY
timeout 90 python3 -m pytest -q -n 4 -p no:cacheprovider tests/gpu/test_gpu_rnn.py 2>&1 \
  | tee "$OUT/pytest.log" | grep -vE "^(tests|E |  )" | tail -4
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_rnn.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E '^(lstm|gru|rnn)' "$OUT/sanitize_$tool.log" | tr '\n' ' ') $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
done
timeout $(( ${1:-120} + 60 )) python3 benchmarks/suite.py tests/problems/level3/010_lstm_classifier.py \
  tests/problems/level3/011_gru_bidirectional.py tests/problems/level3/023_lstm_bidir_state.py \
  tests/problems/level3/025_gru_last_hidden.py tests/problems/level3/006_efficientnet_mbconv_se.py --jobs 5 --runs 10 --time-budget "${1:-120}" \
  --out "$OUT/suite-rnn8.json" 2>&1 | grep -E "^(level|built)"
