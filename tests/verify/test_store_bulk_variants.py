"""Soundness of the bulk-store read's end (checks/race.py `_bulk_store_pair`): a family of all-threads loops that
write a shared output tile (one, or two alternating), store it with tp.store_bulk and wait for the store's read
at some point under some uniform guard, run on the interpreter. Whatever it shows (a tile stored with another
tile's values, or the trace oracle's race between the store's read, which the interpreter makes at the wait, and
another thread's write) the verifier reports as a race, and where the interpreter shows nothing on 6 and 7 tiles
the verifier reports nothing: on all 24 variants the two agree (before the read's end was taken from any wait of
the issuing thread after the issue, 4 of the correct ones were false races and 3 real ones were missed)."""

import itertools

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv

from . import oracle


@tp.kernel(threads=128, target="sm_90a")
def out_tiles(A: tp.Tensor[tp.f32, "M", 32], C: tp.Tensor[tp.f32, "M", 32], NB: tp.constexpr = 1,
              AT: tp.constexpr = "top", EVERY: tp.constexpr = 1):
    """C = 2 A, tile t through o_s[t % NB]; the issuing thread waits (for every tile t with t % EVERY == EVERY - 1)
    AT "top": before tile t's first barrier, "topafter": after it, "end": after tile t's store, "none": only after
    the loop."""
    o_s = tp.shared((32, 32), tp.f32, stages=NB)
    n = A.shape[0] // 32
    for t in range(n):
        x = tp.load(A[t * 32:t * 32 + 32, 0:32], layout=tp.blocked((32, 32), 128, 4))
        if AT == "top":
            if t % EVERY == EVERY - 1:
                tp.store_bulk_wait(o_s[t % NB])
        tp.barrier()
        if AT == "topafter":
            if t % EVERY == EVERY - 1:
                tp.store_bulk_wait(o_s[t % NB])
        tp.store(o_s[t % NB], x * 2.0)
        tp.barrier()
        tp.store_bulk(o_s[t % NB], C[t * 32:t * 32 + 32, 0:32])
        if AT == "end":
            if t % EVERY == EVERY - 1:
                tp.store_bulk_wait(o_s[t % NB])
    tp.store_bulk_wait(o_s[0])


VARIANTS = [dict(NB=nb, AT=at, EVERY=ev) for nb, at, ev in itertools.product(
    (1, 2), ("top", "topafter", "end", "none"), (1, 2, 3))]
@pytest.mark.parametrize("v", VARIANTS, ids=["-".join(str(x) for x in v.values()) for v in VARIANTS])
def test_variants_sound_against_the_interpreter(v):
    kir = out_tiles.ir("sm_90a", **v)
    report = tv.verify_ir(kir)
    races = [f for f in report.errors if f.check == "race"]
    shown = False
    for tiles in (6, 7):
        a = np.random.default_rng(tiles).standard_normal((32 * tiles, 32)).astype(np.float32)
        c = np.full_like(a, np.nan)
        obs = oracle.run(kir, (1,), [a, c])
        assert obs.error is None, obs.error
        wrong = not np.array_equal(c.astype(np.float64), 2.0 * a.astype(np.float64))
        shown = shown or wrong or bool(obs.kinds())
        if wrong or obs.kinds():
            assert races, f"{v}: the interpreter shows it on {tiles} tiles ({obs.kinds()}, wrong {wrong})\n{report}"
    if not shown:
        assert report.ok and not report.findings, f"{v}: the interpreter shows nothing\n{report}"
