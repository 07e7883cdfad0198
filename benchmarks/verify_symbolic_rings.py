"""The symbolic-ring switch (TILEPY_VERIFY_SYMBOLIC_RINGS, tilepy_verify/symbolic_ring.py) against the stage copies:
for every stdlib kernel (benchmarks/verify_speed.py's cases, `--stages`: its ring cases at STAGES 2..8) and every
kernel of the seeded corpora (each bug and twin), the findings with the switch off and on, whether the tag check
took the symbolic form or fell back to the copies (and why), and the CPU seconds of both.

    python benchmarks/verify_symbolic_rings.py [--only NAME] [--stages] [--corpora] [--repeat N] [--json FILE]

Exits 1 when a kernel's findings (check, line) differ between the two."""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import tilepy_verify  # noqa: E402
from tilepy_verify import symbolic_ring  # noqa: E402


class _Gaps(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def run(kernel, target, params, on):
    """(findings as sorted (check, line) pairs, CPU seconds, queries, fallback reasons or None)."""
    symbolic_ring.ENABLED = on
    kernel._cache.clear()
    kir = kernel.ir(target, **params)
    h = _Gaps()
    log = symbolic_ring.log
    log.addHandler(h)
    old = log.level
    log.setLevel(logging.DEBUG)
    try:
        c0 = time.process_time()
        report = tilepy_verify.verify_ir(kir)
        cpu = time.process_time() - c0
    finally:
        log.removeHandler(h)
        log.setLevel(old)
        symbolic_ring.ENABLED = None
    found = sorted({(f.check, f.span.line) for f in report.errors})
    form = ("no mbarrier array" if not symbolic_ring.uses_arrays(kir) else
            "copies: " + "; ".join(h.lines) if h.lines else "symbolic")
    return found, cpu, report.stats["queries"], form


def cases(args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import verify_speed as VS

    if args.no_stdlib:
        pass
    elif args.stages:
        for name, kernel, target, params in VS.ring_cases():
            for st in VS.STAGES:
                yield f"{name} S={st}", kernel, target, {**params, "STAGES": st}
    else:
        yield from VS.cases()
    if args.corpora:
        from tests.verify import seeded_corpus, seeded_corpus2, stage_ring_kernels

        for C in (seeded_corpus, seeded_corpus2):
            for kernel in C.KERNELS:
                yield f"{kernel.name} twin", kernel, None, {}
                for k, bug, _checks, _shows in C.CORPUS:
                    if k is kernel:
                        yield f"{kernel.name} BUG={bug}", kernel, None, {"BUG": bug}
        for bug in ["none"] + [b for b, *_ in stage_ring_kernels.BUGS]:
            for st in (2, 3, 4, 6):
                yield f"stage_ring BUG={bug} S={st}", stage_ring_kernels.ring, None, {"BUG": bug, "STAGES": st}
        yield from _more_rings()


def _more_rings():
    """The ring shapes of tests/verify/symbolic_ring_kernels2.py (two waits, a self-filled ring, conv_tma's
    unrolled stages, two producer roles), symbolic_ring_kernels.py's family, several_waits_kernels.py (two waits an
    iteration on one element, a tile prologue's wait) and the cluster kernels' bugs."""
    from tests.verify import cluster_kernels as CK
    from tests.verify import several_waits_kernels as SW
    from tests.verify import symbolic_ring_kernels as K
    from tests.verify import symbolic_ring_kernels2 as K2

    for b in ("none", "stage", "rows", "prologue", "phase"):
        yield f"self_ring BUG={b}", K2.self_ring, None, {"BUG": b}
    for late in (0, 1, 2):
        for b in ("none", "late", "early", "rows"):
            yield f"two_waits LATE={late} BUG={b}", K2.two_waits, None, {"LATE": late, "BUG": b}
    for b in ("none", "stage", "phase", "rows"):
        yield f"unrolled BUG={b}", K2.unrolled, None, {"BUG": b}
    yield "two_producers", K2.two_producers, None, {}
    for cx in ({}, {"D": 1}, {"D": 2, "STAGES": 4}, {"NX": 2}, {"NX": 2, "NB": 1}, {"D": 1, "NX": 3, "NB": 2},
               {"BUG": "rows"}, {"BUG": "phase"}, {"BUG": "elem", "NX": 2}, {"BUG": "elem", "D": 1, "NX": 2, "NB": 1}):
        yield f"family {cx}", K.ring, None, cx
    for first in (0, -1):
        for second in (0, -1, 1):
            for claim in (0, -1):
                cx = {"FIRST": first, "SECOND": second, "CLAIM": claim}
                yield f"several_waits twice {cx}", SW.twice, None, cx
    for b in ("none", "stale", "other"):
        yield f"several_waits prologue BUG={b}", SW.prologue, None, {"BUG": b}
    for b in range(6):
        yield f"cluster_gemm BUG={b}", CK.cluster_gemm, None, {"BUG": b}
    for b in (0, 6):
        yield f"cluster_gemm_peer BUG={b}", CK.cluster_gemm_peer, None, {"BUG": b}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--corpora", action="store_true", help="also the seeded corpora and the one-stage ring bugs")
    ap.add_argument("--no-stdlib", action="store_true", help="only the corpora (with --corpora)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each form (alternating); the best CPU seconds")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    rows, differ = [], 0
    for name, kernel, target, params in cases(args):
        if args.only not in name:
            continue
        try:
            t_off = t_on = float("inf")
            for _ in range(args.repeat):  # alternating, the best CPU seconds of each
                off, t, q_off, _ = run(kernel, target, params, False)
                t_off = min(t_off, t)
                on, t, q_on, form = run(kernel, target, params, True)
                t_on = min(t_on, t)
        except Exception as e:  # noqa: BLE001 - a form the kernel does not build: reported, go on
            print(f"{name:60s} error {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
            continue
        same = off == on
        differ += not same
        print(f"{name:60s} {'same' if same else 'DIFFER'} off {t_off:5.2f}s/{q_off:3d}q on {t_on:5.2f}s/{q_on:3d}q "
              f"{len(off)} errors  {form[:150]}", flush=True)
        if not same:
            print(f"    off: {off}\n    on:  {on}", flush=True)
        rows.append({"kernel": name, "same": same, "errors_off": off, "errors_on": on, "cpu_off": round(t_off, 3),
                     "cpu_on": round(t_on, 3), "queries_off": q_off, "queries_on": q_on, "tag_check": form})
    sym = sum(1 for r in rows if r["tag_check"] == "symbolic")
    fell = sum(1 for r in rows if r["tag_check"].startswith("copies"))
    cpu_off, cpu_on = sum(r["cpu_off"] for r in rows), sum(r["cpu_on"] for r in rows)
    print(f"{len(rows)} kernels: {differ} differ; with mbarrier arrays: tag check symbolic on {sym}, on the copies "
          f"(fallback) on {fell}; CPU s off {cpu_off:.1f}, on {cpu_on:.1f}")
    if args.json:
        meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                "load_avg": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "repeat": args.repeat, "argv": list(argv if argv is not None else sys.argv[1:])}
        with open(args.json, "w") as f:
            json.dump({**meta, "kernels": rows}, f, indent=1)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
