"""gemm_streamk (stdlib_kernels/gemm_streamk.py) on the GPU: stream-K shares with the in-kernel fix-up, against
float64 on random inputs (outputs poisoned with NaN first), f32 and bf16 out, ragged shapes, a grid smaller
than the tiles, repeated calls (the workspace and tickets must come back to zero), and the SASS (HGMMA, no local
memory). Skips without a CUDA GPU."""

import re

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
if torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("gemm_streamk is an sm_90a kernel (wgmma, TMA)", allow_module_level=True)

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_streamk as sk  # noqa: E402

CASES = [  # (M, N, K, preset, num_sms)
    (16, 4096, 4096, "narrow", None),
    (64, 1024, 2048, "narrow", None),
    (130, 1000, 1032, "wide", None),      # ragged M, N and K; 8 x 8 tiles of 17 k-tiles over 132 blocks
    (256, 4096, 4096, "wide", None),
    (1024, 1024, 1024, "narrow", None),
    (300, 264, 520, "narrow", 7),         # a grid of 7 blocks: long shares, tiles split 2-3 ways
    (1000, 1000, 200, "wide", 132),       # fewer k-tiles (4) than blocks per tile: every block in a fix-up
]


def _rel(c, ref):
    assert not torch.isnan(c).any(), "an output element was never written"
    return float((c.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("m,n,k,preset,sms", CASES)
@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
def test_streamk_matches_float64(m, n, k, preset, sms, out):
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device="cuda", dtype=out)
    sk._PLANS.clear()
    for call in range(3):   # the fix-up leaves workspace and tickets zero: later calls are right too
        c.fill_(float("nan"))
        if call == 2:       # fresh inputs through the same plan (the workspace was reused twice)
            a.copy_(torch.randn(m, k, device="cuda", generator=g))
            ref = a.double() @ b.double()
        sk.launch(a, b, c, num_sms=sms, **sk.PRESETS[preset])
        torch.cuda.synchronize()
        err = _rel(c, ref)
        assert err < (4e-3 if out == torch.bfloat16 else 1e-5), (call, err)
    (plan,) = sk._PLANS.values()
    ws, locks = next(iter(plan.bufs.values()))
    assert int(locks.abs().sum()) == 0   # (the slots of FIXUP=1 keep their parts; FIXUP=0 zeroes its sums)
    assert plan.params.get("FIXUP", 1) == 1 or float(ws.abs().sum()) == 0.0


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
def test_streamk_reduce_matches_float64(out):
    """FIXUP=2: the parts added into an f32 C zeroed first (split-K's reduction), twice."""
    m, n, k = 130, 1000, 1032
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
    ref = a.double() @ b.double()
    for _ in range(2):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=out)
        sk.launch(a, b, c, **{**sk.PRESETS["narrow"], "FIXUP": 2})
        torch.cuda.synchronize()
        assert _rel(c, ref) < (4e-3 if out == torch.bfloat16 else 1e-5)


@pytest.mark.parametrize("preset", ["narrow", "wide"])
@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
def test_streamk_sass_hgmma_no_local_memory(preset, out):
    ck = tilepy_hip.compile(sk.KERNELS[out], target="sm_90a", **sk.PRESETS[preset])
    sass = ck.sass() if callable(ck.sass) else ck.sass
    assert re.search(r"\bHGMMA\.64x128x16", sass), "no wgmma in the SASS"
    assert not re.search(r"\b(LDL|STL)\b", sass), "local memory (spills) in the SASS"
    assert ck.resources.get("spill_stores", 0) == 0 and ck.resources.get("stack_bytes", 0) == 0
