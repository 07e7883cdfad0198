"""gemm_fp32's split-K policy (stdlib_kernels/gemm_fp32.py `policy`, what `launch` runs when the caller names no
tile): the blocks fill one wave of SMs, every share keeps >= MIN_SHARE k-tiles and none is empty; on the
interpreter the split product through `launch` matches float64 at fp32 accuracy on ragged M and a K that the
shares do not divide. Outputs are poisoned with NaN first."""

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_fp32


def _rel(c, ref):
    return float(np.linalg.norm(np.asarray(c, np.float64) - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("M,N,K,batch", [(128, 4096, 4096, 1), (64, 4096, 4096, 1), (256, 4096, 4096, 1),
                                         (1024, 1024, 1024, 1), (100, 300, 5000, 3), (256, 256, 131072, 1),
                                         (4096, 4096, 4096, 1), (128, 128, 200, 1)])
def test_policy_fills_one_wave_with_long_enough_shares(M, N, K, batch):
    p = gemm_fp32.PRESETS["sm_90a"]
    tiles = batch * -(-M // p["BM"]) * -(-N // p["BN"])
    kt = -(-K // p["BK"])
    ks = gemm_fp32.policy(M, N, K, batch).get("KSPLIT", 1)
    share = -(-kt // ks)
    assert tiles * ks <= max(tiles, gemm_fp32.SMS)             # never a second wave made by the split
    assert ks == 1 or share >= gemm_fp32.MIN_SHARE             # each share long enough to pay for itself
    assert (ks - 1) * share < kt                                 # no empty share
    if ks == 1:     # no split: the tiles fill the GPU, or K has too few k-tiles for two shares
        assert tiles * 2 > gemm_fp32.SMS or kt < 2 * gemm_fp32.MIN_SHARE
    else:           # and no room for another share within the wave and the share length
        assert tiles * (ks + 1) > gemm_fp32.SMS or -(-kt // (ks + 1)) < gemm_fp32.MIN_SHARE


def test_policy_values_at_the_benchmarked_shapes():
    assert gemm_fp32.policy(128, 4096, 4096) == {"KSPLIT": 4}     # 32 tiles x 4 shares of 32 k-tiles
    assert gemm_fp32.policy(1024, 1024, 1024) == {"KSPLIT": 2}    # 64 tiles x 2 of 16
    assert gemm_fp32.policy(4096, 4096, 4096) == {}


@pytest.mark.parametrize("b_layout", ["kn", "nk"])
@pytest.mark.parametrize("M,K,raw,ks", [(37, 1331, False, 4), (70, 1640, True, 4)])
def test_launch_runs_the_policy_split_and_matches_float64(monkeypatch, b_layout, M, K, raw, ks):
    """Ragged M, K not a multiple of the share (1331: 42 k-tiles in shares of 11, 11, 11, 9; 1640: 52 in shares of
    13), both the split form (K % 4 != 0) and A split in registers; a small `sms` makes the policy split (K past
    NARROW_KT k-tiles: a shorter K runs launch_policy's unsplit narrow tiles)."""
    monkeypatch.setattr(gemm_fp32, "SMS", 4)
    seen = []
    real = gemm_fp32.gemm_fp32.__getitem__

    class Spy:
        def __getitem__(self, grid):
            seen.append(grid)
            return real(grid)
    monkeypatch.setattr(gemm_fp32, "gemm_fp32", Spy())
    rng = np.random.default_rng(M + K)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, 90) if b_layout == "kn" else (90, K)).astype(np.float32)
    c = np.full((M, 90), np.nan, np.float32)
    assert gemm_fp32.policy(M, 90, K) == {"KSPLIT": ks}
    assert gemm_fp32.raw_ok(K) == raw
    gemm_fp32.launch(a, b, c, b_layout, SWAP=0)   # (an "nk" product this skinny swaps by default: test_gemm_fp32_swap)
    assert seen and seen[-1][2] == ks           # grid z = batch x KSPLIT
    ref = gemm_fp32.reference(a, b, b_layout)
    assert _rel(c, ref) < 3e-7
    f32 = a @ (b if b_layout == "kn" else b.T)
    assert np.abs(c - ref).max() <= 2 * np.abs(f32 - ref).max()


def test_a_named_tile_keeps_the_policy_out(monkeypatch):
    seen = []
    real = gemm_fp32.launch_split
    monkeypatch.setattr(gemm_fp32, "launch_split", lambda *a, **k: seen.append(k) or real(*a, **k))
    monkeypatch.setattr(gemm_fp32, "SMS", 4)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 600)).astype(np.float32)
    b = rng.standard_normal((600, 24)).astype(np.float32)
    c = np.full((40, 24), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, BK=32)
    assert "KSPLIT" not in seen[-1]
    assert _rel(c, gemm_fp32.reference(a, b)) < 3e-7


def test_launch_takes_64_wide_tiles_where_they_fill_the_wave_unsplit(monkeypatch):
    """launch_policy: where the split-K policy would split 128 x 128 tiles of a short K (<= 32 k-tiles) that as
    128 x 64 tiles fill >= 3/4 of a wave unsplit (1024^3 on 132 SMs; here 256 x 256 x 1024 on 8), launch runs
    those, no partial products; the lowering's policy keeps its split."""
    assert gemm_fp32.launch_policy(1024, 1024, 1024) == {"BN": 64, "INSTR": tp.nv.wgmma_m64n64k8_tf32, "TMA_ONLY": 1}
    assert gemm_fp32.launch_policy(128, 4096, 4096) == gemm_fp32.policy(128, 4096, 4096) == {"KSPLIT": 4}
    assert gemm_fp32.launch_policy(4096, 4096, 4096) == {}
    for longer_k in ((512, 2048, 2048), (256, 4096, 4096)):    # measured: the split wins there
        assert gemm_fp32.launch_policy(*longer_k) == gemm_fp32.policy(*longer_k) == {"KSPLIT": 2}
    monkeypatch.setattr(gemm_fp32, "SMS", 8)
    assert gemm_fp32.policy(256, 256, 1024) == {"KSPLIT": 2}
    seen = []
    real = gemm_fp32.launch_split
    monkeypatch.setattr(gemm_fp32, "launch_split", lambda *a, **k: seen.append(k) or real(*a, **k))
    rng = np.random.default_rng(9)
    a = rng.standard_normal((256, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 256)).astype(np.float32)
    c = np.full((256, 256), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, SWAP=0)       # (256 rows of a (K, N) b would swap: SWAP_ROWS)
    assert seen[-1]["BN"] == 64 and seen[-1].get("KSPLIT", 1) == 1
    ref = gemm_fp32.reference(a, b)
    assert _rel(c, ref) < 3e-7 and np.abs(c - ref).max() <= 2 * np.abs(a @ b - ref).max()


def test_launch_policy_takes_96_wide_tiles_where_their_waves_are_fuller():
    """launch_policy (G36): unsplit, 128 x 96 tiles (TMA_ONLY) where waves(96-wide tiles) x 96 <= WAVE_GAIN x
    waves(128-wide) x 128 on 132 SMs. Measured (H100, rotated, x SGEMM): 2051 x 2045 x 1000 1.62 -> 2.05, 1536^3 1.63
    -> 2.11; 2048^3 stays 128 wide (96 measured slower), as do the large shapes."""
    n96 = {"BN": 96, "INSTR": tp.nv.wgmma_m64n96k8_tf32, "TMA_ONLY": 1}
    assert gemm_fp32.launch_policy(768, 768, 768)["BN"] == 64          # 72 tiles 128 x 64: >= half a wave, unsplit
    for shape in ((512, 512, 512), (640, 640, 640)):                    # under half a wave: 64 x 64, one consumer
        assert gemm_fp32.launch_policy(*shape) == gemm_fp32.SMALL_64, shape
    for shape in ((2051, 2045, 1000), (1536, 1536, 1536), (3072, 3072, 1024), (1600, 1600, 1600)):
        assert gemm_fp32.launch_policy(*shape) == n96, shape
    for shape in ((2048, 2048, 2048), (3000, 5000, 4096), (4096, 4096, 4096), (8192, 8192, 8192),
                  (4096, 14336, 4096), (8192, 8192, 1024), (2304, 2304, 2304)):
        assert gemm_fp32.launch_policy(*shape) == {}, shape
    assert gemm_fp32.waves(272) == 3 and gemm_fp32.waves(374) == 3 and gemm_fp32.waves(132) == 1


def test_launch_runs_the_96_wide_tiles_and_matches_float64(monkeypatch):
    """Through launch on the interpreter with a pretended 4 SMs: 256 x 300 takes 6 tiles 128 wide (2 waves) or 8 tiles
    96 wide (2 waves, 192 <= 0.9 x 256): the 96-wide form, ragged N (300 = 3 x 96 + 12), TMA_ONLY, vs float64."""
    monkeypatch.setattr(gemm_fp32, "SMS", 4)
    seen = []
    real = gemm_fp32.launch_split
    monkeypatch.setattr(gemm_fp32, "launch_split", lambda *a, **k: seen.append(k) or real(*a, **k))
    rng = np.random.default_rng(96)
    a = rng.standard_normal((256, 200)).astype(np.float32)
    b = rng.standard_normal((200, 300)).astype(np.float32)
    c = np.full((256, 300), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, SWAP=0)
    assert seen[-1]["BN"] == 96 and seen[-1]["TMA_ONLY"] == 1 and seen[-1].get("KSPLIT", 1) == 1
    ref = gemm_fp32.reference(a, b)
    assert _rel(c, ref) < 3e-7 and np.abs(c - ref).max() <= 2 * np.abs(a @ b - ref).max()


@pytest.mark.parametrize("params", [
    dict(BN=96, INSTR=tp.nv.wgmma_m64n96k8_tf32, TMA_ONLY=1), gemm_fp32.SMALL_64,
    dict(BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32, TMA_ONLY=1),
])
def test_launch_policy_forms_verify_clean(params):
    """The forms launch_policy takes (A split in registers, 4 stages, TMA_ONLY copies): clean, fast."""
    from verify_budget import assert_within_budget, cpu_seconds

    import tilepy_verify as tv

    kp = {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW, **params}

    def run():
        gemm_fp32.gemm_fp32._cache.clear()
        return cpu_seconds(lambda: tv.verify(gemm_fp32.gemm_fp32, target="sm_90a", **kp))

    took, report = run()
    assert report.ok and not report.findings, str(report)
    assert_within_budget(took, lambda: run()[0], str(params))


def test_launch_runs_64x64_tiles_for_a_short_k_under_half_a_wave(monkeypatch):
    """A short K (<= NARROW_KT k-tiles) that the split-K policy would split and whose 128 x 64 tiles fill less than
    half a wave runs unsplit 64 x 64 tiles of one consumer warpgroup (SMALL_64; 512^3 on 132 SMs, here 130 x 100 x
    200 on a pretended 16: 3 x 2 = 6 tiles 128 x 64 < 8, 3 x 2 = 6 of 64 x 64 <= 32), ragged M / N, vs float64."""
    monkeypatch.setattr(gemm_fp32, "SMS", 16)
    assert gemm_fp32.policy(130, 100, 520).get("KSPLIT", 1) > 1
    assert gemm_fp32.launch_policy(130, 100, 520) == gemm_fp32.SMALL_64
    seen = []
    real = gemm_fp32.launch_split
    monkeypatch.setattr(gemm_fp32, "launch_split", lambda *a, **k: seen.append(k) or real(*a, **k))
    rng = np.random.default_rng(64)
    a = rng.standard_normal((130, 520)).astype(np.float32)
    b = rng.standard_normal((520, 100)).astype(np.float32)
    c = np.full((130, 100), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, SWAP=0)
    assert (seen[-1]["BM"], seen[-1]["BN"], seen[-1]["CONSUMERS"]) == (64, 64, 1) and seen[-1].get("KSPLIT", 1) == 1
    ref = gemm_fp32.reference(a, b)
    assert _rel(c, ref) < 3e-7 and np.abs(c - ref).max() <= 2 * np.abs(a @ b - ref).max()
