"""G37: forms of the role-relative thread index (tilepy_hip.render.walk.Renderer.role_tid) against the kernels they
touch: the large persistent / grouped bf16 GEMM (G33's unsigned form spilled 76 bytes there) and the small class's
K_WAYS (where the unsigned form took 0.8-1.3 us off the hand-over and C^T store). Per form and kernel: registers,
spill bytes, LDL / STL, SASS instruction count. sm_90a, compiled on the host (no GPU). Forms: `signed` (before G37),
`g33` (hoisted unsigned), `inline` (unsigned at each use), `outloop` (unsigned outside loops, signed inside: what G37's
call 1 timed in every kernel), `renderer` (the renderer's own: `outloop` in kernels declared unsigned_role_index,
`signed` elsewhere).

    python benchmarks/profile/g37_sass.py [--forms signed,g33,...] [--kernels large,pers,...]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402
from tilepy_hip.render import walk  # noqa: E402

ORIG = walk.Renderer.role_tid     # the renderer's own form (G37: `outloop` below)


def _signed(self, lo, size):
    """The form before G37 (and before G33): `tp_tid - lo`, hoisted, everywhere."""
    return self.hoist(f"tp_tid - {lo}", stem="rt") if lo else "tp_tid"


def _g33(self, lo, size):
    return self.hoist(f"(int)((unsigned)(tp_tid - {lo}) % {size}u)", stem="rt") if lo else "tp_tid"


def _inline(self, lo, size):
    return f"((int)((unsigned)(tp_tid - {lo}) % {size}u))" if lo else "tp_tid"


def _outloop(self, lo, size):
    """The unsigned form inline outside loops (epilogues, hand-overs), the signed hoisted one inside them."""
    return _signed(self, lo, size) if self.ctx.loop_depth else _inline(self, lo, size)


FORMS = {"signed": _signed, "renderer": ORIG, "g33": _g33, "inline": _inline, "outloop": _outloop}


def kernels():
    out = {}
    p = {**gemm_hopper.policy(4096, 4096, 4096, tp.bf16), "GROUP_M": 16}
    out["large"] = (4096, 4096, 4096, tp.bf16, p)
    out["pers"] = (4096, 4096, 4096, tp.bf16, gemm_hopper.policy(4096, 4096, 4096, tp.bf16, fixup=True))
    out["pers_8k1k"] = (8192, 8192, 1024, tp.bf16, gemm_hopper.policy(8192, 8192, 1024, tp.bf16, fixup=True))
    out["pers_f32"] = (4096, 4096, 4096, tp.f32, gemm_hopper.policy(4096, 4096, 4096, tp.f32, fixup=True))
    out["kw"] = (1024, 1024, 4096, tp.bf16, gemm_hopper.policy(1024, 1024, 4096, tp.bf16, fixup=True))
    out["kw_f32"] = (1024, 1024, 4096, tp.f32, gemm_hopper.policy(1024, 1024, 4096, tp.f32, fixup=True))
    out["small_cl"] = (1024, 1024, 1024, tp.bf16, gemm_hopper.policy(1024, 1024, 1024, tp.bf16, fixup=True))
    from stdlib_kernels import gemm_fp32

    for shape in ((1024, 1024, 1024), (2051, 2045, 1000)):
        out[f"fp32_{shape[0]}"] = ("fp32", gemm_fp32.gemm_fp32, {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW,
                                                             **gemm_fp32.launch_policy(*shape)})
    out["small512"] = (512, 512, 512, tp.bf16, gemm_hopper.policy(512, 512, 512, tp.bf16, fixup=True))
    return out


def measure(form, name, spec):
    walk.Renderer.role_tid = FORMS[form]
    try:
        if spec[0] == "fp32":
            kernel, kp = spec[1], spec[2]
        else:
            M, N, K, out, p = spec
            kernel, kp = gemm_hopper.plan_kernel(M, N, out, p, K)
        ck = tilepy_hip.compile(kernel, target="sm_90a", force=True, **kp)
        sass = ck.sass()
    finally:
        walk.Renderer.role_tid = ORIG
    res = ck.resources
    n_ins = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, re.M))
    ldst = len(re.findall(r"\b(?:LDL|STL)\b", sass))
    return (f"{name:10} {form:8} regs {res.get('registers')} spill {res.get('spill_stores', 0)}/"
            f"{res.get('spill_loads', 0)} LDL/STL {ldst} instr {n_ins} hgmma {sass.count('HGMMA')}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--kernels", default=None)
    ap.add_argument("--sweep", action="store_true", help="every GEMM / attention kernel the policies pick")
    a = ap.parse_args()
    if a.sweep:
        sweep(a.forms.split(","))
        return
    ks = kernels()
    names = a.kernels.split(",") if a.kernels else list(ks)
    for name in names:
        for form in a.forms.split(","):
            print(measure(form, name, ks[name]), flush=True)



# ------------------------------------------------------------------------------------------------ the sweep
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (4096, 14336, 4096), (4096, 4096, 14336),
          (16, 4096, 4096), (32, 4096, 4096), (64, 4096, 4096), (96, 4096, 4096), (128, 4096, 4096),
          (256, 4096, 4096), (128, 14336, 4096), (1024, 1024, 1024), (512, 512, 512), (768, 768, 768),
          (1024, 1024, 4096), (512, 2048, 4096), (1024, 1024, 2048), (2048, 1024, 1024), (1536, 1536, 1536),
          (2051, 2045, 1000), (3000, 5000, 4096), (1000, 1000, 4096), (2048, 512, 4096)]


def sweep_items():
    """{key: (kernel, constexprs)} of the GEMM / attention kernels the policies pick over SHAPES (deduplicated)."""
    from stdlib_kernels import attention, gemm_fp8, gemm_fp32

    items = {}

    def add(kernel, kp):
        key = (kernel.name if hasattr(kernel, "name") else repr(kernel), tuple(sorted((k, repr(v)) for k, v in
                                                                                      kp.items())))
        items.setdefault(key, (kernel, kp))

    for M, N, K in SHAPES:
        for out in (tp.bf16, tp.f32):
            for fixup in (True, False):
                try:
                    p = gemm_hopper.policy(M, N, K, out, fixup=fixup)
                    add(*gemm_hopper.plan_kernel(M, N, out, p, K))
                except Exception as e:  # noqa: BLE001
                    print("skip hopper", M, N, K, out, fixup, e)
        K16 = -(-K // 16) * 16
        try:
            add(*gemm_fp8.kernel_of(gemm_fp8.params_for(M, N, K16)))
        except Exception as e:  # noqa: BLE001
            print("skip fp8", M, N, K16, e)
        try:
            add(gemm_fp32.gemm_fp32, {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW,
                                      **gemm_fp32.launch_policy(M, N, K)})
        except Exception as e:  # noqa: BLE001
            print("skip fp32", M, N, K, e)
    for M in (16, 64, 128):
        add(gemm_fp32.gemm_fp32_ct, gemm_fp32.swap_params(M, 4096, 4096))
        add(gemm_fp32.gemm_fp32_kt, gemm_fp32.swap_params(M, 4096, 4096, b_layout="kn"))
    for d in (64, 128):
        for sq in (512, 4096):
            for causal in (False, True):
                add(attention.attention_fwd, {"FALLBACK": False, **attention.policy(d, sq, causal), "GROUP": 1})
    return items


def sweep(forms):
    rows = []
    for (name, kps), (kernel, kp) in sweep_items().items():
        got = {}
        for form in forms:
            walk.Renderer.role_tid = FORMS[form]
            try:
                ck = tilepy_hip.compile(kernel, target="sm_90a", force=True, **kp)
                sass = ck.sass()
                got[form] = (ck.resources.get("registers"), ck.resources.get("spill_stores", 0),
                             len(re.findall(r"\b(?:LDL|STL)\b", sass)),
                             len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, re.M)))
            except Exception as e:  # noqa: BLE001
                got[form] = ("ERR", str(e)[:80])
            finally:
                walk.Renderer.role_tid = ORIG
        more = any(isinstance(v[1], int) and v[1] > got[forms[0]][1] for v in got.values())
        flag = "  <-- spills more" if more else ""
        short = ",".join(f"{k}={v}" for k, v in kps if k in ("BM", "BN", "STAGES", "CONSUMERS", "K_WAYS", "SWAP_AB",
                                                                 "PERSISTENT", "CLUSTER_M", "SPLIT_K", "EPILOGUE"))
        line = f"{name:28} {short:60} " + "  ".join(f"{f}: {got[f]}" for f in forms) + flag
        print(line, flush=True)
        rows.append(line)
    return rows


if __name__ == "__main__":
    main()
