"""H1 call 2: does the paired timer's order matter? benchmarks/timing.paired_graph_seconds reverses the order every
other round (O P | P O | O P ...), so half the replays follow a replay of the same graph; in call 1 the fp32 rows'
medians' ratio (2.47-2.49) sat outside the pairs' quartiles (2.39-2.47). Here each row is timed in blocks of 30
rounds, reversed ("abba") and in a fixed order ("abab", each graph always after the other), alternated twice, with
the raw per-round times kept: per block the pairs' median and the medians' ratio, and for "abba" the pairs' median
of even rounds (ours after ours, the peer after ours) and odd rounds (the peer after the peer, ours after the peer).

    python benchmarks/profile/h1_order.py OUT.json
"""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from timing import input_sets, interleaved_graph_seconds, pair_stats  # noqa: E402

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_fp32, gemm_hopper  # noqa: E402


def nbytes(*ts):
    return sum(t.numel() * t.element_size() for t in ts)


def rows(g):
    M = N = K = 4096
    out = {}
    # fp32 whole call against SGEMM (one set at 4096^3), and bf16 out against torch.matmul (2 sets)
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn(K, N, device="cuda", generator=g)
    c = torch.empty(M, N, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    sets = [(a, b, c)] + [(torch.randn_like(a), torch.randn_like(b), torch.empty_like(c))
                          for _ in range(input_sets(nbytes(a, b, c)) - 1)]
    out["fp32_4096"] = ([partial(gemm_fp32.launch, x, y, z, "kn") for x, y, z in sets],
                        [partial(torch.matmul, x, y) for x, y, _ in sets])
    ab = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    bb = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    cb = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    p = gemm_hopper.policy(M, N, K, tp.bf16, fixup=True)
    bsets = [(ab, bb, cb)] + [(torch.randn_like(ab), torch.randn_like(bb), torch.empty_like(cb))
                              for _ in range(input_sets(nbytes(ab, bb, cb)) - 1)]
    out["bf16out_4096"] = ([partial(gemm_hopper.launch, x, y, z, **p) for x, y, z in bsets],
                           [partial(torch.matmul, x, y) for x, y, _ in bsets])
    return out


def summary(o, q, reverse):
    s = pair_stats(o, q)
    r = {"pairs": s.ratio, "medians": s.peer / s.ours, "q1": s.ratio_q1, "q3": s.ratio_q3, "min": s.ratio_min,
         "max": s.ratio_max, "ours_us": s.ours * 1e6, "peer_us": s.peer * 1e6}
    if reverse:
        ev, od = pair_stats(o[0::2], q[0::2]), pair_stats(o[1::2], q[1::2])
        r.update(even_pairs=ev.ratio, even_ours_us=ev.ours * 1e6, even_peer_us=ev.peer * 1e6,
                 odd_pairs=od.ratio, odd_ours_us=od.ours * 1e6, odd_peer_us=od.peer * 1e6)
    return r


def main():
    path = Path(sys.argv[1])
    g = torch.Generator(device="cuda").manual_seed(15)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "rows": {}}
    for name, (ours, peer) in rows(g).items():
        blocks = []
        for rev in (True, False, True, False):
            o, q = interleaved_graph_seconds([ours, peer], reps=20, replays=30, reverse=rev)
            sm = summary(o, q, rev)
            blocks.append({"order": "abba" if rev else "abab", **sm, "ours_s": o, "peer_s": q})
            print(f"{name:14s} {'abba' if rev else 'abab'} pairs {sm['pairs']:.3f} [{sm['q1']:.3f}-{sm['q3']:.3f}] "
                  f"medians {sm['medians']:.3f} ours {sm['ours_us']:.1f} peer {sm['peer_us']:.1f}"
                  + (f" | even (ours after ours) {sm['even_pairs']:.3f} ours {sm['even_ours_us']:.1f} peer "
                     f"{sm['even_peer_us']:.1f}; odd {sm['odd_pairs']:.3f} ours {sm['odd_ours_us']:.1f} peer "
                     f"{sm['odd_peer_us']:.1f}" if rev else ""), flush=True)
        res["rows"][name] = blocks
        path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
