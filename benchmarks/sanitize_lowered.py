"""Small lowered reductions, scans and fused rows on the GPU, for compute-sanitizer (memcheck / racecheck).

    compute-sanitizer --tool memcheck python3 benchmarks/sanitize_lowered.py

Each program is lowered for sm_90a, run once on CUDA tensors and compared with torch in float64; prints one
line per program and exits 1 on a mismatch.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from argus_agent.lower import lower_model, render_program  # noqa: E402


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


CASES = {
    "softmax_rows": (lambda t: torch.softmax(t, -1), (64, 1000)),
    "amax_dim0_split": (lambda t: t.amax(0), (9000, 40)),
    "sum_dim1_col": (lambda t: t.sum(1), (3, 700, 37)),
    "var_last_fused": (lambda t: t.var(-1), (33, 515)),
    "mean_all_split": (lambda t: t.mean(), (5, 70000)),
    "cumsum_rows": (lambda t: t.cumsum(1), (7, 3000)),
    "reverse_cumsum_col": (lambda t: t.flip(0).cumsum(0).flip(0), (300, 5, 33)),
    "exclusive_cumprod": (lambda t: torch.cat([torch.ones_like(t[:, :1]), 1 + 1e-3 * t[:, :-1]], 1).cumprod(1),
                          (9, 2100)),
}


def main() -> int:
    bad = 0
    d = Path(tempfile.mkdtemp(prefix="argus-sanitize-"))
    for name, (fn, shape) in CASES.items():
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        model = Fn(fn)
        src = render_program(lower_model(model, [x], target="sm_90a"))
        p = d / f"{name}.py"
        p.write_text(src)
        spec = importlib.util.spec_from_file_location(name, p)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out = mod.argus_forward(model, x.cuda())
        torch.cuda.synchronize()
        ref = fn(x.double())
        err = float((out.double().cpu() - ref).abs().max())
        ok = err <= 1e-4 * max(1.0, float(ref.abs().max()))
        bad += not ok
        print(f"{name:22s} {'ok ' if ok else 'BAD'} max err {err:.3g}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
