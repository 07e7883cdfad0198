"""G38: where gemm_fp32's whole "kn" call goes, and B's transposed split pass in (32, 128) register-transposed tiles
(split_tf32_tw) against the (32, 32) shared-memory one (split_tf32_t). Every timing rotates its input sets out of the L2
(timing.input_sets; each set its own a, b, c, built once); the forms of a shape are timed in `--rounds` alternating
rounds (order reversed every other round). Peers: cuBLAS SGEMM (torch.matmul f32, TF32 off) for the whole call, and
device copies of B (a plain copy, and torch's transposing copy out.copy_(b.t())) for the pass's bytes.

    python benchmarks/profile/g38_split.py [--shapes 1024,1024,1024 ...] [--rounds 2] [--out DIR] [--tag T]
        [--forms sgemm,whole_t,gemm] [--role-tid unsigned] [--build-only]

`--role-tid unsigned` renders a role's thread index as G33 did ((int)((unsigned)(tp_tid - lo) % size), taken back in
49ad232) for this process's kernels: run it and the default in alternate processes to compare the two on gemm_fp32.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from timing import graph_seconds, input_sets  # noqa: E402

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402


def rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm()) if torch.isfinite(x).all() else float("inf")


def _split(y, wide):
    gemm_fp32.KN_SPLIT_WIDE = wide
    try:
        return gemm_fp32.split(y, "kn")
    finally:
        gemm_fp32.KN_SPLIT_WIDE = True


def _launch(x, y, c, wide):
    gemm_fp32.KN_SPLIT_WIDE = wide
    try:
        return gemm_fp32.launch(x, y, c, "kn")
    finally:
        gemm_fp32.KN_SPLIT_WIDE = True


def row(M, N, K, g, rounds, forms=None):
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn(K, N, device="cuda", generator=g)
    KP = -(-K // 4) * 4
    nsets = input_sets(4 * (M * K + K * N + M * N))
    sets = [(a, b)] + [(torch.randn_like(a), torch.randn_like(b)) for _ in range(nsets - 1)]
    ref = a.double() @ b.double()
    e_sgemm = rel(torch.matmul(a, b), ref)
    out = {"shape": [M, N, K], "b_layout": "kn", "input_sets": nsets, "sgemm_rel_err": e_sgemm,
           "policy": {k: str(v) for k, v in gemm_fp32.launch_policy(M, N, K).items()},
           "pass_bytes": 4 * (K * N + 2 * N * KP), "b_bytes": 4 * K * N, "us": {}, "checks": {}}
    # correctness first: the two passes bit for bit, the whole call against float64 (NaN-poisoned outputs)
    h0, l0 = _split(b, False)
    h1, l1 = _split(b, True)
    out["checks"]["tw_equals_t"] = bool(torch.equal(h0, h1) and torch.equal(l0, l1))
    for wide in (False, True):
        c = torch.full((M, N), float("nan"), device="cuda")
        _launch(a, b, c, wide)
        torch.cuda.synchronize()
        out["checks"][f"rel_err_{'tw' if wide else 't'}"] = rel(c, ref)
    out["checks"]["error_no_worse"] = out["checks"]["rel_err_tw"] <= e_sgemm
    pol = gemm_fp32.launch_policy(M, N, K)
    halves = [_split(y, True) for _, y in sets]
    cs = [torch.empty(M, N, device="cuda") for _ in sets]
    outs_t = [torch.empty(N, K, device="cuda") for _ in sets]
    outs_c = [torch.empty(K, N, device="cuda") for _ in sets]
    fns = {
        "sgemm": [lambda x=x, y=y: torch.matmul(x, y) for x, y in sets],
        "whole_t": [lambda x=x, y=y, c=c: _launch(x, y, c, False) for (x, y), c in zip(sets, cs)],
        "whole_tw": [lambda x=x, y=y, c=c: _launch(x, y, c, True) for (x, y), c in zip(sets, cs)],
        "split_t": [lambda y=y: _split(y, False) for _, y in sets],
        "split_tw": [lambda y=y: _split(y, True) for _, y in sets],
        "gemm": [lambda x=x, s=s, c=c: gemm_fp32.launch_raw(x, s, c, **pol) for (x, _), s, c in zip(sets, halves, cs)],
        "copy_b": [lambda y=y, o=o: o.copy_(y) for (_, y), o in zip(sets, outs_c)],
        "copy_bt": [lambda y=y, o=o: o.copy_(y.t()) for (_, y), o in zip(sets, outs_t)],
    }
    fns = {k: v for k, v in fns.items() if not forms or k in forms}
    order = list(fns)
    for r in range(rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            out["us"].setdefault(name, []).append(graph_seconds(fns[name]) * 1e6)
    us = {k: min(v) for k, v in out["us"].items()}
    for w in ("whole_t", "whole_tw", "gemm"):
        if w in us and "sgemm" in us:
            out[f"ratio_{w}"] = [s / x for s, x in zip(out["us"]["sgemm"], out["us"][w])]
    out["pass_TBps"] = {k: out["pass_bytes"] / (us[k] * 1e-6) / 1e12 for k in ("split_t", "split_tw") if k in us}
    out["copy_TBps"] = {k: 2 * out["b_bytes"] / (us[k] * 1e-6) / 1e12 for k in ("copy_b", "copy_bt") if k in us}
    print(f"{M}x{N}x{K} ({nsets} sets, policy {out['policy']}): " + ", ".join(
        f"{k} {'/'.join(f'{t:.1f}' for t in v)}" for k, v in out["us"].items()), flush=True)
    print("   x SGEMM " + ", ".join(f"{w} {'/'.join(f'{x:.3f}' for x in out[f'ratio_{w}'])}"
                                    for w in ("whole_t", "whole_tw", "gemm") if f"ratio_{w}" in out)
          + f"; pass TB/s {out['pass_TBps']}, copy TB/s {out['copy_TBps']}; checks {out['checks']} (SGEMM err "
          f"{e_sgemm:.2e})", flush=True)
    return out


def unsigned_role_tid():
    """G33's form of a role's thread index (see the module docstring), for this process."""
    from tilepy_hip.render import walk

    def role_tid(self, lo: int, size: int) -> str:
        return self.hoist(f"(int)((unsigned)(tp_tid - {lo}) % {size}u)", stem="rt") if lo else "tp_tid"

    walk.Renderer.role_tid = role_tid


def build(shapes):
    """The policy's GEMM of every shape and both passes, built in parallel (nvcc runs in subprocesses)."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(gemm_fp32.split_tf32_t, {}), (gemm_fp32.split_tf32_tw, {})]
    for M, N, K in shapes:
        jobs.append((gemm_fp32.gemm_fp32, {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW,
                                           **gemm_fp32.launch_policy(M, N, K)}))
    with ThreadPoolExecutor(len(jobs)) as ex:
        for ck in ex.map(lambda j: tilepy_hip.compile(j[0], target="sm_90a", **j[1]), jobs):
            print(f"built {ck.resources}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=["1024,1024,1024", "2051,2045,1000", "1536,1536,1536",
                                                    "2048,2048,2048", "4096,4096,4096"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--forms", default="", help="comma-separated: sgemm,whole_t,whole_tw,split_t,split_tw,gemm,copy_b,"
                    "copy_bt (default all)")
    ap.add_argument("--role-tid", default="signed", choices=["signed", "unsigned"])
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args(argv)
    if args.role_tid == "unsigned":
        unsigned_role_tid()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes]
    if args.build_only:
        build(shapes)
        return
    ck = tilepy_hip.compile(gemm_fp32.split_tf32_tw, target="sm_90a")
    ck0 = tilepy_hip.compile(gemm_fp32.split_tf32_t, target="sm_90a")
    name = torch.cuda.get_device_name(0)
    res = {"device": name, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "against": "SGEMM (torch.matmul f32, TF32 off) and device copies of B; rotated input sets, alternating "
                      "rounds",
           "split_tf32_tw": dict(ck.resources), "split_tf32_t": dict(ck0.resources), "role_tid": args.role_tid,
           "rows": []}
    print(f"split_tf32_tw {ck.resources}; split_tf32_t {ck0.resources}", flush=True)
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    for M, N, K in shapes:
        res["rows"].append(row(M, N, K, g, args.rounds, [f for f in args.forms.split(",") if f]))
        torch.cuda.empty_cache()
        path = Path(args.out) / f"gemm-fp32-g38{args.tag}-{name.replace(' ', '_')}.json"
        path.write_text(json.dumps(res, indent=1, default=str))
    print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
