"""G33: the SASS of gemm_splitk_swap K_WAYS=2 (128 x 64 tiles of C, two consumers on alternate k-tiles) unclustered
and in clusters (CLUSTER_N: column tiles sharing A by multicast; CLUSTER_M: row tiles sharing B), with the relaxed
coupling and the full cluster barriers: registers, spills, HGMMA, the multicast copies, MEMBAR.ALL.GPU (the release
of a non-relaxed cluster barrier), UCGABAR (cluster barrier arrive / wait), remote mbarrier arrivals (SYNCS with a
cluster address), LDL / STL; and tilepy-verify's findings and CPU time. sm_90a, compiled on the host (no GPU).

    python benchmarks/profile/g33_sass.py
"""

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
import tilepy_verify as tv  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, IN_FLIGHT=1, SPLIT_K=1, STAGES=4, BM=128, BN=64,
          INSTR=tp.nv.wgmma_m64n128k16_bf16)
FORMS = {"kw": KW, "kw_cn2_rel": dict(KW, CLUSTER_N=2, RELAXED=1), "kw_cn2": dict(KW, CLUSTER_N=2),
         "kw_cn2_rel_w0": dict(KW, CLUSTER_N=2, RELAXED=1, IN_FLIGHT=0), "kw_cn4_rel": dict(KW, CLUSTER_N=4, RELAXED=1),
         "kw_cm2_rel": dict(KW, CLUSTER_M=2, RELAXED=1), "kw_cm2": dict(KW, CLUSTER_M=2)}


def main():
    for name, p in FORMS.items():
        for out in (tp.bf16, tp.f32):
            kernel, kp = gemm_hopper.plan_kernel(1024, 1024, out, p, 4096)
            ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
            sass = ck.sass()
            res = ck.resources
            count = {k: len(re.findall(rx, sass)) for k, rx in (
                ("MEMBAR.ALL.GPU", r"MEMBAR\.ALL\.GPU"), ("UCGABAR", r"\bUCGABAR_\w+"),
                ("MULTICAST", r"UTMALDG\.\w+\.MULTICAST"), ("UTMALDG", r"\bUTMALDG\b"),
                ("remote SYNCS", r"SYNCS\.ARRIVE\.TRANS64\.RED\.A1T0"), ("LDL/STL", r"\b(?:LDL|STL)\b"))}
            mma = sorted(set(re.findall(r"\bHGMMA\.[\w.]+", sass)))
            t = time.process_time()
            rep = tv.verify(kernel, target="sm_90a", **kp)
            dt = time.process_time() - t
            print(f"{name:14} {str(out):8} regs {res.get('registers')} spills {res.get('spill_stores', 0)} {mma} "
                  f"{count} | verify {dt:.2f} s CPU, {len(rep.findings)} findings", flush=True)
            for f in rep.findings:
                print("   ", f.check, f.message[:160])


if __name__ == "__main__":
    main()
