"""Where attention_fp32's largest error at head dim 128 comes from: a CPU emulation of its arithmetic (S and P V as
three TF32 products, smallest first, summed in f32; online softmax over 32-key tiles with exp2 and the scale folded
in; O rescaled and accumulated in f32) against float64, with one term at a time made more accurate:

    python benchmarks/profile/a7_fp32_attention_emulation.py [--out results.json]

Variants: the kernel's arithmetic (S's terms in one f32 accumulator, as attention_fp32 issues them); the three
S products summed apart; S exact (float64 products and sums, rounded once to f32); S as six TF32 products
(operands split in three pieces: ~33 bits kept, the split is not the error); S by an f32 matmul (no split at all);
P V exact; torch's CPU f32 math backend. The shapes are tests/gpu/test_gpu_attention_fp32.py's two d 128 cases.
The emulation's summation order is the CPU matmul's, not the tensor cores', so only the ratios between variants
matter."""

from __future__ import annotations

import argparse
import json
import math

import torch


def tf32(x):
    """Round to nearest (ties away) to TF32's 10-bit mantissa, as cvt.rna.tf32.f32."""
    b = x.contiguous().view(torch.int32)
    return ((b + 0x1000) & ~0x1FFF).view(torch.float32)


def split(x):
    hi = tf32(x)
    return hi, tf32(x - hi)


def mm(a, b, how="three"):
    if how == "exact":
        return (a.double() @ b.double()).float()
    if how == "f32":
        return a @ b
    if how == "six":
        ah, am = split(a)
        bh, bm = split(b)
        al, bl = tf32(a - ah - am), tf32(b - bh - bm)
        return (am @ bm) + (al @ bh) + (ah @ bl) + (am @ bh) + (ah @ bm) + (ah @ bh)
    ah, al = split(a)
    bh, bl = split(b)
    if how == "chain":          # the kernel's order: one accumulator, per 32-wide piece of k the two small terms,
        acc = torch.zeros(a.shape[:-1] + b.shape[-1:])   # then the head terms piece by piece
        for p in range(0, a.shape[-1], 32):
            acc = acc + al[..., p:p + 32] @ bh[..., p:p + 32, :]
            acc = acc + ah[..., p:p + 32] @ bl[..., p:p + 32, :]
        for p in range(0, a.shape[-1], 32):
            acc = acc + ah[..., p:p + 32] @ bh[..., p:p + 32, :]
        return acc
    return (al @ bh) + (ah @ bl) + (ah @ bh)


def attention(q, k, v, causal, s_how="three", pv_how="three", bn=32):
    sq, d = q.shape[-2], q.shape[-1]
    c = (1 / math.sqrt(d)) * math.log2(math.e)
    o = torch.zeros(q.shape)
    m = torch.full(q.shape[:-1], -float("inf"))
    lsum = torch.zeros(q.shape[:-1])
    for j0 in range(0, k.shape[-2], bn):
        kt, vt = k[..., j0:j0 + bn, :], v[..., j0:j0 + bn, :]
        s = mm(q, kt.transpose(-1, -2), s_how)
        if causal:
            s = s.masked_fill(torch.arange(j0, j0 + kt.shape[-2])[None, :] > torch.arange(sq)[:, None], -float("inf"))
        mn = torch.maximum(m, s.max(-1).values * c)
        alpha = torch.where(torch.isinf(m), torch.zeros_like(m), torch.exp2(m - mn))
        p = torch.exp2(s * c - mn[..., None])
        lsum = lsum * alpha + p.sum(-1)
        o = o * alpha[..., None] + mm(p, vt, pv_how)
        m = mn
    return o / lsum[..., None]


def reference(q, k, v, causal):
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.arange(s.shape[-1])[None, :] > torch.arange(s.shape[-2])[:, None], -float("inf"))
    return torch.softmax(s, -1) @ v.double()


VARIANTS = {"kernel": dict(s_how="chain"), "three products apart": {}, "S exact": dict(s_how="exact"),
            "S six TF32 products": dict(s_how="six"), "S f32 matmul": dict(s_how="f32"),
            "P V exact": dict(s_how="chain", pv_how="exact"), "torch f32 math": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for h, hkv, s_, causal, seed in ((4, 4, 1024, False, 0), (4, 4, 1024, False, 1), (8, 2, 1000, True, 0),
                                     (8, 2, 1000, True, 1)):
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(h, s_, 128, generator=g)
        k = torch.randn(hkv, s_, 128, generator=g).repeat_interleave(h // hkv, 0)
        v = torch.randn(hkv, s_, 128, generator=g).repeat_interleave(h // hkv, 0)
        ref = reference(q, k, v, causal)
        row = {"heads": h, "kv_heads": hkv, "seq": s_, "d": 128, "causal": causal, "seed": seed}
        for name, kw in VARIANTS.items():
            if kw is None:
                o = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal)[0]
            else:
                o = attention(q, k, v, causal, **kw)
            e = o.double() - ref
            row[name] = {"max": float(e.abs().max()), "rms": float(e.pow(2).mean().sqrt())}
        rows.append(row)
        print(row, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"what": __doc__.splitlines()[0], "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
