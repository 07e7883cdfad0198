"""The attention section of `benchmarks/ablation.py`: each step adds one policy to the one before, on the same
inputs, in one run (bf16, causal=False, head dim 128, B x H x S = 4 x 16 x 4096; the ceiling is torch's
cuDNN SDPA backend, the flash backend is printed beside it):

  1. naive               `attention_naive` below: 4 warps, mma.sync m16n8k16 with every fragment loaded straight
                         from global memory (each warp reads whole K and V tiles), P through shared memory to
                         the A layout, 64 x 32 tiles, nothing overlapped
  2. + TMA, swizzle, wgmma, warp specialization   `attention_fwd` with PIPELINE=False, 2 stages, no setmaxnreg:
                         a TMA producer warpgroup, 128-byte-swizzled K/V stages, two wgmma consumer warpgroups
                         (S from descriptors, P V with P in registers), each wgmma waited for
  3. + 3-stage ring      STAGES=3
  4. + setmaxnreg        producer 24 registers, consumers 240
  5. + intra-warpgroup overlap   PIPELINE=True (softmax of S_j while P_{j-1} V_{j-1} runs): the preset

`python benchmarks/ablation.py` runs it after the GEMM's section (`section(args)` is the entry point);
`python benchmarks/ablation_attention.py` runs it alone (results/ablation-attention-<device>.json). The H100
table is in benchmarks/NOTES.md.
"""

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tilepy as tp  # noqa: E402
from stdlib_kernels import attention  # noqa: E402

MMA = tp.nv.mma_m16n8k16_bf16
WARPS = (4, 1)
SHAPE = (4, 16, 4096, 128)  # batch, heads, seqlen, head dim


def b_transposed(D, BN):
    """A (BN, D) register layout whose transpose is mma.sync's B fragment layout over (D, BN): K loaded as
    stored, multiplied as K^T."""
    L = tp.mma_layout(MMA, "b", (D, BN), WARPS)
    return tp.TVLayout((BN, D), L.thread_shape, L.value_shape, (L.strides[1], L.strides[0]), "mma16816.B^T")


@tp.kernel(threads=128, target="sm_90a")
def attention_naive(Q: tp.Tensor[tp.bf16, "BH", "SQ", "D"], K: tp.Tensor[tp.bf16, "BHKV", "SKV", "D"],
                    V: tp.Tensor[tp.bf16, "BHKV", "SKV", "D"], O: tp.Tensor[tp.bf16, "BH", "SQ", "D"],
                    scale_log2: tp.f32, HEAD_DIM: tp.constexpr = 128, BM: tp.constexpr = 64,
                    BN: tp.constexpr = 32, GROUP: tp.constexpr = 1):
    bh = tp.block_id(1)
    kvh = bh // GROUP
    m0 = tp.block_id(0) * BM
    seq_k = K.shape[1]
    ACC_S = tp.accumulator(MMA, (BM, BN), WARPS)
    q = tp.load(Q[bh, m0:m0 + BM, 0:HEAD_DIM], layout=tp.mma_layout(MMA, "a", (BM, HEAD_DIM), WARPS))
    o = tp.zeros((BM, HEAD_DIM), tp.f32, layout=tp.accumulator(MMA, (BM, HEAD_DIM), WARPS))
    m_i = tp.max(tp.full((BM, BN), -1.0e30, layout=ACC_S), axis=1)
    l_i = tp.sum(tp.zeros((BM, BN), tp.f32, layout=ACC_S), axis=1)
    for j in range(tp.cdiv(seq_k, BN)):
        kt = tp.load(K[kvh, j * BN:(j + 1) * BN, 0:HEAD_DIM], layout=b_transposed(HEAD_DIM, BN))
        sc = tp.mma(q, kt.T, tp.zeros((BM, BN), tp.f32, layout=ACC_S)) * scale_log2
        sc = tp.where((j * BN + tp.arange(BN))[None, :] < seq_k, sc, float("-inf"))
        m_new = tp.maximum(m_i, tp.max(sc, axis=1))
        pr = tp.exp2(sc - m_new[:, None])
        alpha = tp.exp2(m_i - m_new)
        l_i = l_i * alpha + tp.sum(pr, axis=1)
        m_i = m_new
        p = tp.convert_layout(pr.to(tp.bf16), tp.mma_layout(MMA, "a", (BM, BN), WARPS))
        v = tp.load(V[kvh, j * BN:(j + 1) * BN, 0:HEAD_DIM], layout=tp.mma_layout(MMA, "b", (BN, HEAD_DIM), WARPS))
        o = tp.mma(p, v, o * alpha[:, None])
    tp.store(O[bh, m0:m0 + BM, 0:HEAD_DIM], o / l_i[:, None])


def launch_naive(q, k, v, o, scale=None, **constexprs):
    bh, sq, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    params = {"HEAD_DIM": d, "GROUP": bh // k.shape[0], **constexprs}
    return attention_naive[(tp.cdiv(sq, params.get("BM", 64)), bh)](q, k, v, o, scale * math.log2(math.e), **params)


STEPS = [  # (name, constexprs over the D = 128 preset; None: the naive kernel)
    ("naive (mma.sync, fragments from global)", None),
    ("+ TMA, swizzle, wgmma, warp specialization", dict(PIPELINE=False, STAGES=2, PRODUCER_REGS=0, CONSUMER_REGS=0)),
    ("+ 3-stage ring", dict(PIPELINE=False, STAGES=3, PRODUCER_REGS=0, CONSUMER_REGS=0)),
    ("+ setmaxnreg (24 / 240)", dict(PIPELINE=False, STAGES=3)),
    ("+ intra-warpgroup overlap (the preset)", dict()),
]


def section(args) -> dict:
    import torch
    from ablation import timeit
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, s, d = SHAPE
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(b * h, s, d, device="cuda", generator=g).bfloat16() for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.empty(b * h, s, device="cuda")
    q0, k0, v0 = q[0].double(), k[0].double(), v[0].double()
    ref = torch.softmax(q0 @ k0.T / math.sqrt(d), -1) @ v0
    flops = 4 * b * h * s * s * d
    q4, k4, v4 = (x.view(b, h, s, d) for x in (q, k, v))

    def sdpa(backend):
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q4, k4, v4)

    t_cudnn = timeit(lambda: sdpa(SDPBackend.CUDNN_ATTENTION))
    t_flash = timeit(lambda: sdpa(SDPBackend.FLASH_ATTENTION))
    rows, prev = [], None
    for name, extra in STEPS:
        if extra is None:
            fn = lambda: launch_naive(q, k, v, o)  # noqa: E731
            params = {"naive": True}
        else:
            params = {**attention.PRESETS[d], **extra}
            fn = lambda params=params: attention.launch(q, k, v, o, lse, **params)  # noqa: E731
        o.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        err = float((o[0].double() - ref).norm() / ref.norm()) if torch.isfinite(o).all() else float("inf")
        t = timeit(fn)
        rows.append({"step": name, "us": t * 1e6, "TFLOPs": flops / t / 1e12, "of_cublas": t_cudnn / t,
                     "speedup": (prev / t) if prev else 1.0, "rel_err": err, "registers": None,
                     "constexprs": " ".join(f"{name_}={value}" for name_, value in params.items())})
        prev = t
    return {"title": f"attention {b}x{h}x{s}x{d}, bf16, not causal (flash backend: {flops / t_flash / 1e12:.0f} "
                     "TFLOP/s)",
            "ceiling": {"name": "cuDNN SDPA", "us": t_cudnn * 1e6, "TFLOPs": flops / t_cudnn / 1e12}, "rows": rows}


def main(argv=None) -> dict:
    """Run this section alone: print its table, write benchmarks/results/ablation-attention-<device>.json."""
    import argparse
    import json
    import re
    import time

    import torch
    from ablation import print_section

    import tilepy_hip

    ap = argparse.ArgumentParser(description="the attention ablation alone")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    props = torch.cuda.get_device_properties(0)
    sec = section(args)
    print_section(sec)
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "attention": sec}
    out = Path(args.out) / f"ablation-attention-{re.sub(r'[^A-Za-z0-9_.-]+', '_', props.name).strip('_')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print("wrote", out)
    return res


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "benchmarks"))
    main()
