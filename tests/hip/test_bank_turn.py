"""The renderer's per-lane order of a register tile's vector stores into shared memory (tiles.bank_turn): the bank
model against hand-built addresses of wgmma's f32 accumulator pairs in 128-byte swizzled rows (2-way in order,
conflict-free turned, every lane still storing each of its addresses once), None where the order does not matter,
and the f32-out persistent GEMM rendered with the turn where the bf16-out one has none. Host only (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_hopper
from tilepy.banks import bank_turn, turned, wavefronts
from tilepy_hip.render import render_source


def accumulator_pairs(swizzle: bool, warps: int = 4, cols: int = 32):
    """[warp, lane, group] byte addresses of the 8-byte stores of a (16 * warps, cols) f32 tile from wgmma's
    accumulator layout (lane l: rows l // 4 and l // 4 + 8 of its warp's 16, columns 2 (l % 4) + 8 j), the tile's
    rows of cols f32, 16-byte chunks XOR-swizzled by the row (128-byte swizzle) or not."""
    out = np.zeros((warps, 32, 2 * (cols // 8)), np.int64)
    for w in range(warps):
        for lane in range(32):
            for h in range(2):
                for j in range(cols // 8):
                    row, col = 16 * w + lane // 4 + 8 * h, 2 * (lane % 4) + 8 * j
                    byte = col * 4
                    chunk = byte // 16 ^ (row % 8) if swizzle else byte // 16
                    out[w, lane, h * (cols // 8) + j] = row * cols * 4 + chunk * 16 + byte % 16
    return out


def test_the_swizzled_f32_pairs_are_two_way_in_order_and_conflict_free_turned():
    first = accumulator_pairs(swizzle=True)
    warps, _, groups = first.shape
    least = warps * 2        # 32 lanes x 8 bytes: two 128-byte wavefronts an instruction at best
    in_order = sum(wavefronts(first[:, :, g], 8) for g in range(groups))
    assert in_order == 2 * least * groups
    turn = bank_turn(first, 8)
    assert turn is not None
    addr = turned(first, *turn)
    assert sum(wavefronts(addr[:, :, i], 8) for i in range(groups)) == least * groups
    for w in range(warps):        # each lane stores exactly its own addresses, once each
        for lane in range(32):
            assert sorted(addr[w, lane]) == sorted(first[w, lane])


def test_no_turn_where_the_order_does_not_matter():
    first = accumulator_pairs(swizzle=False, cols=8)      # 32-byte rows: a half-warp's 4 rows fill 128 bytes
    assert sum(wavefronts(first[:, :, g], 8) for g in range(first.shape[2])) == 2 * first.shape[0] * first.shape[2]
    assert bank_turn(first, 8) is None


def test_wavefronts_counts_distinct_words_of_one_bank():
    same_word = np.zeros((1, 32), np.int64)               # a broadcast: one wavefront
    assert wavefronts(same_word, 4) == 1
    stride_128 = (np.arange(32) * 128)[None, :]           # every lane in bank 0, distinct words: 32-way
    assert wavefronts(stride_128, 4) == 32


def _render(out):
    M, N, K = 8192, 8192, 1024
    kernel, kp = gemm_hopper.plan_kernel(M, N, out, gemm_hopper.policy(M, N, K, out, fixup=True), K)
    return render_source(kernel.ir("sm_90a", **kp), "sm_90a")[0]


@pytest.mark.parametrize("out, expect", [(tp.f32, True), (tp.bf16, False)])
def test_the_persistent_gemm_turns_only_its_f32_pieces(out, expect):
    assert ("(tp_lane >> " in _render(out)) is expect


def _wavefronts_by_lane(addr, nbytes):
    """The bank model written out lane by lane (an independent reference for the vectorized count)."""
    phase, words, total = max(1, 128 // max(nbytes, 4)), max(1, nbytes // 4), 0
    for w in range(addr.shape[0]):
        for p0 in range(0, addr.shape[1], phase):
            per_bank: dict = {}
            for x in addr[w, p0:p0 + phase] // 4:
                for k in range(words):
                    per_bank.setdefault(int(x + k) % 32, set()).add(int(x + k))
            total += max(len(v) for v in per_bank.values())
    return total


@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_wavefronts_match_the_lane_by_lane_model(nbytes):
    rng = np.random.default_rng(nbytes)
    for _ in range(50):
        addr = rng.integers(0, 512, size=(3, 32)) * nbytes         # aligned accesses over 4-8 KB
        assert wavefronts(addr, nbytes) == _wavefronts_by_lane(addr, nbytes)
