"""Fused LLM ops (stdlib_kernels/llm_ops.py) against torch eager and torch.compile, in one run, bf16.

    python benchmarks/llm_ops.py [--quick] [--out DIR]

Each op moves a known number of bytes (every tensor it must read and write, once); the figure is achieved
bandwidth as a share of a device-to-device copy measured in the same run, and the time ratio to each peer.
Inputs are random; each output is checked against float64 first; timings are medians of CUDA-event-timed
batches after a warm-up (benchmarks/run.py's `timeit`). Writes <out>/llm_ops-<device>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilepy_hip  # noqa: E402
from benchmarks.run import timeit  # noqa: E402
from stdlib_kernels import llm_ops as L  # noqa: E402


def rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


# ---- the peers: the same math in torch (eager, and compiled by torch.compile)


def t_silu_and_mul(x):
    d = x.shape[1] // 2
    return F.silu(x[:, :d]) * x[:, d:]


def t_fused_add_rmsnorm(x, r, w, eps: float = 1e-6):
    r = x + r
    return F.rms_norm(r, (r.shape[1],), w, eps), r


def t_layer_norm(x, w, b, eps: float = 1e-5):
    return F.layer_norm(x, (x.shape[1],), w, b, eps)


def t_merge(po, pl, so, sl):
    m = torch.clamp(torch.maximum(pl, sl), min=-3e38)
    pe, se = torch.exp(pl - m), torch.exp(sl - m)
    tot = pe + se
    inv = 1 / torch.clamp(tot, min=1.0)
    o = po.float() * (pe * inv)[..., None] + so.float() * (se * inv)[..., None]
    return o.to(po.dtype), torch.log(tot) + m


def t_rotary_neox(pos, q, k, cs, head_size: int):
    half = cs.shape[1] // 2
    c, s = cs[pos, :half][:, None, :], cs[pos, half:][:, None, :]

    def rot(a):
        a = a.view(a.shape[0], -1, head_size).float()
        x1, x2 = a[..., :half], a[..., half:2 * half]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, a[..., 2 * half:]], dim=-1)

    return rot(q).to(q.dtype), rot(k).to(k.dtype)


def t_rotary_gptj(pos, q, k, cs, head_size: int):
    half = cs.shape[1] // 2
    c, s = cs[pos, :half][:, None, :], cs[pos, half:][:, None, :]

    def rot(a):
        a = a.view(a.shape[0], -1, head_size).float()
        x1, x2 = a[..., 0:2 * half:2], a[..., 1:2 * half:2]
        r = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
        return torch.cat([r, a[..., 2 * half:]], dim=-1)

    return rot(q).to(q.dtype), rot(k).to(k.dtype)


# layer_norm's variants (threads, one pass, rows a block, EVEN: no mask on the centred values (4096 is a power
# of two, so the launch's default is EVEN=True), MIN_BLOCKS: -1 the kernel's rule (4 blocks of 512 threads per SM
# in registers), 0 none; WARP_SUMS: per-warp sums and one exchange of the warps' partials)
LAYER_NORM_VARIANTS = ((512, False, 1, True, -1, True), (512, False, 1, True, -1, False),
                       (512, False, 1, False, -1, True), (512, False, 1, True, 0, True),
                       (512, False, 1, False, 0, False), (512, True, 1, True, -1, True))
# layer_norm_ring (rows through a ring of shared-memory buffers, TMA): (STAGES, blocks per SM)
LAYER_NORM_RING_VARIANTS = ((3, 2), (2, 2), (4, 2), (5, 2), (4, 1), (3, 3))
RMSNORM_VARIANTS = ((512, -1, True), (512, -1, False), (512, 0, True), (512, 0, False), (256, -1, True))


# rotary variants: launch_rotary keyword sets; every variant's output is checked. heads_per_block: blocks of that
# many q or k heads (None: one block a token); EARLY_K: k loaded with q (neox); KVEC: k's vector width; stream:
# rotary_*_stream on a grid of that many blocks per SM, MIN_BLOCKS its register bound
ROTARY_VARIANTS = [dict(THREADS=128), dict(THREADS=256), dict(THREADS=64), dict(THREADS=32),
                   dict(THREADS=128, EARLY_K=True), dict(THREADS=64, EARLY_K=True),
                   dict(heads_per_block=8, THREADS=64), dict(heads_per_block=16, THREADS=64),
                   dict(heads_per_block=32, THREADS=64), dict(heads_per_block=32, THREADS=128),
                   dict(THREADS=256, KVEC=2), dict(stream=5, THREADS=128, MIN_BLOCKS=5),
                   dict(HALVES=True, heads_per_block=16, THREADS=64),
                   dict(HALVES=True, heads_per_block=8, THREADS=64),
                   dict(HALVES=True, heads_per_block=32, THREADS=128),
                   dict(HALVES=True, heads_per_block=16, THREADS=128),
                   dict(HALVES=True, THREADS=128), dict(HALVES=True, THREADS=256)]
# (measured slower on the H100, 2026-11-24 06:15, results/llm_ops-*-rotary-stream.json: the other stream
# variants 50-74%, PREFETCH 50-51%, EARLY_K with KVEC 71-75%, blocks of 16 heads of 128 threads 70%)
NEOX_ONLY = ("EARLY_K", "KVEC", "PREFETCH", "HALVES")       # the variants GPT-J's kernels do not have
# rotary_ring (launch_rotary_ring): q / k through shared memory by bulk tensor copies; (THREADS, blocks per SM,
# STAGES)
ROTARY_RING_VARIANTS = ((512, 2, 3), (512, 2, 4), (256, 3, 3), (256, 3, 4), (256, 2, 4), (512, 1, 6))
ROTARY_RING_CS_SMEM = ((256, 3, 3), (256, 3, 4), (256, 4, 3))   # CS_SMEM: cos / sin through shared memory


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile peer")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--ring-only", action="store_true", help="rotary: the rotary_ring variants alone (plain and "
                    "CS_SMEM), not launch_rotary's older kernels")
    ap.add_argument("--ops", default="", help="comma list of ops to run (default: all); results in "
                    "llm_ops-<device>-<ops>.json")
    args = ap.parse_args(argv)
    only = [x for x in args.ops.split(",") if x]
    want = lambda op: not only or op in only  # noqa: E731
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    s = 8 if args.quick else 1
    res = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
           "tilepy_hip": tilepy_hip.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"), "dtype": "bf16", "results": {}}
    out = res["results"]
    g = torch.Generator(device=dev).manual_seed(int.from_bytes(os.urandom(4), "little"))
    bf = torch.bfloat16

    def rn(*shape, dtype=bf):
        return torch.randn(*shape, device=dev, generator=g).to(dtype)

    n = (1 << 28) // s
    src = torch.randn(n, device=dev, generator=g)
    dst = torch.empty_like(src)
    copy_bw = 2 * n * 4 / timeit(lambda: dst.copy_(src))
    out["d2d_copy"] = {"bytes": 2 * n * 4, "GBps": copy_bw / 1e9}
    del src, dst

    path = Path(args.out) / f"llm_ops-{name}{'-quick' if args.quick else ''}{'-' + '-'.join(only) if only else ''}.json"

    def save():
        Path(args.out).mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1))

    def row(key, shape, nbytes, ours, eager, compiled, err):
        """`ours`: {variant label: callable}; every variant is timed, the fastest is the row's figure (chosen in
        this run, as torch.compile picks its own configs), and all of them are kept under "variants"."""
        ts = {label: timeit(fn) for label, fn in ours.items()}
        best = min(ts, key=ts.get)
        t = ts[best]
        te = timeit(eager)
        r = {"shape": shape, "bytes": nbytes, "variant": best, "seconds": t, "GBps": nbytes / t / 1e9,
             "fraction_of_copy": nbytes / t / copy_bw, "eager_seconds": te, "speedup_vs_eager": te / t,
             "rel_err_vs_f64": err,
             "variants": {label: {"seconds": v, "fraction_of_copy": nbytes / v / copy_bw} for label, v in ts.items()}}
        if compiled is not None:
            tc = timeit(compiled)
            r.update(compile_seconds=tc, speedup_vs_compile=tc / t, compile_fraction_of_copy=nbytes / tc / copy_bw)
        out[key] = r
        save()                                   # after every row: a run cut short keeps what it measured
        print(f"{key:24s} {t * 1e6:9.1f} us {r['GBps']:7.0f} GB/s {r['fraction_of_copy']:6.1%} of copy; "
              f"eager {te / t:5.2f}x" + (f", compile {r['speedup_vs_compile']:5.2f}x" if compiled else "")
              + f"; rel err {err:.1e}; {best} (" + ", ".join(f"{k} {nbytes / v / copy_bw:.1%}" for k, v in ts.items())
              + ")", flush=True)

    def comp(fn):
        return None if args.no_compile else torch.compile(fn, dynamic=False)

    if want("silu_and_mul"):
        # silu_and_mul: Mixtral's ffn (d = 14336) over 8192 tokens
        m, d = 8192 // s, 14336
        x = rn(m, 2 * d)
        y = torch.empty(m, d, device=dev, dtype=bf)
        L.launch_silu_and_mul(x, y)
        err = rel(y, t_silu_and_mul(x.double()))
        cf = comp(t_silu_and_mul)
        row("silu_and_mul", [m, d], 3 * m * d * 2,
            {f"BLOCK={b},THREADS={th}": (lambda b=b, th=th: L.launch_silu_and_mul(x, y, BLOCK=b, THREADS=th))
             for b, th in ((1024, 128), (2048, 128), (2048, 256), (4096, 256), (4096, 512))},
            lambda: t_silu_and_mul(x), cf and (lambda: cf(x)), err)
        del x, y

    if want("fused_add_rmsnorm") or want("layer_norm"):
        # fused_add_rmsnorm and layer norm: 32768 rows of 4096
        m, k = 32768 // s, 4096
        x, r, w, b = rn(m, k), rn(m, k), rn(k), rn(k)
        y, ro = torch.empty_like(x), torch.empty_like(x)
        L.launch_fused_add_rmsnorm(x, r, w, y, ro, 1e-6)
        rd = (x.double() + r.double()).to(bf).double()
        err = max(rel(y, F.rms_norm(rd, (k,), w.double(), 1e-6)), rel(ro, rd))
        cf = comp(t_fused_add_rmsnorm)
        row("fused_add_rmsnorm", [m, k], 4 * m * k * 2 + k * 2,
            {f"THREADS={th},MIN_BLOCKS={mb},WARP_SUMS={ws}": (lambda th=th, mb=mb, ws=ws: L.launch_fused_add_rmsnorm(
                x, r, w, y, ro, 1e-6, THREADS=th, MIN_BLOCKS=mb, WARP_SUMS=ws)) for th, mb, ws in RMSNORM_VARIANTS},
            lambda: t_fused_add_rmsnorm(x, r, w), cf and (lambda: cf(x, r, w)), err)
        L.launch_layer_norm(x, w, b, y, 1e-5)
        err = rel(y, F.layer_norm(x.double(), (k,), w.double(), b.double(), 1e-5))
        cf = comp(t_layer_norm)
        row("layer_norm", [m, k], 2 * m * k * 2 + 2 * k * 2,
            {f"THREADS={th},ONE_PASS={op},ROWS={rw},EVEN={ev},MIN_BLOCKS={mb},WARP_SUMS={ws}": (
                lambda th=th, op=op, rw=rw, ev=ev, mb=mb, ws=ws: L.launch_layer_norm(
                    x, w, b, y, 1e-5, THREADS=th, ONE_PASS=op, ROWS=rw, EVEN=ev, MIN_BLOCKS=mb, WARP_SUMS=ws))
             for th, op, rw, ev, mb, ws in LAYER_NORM_VARIANTS}
            | {f"RING,STAGES={st},BLOCKS_PER_SM={bps}": (lambda st=st, bps=bps: L.launch_layer_norm_ring(
                x, w, b, y, 1e-5, blocks_per_sm=bps, STAGES=st)) for st, bps in LAYER_NORM_RING_VARIANTS},
            lambda: t_layer_norm(x, w, b), cf and (lambda: cf(x, w, b)), err)
        for st, bps in LAYER_NORM_RING_VARIANTS:          # every variant's output is checked
            y.fill_(float("nan"))
            L.launch_layer_norm_ring(x, w, b, y, 1e-5, blocks_per_sm=bps, STAGES=st)
            out["layer_norm"]["variants"][f"RING,STAGES={st},BLOCKS_PER_SM={bps}"]["rel_err_vs_f64"] = rel(
                y, F.layer_norm(x.double(), (k,), w.double(), b.double(), 1e-5))
        del x, r, y, ro

    if want("merge_attn_states_lse"):
        # merge_attn_states_lse: 16384 tokens x 32 heads x 128
        t, h, hd = 16384 // s, 32, 128
        po, so = rn(t, h, hd), rn(t, h, hd)
        pl, sl = rn(t, h, dtype=torch.float32) * 3, rn(t, h, dtype=torch.float32) * 3
        o, ol = torch.empty_like(po), torch.empty_like(pl)
        L.launch_merge_attn_states_lse(po, pl, so, sl, o, ol)
        ro_, rl = t_merge(po.double(), pl.double(), so.double(), sl.double())
        err = max(rel(o, ro_), rel(ol, rl))
        cf = comp(t_merge)
        row("merge_attn_states_lse", [t, h, hd], 3 * t * h * hd * 2 + 3 * t * h * 4,
            {f"BR={br},THREADS={th}": (lambda br=br, th=th: L.launch_merge_attn_states_lse(po, pl, so, sl, o, ol, BR=br,
                                                                                           THREADS=th))
             for br, th in ((16, 128), (8, 128), (8, 64), (4, 64), (16, 256))},
            lambda: t_merge(po, pl, so, sl),
            cf and (lambda: cf(po, pl, so, sl)), err)
        del po, so, o

    if want("rotary_neox") or want("rotary_gptj"):
        # rotary: 32768 tokens, 32 q heads, 8 k heads, head 128, cache of 32768 positions
        t, hq, hk, hs = 32768 // s, 32, 8, 128
        pos = torch.randint(0, t, (t,), device=dev, generator=g)
        ang = torch.rand(t, hs // 2, device=dev, generator=g, dtype=torch.float64) * 6.3
        cs = torch.cat([ang.cos(), ang.sin()], dim=1).float()
        q, kk = rn(t, hq * hs), rn(t, hk * hs)
        nbytes = 2 * t * (hq + hk) * hs * 2 + t * 8 + t * hs * 4
        def label(v):
            return ",".join(f"{k}={x}" if x is not True else k for k, x in v.items())

        for style, fn in (("neox", t_rotary_neox), ("gptj", t_rotary_gptj)):
            if not want(f"rotary_{style}"):
                continue
            neox = style == "neox"
            rq, rk = fn(pos, q.double(), kk.double(), cs.double(), hs)
            err = 0.0
            vs = [v for v in ROTARY_VARIANTS if (neox or not any(n in v for n in NEOX_ONLY)) and not args.ring_only]
            for v in vs:
                q2, k2 = q.clone(), kk.clone()
                L.launch_rotary(pos, q2, k2, cs, hs, neox, **v)
                err = max(err, rel(q2, rq.reshape(q2.shape)), rel(k2, rk.reshape(k2.shape)))
            for (th, bps, st), csm in [(v, False) for v in ROTARY_RING_VARIANTS] + [(v, True) for v in
                                                                                ROTARY_RING_CS_SMEM]:
                q2, k2 = q.clone(), kk.clone()
                L.launch_rotary_ring(pos, q2, k2, cs, hs, neox, blocks_per_sm=bps, THREADS=th, STAGES=st, CS_SMEM=csm)
                err = max(err, rel(q2, rq.reshape(q2.shape)), rel(k2, rk.reshape(k2.shape)))
            cf = comp(fn)
            row(f"rotary_{style}", [t, hq, hk, hs], nbytes,
                {label(v): (lambda q2=q2, k2=k2, neox=neox, v=v: L.launch_rotary(pos, q2, k2, cs, hs, neox, **v))
                 for v in vs}
                | {f"RING,THREADS={th},BLOCKS_PER_SM={bps},STAGES={st}": (
                    lambda q2=q2, k2=k2, neox=neox, th=th, bps=bps, st=st: L.launch_rotary_ring(
                        pos, q2, k2, cs, hs, neox, blocks_per_sm=bps, THREADS=th, STAGES=st, CS_SMEM=False))
                   for th, bps, st in ROTARY_RING_VARIANTS}
                | {f"RING,CS_SMEM,THREADS={th},BLOCKS_PER_SM={bps},STAGES={st}": (
                    lambda q2=q2, k2=k2, neox=neox, th=th, bps=bps, st=st: L.launch_rotary_ring(
                        pos, q2, k2, cs, hs, neox, blocks_per_sm=bps, THREADS=th, STAGES=st, CS_SMEM=True))
                   for th, bps, st in ROTARY_RING_CS_SMEM},
                lambda fn=fn: fn(pos, q, kk, cs, hs), cf and (lambda cf=cf: cf(pos, q, kk, cs, hs)), err)

    print(f"device: {props.name}; copy {copy_bw / 1e9:.0f} GB/s")
    save()
    print("results in", path)
    return res


if __name__ == "__main__":
    main()
