#!/usr/bin/env bash
# One device call for L8's recurrent layers: rnn_step_tc's registers / SASS, the step alone timed (eager-launched
# and CUDA-graph replayed) at the corpus's LSTM / GRU sizes, the GPU tests, compute-sanitizer memcheck /
# racecheck, the suite on the recurrent problems (rows into $OUT/suite-rnn8.json; SUITE_EXTRA: more problem
# files), and with PROFILE=<problem files> benchmarks/conv_profile.py on them.
# Usage on the device machine (repo root): bash tests/gpu/device_run_rnn8.sh [SUITE_BUDGET_S]
set -uo pipefail
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 TILEPY_HIP_CACHE=/tmp/thc
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 90 python3 - <<'PY' 2>&1 | tee "$OUT/step.txt"
import re, torch, tilepy_hip
from stdlib_kernels import rnn
for cell, B, H, D, T in ((rnn.LSTM, 64, 512, 1, 128), (rnn.GRU, 32, 256, 2, 256)):
    G = rnn.GATES[cell]
    dev = "cuda"
    gx = torch.randn(T * B, D * G * H, device=dev)
    w = torch.randn(D * G * H, H, device=dev) * 0.05
    bi, bh = torch.randn(D * G * H, device=dev), torch.randn(D * G * H, device=dev)
    h0, c0 = torch.randn(D * B, H, device=dev), torch.randn(D * B, H, device=dev)
    out, cb = torch.empty(T * B, D * H, device=dev), torch.empty(2 * D * B, H, device=dev)
    for passes in (3, 1):
        p = {**rnn.policy_tc(B, H, G), "PASSES": passes}
        cs = dict(NB=B, T=T, CELL=cell, G=G, ND=D, X_RB=1, X_RT=B, O_RB=1, O_RT=B, **p)
        ck = tilepy_hip.compile(rnn.rnn_step_tc, target="sm_90a", **cs)
        sass = ck.sass() or ""
        print("rnn_step_tc", dict(cell=cell, B=B, H=H, D=D), p, "regs", ck.resources.get("registers"),
              {op: len(re.findall(rf"\b{op}\b", sass)) for op in ("HMMA", "LDL", "STL", "LDG", "LDS", "STS")})
        grid = rnn.grid_tc(B, H, p, D)

        def steps():
            for s in range(T):
                tilepy_hip.launch(rnn.rnn_step_tc, grid, gx, h0 if s == 0 else out, c0 if s == 0 else cb, w, bi, bh,
                                  out, cb, s, 0, **cs)
        for _ in range(2):
            steps()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); steps(); e1.record(); torch.cuda.synchronize()
        eager_us = e0.elapsed_time(e1) * 1e3 / T
        g = torch.cuda.CUDAGraph()
        st = torch.cuda.Stream()
        with torch.cuda.stream(st):
            steps()
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=st):
                steps()
        ts = []
        for _ in range(5):
            e0.record(); g.replay(); e1.record(); torch.cuda.synchronize()
            ts.append(e0.elapsed_time(e1) * 1e3 / T)
        print(f"  us per step: eager-launched {eager_us:.1f}, graph-replayed median {sorted(ts)[2]:.1f}")
PY
timeout 90 python3 -m pytest -q -n 4 -p no:cacheprovider tests/gpu/test_gpu_rnn.py 2>&1 \
  | tee "$OUT/pytest.log" | grep -vE "^(tests|E |  )" | tail -4
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool python3 tests/gpu/sanitize_rnn.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "== $tool: rc=$? $(grep -E '^(lstm|gru|rnn)' "$OUT/sanitize_$tool.log" | tr '\n' ' ') $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)"
done
timeout $(( ${1:-120} + 60 )) python3 benchmarks/suite.py tests/problems/level3/010_lstm_classifier.py \
  tests/problems/level3/011_gru_bidirectional.py \
  tests/problems/level3/025_gru_last_hidden.py ${SUITE_EXTRA:-} --jobs 4 --runs 10 --time-budget "${1:-120}" \
  --out "$OUT/suite-rnn8.json" 2>&1 | grep -E "^(level|built)"
if [ -n "${PROFILE:-}" ]; then   # where the ResNet blocks' time goes, kernel by kernel (ours and eager)
  timeout 100 python3 benchmarks/conv_profile.py $PROFILE --runs 5 --out "$OUT" 2>&1 | tail -40
fi
