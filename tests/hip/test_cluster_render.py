"""Thread-block clusters on sm_90a: the kernel carries __cluster_dims__, a multicast copy is one
`cp.async.bulk.tensor ... .multicast::cluster` per column block issued by the rank `by` after every block's
expect_tx, a remote release is mapa + a shared::cluster arrive per warp (the mbarrier counts warps), the cluster
barrier is barrier.cluster.arrive/wait; the launch rounds the grid up to whole clusters; gemm_cluster's SASS has
HGMMA, UTMALDG.2D.MULTICAST and no local memory."""

import re

import pytest

import tilepy_hip
from stdlib_kernels import gemm_hopper
from tilepy_hip import build
from tilepy_hip.prepared import PreparedLaunch
from tilepy_hip.render import render_kernel

needs_sass = pytest.mark.skipif(
    build.nvidia_compiler() is None or build.find_cuobjdump() is None, reason="no NVRTC/cuobjdump here"
)


def test_gemm_cluster_renders_clusters_multicast_and_remote_releases():
    src, _, maps = render_kernel(gemm_hopper.gemm_cluster.ir())
    assert "__cluster_dims__(2, 1, 1) __launch_bounds__(384)" in src
    assert src.count("tp_cluster_sync();") == 2
    assert src.count("tp_tma_load_2d_mc(") == 4                 # B: four 64-column blocks, multicast
    assert re.search(r"if \(tp_cluster_rank\(\) == \(tp_mod<int>\(k, 2\)\)\)", src)
    assert "tp_mbar_init(empty_p + tp_tid, 16);" in src          # 2 blocks x 8 consumer warps
    assert "__syncwarp();" in src and "if (tp_lane == 0) tp_mbar_arrive_cluster(" in src
    assert [m.required for m in maps] == [False, True]           # B's map is TMA-only (no fallback path)


def test_launch_rounds_the_grid_to_whole_clusters():
    ck = type("CK", (), {"kir": gemm_hopper.gemm_cluster.ir()})()
    prep = object.__new__(PreparedLaunch)
    prep.ck, prep.grids = ck, {}
    assert prep.grid_dims((3, 5)) == (4, 5, 1)
    assert prep.grid_dims((4, 5)) == (4, 5, 1)


@needs_sass
def test_gemm_cluster_sass():
    for k, extra in ((gemm_hopper.gemm_cluster, {}), (gemm_hopper.gemm_cluster_bf16, dict(STAGES=3, EPILOGUE=2))):
        ck = tilepy_hip.compile(k, target="sm_90a", **extra)
        sass = ck.sass()
        assert "HGMMA.64x256x16.F32.BF16" in sass
        assert sass.count("UTMALDG.2D.MULTICAST") == 4 and "UCGABAR_ARV" in sass and "UCGABAR_WAIT" in sass
        assert not re.search(r"\b(LDL|STL)\b", sass)
        assert ck.resources["spill_stores"] == 0 and ck.resources["stack_bytes"] == 0


def _k_loop(sass: str) -> list:
    """The SASS lines of the consumers' k-loop: from the target of the backward branch after the last HGMMA to
    that branch."""
    lines = sass.splitlines()
    addr = [int(m.group(1), 16) if (m := re.search(r"/\*([0-9a-f]{4,})\*/", s)) else None for s in lines]
    last = max(i for i, s in enumerate(lines) if "HGMMA" in s)
    first = min(i for i, s in enumerate(lines) if "HGMMA" in s)
    for i in range(last, len(lines)):
        m = re.search(r"\bBRA (0x[0-9a-f]+)", lines[i])
        if m and int(m.group(1), 16) <= addr[first]:
            head = next(j for j in range(len(lines)) if addr[j] == int(m.group(1), 16))
            return lines[head:i + 1]
    raise AssertionError("no backward branch after the HGMMAs")


@needs_sass
def test_large_bf16_policy_keeps_local_memory_out_of_the_k_loop():
    """The large class's bf16-out policy (setmaxnreg 64 / 216): no local memory in the consumers' k-loop (a
    40-register producer made ptxas spill a scalar reloaded every k-tile)."""
    p = gemm_hopper.kernel_params(gemm_hopper.policy(4096, 4096, 4096, out=gemm_hopper.tp.bf16))
    assert (p["PRODUCER_REGS"], p["CONSUMER_REGS"]) == (64, 216)
    ck = tilepy_hip.compile(gemm_hopper.gemm_hopper_bf16, target="sm_90a", **p)
    loop = _k_loop(ck.sass())
    assert any("HGMMA.64x256x16.F32.BF16" in s for s in loop)
    assert not [s for s in loop if re.search(r"\b(LDL|STL)\b", s)]
