"""fp32 attention (stdlib_kernels/attention_fp32.py: split TF32 on the tensor cores) against eager
`F.scaled_dot_product_attention` in fp32 (torch picks its memory-efficient kernel for fp32), on the shapes of
the suite's SDPA problems and a head-dim row each; writes benchmarks/results/attention-fp32-<device>.json.

    python benchmarks/attention_fp32.py [--out DIR] [--sweep] [--quick] [--errors]

Times are CUDA-graph medians (`benchmarks/timing.py`). The kernel's time includes its split pass (q, k and v
into TF32 halves), as a lowered program runs it. Errors are against float64 on the device, for both, on the
same inputs (the first batch entries' heads: the float64 scores of every head would not fit beside them);
`err_ratio` = the kernel's max abs error / eager's. `--sweep` times the policy alternatives per row.
`--errors` (no timing): max and RMS errors against float64 of the kernel (PROMOTE off and on) and of eager on
fresh inputs of several shapes and seeds (attention-fp32-errors-<device>.json).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# (name, batch, heads, kv heads, seq, head dim, causal): the suite's problems first
ROWS = [
    ("l1_131_sdpa", 8, 16, 16, 1024, 64, False),
    ("l1_132_sdpa_causal / l2_025", 8, 16, 16, 2048, 64, True),
    ("l1_175_mha", 16, 16, 16, 1024, 64, False),
    ("d128", 4, 16, 16, 2048, 128, False),
    ("d128_causal", 4, 16, 16, 2048, 128, True),
    ("d32_gqa", 8, 16, 4, 2048, 32, False),
]
SWEEP = {   # head dim: alternatives to the preset
    64: [dict(PROMOTE=True), dict(STAGES=3, PBUF=1), dict(CONSUMERS=1, STAGES=4), dict(CONSUMERS=1, STAGES=2)],
    128: [dict(PROMOTE=True), dict(STAGES=1), dict(PBUF=1, STAGES=2)],
    32: [dict(STAGES=4), dict(CONSUMERS=1, STAGES=4)],
}


def flops(b, h, s, d, causal):
    return 4 * b * h * s * s * d / (2 if causal else 1)


def errors(q, k, v, o, ref_o, causal, nb):
    """Max abs errors against float64 of the kernel's o and eager's, on the first nb batch entries."""
    import torch.nn.functional as F

    q64, k64, v64 = (x[:nb].double() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    ref = F.scaled_dot_product_attention(q64, k64.repeat_interleave(g, 1), v64.repeat_interleave(g, 1),
                                         is_causal=causal)
    return float((o[:nb].double() - ref).abs().max()), float((ref_o[:nb].double() - ref).abs().max())


def run_row(name, b, h, hkv, s, d, causal, g, sweep):
    import torch
    import torch.nn.functional as F
    from timing import graph_seconds

    from stdlib_kernels import attention_fp32

    q = torch.randn(b, h, s, d, device="cuda", generator=g)
    k = torch.randn(b, hkv, s, d, device="cuda", generator=g)
    v = torch.randn(b, hkv, s, d, device="cuda", generator=g)
    o = torch.empty_like(q)
    lse = torch.empty(b * h, s, device="cuda")
    qf, kf, vf, of = (x.view(-1, s, d) for x in (q, k, v, o))
    gqa = h != hkv

    def ours(**c):
        return lambda: attention_fp32.launch(qf, kf, vf, of, lse, causal=causal, **c)

    def eager():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    t_eager = graph_seconds(eager)
    t_ours = graph_seconds(ours())
    ref_o = eager()
    ours()()
    torch.cuda.synchronize()
    e_ours, e_eager = errors(q, k, v, o, ref_o, causal, nb=1)
    fl = flops(b, h, s, d, causal)
    row = {"name": name, "shape": [b, h, hkv, s, d], "causal": causal,
           "params": attention_fp32.policy(d, s, causal),
           "ms_kernel": t_ours * 1e3, "ms_eager": t_eager * 1e3, "speedup": t_eager / t_ours,
           "tflops_kernel": fl / t_ours / 1e12, "tflops_eager": fl / t_eager / 1e12,
           "max_err_kernel": e_ours, "max_err_eager": e_eager, "err_ratio": e_ours / e_eager}
    print(f"{name:28s} {t_ours * 1e3:8.3f} ms {t_eager * 1e3:8.3f} ms eager  {t_eager / t_ours:5.2f}x  "
          f"{fl / t_ours / 1e12:6.1f} TFLOP/s  err {e_ours:.2e} vs eager {e_eager:.2e}", flush=True)
    if sweep:
        row["sweep"] = []
        for c in SWEEP.get(d, []):
            try:
                t = graph_seconds(ours(**c))
                row["sweep"].append({"params": c, "ms": t * 1e3, "speedup_eager": t_eager / t})
                print(f"    {c}: {t * 1e3:.3f} ms ({t_eager / t:.2f}x eager)", flush=True)
            except Exception as e:          # a variant over the shared-memory limit: reported, not fatal
                row["sweep"].append({"params": c, "error": f"{type(e).__name__}: {str(e)[:200]}"})
                print(f"    {c}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    return row


ERROR_ROWS = [  # batch, heads, kv heads, sq, skv, d, causal
    (2, 8, 8, 1024, 1024, 64, False), (2, 8, 8, 2048, 2048, 64, True), (2, 4, 4, 1024, 1024, 128, False),
    (1, 8, 2, 1000, 1000, 128, True), (2, 8, 8, 1024, 1024, 32, False)]


# the kernel variants of the error study: the preset, PROMOTE (the head products in chains of their own), LOLO /
# PV_LOLO (the split's fourth, smallest term of S / of P V)
ERROR_VARIANTS = {"preset": {}, "promote": dict(PROMOTE=True), "lolo": dict(LOLO=True), "pv_lolo": dict(PV_LOLO=True),
                  "lolo_pv_lolo": dict(LOLO=True, PV_LOLO=True),
                  "promote_lolo_pv_lolo": dict(PROMOTE=True, LOLO=True, PV_LOLO=True),
                  "pieces": dict(PIECES=True)}


def error_study(seeds=3, head_dims=None, variants=None, identity_v=True):
    """Max and RMS errors against float64 of eager and of the kernel's variants, per shape and seed; with
    `identity_v` also rows whose V is the identity (128 keys, d 128: O = P, the softmax's own error, no P V
    rounding), which tells the S / exp side from the P V side."""
    import torch
    import torch.nn.functional as F

    from stdlib_kernels import attention_fp32

    variants = ERROR_VARIANTS if variants is None else variants
    rows = [r for r in ERROR_ROWS if head_dims is None or r[5] in head_dims]
    if identity_v:
        rows += [(2, 8, 8, 256, 128, 128, False, "identity_v"), (2, 8, 8, 256, 128, 128, True, "identity_v")]
    out = []
    for b, h, hkv, sq, sk, d, causal, *kind in rows:
        for seed in range(seeds):
            g = torch.Generator(device="cuda").manual_seed(seed * 1000 + sq + d)
            q = torch.randn(b, h, sq, d, device="cuda", generator=g)
            k = torch.randn(b, hkv, sk, d, device="cuda", generator=g)
            v = torch.randn(b, hkv, sk, d, device="cuda", generator=g)
            if kind:                      # V = I: O[i] = P[i, :] (sk == d)
                v = torch.eye(sk, d, device="cuda").expand(b, hkv, sk, d).contiguous()
            gq = h // hkv
            ref = F.scaled_dot_product_attention(q.double(), k.double().repeat_interleave(gq, 1),
                                                 v.double().repeat_interleave(gq, 1), is_causal=causal)
            row = {"shape": [b, h, hkv, sq, sk, d], "causal": causal, "seed": seed, "kind": kind[0] if kind else ""}
            eager = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gq > 1)
            for name, x in [("eager", eager)] + [(n, None) for n in variants]:
                if x is None:
                    x = torch.empty_like(q)
                    lse = torch.empty(b * h, sq, device="cuda")
                    attention_fp32.launch(q.view(-1, sq, d), k.view(-1, sk, d), v.view(-1, sk, d), x.view(-1, sq, d),
                                          lse, causal=causal, **variants[name])
                e = x.double() - ref
                row[name] = {"max": float(e.abs().max()), "rms": float(e.pow(2).mean().sqrt())}
            out.append(row)
            print(row["shape"], causal, row["kind"], seed, "  ".join(
                f"{n}: max {row[n]['max']:.3g} ({row[n]['max'] / row['eager']['max']:.2f}) rms {row[n]['rms']:.3g}"
                for n in ["eager"] + list(variants)), flush=True)
    return out


def variant_times(shapes=((8, 16, 16, 1024, 128, False), (8, 16, 16, 1024, 64, False)), variants=None):
    """CUDA-graph times of the error study's variants (the split pass included) against eager."""
    import torch
    import torch.nn.functional as F
    from timing import graph_seconds

    from stdlib_kernels import attention_fp32

    variants = ERROR_VARIANTS if variants is None else variants
    def times(b, h, hkv, s, d, causal):
        q, k, v = (torch.randn(b, n, s, d, device="cuda") for n in (h, hkv, hkv))
        o = torch.empty_like(q)
        lse = torch.empty(b * h, s, device="cuda")
        qf, kf, vf, of = (x.view(-1, s, d) for x in (q, k, v, o))
        row = {"shape": [b, h, hkv, s, d], "causal": causal,
               "ms_eager": graph_seconds(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)) * 1e3}
        for name, c in variants.items():
            row["ms_" + name] = graph_seconds(lambda c=c: attention_fp32.launch(qf, kf, vf, of, lse, causal=causal,
                                                                                **c)) * 1e3
        return row

    out = []
    for shape in shapes:
        row = times(*shape)
        out.append(row)
        print(row, flush=True)
    return out


def main(argv=None):
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--sweep", action="store_true", help="also time the policy alternatives (SWEEP)")
    ap.add_argument("--quick", action="store_true", help="the suite's problems' rows only")
    ap.add_argument("--errors", action="store_true", help="the error study alone (no timing)")
    ap.add_argument("--error-dims", default="", help="with --errors: only these head dims (comma list)")
    ap.add_argument("--variant-times", action="store_true", help="with --errors: also time the variants")
    args = ap.parse_args(argv)
    props = torch.cuda.get_device_properties(0)
    g = torch.Generator(device="cuda").manual_seed(32)
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if args.errors:
        res = {"device": props.name, "torch": torch.__version__, "cuda": torch.version.cuda, "date": date,
               "what": "max / RMS abs error against float64 (torch on the device) of eager fp32 SDPA and of "
                       "attention_fp32's variants (ERROR_VARIANTS), fresh randn inputs; kind identity_v: V = I",
               "variants": ERROR_VARIANTS,
               "rows": error_study(head_dims=[int(x) for x in args.error_dims.split(",") if x] or None)}
        if args.variant_times:
            res["times"] = variant_times()
        path = Path(args.out) / f"attention-fp32-errors-{props.name.replace(' ', '_')}.json"
        Path(args.out).mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1))
        print("wrote", path)
        return
    res = {"device": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "date": date,
           "peer": "F.scaled_dot_product_attention fp32 (eager: torch's memory-efficient kernel)",
           "timing": "CUDA-graph median (benchmarks/timing.py); the kernel's time includes its TF32 split pass",
           "rows": []}
    print(f"{props.name}, torch {torch.__version__}")
    rows = ROWS[:3] if args.quick else ROWS
    for r in rows:
        res["rows"].append(run_row(*r, g=g, sweep=args.sweep))
        torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"attention-fp32-{props.name.replace(' ', '_')}.json"
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
