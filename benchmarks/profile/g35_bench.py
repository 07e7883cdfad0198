"""G35 (issue 15: fp8 >= 0.95x torch._scaled_mm): the ragged and mid fp8 shapes, candidate forms of gemm_fp8 against
the policy and torch._scaled_mm, alternated in `--rounds` rounds, rotated over input sets >= 2x the L2
(benchmarks/gemm_fp8_small.py's method and forms, plus G35's: wave-filling 128 x 144 / 128 x 192 tiles, the large
row storing from the registers, the persistent piece store on one wave, and A / B padded once to K a multiple of 128
inside the timed call).

    python benchmarks/profile/g35_bench.py --plan call1 [--rounds 3] [--tag -g35-call1] [--out DIR]

Where a shape is not a multiple of 16 the peer is _scaled_mm on operands padded once to multiples of 16 (the pad NOT
timed: _scaled_mm cannot take the shape); a `padk_` form pads A and B to K rounded up to 128 into buffers zeroed
once, and that copy IS timed with it (two torch copies a call). `padcopy` times the copy alone.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gemm_fp8_small as small  # noqa: E402

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

I256, I192, I144 = tp.nv.wgmma_m64n256k32_e4m3, tp.nv.wgmma_m64n192k32_e4m3, tp.nv.wgmma_m64n144k32_e4m3
G35_FORMS = {
    # wave-filling tiles (1536^3: 12 x 11 = 132 tiles of 128 x 144, cuBLASLt's count; 128 x 192: 96)
    "128x144_s6_w1_ep0": dict(BM=128, BN=144, STAGES=6, CONSUMERS=2, INSTR=I144, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    "128x144_s6_w0_ep0": dict(BM=128, BN=144, STAGES=6, CONSUMERS=2, INSTR=I144, IN_FLIGHT=0, EPILOGUE=0, TMA_ONLY=1),
    "128x192_s5_w1_ep0": dict(BM=128, BN=192, STAGES=5, CONSUMERS=2, INSTR=I192, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    # the large tile storing from the registers (C's rows off 16 bytes: no TMA store), 4 stages
    "large_ep0": dict(BM=128, BN=256, STAGES=4, CONSUMERS=2, INSTR=I256, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    "large_ep0_w0": dict(BM=128, BN=256, STAGES=4, CONSUMERS=2, INSTR=I256, IN_FLIGHT=0, EPILOGUE=0, TMA_ONLY=1),
    # the large class's persistent piece store where one wave of 128 x 256 tiles (or fewer) runs
    "lp": dict(gemm_fp8.LARGE_PERSISTENT),
    # call 2: the tile staged in shared memory and stored coalesced by the producer warpgroup (EPILOGUE=1: C's rows
    # off 16 bytes); 192 x 192 tiles over three consumers (2051 x 2045: 11 x 11 = 121 tiles, one wave, where 128 x 256
    # gives 17 x 8 = 136); 128 x 144 with the TMA store in 16-column blocks
    "128x256_s3_w1_ep1": dict(BM=128, BN=256, STAGES=3, CONSUMERS=2, INSTR=I256, IN_FLIGHT=1, EPILOGUE=1, TMA_ONLY=1),
    "128x128_s5_w1_ep1": dict(BM=128, BN=128, STAGES=5, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n128k32_e4m3, IN_FLIGHT=1,
                              EPILOGUE=1, TMA_ONLY=1),
    "192x192_s3_w1_ep1": dict(BM=192, BN=192, STAGES=3, CONSUMERS=3, INSTR=I192, IN_FLIGHT=1, EPILOGUE=1, TMA_ONLY=1),
    "192x192_s3_w1_ep1_r": dict(BM=192, BN=192, STAGES=3, CONSUMERS=3, INSTR=I192, IN_FLIGHT=1, EPILOGUE=1,
                                TMA_ONLY=1, PRODUCER_REGS=40, CONSUMER_REGS=152),
    "192x192_s4_w1_ep0": dict(BM=192, BN=192, STAGES=4, CONSUMERS=3, INSTR=I192, IN_FLIGHT=1, EPILOGUE=0, TMA_ONLY=1),
    "128x144_s5_w1_ep2": dict(BM=128, BN=144, STAGES=5, CONSUMERS=2, INSTR=I144, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    # call 3: 192 x 192 with the TMA store (into C padded to rows of 16-byte multiples: `padc_` forms)
    "192x192_s3_w1_ep2": dict(BM=192, BN=192, STAGES=3, CONSUMERS=3, INSTR=I192, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "large_s3_ep2": dict(gemm_fp8.POLICIES["large"], TMA_ONLY=1),
    "old_large": dict(gemm_fp8.POLICIES["large"]),     # the large row, the policy before G35 where it stayed
    "old_unaligned": dict(gemm_fp8.UNALIGNED_N_128x128),  # the ragged row before G35
}
small.FORMS.update(G35_FORMS)
PAD_FORMS = ("128x128_s6_w1_ep0", "large_ep0", "128x144_s6_w1_ep0", "64x128_s8_w1_ep0")

RAGGED = ["policy", "128x128_s6_w1_ep0", "large_ep0", "large_ep0_w0", "64x128_s8_w1_ep0", "128x144_s6_w1_ep0"]
PLANS = {
    "call1": [
        ((2051, 2045, 1008), RAGGED + ["padk_" + f for f in PAD_FORMS] + ["padcopy"]),
        ((2048, 2048, 1008), RAGGED),
        ((2051, 2045, 1024), RAGGED),
        ((2048, 2048, 1024), RAGGED),
        ((1536, 1536, 1536), ["policy", "128x144_s6_w1_ep0", "128x144_s6_w0_ep0", "128x192_s5_w1_ep0", "lp"]),
        ((4096, 1024, 1024), ["policy", "lp", "large_ep0"]),
        ((2048, 2048, 2048), ["policy", "lp"]),
    ],
    "call2": [
        ((2051, 2045, 1008), ["policy", "large_ep0", "128x256_s3_w1_ep1", "128x128_s5_w1_ep1", "192x192_s3_w1_ep1",
                              "192x192_s3_w1_ep1_r", "192x192_s4_w1_ep0"]),
        ((2048, 2048, 1008), ["policy", "192x192_s3_w1_ep1", "192x192_s4_w1_ep0"]),
        ((1536, 1536, 1536), ["policy", "128x144_s5_w1_ep2", "128x144_s6_w1_ep0", "lp"]),
        ((4096, 1024, 1024), ["policy", "lp"]),
        ((2048, 2048, 2048), ["policy", "lp"]),
        ((1024, 2048, 2048), ["policy", "lp"]),
        ((2048, 1024, 4096), ["policy", "lp"]),
    ],
    "call3": [     # (the policy: G35's, adopted after call 2; old_large: the row it replaced)
        ((2051, 2045, 1008), ["policy", "192x192_s3_w1_ep1", "large_ep0", "padc_192x192_s3_w1_ep2", "padc_lp",
                              "padc_large_s3_ep2", "copyc"]),
        ((1536, 1536, 1536), ["policy", "old_large"]),
        ((4096, 1024, 1024), ["policy", "old_large"]),
        ((2048, 2048, 2048), ["policy", "old_large"]),
        ((2048, 2048, 1008), ["policy", "old_large"]),
        ((2560, 1536, 2048), ["policy", "old_large"]),
        ((1600, 1600, 1600), ["policy", "old_large", "128x144_s5_w1_ep2"]),
    ],
    "call4": [     # the final policy (G35) against the rows it replaced, alternated
        ((2051, 2045, 1008), ["policy", "old_unaligned"]),
        ((1536, 1536, 1536), ["policy", "old_large"]),
        ((4096, 1024, 1024), ["policy", "old_large"]),
        ((2048, 2048, 2048), ["policy", "old_large"]),
        ((2560, 1536, 2048), ["policy", "old_large"]),
        ((2048, 2048, 1008), ["policy"]),
        ((1024, 2048, 2048), ["policy"]),
        ((2048, 1024, 4096), ["policy"]),
    ],
}


def shape_row(M, N, K, names, rounds, g) -> dict:
    import torch
    from timing import graph_seconds, input_sets

    def data():
        a, sa = small._quantize(torch.randn(M, K, device="cuda", generator=g))
        b, sb = small._quantize(torch.randn(N, K, device="cuda", generator=g))
        return a, b, sa, sb, torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)

    nsets = input_sets(M * K + N * K + 2 * M * N)
    sets = [data() for _ in range(nsets)]
    a, b, sa, sb, out = sets[0]
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()

    def rel(x):
        x = x.double()
        return float((x - ref).norm() / ref.norm()) if torch.isfinite(x).all() else float("inf")

    row = {"shape": [M, N, K], "input_sets": nsets, "forms": {}}
    fns, errs = {}, {}
    mp, np_ = -(-M // 16) * 16, -(-N // 16) * 16
    if (mp, np_) == (M, N):
        fns["peer"] = [lambda x=x: torch._scaled_mm(x[0], x[1].t(), x[2], x[3], out_dtype=torch.bfloat16)
                       for x in sets]
        errs["peer"] = rel(fns["peer"][0]())
    else:
        pads = [(torch.nn.functional.pad(x[0].view(torch.uint8), (0, 0, 0, mp - M)).view(torch.float8_e4m3fn),
                 torch.nn.functional.pad(x[1].view(torch.uint8), (0, 0, 0, np_ - N)).view(torch.float8_e4m3fn),
                 x[2], x[3]) for x in sets]
        fns["peer"] = [lambda x=x: torch._scaled_mm(x[0], x[1].t(), x[2], x[3], out_dtype=torch.bfloat16)
                       for x in pads]
        errs["peer"] = rel(fns["peer"][0]()[:M, :N])
        row["peer_against"] = "torch._scaled_mm on operands padded to multiples of 16 (pad not timed)"
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fns["peer"][0]()
        torch.cuda.synchronize()
    row["peer_kernels"] = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
    kp128 = -(-K // 128) * 128
    padded = None
    for n in names:
        if n == "policy":
            pol = gemm_fp8.policy(M, N, K)
            row["policy"] = {k: getattr(v, "name", v) for k, v in pol.items() if k != "SWIZZLE"}
            fns[n] = [lambda x=x, pol=pol: gemm_fp8.launch(*x, **pol) for x in sets]
            continue
        if n.startswith("padc_"):     # C computed into (M, N rounded up to 8) with the TMA store, then copied out
            p = small.params_of(n[len("padc_"):])
            kernel, kp = gemm_fp8.kernel_of(p)
            n8 = -(-N // 8) * 8
            grid = gemm_fp8.grid_of(M, n8, p)
            cps = [torch.empty(M, n8, device="cuda", dtype=torch.bfloat16) for _ in sets]

            def fc(x, cp, kernel=kernel, kp=kp, grid=grid):
                kernel[grid](x[0], x[1], x[2], x[3], cp, target="sm_90a", **kp)
                x[4].copy_(cp[:, :N])

            fns[n] = [lambda x=x, cp=cp, fc=fc: fc(x, cp) for x, cp in zip(sets, cps)]
            continue
        if n == "copyc":            # that copy alone
            cps = [torch.zeros(M, -(-N // 8) * 8, device="cuda", dtype=torch.bfloat16) for _ in sets]
            fns[n] = [lambda x=x, cp=cp: x[4].copy_(cp[:, :N]) for x, cp in zip(sets, cps)]
            continue
        if n.startswith("pad"):
            if padded is None:      # zeroed once: the copies write columns [0, K) only
                padded = [(torch.zeros(M, kp128, device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn),
                           torch.zeros(N, kp128, device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn))
                          for _ in sets]
            if n == "padcopy":
                fns[n] = [lambda x=x, q=q: (q[0][:, :K].copy_(x[0]), q[1][:, :K].copy_(x[1]))
                          for x, q in zip(sets, padded)]
                continue
            p = small.params_of(n[len("padk_"):])
            kernel, kp = gemm_fp8.kernel_of(p)
            grid = gemm_fp8.grid_of(M, N, p)

            def f(x, q, kernel=kernel, kp=kp, grid=grid):
                q[0][:, :K].copy_(x[0])
                q[1][:, :K].copy_(x[1])
                kernel[grid](q[0], q[1], x[2], x[3], x[4], target="sm_90a", **kp)

            fns[n] = [lambda x=x, q=q, f=f: f(x, q) for x, q in zip(sets, padded)]
            continue
        p = small.params_of(n)
        if p.get("STORE_N") and N % 8:
            row["forms"][n] = {"skipped": "TMA-only store needs N % 8 == 0"}
            continue
        kernel, kp = gemm_fp8.kernel_of(p)
        grid = gemm_fp8.grid_of(M, N, p)
        fns[n] = [lambda x=x, kernel=kernel, kp=kp, grid=grid: kernel[grid](*x, target="sm_90a", **kp) for x in sets]
    for n in list(fns):
        if n in ("peer", "padcopy", "copyc"):
            continue
        out.fill_(float("nan"))
        try:
            fns[n][0]()
            torch.cuda.synchronize()
            errs[n] = rel(out)
        except Exception as e:  # noqa: BLE001 - a form that does not launch: say so, go on
            row["forms"][n] = {"skipped": f"{type(e).__name__}: {str(e)[:200]}"}
            del fns[n]
            continue
        if not errs[n] <= 2.0**-8:
            row["forms"][n] = {"skipped": f"rel err {errs[n]:.3e} over 2^-8"}
            del fns[n]
    times = {n: [] for n in fns}
    for _ in range(rounds):
        for n in fns:
            times[n].append(graph_seconds(fns[n], 20, 15) * 1e6)
    med = {n: statistics.median(v) for n, v in times.items()}
    peer = med["peer"]
    row.update(peer_us=peer, peer_times_us=times["peer"], peer_rel_err=errs["peer"],
               hot_us={n: graph_seconds(fns[n][0], 20, 15) * 1e6 for n in ("peer", "policy") if n in fns})
    for n in fns:
        if n == "peer":
            continue
        row["forms"][n] = {"us": med[n], "times_us": times[n], "rel_err": errs.get(n), "ratio": peer / med[n]}
    print(f"{M} x {N} x {K} ({nsets} sets): peer {peer:.2f} us {times['peer']} {row['peer_kernels']} "
          f"{row.get('peer_against', '')} hot {row['hot_us']}", flush=True)
    for us, k in sorted((v["us"], k) for k, v in row["forms"].items() if "us" in v):
        f = row["forms"][k]
        err = f"{f['rel_err']:.2e}" if f["rel_err"] is not None else "-"
        print(f"    {k:24s} {us:8.2f} us  x peer {f['ratio']:.3f}  runs {[round(t, 2) for t in f['times_us']]}  "
              f"err {err}", flush=True)
    for k, v in row["forms"].items():
        if "skipped" in v:
            print(f"    {k:24s} skipped: {v['skipped']}", flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="call1", choices=sorted(PLANS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    plan = PLANS[args.plan]
    names = sorted({n.split("_", 1)[1] if n.startswith(("padk_", "padc_")) else n for _, ns in plan for n in ns}
                   - {"policy", "padcopy", "copyc"})
    t0 = time.time()
    with ProcessPoolExecutor(max(1, min(16, len(names))), mp_context=multiprocessing.get_context("fork")) as ex:
        built = dict(zip(names, ex.map(small.build, [small.params_of(n) for n in names])))
    print(f"built {len(names)} forms in {time.time() - t0:.1f} s", flush=True)
    for n, b in built.items():
        print(f"  {n:24s} {b}", flush=True)

    import torch

    import tilepy_hip

    props = torch.cuda.get_device_properties(0)
    dev = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "rounds": args.rounds, "plan": args.plan,
           "forms": {n: {**{k: getattr(v, "name", v) for k, v in small.params_of(n).items() if k != "SWIZZLE"},
                         **built[n]} for n in names},
           "against": "torch._scaled_mm(a, b.t(), sa, sb, out_dtype=bf16), default (promoted) accumulation",
           "rows": []}
    g = torch.Generator(device="cuda").manual_seed(35)
    for (M, N, K), ns in plan:
        ns = [n for n in ns if n in ("policy", "padcopy", "copyc")
              or "error" not in built[n.split("_", 1)[1] if n.startswith(("padk_", "padc_")) else n]]
        res["rows"].append(shape_row(M, N, K, ns, args.rounds, g))
        torch.cuda.empty_cache()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"gemm-fp8{args.tag}-{dev}.json"
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
