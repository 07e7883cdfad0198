"""The built-in example: run each stdlib kernel on the CPU interpreter and compare with numpy in float64."""

from __future__ import annotations

import time

import numpy as np


def _rel_err(out, ref) -> float:
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def run_demo(seed: int = 0) -> list[tuple[str, str, float, float, bool]]:
    """Run the stdlib kernels on random inputs whose sizes are not multiples of the tiles.

    Returns rows (kernel, shape, relative error, seconds, ok)."""
    import torch

    from stdlib_kernels import gemm, rmsnorm, softmax, vector_add

    rng = np.random.default_rng(seed)
    rows = []

    def timed(name, shape, fn, ref, tol):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        err = _rel_err(out, ref)
        rows.append((name, shape, err, dt, bool(err < tol)))

    x, y = rng.standard_normal(5000, dtype=np.float32), rng.standard_normal(5000, dtype=np.float32)
    z = np.full_like(x, np.nan)
    timed("vector_add", "5000", lambda: (vector_add.launch(x, y, z), z)[1], vector_add.reference(x, y), 1e-6)

    xs = rng.standard_normal((37, 1000), dtype=np.float32)
    ys = np.full_like(xs, np.nan)
    timed("softmax", "37x1000", lambda: (softmax.launch(xs, ys), ys)[1], softmax.reference(xs), 1e-5)

    xr, w = rng.standard_normal((19, 700), dtype=np.float32), rng.standard_normal(700, dtype=np.float32)
    yr = np.full_like(xr, np.nan)
    timed("rmsnorm", "19x700", lambda: (rmsnorm.launch(xr, w, yr), yr)[1], rmsnorm.reference(xr, w), 1e-5)

    a = torch.from_numpy(rng.standard_normal((100, 72), dtype=np.float32)).to(torch.bfloat16)
    b = torch.from_numpy(rng.standard_normal((72, 90), dtype=np.float32)).to(torch.bfloat16)
    ref = gemm.reference(a.float().numpy(), b.float().numpy())
    for target in gemm.PRESETS:
        c = torch.full((100, 90), float("nan"))
        timed(f"gemm[{target}]", "100x90x72", lambda c=c, target=target: (gemm.launch(a, b, c, target=target),
                                                                           c.numpy())[1], ref, 1e-5)
    return rows


def main() -> int:
    print("ARGUS demo: stdlib kernels on the tilepy CPU interpreter (no GPU, no LLM needed)\n")
    rows = run_demo()
    print(f"{'kernel':<16} {'shape':<12} {'rel. error vs numpy f64':>24} {'time':>8}  result")
    for name, shape, err, dt, ok in rows:
        print(f"{name:<16} {shape:<12} {err:>24.2e} {dt:>7.2f}s  {'ok' if ok else 'MISMATCH'}")
    bad = [r for r in rows if not r[4]]
    print(f"\n{len(rows) - len(bad)}/{len(rows)} kernels match the numpy reference")
    return 1 if bad else 0
