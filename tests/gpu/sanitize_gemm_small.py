"""G8's new configurations of existing kernel forms on small ragged shapes, for compute-sanitizer: gemm_cluster with
64 x 128 tiles and one consumer warpgroup (CLUSTER_M=2: the 129-256-row skinny candidate), f32 out and bf16 out
through the TMA store, an odd number of M tiles (the grid rounded up to whole clusters), K not a multiple of BK;
gemm_splitk_swap (swap-AB split-K, FIXUP=3 slots) on ragged decode shapes; and splitk_sum at row blocks of 1 and 2
(the decode sum's candidates). With --sass: the cluster and swap kernels' SASS (HGMMA, no local memory).

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_small.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_small.py
(--kways: only G11's gemm_splitk_swap K_WAYS=2 cases: two consumer warpgroups over one tile, alternate k-tiles, the
hand-over through shared memory; unsplit / split / clusters / B as (N, K), odd k-tile counts, ragged M / N / K;
--clusterk: only G14's CLUSTER_K=2 cases, K split over a cluster's two blocks, summed through distributed shared memory;
--clusterk-small: only its pushed form below 17 rows, n8 / n16, and the policy there; --clusterk-stages: the
policy's split with 4 stages per ring at 32-80 rows and XCH at 105-128 rows, G23; --rowtiles: the policy's two
unsplit swap-AB row tiles at 81-256 rows, G27)
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

T = dict(BM=64, BN=128, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16, IN_FLIGHT=0, STAGES=6, SPLIT_K=1,
         CLUSTER_M=2)
d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)


def kways_cases():
    from stdlib_kernels import gemm_splitk_swap as gs

    i16, i32, i64 = tp.nv.wgmma_m64n16k16_bf16, tp.nv.wgmma_m64n32k16_bf16, tp.nv.wgmma_m64n64k16_bf16
    kw = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, BN=64, IN_FLIGHT=1, FIXUP=3, SPLIT_K=1)
    for (m, k, n), extra in (((45, 1100, 264), dict(BM=16, INSTR=i16, STAGES=8, CLUSTER_M=2)),   # 3 row tiles
                             ((30, 520, 2045), dict(BM=32, INSTR=i32, STAGES=4, SPLIT_K=2)),     # 9 k-tiles, padded B
                             ((100, 700, 300), dict(BM=64, INSTR=i64, STAGES=6, CLUSTER_M=2, IN_FLIGHT=0)),
                             ((13, 1000, 200), dict(BM=16, INSTR=i16, BN=128, STAGES=4, SPLIT_K=3)),
                             ((200, 300, 264), dict(BM=128, INSTR=tp.nv.wgmma_m64n128k16_bf16, STAGES=3)),  # 5 k-tiles
                             ((80, 520, 300), dict(BM=64, INSTR=i64, STAGES=4, M_SHIFT=1)),    # last tile shifted
                             ((100, 700, 264), dict(BM=64, INSTR=i64, STAGES=4, M_SHIFT=1, SPLIT_K=2))):
        a = torch.randn(m, k, device=d, generator=g).bfloat16()
        b = torch.randn(k, n, device=d, generator=g).bfloat16()
        ref = a.double() @ b.double()
        for out in (torch.float32, torch.bfloat16):
            c = torch.full((m, n), float("nan"), device=d, dtype=out)
            gemm_hopper.launch(a, b, c, **{**kw, **extra})
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            print("k_ways", m, k, n, out, extra, "rel err", err, flush=True)
            assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
    # the policy itself (A / B rows padded by the plan)
    for m, n, k in ((97, 2200, 1001), (120, 4095, 300), (32, 2048, 1100)):
        assert gemm_hopper.policy(m, n, k, tp.f32, fixup=True).get("K_WAYS") == 2
        a = torch.randn(m, k, device=d, generator=g).bfloat16()
        b = torch.randn(k, n, device=d, generator=g).bfloat16()
        ref = a.double() @ b.double()
        for out in (torch.float32, torch.bfloat16):
            c = torch.full((m, n), float("nan"), device=d, dtype=out)
            gemm_hopper.launch(a, b, c)
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            print("k_ways policy", m, n, k, out, "rel err", err, flush=True)
            assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
    m, k, n = 32, 600, 264      # B as (N, K), in clusters, bf16 out stored by the kernel
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    w = torch.randn(n, k, device=d, generator=g).bfloat16()
    c = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
    kp = gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], **kw, "BM": 16, "STAGES": 8, "CLUSTER_M": 2,
                                    "B_NK": 1, "INSTR": i16})
    gs.gemm_splitk_swap_nk_bf16[(2, gemm_hopper._cdiv(n, 64), 1)](a, w, c, torch.zeros(1, 1, device=d),
                                                                   torch.zeros(1, device=d, dtype=torch.int32),
                                                                   target="sm_90a", **kp)
    torch.cuda.synchronize()
    ref = a.double() @ w.double().T
    err = float((c.double() - ref).norm() / ref.norm())
    print("k_ways B_NK cluster rel err", err, flush=True)
    assert err < 4e-3, err


def cluster_k_cases(only_small=False):
    """G14's CLUSTER_K=2: K split over the two blocks of a cluster, rank 1's sum read by rank 0 through distributed
    shared memory (tp.load(..., cta=1)) between two cluster barriers; odd k-tile counts, ragged M / N / K, n48 / n80 /
    n104 tiles, the shifted last row tile, B as (N, K)."""
    from stdlib_kernels import gemm_splitk_swap as gs

    ins = {bm: getattr(tp.nv, f"wgmma_m64n{bm}k16_bf16") for bm in (8, 16, 32, 48, 64, 80, 104)}
    ck = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, BN=64, IN_FLIGHT=1, SPLIT_K=1, CLUSTER_K=2)
    # (G19, --clusterk-small: only the pushed split below 17 rows, n8 / n16, and the policy there)
    small = [((5, 1000, 264), 8, dict(STAGES=8, PUSH=1)),                  # n8: 3 of 8 rows past M, 16 k-tiles
             ((16, 1100, 2045), 16, dict(STAGES=8, PUSH=1))]               # 18 k-tiles, B rows padded
    for (m, k, n), bm, extra in small if only_small else [
                                 ((32, 1100, 264), 32, dict(STAGES=8)),      # 18 k-tiles: 10 per rank, zeros past K
                                 ((13, 520, 2045), 16, dict(STAGES=4)),      # 9 k-tiles, B rows padded
                                 ((45, 300, 200), 48, dict(STAGES=6)),
                                 ((80, 700, 130), 80, dict(STAGES=5)),
                                 ((100, 264, 300), 104, dict(STAGES=4)),     # 5 k-tiles: rank 1 reads 1 real + zeros
                                 ((130, 600, 200), 64, dict(STAGES=6, M_SHIFT=1)),
                                 # PUSH=1 (G19): the sums exchanged by st.async (tp.store_remote), no barrier after
                                 ((32, 1100, 264), 32, dict(STAGES=8, PUSH=1)),
                                 ((13, 520, 2045), 16, dict(STAGES=4, PUSH=1)),
                                 ((100, 264, 300), 104, dict(STAGES=4, PUSH=1)),
                                 ((130, 600, 200), 64, dict(STAGES=6, M_SHIFT=1, PUSH=1)), *small]:
        a = torch.randn(m, k, device=d, generator=g).bfloat16()
        b = torch.randn(k, n, device=d, generator=g).bfloat16()
        ref = a.double() @ b.double()
        for out in (torch.float32, torch.bfloat16):
            c = torch.full((m, n), float("nan"), device=d, dtype=out)
            gemm_hopper.launch(a, b, c, **{**ck, **extra, "BM": bm, "INSTR": ins[bm]})
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            print("cluster_k", m, k, n, bm, out, extra, "rel err", err, flush=True)
            assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
    # the policy itself (launch's: 17-128 rows, 32-64 k-tiles, 64-column tiles filling half a wave to one when split)
    for m, n, k in ((8, 2200, 1100), (16, 2200, 600)) if only_small else (
            (20, 2200, 3100), (33, 2200, 2050), (64, 2200, 3072), (100, 2200, 4100), (128, 4095, 4100), (8, 2200, 1100),
            (16, 2200, 600)):
        assert gemm_hopper.policy(m, n, k, tp.f32, fixup=True).get("CLUSTER_K") == 2
        a = torch.randn(m, k, device=d, generator=g).bfloat16()
        b = torch.randn(k, n, device=d, generator=g).bfloat16()
        ref = a.double() @ b.double()
        for out in (torch.float32, torch.bfloat16):
            c = torch.full((m, n), float("nan"), device=d, dtype=out)
            gemm_hopper.launch(a, b, c)
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            print("cluster_k policy", m, n, k, out, "rel err", err, flush=True)
            assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
    m, k, n = 32, 600, 264      # B as (N, K)
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    w = torch.randn(n, k, device=d, generator=g).bfloat16()
    c = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
    p = {**gemm_hopper.PRESETS["sm_90a"], **ck, "BM": 32, "STAGES": 8, "B_NK": 1, "INSTR": ins[32]}
    gs.gemm_splitk_swap_nk_bf16[gemm_hopper.grid_of(m, n, p)](a, w, c, torch.zeros(1, 1, device=d),
                                                               torch.zeros(1, device=d, dtype=torch.int32),
                                                               target="sm_90a", **gemm_hopper.kernel_params(p))
    torch.cuda.synchronize()
    err = float((c.double() - a.double() @ w.double().T).norm() / (a.double() @ w.double().T).norm())
    print("cluster_k B_NK rel err", err, flush=True)
    assert err < 4e-3, err


def cluster_split_stages_cases():
    """G23: the policy's cluster split with 4 stages per ring at BM 32-80 (CLUSTER_SPLIT_STAGES) and, at 105-128 rows,
    its pushed exchange in one tile (XCH=1): each ring turning over several times, odd k-tile counts, N not a multiple
    of 64."""
    for m, n, k in ((32, 2200, 3100), (72, 2200, 3100), (112, 2200, 3100), (120, 2200, 4100)):
        # (105-128 rows: the split's own form since G27, the policy there being two unsplit row tiles)
        given = gemm_hopper.cluster_split(m, n, k) if m > gemm_hopper.CLUSTER_SPLIT_MAX_M else {}
        p = {**gemm_hopper.policy(m, n, k, tp.f32, fixup=True), **given}
        assert p.get("CLUSTER_K") == 2 and p.get("PUSH") == 1 and p["STAGES"] == 4, p
        assert p.get("XCH", 0) == (m > 104), p     # (105-128 rows: the exchange in one tile)
        a = torch.randn(m, k, device=d, generator=g).bfloat16()
        b = torch.randn(k, n, device=d, generator=g).bfloat16()
        ref = a.double() @ b.double()
        for out in (torch.float32, torch.bfloat16):
            c = torch.full((m, n), float("nan"), device=d, dtype=out)
            gemm_hopper.launch(a, b, c, **given)
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            print("cluster split, 4 stages", m, n, k, out, "rel err", err, flush=True)
            assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err


def row_tiles_cases():
    """G27: the policy's two unsplit swap-AB row tiles at 81-256 rows (BM 48, 64 shifted, 80 / 96 / 112 with rows past
    M, 128 shifted): odd k-tile counts, N not a multiple of 64, K not a multiple of 64."""
    for m, n, k in ((88, 2200, 3100), (112, 2200, 3100), (136, 2200, 3100), (192, 2200, 1100), (200, 2200, 1001),
                    (250, 2200, 700)):
        p = gemm_hopper.policy(m, n, k, tp.f32, fixup=True)
        assert p.get("K_WAYS") == 2 and p.get("SPLIT_K", 1) == 1 and p.get("CLUSTER_K", 1) == 1, p
        a = torch.randn(m, k, device=d, generator=g).bfloat16()
        b = torch.randn(k, n, device=d, generator=g).bfloat16()
        ref = a.double() @ b.double()
        for out in (torch.float32, torch.bfloat16):
            c = torch.full((m, n), float("nan"), device=d, dtype=out)
            gemm_hopper.launch(a, b, c)
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            print("row tiles", m, n, k, out, p["BM"], p["STAGES"], p.get("M_SHIFT"), "rel err", err, flush=True)
            assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err


if "--rowtiles" in sys.argv:
    row_tiles_cases()
    print("ok")
    sys.exit(0)
if "--clusterk-stages" in sys.argv:
    cluster_split_stages_cases()
    print("ok")
    sys.exit(0)
if "--clusterk-small" in sys.argv:
    cluster_k_cases(only_small=True)
    print("ok")
    sys.exit(0)
if "--clusterk" in sys.argv:
    cluster_k_cases()
    print("ok")
    sys.exit(0)
if "--kways" in sys.argv:
    kways_cases()
    print("ok")
    sys.exit(0)
for m, k, n in ((200, 520, 264), (136, 200, 128)):
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out, epi in ((torch.float32, 0), (torch.bfloat16, 2), (torch.bfloat16, 0)):
        c = torch.full((m, n), float("nan"), device=d, dtype=out)
        gemm_hopper.launch(a, b, c, EPILOGUE=epi, **T)
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        print(m, k, n, out, "EPILOGUE", epi, "rel err", err, flush=True)
        assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
# swap-AB split-K (gemm_splitk_swap through launch: SWAP_AB=1, FIXUP=3): ragged M / N / K, B rows padded (N = 2045)
SW = dict(SWAP_AB=1, BM=16, BN=128, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n16k16_bf16, IN_FLIGHT=1, FIXUP=3, STAGES=11)
for (m, k, n), extra in (((13, 1000, 200), dict(SPLIT_K=3)), ((30, 520, 2045), dict(SPLIT_K=2, BN=64, CONSUMERS=1)),
                         ((64, 700, 264), dict(SPLIT_K=4, BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=8)),
                         ((30, 520, 300), dict(SPLIT_K=2, BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16, STAGES=10))):
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out in (torch.float32, torch.bfloat16):
        c = torch.full((m, n), float("nan"), device=d, dtype=out)
        gemm_hopper.launch(a, b, c, **{**SW, **extra})
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        print("swap", m, k, n, out, "rel err", err, flush=True)
        assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
# G10: swap-AB in 2x1 clusters of row tiles (B multicast), unsplit and split, an odd row-tile count; B as (N, K)
from stdlib_kernels import gemm_splitk_swap as gs  # noqa: E402

SWC = dict(SWAP_AB=1, IN_FLIGHT=1, FIXUP=3, SPLIT_K=1, CLUSTER_M=2, CONSUMERS=1, BN=64)
for (m, k, n), extra in (((45, 1100, 264), dict(BM=16, INSTR=tp.nv.wgmma_m64n16k16_bf16, STAGES=16)),
                         ((64, 520, 300), dict(BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16, STAGES=14, IN_FLIGHT=0)),
                         ((100, 700, 2045), dict(BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=12)),
                         ((40, 1000, 200), dict(BM=16, INSTR=tp.nv.wgmma_m64n16k16_bf16, STAGES=12, BN=128,
                                                CONSUMERS=2, SPLIT_K=2))):
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out in (torch.float32, torch.bfloat16):
        c = torch.full((m, n), float("nan"), device=d, dtype=out)
        gemm_hopper.launch(a, b, c, **{**SWC, **extra})
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        print("swap cluster", m, k, n, out, extra.get("SPLIT_K", 1), "rel err", err, flush=True)
        assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
m, k, n = 32, 600, 264
a = torch.randn(m, k, device=d, generator=g).bfloat16()
w = torch.randn(n, k, device=d, generator=g).bfloat16()
c = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
kp = gemm_hopper.kernel_params({**gemm_hopper.PRESETS["sm_90a"], **SWC, "BM": 16, "STAGES": 16, "B_NK": 1,
                                "INSTR": tp.nv.wgmma_m64n16k16_bf16})
gs.gemm_splitk_swap_nk_bf16[(2, gemm_hopper._cdiv(n, 64), 1)](a, w, c, torch.zeros(1, 1, device=d),
                                                               torch.zeros(1, device=d, dtype=torch.int32),
                                                               target="sm_90a", **kp)
torch.cuda.synchronize()
err = float((c.double() - a.double() @ w.double().T).norm() / (a.double() @ w.double().T).norm())
print("swap cluster B_NK rel err", err, flush=True)
assert err < 4e-3, err
# the lowering's form: B as (N, K), no cluster, split 4 into slots, summed by splitk_sum
m, k, n = 13, 1000, 264
a = torch.randn(m, k, device=d, generator=g).bfloat16()
w = torch.randn(n, k, device=d, generator=g).bfloat16()
c = torch.full((m, n), float("nan"), device=d)
p = {**gemm_hopper.PRESETS["sm_90a"], **SWC, "BM": 16, "BN": 128, "CONSUMERS": 2, "STAGES": 8, "CLUSTER_M": 1,
     "SPLIT_K": 4, "B_NK": 1, "INSTR": tp.nv.wgmma_m64n16k16_bf16}
kp = gemm_hopper.kernel_params(p)
ws = torch.empty(gemm_hopper.workspace_shapes(m, n, p)[0], device=d)
gs.gemm_splitk_swap_nk[gemm_hopper.grid_of(m, n, p)](a, w, torch.empty(m, n, device=d), ws,
                                                       torch.zeros(1, device=d, dtype=torch.int32), target="sm_90a",
                                                       **kp)
gemm_hopper.splitk_sum[(gemm_hopper._cdiv(m, 8), gemm_hopper._cdiv(n, 128))](ws, c, SPLIT_K=4)
torch.cuda.synchronize()
ref = a.double() @ w.double().T
err = float((c.double() - ref).norm() / ref.norm())
print("swap split B_NK rel err", err, flush=True)
assert err < 1e-5, err
# gemm_hopper with B as (N, K) (B_NK=1) at the decode / skinny split policies (the lowering's split-K Linear):
# atomics into the zeroed f32 output, ragged M / N / K
for m, n, k in ((48, 300, 1000), (100, 264, 520)):
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    w = torch.randn(n, k, device=d, generator=g).bfloat16()
    p = gemm_hopper.policy(m, n, k, tp.f32)
    assert p.get("SPLIT_K", 1) > 1, p
    c = torch.zeros(m, n, device=d)
    gemm_hopper.gemm_hopper_nk[gemm_hopper.grid_of(m, n, p)](a, w, c, target="sm_90a",
                                                             **gemm_hopper.kernel_params({**p, "B_NK": 1}))
    torch.cuda.synchronize()
    ref = a.double() @ w.double().T
    err = float((c.double() - ref).norm() / ref.norm())
    print("gemm_hopper B_NK split", m, n, k, p["SPLIT_K"], "rel err", err, flush=True)
    assert err < 1e-5, err
ws = torch.randn(4 * 64, 300, device=d, generator=g)
for br in (1, 2):
    c = torch.full((5, 300), float("nan"), device=d)
    gemm_hopper.splitk_sum[(gemm_hopper._cdiv(5, br), gemm_hopper._cdiv(300, 128))](ws, c, SPLIT_K=4, BR=br)
    torch.cuda.synchronize()
    ref = sum(ws[q * 64:q * 64 + 5].double() for q in range(4))
    err = float((c.double() - ref).abs().max())
    print("splitk_sum BR", br, "max err", err, flush=True)
    assert err < 1e-5, err
kways_cases()
if "--sass" in sys.argv:
    for out in (tp.f32, tp.bf16):
        kernel, kp = gemm_hopper.plan_kernel(200, 264, out, {**gemm_hopper.PRESETS["sm_90a"], **T,
                                                              "EPILOGUE": 2 if out == tp.bf16 else 0}, 520)
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        sass = ck.sass()
        print(kernel.name, out, "HGMMA" in sass, "LDL" in sass or "STL" in sass, ck.resources, flush=True)
        assert "HGMMA.64x128x16" in sass and "LDL" not in sass and "STL" not in sass
    for out in (tp.f32, tp.bf16):
        kernel, kp = gemm_hopper.plan_kernel(16, 4096, out, {**gemm_hopper.PRESETS["sm_90a"], **SW, "SPLIT_K": 4}, 4096)
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        sass = ck.sass()
        print(kernel.name, out, [ln.strip()[:90] for ln in sass.splitlines() if "HGMMA" in ln][:2],
              "LDL" in sass or "STL" in sass, ck.resources, flush=True)
        assert "HGMMA.64x16x16" in sass and "LDL" not in sass and "STL" not in sass
print("ok")
