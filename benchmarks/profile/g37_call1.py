"""G37 call 1 (issue 15, the bf16 small class; H100, rotated input sets): the role thread index as the renderer now
writes it (`new`: G33's unsigned form inline at each use outside loops, the hoisted `tp_tid - lo` inside them) against
the form before (`old`: `tp_tid - lo` hoisted everywhere), old / new alternated twice in one process on the rows it
touches (K_WAYS, the large persistent GEMM, skinny swap-AB, the small class); and SMALL_KWAYS_MIN_K_TILES 64 -> 32:
K_WAYS (both forms) against the relaxed cluster policy at 32-48 k-tiles, alternated twice. (Call 1 ran with that form
in every kernel, `g37_sass._outloop`; since, it is gemm_splitk_swap's alone, `@tp.kernel(unsigned_role_index=True)`,
so `new` here is the renderer's own form: only gemm_splitk_swap's rows differ from `old`.)

    python benchmarks/profile/g37_call1.py [--out DIR] [--precompile N]

Each row is `benchmarks/gemm.py`'s f32out_row (output checked against float64 first; graph median of 15 replays of 20
calls over rotated input sets, ours and cuBLAS alternated, the one-set figures beside). Between forms the compiled-
kernel memos are dropped so each launch renders and loads that form's kernel (the disk cache keeps both).
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT, ROOT / "benchmarks", ROOT / "benchmarks" / "profile"):
    sys.path.insert(0, str(p))

import g37_sass  # noqa: E402
import gemm as gb  # noqa: E402
import gemm_small_class as gsc  # noqa: E402
import torch  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402
from tilepy_hip.render import walk  # noqa: E402

tbuild = importlib.import_module("tilepy_hip.build")     # (the package exports functions of these names)
tlaunch = importlib.import_module("tilepy_hip.launch")
FORMS = {"old": g37_sass._signed, "new": g37_sass.ORIG}
KW = gsc.KW128x64
BF, F32 = "bf16", "f32"
AB = ("old", "new", "old", "new")
# (shape, out, [(tag, spec, form), ...] in the order run); spec as gemm_small_class.params_of (None: the policy)
ROWS = []
for shape, out in (((1024, 1024, 4096), BF), ((1024, 1024, 4096), F32), ((512, 2048, 4096), BF),
                   ((4096, 4096, 4096), BF), ((8192, 8192, 1024), BF), ((4096, 4096, 4096), F32),
                   ((64, 4096, 4096), BF), ((128, 4096, 4096), BF), ((1024, 1024, 1024), BF), ((512, 512, 512), BF)):
    ROWS.append((shape, out, [("policy", None, f) for f in AB]))
for shape, outs in (((1024, 1024, 2048), (BF, F32)), ((1024, 1024, 3072), (BF,)), ((512, 2048, 2048), (BF,))):
    for out in outs:
        one = [("policy", None, "new"), ("kw", KW, "new")] + ([("kw", KW, "old")] if out == BF else [])
        ROWS.append((shape, out, one + one))


def use(form):
    """Render with `form` from now on: the kernels' compiled memos and fast launch paths dropped."""
    walk.Renderer.role_tid = FORMS[form]
    tbuild._MEMO.clear()
    tlaunch._LAUNCHED.clear()
    for k in list(tlaunch._PREPARED):
        k.gpu_launch = None
    tlaunch._PREPARED.clear()
    gemm_hopper._PLANS.clear()


def _init(form):
    walk.Renderer.role_tid = FORMS[form]


def _items():
    by_form = {"old": {}, "new": {}}
    for (M, N, K), o, variants in ROWS:
        out = tp.bf16 if o == BF else tp.f32
        for _tag, spec, form in variants:
            p = gsc.params_of(M, N, K, spec, out)
            by_form[form][(M, N, K, o, repr(sorted(p.items())))] = (M, N, K, out, p)
    return {f: list(v.values()) for f, v in by_form.items()}


def precompile(workers):
    t = time.time()
    for form, items in _items().items():
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init,
                                 initargs=(form,)) as ex:
            errs = [e for e in ex.map(gb._build, items) if e]
        print(f"precompiled {len(items)} {form} kernels, {len(errs)} errors {errs[:3]}  +{time.time() - t:.1f} s",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--precompile", type=int, default=0)
    a = ap.parse_args()
    if a.precompile:
        precompile(a.precompile)
    props = torch.cuda.get_device_properties(0)
    dev = re.sub(r"[^A-Za-z0-9_.-]+", "_", props.name).strip("_")
    res = {"device": props.name, "torch": torch.__version__, "toolchain": tilepy_hip.toolchain_info()["nvidia"],
           "time": time.strftime("%Y-%m-%d %H:%M:%S"),
           "forms": {"old": "tp_tid - lo hoisted everywhere (HEAD before G37)",
                     "new": "(int)((unsigned)(tp_tid - lo) % size) inline outside loops, tp_tid - lo hoisted inside"},
           "timing": "benchmarks/gemm.py f32out_row: graph median of 15 replays of 20 calls, rotated input sets, ours "
                     "and cuBLAS alternated twice (better of two medians each); us_hot: one set",
           "rows": {}}
    path = Path(a.out) / f"gemm-g37-call1-{dev}.json"
    Path(a.out).mkdir(parents=True, exist_ok=True)
    mm_f32 = gb._mm_f32out()
    g = torch.Generator(device="cuda").manual_seed(37)
    for (M, N, K), o, variants in ROWS:
        key = f"{M}x{N}x{K}/{o}"
        runs = res["rows"].setdefault(key, [])
        out_t, out = (torch.bfloat16, tp.bf16) if o == BF else (torch.float32, tp.f32)
        for tag, spec, form in variants:
            try:
                use(form)
                p = gsc.params_of(M, N, K, spec, out)
                kernel, kp = gemm_hopper.plan_kernel(M, N, out, p, K)
                src = tilepy_hip.compile(kernel, target="sm_90a", **kp).source
                r0 = gb.f32out_row(M, N, K, g, mm_f32, out=out_t, params=p)
                r = {k: r0.get(k) for k in ("us", "torch_us", "ratio", "rel_err", "torch_rel_err", "registers",
                                            "spills", "input_sets", "us_hot", "torch_us_hot", "ratio_hot")}
                r.update(tag=tag, form=form, policy=gsc._text(p), unsigned_index="(unsigned)(tp_tid" in src)
            except Exception as e:  # noqa: BLE001 - say so, go on
                r = {"tag": tag, "form": form, "error": f"{type(e).__name__}: {str(e)[:300]}"}
                print(f"{key:22} {tag:7} {form:4} FAILED {r['error'][:200]}", flush=True)
                runs.append(r)
                continue
            runs.append(r)
            hot = f"[hot {r['us_hot']:.2f} x {r['ratio_hot']:.3f}]" if r.get("us_hot") else ""
            print(f"{key:22} {tag:7} {form:4} {r['us']:8.2f} us  cuBLAS {r['torch_us']:7.2f}  x {r['ratio']:.3f} {hot} "
                  f"err {r['rel_err']:.1e}  regs {r['registers']}/{r['spills']} uns={int(r['unsigned_index'])} "
                  f"{r['policy']}", flush=True)
            torch.cuda.empty_cache()
            path.write_text(json.dumps(res, indent=1))
    path.write_text(json.dumps(res, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
