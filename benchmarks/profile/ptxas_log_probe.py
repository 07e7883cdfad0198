"""The intermittent `KeyError: 'spill_stores'` of GPU SASS tests (a build's resources without ptxas's spill line):
compile test_cluster_k_sass's ten kernels through the NVIDIA toolchain in many processes at once, fresh each time,
and print any log whose `-v` lines lack the stack / spill line.

    python benchmarks/profile/ptxas_log_probe.py [processes] [rounds]
"""

import multiprocessing as mp
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def sources():
    import tilepy as tp
    import tilepy_hip
    from stdlib_kernels import gemm_hopper
    src = (Path(__file__).resolve().parents[2] / "tests" / "gpu" / "test_gpu_gemm_small.py").read_text()
    ns = {}
    line = src[src.index("KW = "):src.index("\n", src.index("KW = "))]
    exec(line, {"tp": tp, "gemm_hopper": gemm_hopper}, ns)
    ck_p = dict(ns["KW"], CLUSTER_K=2)
    out = []
    for extra in (dict(BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16, STAGES=8),
                  dict(BM=80, INSTR=tp.nv.wgmma_m64n80k16_bf16, STAGES=5),
                  dict(BM=128, INSTR=tp.nv.wgmma_m64n128k16_bf16, STAGES=4),
                  dict(BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16, STAGES=8, PUSH=1),
                  dict(BM=104, INSTR=tp.nv.wgmma_m64n104k16_bf16, STAGES=4, PUSH=1)):
        for o in (tp.f32, tp.bf16):
            kernel, kp = gemm_hopper.plan_kernel(64, 4096, o, {**gemm_hopper.PRESETS["sm_90a"], **ck_p, **extra}, 4096)
            out.append(tilepy_hip.compile(kernel, target="sm_90a", **kp).source)
    return out


def one(args):
    i, source = args
    from tilepy_hip import toolchains
    from tilepy_hip.render import get_render_target
    tool = toolchains.nvidia_compiler()
    rt = get_render_target("sm_90a")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"k{i}.cu"
        path.write_text(source)
        built = tool.compile(source, path, rt)
    ok = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", built.log)
    return i, bool(ok), built.log if not ok else ""


if __name__ == "__main__":
    procs = int(sys.argv[1]) if sys.argv[1:] else 14
    rounds = int(sys.argv[2]) if sys.argv[2:] else 3
    srcs = sources()
    bad = 0
    with mp.get_context("spawn").Pool(procs) as pool:
        for r in range(rounds):
            for i, ok, log in pool.imap_unordered(one, [(j, s) for j in range(procs) for s in srcs]):
                if not ok:
                    bad += 1
                    print(f"round {r} build {i}: no spill line; log:\n{log[:3000]}\n---", flush=True)
    print(f"{bad} of {rounds * procs * len(srcs)} builds without the spill line")
