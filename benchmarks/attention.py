"""Forward attention (stdlib_kernels/attention.py) against torch's SDPA flash and cuDNN backends, in one run;
writes benchmarks/results/attention-<device>.json.

    python benchmarks/attention.py [--quick] [--out DIR]
    python benchmarks/attention.py --sweep      # the policy variants on the shape classes (attention-sweep-*.json)

Rows: bf16, head dims 128 (16 heads) and 64 (32 heads), sequence lengths 512 to 16k at 16k tokens per
batch (batch = 16384 / seqlen: batch x heads x row blocks fill the chip), causal and not, plus grouped-query
rows (32 query heads on 8 KV heads). Every kernel gets the same random inputs; our output is checked against
float64 (one head, all rows) and against the flash backend's before timing. A timing is the best of 5
replays of a CUDA graph of 10 calls (GPU time only). TFLOP/s count 4 * B * H * SQ * SKV * D, halved when
causal (the FlashAttention convention). Ratios are flash_time / ours and cudnn_time / ours.
Each kernel variant's registers, spills and HGMMA count (from its SASS) go into the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import tilepy_hip  # noqa: E402
from stdlib_kernels import attention  # noqa: E402

TOKENS = 16384


def configs(quick: bool):
    seqs128 = (512, 2048, 8192, 16384) if quick else (512, 1024, 2048, 4096, 8192, 16384)
    seqs64 = (512, 4096, 16384) if quick else (512, 2048, 8192, 16384)
    out = []
    for causal in (False, True):
        out += [(TOKENS // s, 16, 16, s, 128, causal) for s in seqs128]
        out += [(TOKENS // s, 32, 32, s, 64, causal) for s in seqs64]
        out.append((4, 32, 8, 4096, 128, causal))  # GQA 4:1
    return out


def timeit(fn, reps: int = 10, batches: int = 5) -> float:
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(reps):
                fn()
        replay = graph.replay
    except RuntimeError as e:  # a launch path that cannot be captured: time it eagerly, and say so
        print(f"  (no CUDA graph: {str(e).splitlines()[0][:100]}; eager timing)", flush=True)
        torch.cuda.synchronize()

        def replay():
            for _ in range(reps):
                fn()
    replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(batches):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / reps)
    return best


def ref_one_head(q, k, v, causal, h):
    """float64 output of head h (query rows in chunks)."""
    g = q.shape[0] // k.shape[0]
    qh, kh, vh = q[h].double(), k[h // g].double(), v[h // g].double()
    outs = []
    for r0 in range(0, qh.shape[0], 2048):
        s = qh[r0:r0 + 2048] @ kh.T / math.sqrt(q.shape[-1])
        if causal:
            i = torch.arange(r0, r0 + s.shape[0], device=s.device)[:, None]
            s = s.masked_fill(torch.arange(s.shape[1], device=s.device)[None, :] > i, float("-inf"))
        outs.append(torch.softmax(s, -1) @ vh)
    return torch.cat(outs)


def rel(x, ref) -> float:
    x = x.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def sdpa(backend, q4, k4, v4, causal, gqa):
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q4, k4, v4, is_causal=causal, enable_gqa=gqa)


def peer(backend, q4, k4, v4, causal, gqa):
    """(fn, note) for a torch backend; for GQA a backend without enable_gqa gets K and V expanded beforehand
    (outside the timing); None when the backend refuses the shape."""
    try:
        sdpa(backend, q4, k4, v4, causal, gqa)
        return (lambda: sdpa(backend, q4, k4, v4, causal, gqa)), ""
    except RuntimeError:
        if not gqa:
            return None, "unsupported"
    g = q4.shape[1] // k4.shape[1]
    ke, ve = k4.repeat_interleave(g, 1), v4.repeat_interleave(g, 1)
    try:
        sdpa(backend, q4, ke, ve, causal, False)
    except RuntimeError:
        return None, "unsupported"
    return (lambda: sdpa(backend, q4, ke, ve, causal, False)), "kv expanded beforehand"


def sass_regions(sass: str) -> dict:
    """Instruction counts per warp-role region of the SASS: ptxas lays out the consumers' code after their
    USETMAXREG.TRY_ALLOC and the producer's after its USETMAXREG.DEALLOC. Local-memory traffic (LDL/STL)
    in the consumer region would be spills in the hot loop."""
    cur, out = "entry", {}
    for line in sass.splitlines():
        if not re.search(r"/\*[0-9a-f]{4,}\*/", line):
            continue
        if "USETMAXREG.TRY_ALLOC" in line:
            cur = "consumer"
        elif "USETMAXREG.DEALLOC" in line:
            cur = "producer"
        d = out.setdefault(cur, {"instructions": 0, "LDL": 0, "STL": 0, "HGMMA": 0, "MUFU.EX2": 0})
        d["instructions"] += 1
        for k in ("LDL", "STL", "HGMMA", "MUFU.EX2"):
            d[k] += bool(re.search(rf"\b{re.escape(k)}\b", line))
    return out


def kernel_facts(params) -> dict:
    ck = tilepy_hip.compile(attention.attention_fwd, target="sm_90a", **params)
    return {"registers": ck.resources.get("registers"), "spill_stores": ck.resources.get("spill_stores"),
            "spill_loads": ck.resources.get("spill_loads"), "smem": ck.smem_bytes,
            "sass": sass_regions(ck.sass() or "")}


def row(b, h, hkv, s, d, causal, g, facts):
    q = torch.randn(b * h, s, d, device="cuda", generator=g).bfloat16()
    k = torch.randn(b * hkv, s, d, device="cuda", generator=g).bfloat16()
    v = torch.randn(b * hkv, s, d, device="cuda", generator=g).bfloat16()
    o = torch.full_like(q, float("nan"))
    lse = torch.empty(b * h, s, device="cuda")
    params = {**attention.policy(d, s, causal), "GROUP": h // hkv}
    key = json.dumps(params, sort_keys=True)
    if key not in facts:
        facts[key] = {"params": params, **kernel_facts(params)}

    def ours():
        attention.launch(q, k, v, o, lse, causal=causal)

    ours()
    torch.cuda.synchronize()
    err = rel(o[0], ref_one_head(q, k, v, causal, 0))
    q4, k4, v4 = (x.view(b, -1, s, d) for x in (q, k, v))
    gqa = h != hkv
    flash, flash_note = peer(SDPBackend.FLASH_ATTENTION, q4, k4, v4, causal, gqa)
    cudnn, cudnn_note = peer(SDPBackend.CUDNN_ATTENTION, q4, k4, v4, causal, gqa)
    err_flash = rel(flash().reshape(o.shape)[0], ref_one_head(q, k, v, causal, 0)) if flash else None
    t = timeit(ours)
    t_flash = timeit(flash) if flash else None
    t_cudnn = timeit(cudnn) if cudnn else None
    flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
    tf = lambda x: flops / x / 1e12 if x else None  # noqa: E731
    return {"batch": b, "heads": h, "kv_heads": hkv, "seqlen": s, "head_dim": d, "causal": causal,
            "us": t * 1e6, "TFLOPs": tf(t), "flash_TFLOPs": tf(t_flash), "cudnn_TFLOPs": tf(t_cudnn),
            "vs_flash": t_flash / t if t_flash else None, "vs_cudnn": t_cudnn / t if t_cudnn else None,
            "rel_err": err, "flash_rel_err": err_flash, "flash_note": flash_note, "cudnn_note": cudnn_note,
            "kernel": key}


# The policy sweep (--sweep): constexprs over PRESETS[d], each timed on the same inputs as the flash backend.
SWEEP = {
    64: [("C2 BN128 S4 pipelined (preset)", {}),
         ("C2 BN64 S4 one tile at a time", dict(BN=64, PIPELINE=False)),
         ("C2 BN64 S4 pipelined", dict(BN=64)),
         ("C3 one tile at a time", dict(attention.THREE_CONSUMERS)),
         ("C3 pipelined", {**attention.THREE_CONSUMERS, "PIPELINE": True}),
         ("C2 BN256 S3 pipelined", dict(BN=256, STAGES=3)),
         ("C2 one tile at a time", dict(PIPELINE=False)),
         ("C1 one tile at a time", dict(CONSUMERS=1, PIPELINE=False)),
         ("C1 BN64 one tile at a time", dict(CONSUMERS=1, BN=64, PIPELINE=False)),
         ("C2 paired", dict(PAIRED=True, PIPELINE=False)),
         ("C2 BN64 paired", dict(PAIRED=True, PIPELINE=False, BN=64)),
         ("C3 paired", dict(attention.THREE_CONSUMERS, PAIRED=True))],
    128: [("C2 BN128 S3 pipelined (preset)", {}),
          ("C2 BN128 S2 pipelined", dict(STAGES=2)),
          ("C2 BN64 S4 pipelined", dict(BN=64, STAGES=4)),
          ("C2 one tile at a time", dict(PIPELINE=False)),
          ("C2 S2 paired", dict(PAIRED=True, PIPELINE=False, STAGES=2))],
}
SWEEP_ROWS = [(TOKENS // s, 32, 32, s, 64) for s in (512, 4096, 16384)] + [(TOKENS // 512, 16, 16, 512, 128)]


def sweep_variants():
    """(row, causal, name, constexprs) for every timing of the sweep."""
    for b, h, hkv, s, d in SWEEP_ROWS:
        for causal in (False, True):
            for name, extra in SWEEP[d]:
                yield (b, h, hkv, s, d), causal, name, {**attention.PRESETS[d], **extra, "CAUSAL": causal}


def sweep(g, facts, rows=()) -> list:
    """Each variant of SWEEP on each row of SWEEP_ROWS (`rows`: only those named d<D>s<S>), against the flash
    backend in the same run."""
    out, last = [], None
    for (b, h, hkv, s, d), causal, name, params in sweep_variants():
        if rows and f"d{d}s{s}" not in rows:
            continue
        if (b, h, hkv, s, d, causal) != last:
            last = (b, h, hkv, s, d, causal)
            q = torch.randn(b * h, s, d, device="cuda", generator=g).bfloat16()
            k = torch.randn(b * hkv, s, d, device="cuda", generator=g).bfloat16()
            v = torch.randn(b * hkv, s, d, device="cuda", generator=g).bfloat16()
            o = torch.full_like(q, float("nan"))
            lse = torch.empty(b * h, s, device="cuda")
            ref = ref_one_head(q, k, v, causal, 0)
            q4, k4, v4 = (x.view(b, -1, s, d) for x in (q, k, v))
            flash, _ = peer(SDPBackend.FLASH_ATTENTION, q4, k4, v4, causal, False)
            t_flash = timeit(flash)
        key = json.dumps(params, sort_keys=True)
        if key not in facts:
            facts[key] = {"params": params, **kernel_facts(params)}
        o.fill_(float("nan"))

        def ours(params=params, q=q, k=k, v=v, o=o, lse=lse, causal=causal):
            attention.launch(q, k, v, o, lse, causal=causal, **params)

        ours()
        torch.cuda.synchronize()
        err = rel(o[0], ref)
        t = timeit(ours)
        flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        r = {"batch": b, "heads": h, "seqlen": s, "head_dim": d, "causal": causal, "variant": name, "us": t * 1e6,
             "TFLOPs": flops / t / 1e12, "flash_TFLOPs": flops / t_flash / 1e12, "vs_flash": t_flash / t,
             "rel_err": err, "kernel": key}
        out.append(r)
        f = facts[key]
        print(f"{f'{b} x {h} x {s} x {d}':18} {str(causal):6} {name:32} {r['TFLOPs']:7.1f} {r['flash_TFLOPs']:7.1f} "
              f"{r['vs_flash']:6.2f} {err:8.1e}  regs {f['registers']} consumer LDL/STL "
              f"{f['sass'].get('consumer', {}).get('LDL')}/{f['sass'].get('consumer', {}).get('STL')}", flush=True)
    return out


# batch, heads, kv heads, cache length, head dim, new tokens
DECODE = [(16, 32, 8, 8192, 128, 1), (4, 32, 8, 32768, 128, 1), (16, 32, 8, 8192, 128, 4),
          (8, 32, 8, 16384, 64, 1), (64, 32, 8, 2048, 128, 1)]
DECODE_SPLITS = (1, 2, 3, 4, 8)   # the split counts timed beside the default (`attention.decode_splits`)
# ring shapes timed beside the default (at the default split count), per head dim
DECODE_VARIANTS = {64: (dict(BN=128, STAGES=4), dict(BN=128, STAGES=6), dict(BN=64, STAGES=6),
                        dict(BN=256, STAGES=2), dict(BN=256, STAGES=3)),
                   128: (dict(BN=128, STAGES=3), dict(BN=64, STAGES=6))}


def decode_row(b, h, hkv, skv, d, qlen, g, sweep=True):
    """qlen new tokens per sequence against a cache of skv (split-KV + merge) vs SDPA on the same shapes (not
    causal); the figure is the K/V cache read rate (the bytes every implementation must move). `sweep`: also
    the split counts of DECODE_SPLITS (the default's choice is checked against them)."""
    q = torch.randn(b * h, qlen, d, device="cuda", generator=g).bfloat16()
    k = torch.randn(b * hkv, skv, d, device="cuda", generator=g).bfloat16()
    v = torch.randn(b * hkv, skv, d, device="cuda", generator=g).bfloat16()
    o = torch.full_like(q, float("nan"))
    lse = torch.empty(b * h, qlen, device="cuda")
    splits = attention.decode_splits(b * hkv, h // hkv * qlen, skv, d)

    def ours():
        attention.decode(q, k, v, o, lse)

    ours()
    torch.cuda.synchronize()
    grp = h // hkv
    ref = torch.softmax(q[:grp].double() @ k[0].double().T / math.sqrt(d), -1) @ v[0].double()
    err = rel(o[:grp], ref)
    q4, k4, v4 = q.view(b, h, qlen, d), k.view(b, hkv, skv, d), v.view(b, hkv, skv, d)
    flash, flash_note = peer(SDPBackend.FLASH_ATTENTION, q4, k4, v4, False, True)
    cudnn, cudnn_note = peer(SDPBackend.CUDNN_ATTENTION, q4, k4, v4, False, True)
    t = timeit(ours)
    t_flash = timeit(flash) if flash else None
    t_cudnn = timeit(cudnn) if cudnn else None
    nbytes = 2 * b * hkv * skv * d * 2
    gbs = lambda x: nbytes / x / 1e9 if x else None  # noqa: E731
    by_splits = {}
    for s in (DECODE_SPLITS if sweep else ()):
        if s != splits and s <= -(-skv // 128):
            by_splits[s] = gbs(timeit(lambda s=s: attention.decode(q, k, v, o, lse, splits=s)))
    by_ring = {}
    ring = attention.decode_ring(d, h // hkv * qlen, skv, splits)
    for cfg in (DECODE_VARIANTS[d] if sweep else ()):
        key = json.dumps(cfg, sort_keys=True)
        if (cfg["BN"], cfg["STAGES"]) == ring:
            continue                      # the default ring: timed above
        o.fill_(float("nan"))
        attention.decode(q, k, v, o, lse, **cfg)
        torch.cuda.synchronize()
        by_ring[key] = {"rel_err": rel(o[:grp], ref),
                        "kv_GBs": gbs(timeit(lambda cfg=cfg: attention.decode(q, k, v, o, lse, **cfg)))}
    return {"batch": b, "heads": h, "kv_heads": hkv, "cache": skv, "head_dim": d, "qlen": qlen, "splits": splits,
            "bn": ring[0], "stages": ring[1], "kv_GBs_by_ring": by_ring,
            "us": t * 1e6, "kv_GBs": gbs(t), "flash_kv_GBs": gbs(t_flash), "cudnn_kv_GBs": gbs(t_cudnn),
            "vs_flash": t_flash / t if t_flash else None, "vs_cudnn": t_cudnn / t if t_cudnn else None,
            "rel_err": err, "flash_note": flash_note, "cudnn_note": cudnn_note,
            "kv_GBs_by_splits": by_splits}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sequence lengths")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--sweep", action="store_true", help="time the policy variants (SWEEP) instead of the table")
    ap.add_argument("--decode", action="store_true", help="the decode rows alone (attention-decode-*.json)")
    ap.add_argument("--no-decode", action="store_true", help="the forward table without the decode rows")
    ap.add_argument("--sweep-rows", default="", help="with --sweep: only rows d<D>s<S> in this comma list")
    args = ap.parse_args(argv)
    props = torch.cuda.get_device_properties(0)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    g = torch.Generator(device="cuda").manual_seed(16)
    res = {"device": props.name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "toolchain": tilepy_hip.toolchain_info()["nvidia"], "time": time.strftime("%Y-%m-%d %H:%M:%S"),
           "rows": [], "kernels": {}}
    print(f"{props.name}, torch {torch.__version__}, cuDNN {res['cudnn']}")
    if args.sweep:
        res["sweep"] = sweep(g, res["kernels"], [x for x in args.sweep_rows.split(",") if x])
        path = Path(args.out) / f"attention-sweep-{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1))
        print("wrote", path)
        return res
    print(f"{'B x H/Hkv x S x D':24} {'causal':6} {'ours TF/s':>9} {'flash':>7} {'cudnn':>7} {'vs flash':>8} "
          f"{'vs cudnn':>8} {'err':>8} {'flash err':>9}")
    fmt = lambda x, f: format(x, f) if x is not None else "-"  # noqa: E731
    for b, h, hkv, s, d, causal in ([] if args.decode else configs(args.quick)):
        r = row(b, h, hkv, s, d, causal, g, res["kernels"])
        res["rows"].append(r)
        print(f"{f'{b} x {h}/{hkv} x {s} x {d}':24} {str(causal):6} {r['TFLOPs']:9.1f} "
              f"{fmt(r['flash_TFLOPs'], '7.1f')} {fmt(r['cudnn_TFLOPs'], '7.1f')} {fmt(r['vs_flash'], '8.2f')} "
              f"{fmt(r['vs_cudnn'], '8.2f')} {r['rel_err']:8.1e} {fmt(r['flash_rel_err'], '9.1e')}", flush=True)
        torch.cuda.empty_cache()
    res["decode"] = []
    for b, h, hkv, skv, d, qlen in ([] if args.no_decode else DECODE):
        r = decode_row(b, h, hkv, skv, d, qlen, g)
        res["decode"].append(r)
        print(f"decode {b} x {h}/{hkv} x {qlen} vs {skv} x {d}: {r['splits']} splits {r['us']:.1f} us, KV "
              f"{r['kv_GBs']:.0f} GB/s, flash {fmt(r['flash_kv_GBs'], '.0f')}, cudnn {fmt(r['cudnn_kv_GBs'], '.0f')}"
              f" GB/s, vs flash {fmt(r['vs_flash'], '.2f')}, vs cudnn {fmt(r['vs_cudnn'], '.2f')}, err "
              f"{r['rel_err']:.1e}; other splits GB/s "
              + ", ".join(f"{s}: {x:.0f}" for s, x in r["kv_GBs_by_splits"].items()) + "; other rings GB/s "
              + ", ".join(f"{c}: {x['kv_GBs']:.0f} (err {x['rel_err']:.1e})" for c, x in r["kv_GBs_by_ring"].items()),
              flush=True)
        torch.cuda.empty_cache()
    for k, f in res["kernels"].items():
        print("kernel", k, {x: f[x] for x in f if x != "params"})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"attention-{'decode-' if args.decode else ''}{name}.json"
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)
    vs = [r["vs_flash"] for r in res["rows"] if r["vs_flash"]]
    vc = [r["vs_cudnn"] for r in res["rows"] if r["vs_cudnn"]]
    if vs:
        print(f"vs flash: min {min(vs):.2f} max {max(vs):.2f}; vs cudnn: min {min(vc):.2f} max {max(vc):.2f}")
    return res


if __name__ == "__main__":
    main()
