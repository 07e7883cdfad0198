"""The large class's f32-out GEMM (bf16 in, f32 accumulate and out: stdlib_kernels/gemm_hopper.py's persistent piece
store, LARGE_PERSISTENT_F32) against torch.mm(a, b, out_dtype=torch.float32), forms over the policy (G40, issue 15).

    python benchmarks/gemm_f32out_large.py [--shapes M,N,K ...] [--forms NAME ...] [--rounds 2] [--tag NAME] [--out DIR]

Every form's output is checked against float64 (on the GPU) before it is timed. A timing is the median over 15
replays of a CUDA graph of 20 calls (benchmarks/timing.py's graph_seconds), the calls rotating among input sets whose
footprint is at least twice the L2 (timing.input_sets; one set at these shapes, whose C alone is past the L2); a
form's replays alternate with the peer's replay by replay (ratio: the median of the pairs' peer / ours), and the
whole list of forms is timed `--rounds` times in turn (the forms alternated). Writes
benchmarks/results/gemm-f32out-large<tag>-<device>.json after each shape (or --out DIR).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

SHAPES = [(8192, 8192, 1024), (4096, 14336, 4096), (4096, 4096, 4096)]
# constexprs over the shape's f32 policy (LARGE_PERSISTENT_F32: 8 pieces of 32 f32 columns through two 16 KB buffers,
# the last two held in registers and written under the next tile's first k-tile, 4 stages, 64 / 216 registers)
FORMS = {
    "policy": {},
    # the last four pieces held (64 registers): two pieces drain inside the tile instead of four (the early `staged`
    # arrive while k-tile 0's wgmma is in flight: the verifier's pipeline hazard, so timed only)
    "held4": dict(HELD=4),
    # 3 stages beside four 16 KB buffers: the tile's first four pieces go out with no wait for a read
    "s3_b4_held2": dict(STAGES=3, STORE_BUFS=4, HELD=2),
    "s3_b4_held4": dict(STAGES=3, STORE_BUFS=4, HELD=4),
    "s3_held2": dict(STAGES=3),            # (the 4th stage's share, against the policy)
    "g16": dict(GROUP_M=16),
    "g4": dict(GROUP_M=4),
    # with benchmarks/profile/g40_defer_k.patch applied (gemm_persistent DEFER_K: the tile's first two / three k-tiles'
    # wgmmas issued before the held pieces are written; not in the kernel: 3-5% SLOWER in G40 call 2, and the
    # verifier follows one mma_async a loop iteration); without it these forms report "failed"
    "dk2": dict(DEFER_K=2),
    "dk3": dict(DEFER_K=3),
    # G18's one buffer of 64 columns (the policy before G26)
    "one_buffer": dict(gemm_hopper.F32_ONE_BUFFER, DEFER=0, HELD=0, STORE_LOOP=0),
}


def _bytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _rel(x, ref) -> float:
    import torch

    x = x.double()
    if not bool(torch.isfinite(x).all()):
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def _resources(M, N, K, p) -> dict:
    import tilepy_hip

    kernel, kp = gemm_hopper.plan_kernel(M, N, tp.f32, p, K)
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    sass = ck.sass()
    return {**ck.resources, "hgmma": sass.count("HGMMA"), "ldl_stl": len(re.findall(r"\b(?:LDL|STL)\b", sass))}


REPS = 20      # calls a graph


def _graph(fns):
    """A CUDA graph calling `fns` in turn (one per input set), REPS calls in all, after a warm-up call of each."""
    import torch

    for f in fns:
        f()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(max(REPS, len(fns))):
            fns[i % len(fns)]()
    graph.replay()
    torch.cuda.synchronize()
    return graph, max(REPS, len(fns))


def _replay(gr) -> float:
    """Seconds per call of one replay of (graph, calls)."""
    import torch

    graph, reps = gr
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def rows_of(shape, forms, rounds, g, out_rows, save, replays=15):
    import torch
    from timing import input_sets

    M, N, K = shape
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    ref = a.double() @ b.double()
    err_peer = _rel(torch.mm(a, b, out_dtype=torch.float32), ref)
    sets = [(a, b, c)] + [(torch.randn(M, K, device="cuda", generator=g).bfloat16(),
                           torch.randn(K, N, device="cuda", generator=g).bfloat16(), torch.empty_like(c))
                          for _ in range(input_sets(_bytes(a, b, c)) - 1)]
    peer = [partial(torch.mm, x, y, out_dtype=torch.float32) for x, y, _ in sets]
    base = gemm_hopper.policy(M, N, K, tp.f32, fixup=True)
    row, ok_forms = {}, []
    for name in forms:
        p = {**base, **FORMS[name]}
        c.fill_(float("nan"))
        try:
            gemm_hopper.launch(a, b, c, **p)
            torch.cuda.synchronize()
            res = _resources(M, N, K, p)
        except Exception as e:  # noqa: BLE001 - a form that does not build or run: say so, go on
            row[name] = {"failed": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            print(f"{M}x{N}x{K} {name:14s} failed: {row[name]['failed']}", flush=True)
            continue
        err = _rel(c, ref)
        ok = err <= 1.5 * err_peer + 1e-7     # both sum in f32 (~1e-6)
        row[name] = {"params": {k: (v.name if hasattr(v, "name") else v) for k, v in FORMS[name].items()},
                     "rel_err": err, "peer_rel_err": err_peer, "ok": ok, "kernel": res, "us": [], "peer_us": [],
                     "ratio": []}
        print(f"{M}x{N}x{K} {name:14s} err {err:.2e} (peer {err_peer:.2e}) {'ok' if ok else 'WRONG'} "
              f"regs {res.get('registers')} spills {res.get('spill_stores')} ldl/stl {res['ldl_stl']} "
              f"smem {res.get('dynamic_smem')}", flush=True)
        if ok:
            ok_forms.append(name)
    del ref
    # each form's graph and the peer's replayed in turn, replay by replay (the clock moved ours and the peer's times
    # together by up to 15% between rows of call 1, where each was timed whole before the other)
    peer_graph = _graph(peer)
    graphs = {name: _graph([partial(gemm_hopper.launch, x, y, z, **{**base, **FORMS[name]}) for x, y, z in sets])
              for name in ok_forms}
    for r in range(rounds):
        for name in ok_forms:
            ts, ps = [], []
            for _ in range(replays):
                ts.append(_replay(graphs[name]))
                ps.append(_replay(peer_graph))
            t, tp_ = statistics.median(ts), statistics.median(ps)
            ratio = statistics.median(p / q for p, q in zip(ps, ts))
            row[name]["us"].append(t * 1e6)
            row[name]["peer_us"].append(tp_ * 1e6)
            row[name]["ratio"].append(ratio)
            print(f"{M}x{N}x{K} round {r} {name:14s} {t * 1e6:8.1f} us  peer {tp_ * 1e6:8.1f} us  x{ratio:.3f} "
                  f"(pairs' median)", flush=True)
    for name in ok_forms:
        row[name]["ratio_median"] = statistics.median(row[name]["ratio"])
    out_rows[f"{M}x{N}x{K}"] = {"input_sets": len(sets), "forms": row}
    save()
    del a, b, c, sets
    torch.cuda.empty_cache()


def main(argv=None):
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=None, help="M,N,K triples")
    ap.add_argument("--forms", nargs="*", default=None, help=f"among {', '.join(FORMS)}")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    forms = args.forms or list(FORMS)
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        raise SystemExit(f"gemm_f32out_large: unknown forms {unknown}; known: {', '.join(FORMS)}")
    g = torch.Generator(device="cuda").manual_seed(0)
    dev = torch.cuda.get_device_name(0)
    path = Path(args.out) / f"gemm-f32out-large{args.tag}-{dev.replace(' ', '_')}.json"
    rows = {}
    meta = {"device": dev, "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "peer": "torch.mm(a, b, out_dtype=float32)",
            "timing": "median of 15 replays of a graph of 20 calls (rotated over input sets), ours and the peer "
                      "alternating replay by replay, ratio the median of the pairs' ratios; the forms alternated "
                      "--rounds times", "rounds": args.rounds}

    def save():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**meta, "rows": rows}, indent=1))

    for shape in shapes:
        rows_of(shape, forms, args.rounds, g, rows, save)
    print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
