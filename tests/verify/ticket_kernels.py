"""A stream-K fix-up without the GEMM (tests/verify/test_ticket_protocol.py): block b of a 1-D grid of G blocks
takes iterations [b * total // G, (b + 1) * total // G) of `total = tiles * KT` (tile-major), sums row g of X
for each, and at the end of each segment stores the tile's sum into C when the segment holds the whole tile;
otherwise it puts its part into its own slot of WS (2b: the part that opens its share, 2b + 1: the one that
closes it), takes a ticket on LOCKS[t] (release / acquire), and the contributor whose ticket is hi - lo (the
tile's contributors are blocks lo..hi) adds the other parts, stores C and resets the ticket.

BUG: "none" (correct), "no_release" (the part is put into the slot after the ticket), "no_acquire" (the
fix-up's reads and stores are not masked by the ticket: every contributor stores C), "wrong_tile" (the ticket
is taken on the next tile's lock), "relaxed" (the ticket has no release / acquire order)."""

import tilepy as tp


@tp.kernel(threads=128)
def streamk_fixup(X: tp.Tensor[tp.f32, "R", "BN"], C: tp.Tensor[tp.f32, "TILES", "BN"],
                  WS: tp.Tensor[tp.f32, "WR", "BN"], LOCKS: tp.Tensor[tp.i32, "TILES"],
                  KT: tp.i32, BN: tp.constexpr = 32, MAX_PARTS: tp.constexpr = 3, BUG: tp.constexpr = "none"):
    total = C.shape[0] * KT
    grid = tp.num_blocks(0)
    begin = tp.block_id(0) * total // grid
    end = (tp.block_id(0) + 1) * total // grid
    acc = tp.zeros((1, BN), tp.f32)
    for s in range(end - begin):
        g = begin + s
        k = g % KT
        if k == 0 or s == 0:
            acc = tp.load(X[g:g + 1, 0:BN])
        else:
            acc += tp.load(X[g:g + 1, 0:BN])
        if k == KT - 1 or s == end - begin - 1:
            t = g // KT
            first = t * KT
            if first >= begin and first + KT <= end:
                tp.store(C[t:t + 1, 0:BN], acc)
            else:
                lo = ((first + 1) * grid - 1) // total
                hi = ((first + KT) * grid - 1) // total
                me = tp.block_id(0)
                mine = 2 * me if first <= begin else 2 * me + 1
                if BUG != "no_release":
                    tp.store(WS[mine:mine + 1, 0:BN], acc)
                lock = t + 1 if BUG == "wrong_tile" else t
                ticket = tp.atomic_add(LOCKS[lock:lock + 1], 1, sem="relaxed" if BUG == "relaxed" else "acq_rel")
                if BUG == "no_release":
                    tp.store(WS[mine:mine + 1, 0:BN], acc)
                last = ticket == hi - lo
                if BUG == "no_acquire":
                    last = ticket >= 0
                for i in tp.static_range(MAX_PARTS):
                    j = lo + i
                    theirs = 2 * j if first <= j * total // grid else 2 * j + 1
                    acc += tp.load(WS[theirs:theirs + 1, 0:BN], mask=(last & (j != me) & (j <= hi))[:, None])
                tp.store(C[t:t + 1, 0:BN], acc, mask=last[:, None])
                tp.store(LOCKS[t:t + 1], 0, mask=last)
