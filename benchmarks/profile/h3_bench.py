"""H3: fp8 skinny rows with a long N or K (129-256 rows x 14336 x 4096 and x 4096 x 14336): candidate forms of
gemm_fp8 / gemm_fp8_swap against the policy's, each paired with torch._scaled_mm replay by replay. Per shape one
CUDA graph of 20 calls per function (the peer and every form), rotated over input sets >= 2x the L2
(tilepy_hip.graphs.rotation_count), replayed in turn (benchmarks/timing.py interleave: the order reversed every other
round) for `--blocks` blocks of `--rounds` rounds; per block each form's median us a call and the median of the
rounds' peer / ours. Every form's output is checked against float64 (NaN-poisoned first) before it is timed.

    python benchmarks/profile/h3_bench.py [--shapes 192,14336,4096 ...] [--forms pol swfull ...] [--out DIR]
    python benchmarks/profile/h3_bench.py --build-only     (every form's kernel, registers and spills; no GPU)
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import timing  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402


def _bm_over(rows: int) -> int:
    """The smallest e4m3 swap instruction N that holds `rows`."""
    return next(n for n in sorted(gemm_fp8.SWAP_INSTR) if n >= rows)


SET = "cands"


def forms_of(M: int, N: int, K: int) -> dict:
    """name -> the constexprs `gemm_fp8.launch` takes for that form (None: the policy's own). --set adopt: the policy
    (`new`) against the table without H3's rows (`old`: swap_policy(h3=False), what the policy ran before), and at
    193-256 rows x a long N the large class's non-persistent 128 x 256 row (`large`)."""
    if SET == "adopt":
        f = {"new": None, "old": gemm_fp8.swap_policy(M, N, K, h3=False)}
        if gemm_fp8.skinny_persistent(M, N, K):
            f["large"] = {**gemm_fp8.PRESETS["sm_90a"], **gemm_fp8.POLICIES["large"], "TMA_ONLY": 1}
        return f
    if SET == "extra":      # (call 3) BM 144 at <= 144 rows; at 193-256 rows x a long N one row tile of 256 rows as
        # four consumers of 64 rows over 128 columns (gemm_fp8, not swapped; the registers' store), and swap BM 256
        # with 64-wide k-tiles (64-byte swizzle) for a ring of 8
        f = {"new": None}
        if M <= 144:
            f["bm144"] = dict(SWAP=1, BM=144, BN=128, SPLIT_K=1, CLUSTER_K=1, TMA_ONLY=1)
        if gemm_fp8.skinny_persistent(M, N, K):
            f["c4"] = {**gemm_fp8.PRESETS["sm_90a"], "BM": 256, "BN": 128, "CONSUMERS": 4, "STAGES": 4,
                       "INSTR": tp.nv.wgmma_m64n128k32_e4m3, "EPILOGUE": 0, "IN_FLIGHT": 1, "TMA_ONLY": 1}
            f["bk64"] = dict(SWAP=1, BM=256, BN=128, BK=64, SWIZZLE=tp.Swizzle(2, 4, 3), STAGES=8, SPLIT_K=1,
                             CLUSTER_K=1, TMA_ONLY=1)
        return f
    f = {"pol": None}
    # one row tile of all the rows (the instruction's N up to 256), 128 columns over two consumers, unsplit
    bm = _bm_over(M)
    full = dict(SWAP=1, BM=bm, BN=128, SPLIT_K=1, CLUSTER_K=1, TMA_ONLY=1)
    if N >= 8192:
        f["swfull"] = full
        # the large class's persistent 128 x 256 grid (TMA store in pieces)
        f["lp"] = {**gemm_fp8.PRESETS["sm_90a"], **gemm_fp8.LARGE_PERSISTENT}
        # the 128-row tiles with the K split of 2 over a cluster (448 blocks)
        f["ck2"] = dict(SWAP=1, BM=128, BN=128, CLUSTER_K=2, TMA_ONLY=1)
    else:
        # one row tile, 64 columns, one consumer, the split of 2 over a cluster summed as a reduce-scatter (128 blocks)
        f["hsfull"] = dict(SWAP=1, BM=bm, BN=64, CLUSTER_K=2, HALF_SUM=1, TMA_ONLY=1)
        # two row tiles of half the rows, 64 columns, one consumer, unsplit (G34's rows2 form at this K; 128 blocks)
        half = _bm_over(-(-M // 2))
        r2 = dict(SWAP=1, BM=half, BN=64, SPLIT_K=1, CLUSTER_K=1, TMA_ONLY=1)
        if half in gemm_fp8.SWAP_ROWS2_STORE_T:
            r2["STORE_T"] = 1
        f["rows2"] = r2
    return f


def params(M, N, K, form):
    return gemm_fp8.policy(M, N, K) if form is None else gemm_fp8.params_for(M, N, K, **form)


def short(p) -> str:
    keys = ("BM", "BN", "STAGES", "CONSUMERS", "SPLIT_K", "CLUSTER_K", "K_WAYS", "HALF_SUM", "STORE_T", "TMA_ONLY",
            "PERSISTENT", "STORE_N")
    return ("swap " if p.get("SWAP") else "") + " ".join(f"{k}={p[k]}" for k in keys if p.get(k) is not None)


def build_one(job):
    M, N, K, name, form = job
    p = params(M, N, K, form)
    kernel, kp = gemm_fp8.kernel_of(p)
    try:
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        r = ck.resources
        ldst = -1
        try:
            ldst = len(re.findall(r"\b(?:LDL|STL)\b", ck.sass()))
        except Exception:  # noqa: BLE001 - no cuobjdump
            pass
        smem = r.get("shared") or r.get("smem")
        return (f"{M}x{N}x{K} {name:7} {kernel.name:24} {short(p):80} grid {gemm_fp8.grid_of(M, N, p)} "
                f"regs {r.get('registers')} spill {r.get('spill_stores', 0)} ldst {ldst} smem {smem}")
    except Exception as e:  # noqa: BLE001 - reported
        return f"{M}x{N}x{K} {name:7} FAILED {type(e).__name__}: {str(e)[:300]}"


def _quantize(x):
    import torch

    scale = (x.abs().max().float() / 448.0).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale.reshape(1)


def _sets(M, N, K, g, l2):
    import torch

    from tilepy_hip.graphs import rotation_count

    def one():
        a, sa = _quantize(torch.randn(M, K, device="cuda", generator=g))
        b, sb = _quantize(torch.randn(N, K, device="cuda", generator=g))
        return (a, b, sa, sb, torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16))

    first = one()
    size = sum(t.numel() * t.element_size() for t in first if t.numel() > 1)
    return [first] + [one() for _ in range(rotation_count(size, l2, 64) - 1)]


def _rel(x, ref) -> float:
    x = x.double()
    if not bool(x.isfinite().all()):
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def row(M, N, K, g, l2, names, blocks, rounds):
    import torch

    sets = _sets(M, N, K, g, l2)
    a, b, sa, sb, c = sets[0]
    ref = (a.double() @ b.double().t()) * (sa.double() * sb.double())
    peer = [partial(torch._scaled_mm, s[0], s[1].t(), s[2], s[3], out_dtype=torch.bfloat16) for s in sets]
    err_peer = _rel(peer[0](), ref)
    out = {"shape": [M, N, K], "input_sets": len(sets), "peer_rel_err": err_peer, "forms": {}}
    fns = {}
    for name, form in forms_of(M, N, K).items():
        if names and name not in names:
            continue
        p = params(M, N, K, form)
        kw = {} if form is None else form
        c.fill_(float("nan"))
        try:
            gemm_fp8.launch(a, b, sa, sb, c, **kw)
            torch.cuda.synchronize()
            err = _rel(c, ref)
        except Exception as e:  # noqa: BLE001 - reported, the others go on
            print(f"{M}x{N}x{K} {name} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            out["forms"][name] = {"form": short(p), "failed": f"{type(e).__name__}: {str(e)[:300]}"}
            continue
        ok = err < 4e-3
        out["forms"][name] = {"form": short(p), "grid": list(gemm_fp8.grid_of(M, N, p)), "rel_err": err, "ok": ok,
                              "us": [], "peer_us": [], "ratio": [], "ratio_q": []}
        print(f"{M}x{N}x{K} {name:7} {short(p)} err {err:.2e} (peer {err_peer:.2e}) {'ok' if ok else 'WRONG'}",
              flush=True)
        if ok:
            fns[name] = [partial(gemm_fp8.launch, *s, **kw) for s in sets]
    del ref
    names_t = list(fns)
    for blk in range(blocks):
        times = timing.interleaved_graph_seconds([peer] + [fns[n] for n in names_t], reps=20, replays=rounds)
        for i, n in enumerate(names_t):
            ps = timing.pair_stats(times[i + 1], times[0])
            f = out["forms"][n]
            f["us"].append(ps.ours * 1e6)
            f["peer_us"].append(ps.peer * 1e6)
            f["ratio"].append(ps.ratio)
            f["ratio_q"].append([ps.ratio_q1, ps.ratio_q3])
            print(f"{M}x{N}x{K} block {blk} {n:7} {ps.ours * 1e6:8.2f} us  peer {ps.peer * 1e6:8.2f} us  "
                  f"x{ps.ratio:.3f} [{ps.ratio_q1:.3f}-{ps.ratio_q3:.3f}]", flush=True)
    del fns, peer, sets
    torch.cuda.empty_cache()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=[
        "128,14336,4096", "160,14336,4096", "192,14336,4096", "224,14336,4096", "256,14336,4096",
        "160,4096,14336", "192,4096,14336", "224,4096,14336", "256,4096,14336"])
    ap.add_argument("--forms", nargs="*", default=[])
    ap.add_argument("--set", choices=("cands", "adopt", "extra"), default="cands")
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--precompile", type=int, default=0)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    a = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(",")) for s in a.shapes]
    global SET
    SET = a.set
    t0 = time.time()
    if a.build_only or a.precompile:
        from concurrent.futures import ThreadPoolExecutor

        jobs, seen = [], set()
        for M, N, K in shapes:
            for name, form in forms_of(M, N, K).items():
                if a.forms and name not in a.forms:
                    continue
                kernel, kp = gemm_fp8.kernel_of(params(M, N, K, form))
                key = (kernel.name, tuple(sorted((k, repr(v)) for k, v in kp.items())))
                if key not in seen:
                    seen.add(key)
                    jobs.append((M, N, K, name, form))
        with ThreadPoolExecutor(a.precompile or 2) as ex:
            for r in ex.map(build_one, jobs):
                print("built", r, flush=True)
        print(f"built {len(jobs)} in {time.time() - t0:.1f} s", flush=True)
        if a.build_only:
            return
    import torch

    dev = torch.cuda.get_device_name(0)
    l2 = int(torch.cuda.get_device_properties(0).L2_cache_size)
    g = torch.Generator(device="cuda").manual_seed(0)
    path = Path(a.out) / f"h3-skinny-long{a.tag}-{dev.replace(' ', '_')}.json"
    res = {"device": dev, "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "timing": f"{a.blocks} blocks of {a.rounds} rounds; a round one replay each of the peer's and every form's "
                     "graph of 20 calls rotated over input sets (>= 2x L2), the order reversed every other round "
                     "(benchmarks/timing.py interleave); per block each form's median us a call and the median of the "
                     "rounds' peer / ours (ratio) with its quartiles",
           "peer": "torch._scaled_mm(a, b.t(), sa, sb, out_dtype=bf16)", "rows": []}
    for M, N, K in shapes:
        try:
            res["rows"].append(row(M, N, K, g, l2, a.forms, a.blocks, a.rounds))
        except Exception as e:  # noqa: BLE001 - reported, the run goes on
            print(f"{M}x{N}x{K} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            res["rows"].append({"shape": [M, N, K], "failed": f"{type(e).__name__}: {str(e)[:300]}"})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1))
    print(f"\n{'shape':18} {'form':8} {'us (blocks)':>26} {'x peer (blocks)':>24}  kernel form")
    for r in res["rows"]:
        for n, f in r.get("forms", {}).items():
            if f.get("us"):
                print(f"{'x'.join(map(str, r['shape'])):18} {n:8} {' / '.join(f'{v:.2f}' for v in f['us']):>26} "
                      f"{' / '.join(f'{v:.3f}' for v in f['ratio']):>24}  {f['form']}")
    print(f"wrote {path} in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
