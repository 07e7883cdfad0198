"""Shared-memory banks: how many wavefronts a warp's access takes, and the per-lane order of a register tile's
vector stores that takes fewest.

The model is NVIDIA's: `banks` banks of `bank_bytes` bytes; a warp's accesses of `nbytes` a lane are served in
phases of banks * bank_bytes bytes' worth of lanes (8 lanes for 16-byte accesses, 16 for 8-byte, all for 4 bytes or
less), each phase as many wavefronts as the most distinct words one bank holds (lanes on one word share it).

A thread that stores G groups of values (one vector store each) may store them in any order. Where the value order
puts two lanes of one phase on one bank, a per-lane order can spread them: the lanes whose lane-id bit `bit` is set
store group g ^ d in the instruction where the others store group g (`turned`). `bank_turn` picks the (bit, d) with
the fewest wavefronts over all G instructions. The GPU render stores in that order (tilepy_hip.render.tiles) and
the verifier's bank check judges the order the render emits (tilepy_verify.checks.banks). Example: wgmma's f32
accumulator pairs into 128-byte swizzled rows, where rows r and r ^ 1 of a half-warp share a 16-byte chunk in value
order (2-way) and no bank is shared turned.
"""

from __future__ import annotations

import numpy as np


def wavefronts(addr, nbytes: int, banks: int = 32, bank_bytes: int = 4) -> int:
    """Wavefronts of one access instruction of `nbytes` a lane by every warp; addr [warp, lane] in bytes."""
    return _wavefronts(np.asarray(addr)[:, :, None], nbytes, banks, bank_bytes)


def _wavefronts(addr, nbytes: int, banks: int, bank_bytes: int) -> int:
    """Wavefronts of every instruction together: addr [warp, lane, instruction] in bytes."""
    W, L, n = addr.shape
    plen = max(1, banks * bank_bytes // max(nbytes, bank_bytes))
    nw = max(1, nbytes // bank_bytes)
    word = (addr // bank_bytes)[..., None] + np.arange(nw)                      # [W, L, I, words]
    phases = -(-L // plen)
    group = ((np.arange(W)[:, None, None, None] * phases + (np.arange(L) // plen)[None, :, None, None]) * n
             + np.arange(n)[None, None, :, None])                                # (warp, phase, instruction)
    key = (np.broadcast_to(group, word.shape) * banks + word % banks).ravel()    # ... and bank
    span = int(word.max()) + 1
    pairs = np.unique(key * span + word.ravel())                                 # distinct words of a bank
    keys, counts = np.unique(pairs // span, return_counts=True)
    worst = np.zeros(W * phases * n, dtype=np.int64)
    np.maximum.at(worst, keys // banks, counts)
    return int(worst.sum())


def turned(first, bit: int, d: int):
    """[warp, lane, instruction] byte addresses when the lanes with lane-id bit `bit` set store group g ^ d in the
    instruction where the others store group g (first: [warp, lane, group])."""
    lanes = np.arange(first.shape[1])
    g = np.arange(first.shape[2])
    pick = g[None, :] ^ (((lanes >> bit) & 1) * d)[:, None]          # [lane, instruction] -> group
    return np.take_along_axis(first, np.broadcast_to(pick, first.shape), axis=2)


def bank_turn(first, nbytes: int, banks: int = 32, bank_bytes: int = 4):
    """(bit, d): the per-lane order of G vector stores (`turned`) with the fewest wavefronts, if fewer than in value
    order; None otherwise (or where G is not a power of two, whose XOR would leave the groups).
    first: [warp, lane, group] byte address of each group's store in every lane."""
    groups, lanes = first.shape[2], first.shape[1]
    if groups < 2 or groups & (groups - 1):
        return None

    def cost(addr):
        return _wavefronts(addr, nbytes, banks, bank_bytes)

    base, best = cost(first), None
    for bit in range(max(1, lanes.bit_length() - 1)):
        for d in range(1, groups):
            c = cost(turned(first, bit, d))
            if c < base and (best is None or c < best[0]):
                best = (c, bit, d)
    return None if best is None else best[1:]
