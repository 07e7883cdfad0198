"""Issue 17 item 4: the solver queries of a ring of STAGES shared stages (written at k % STAGES, read under phase
k // STAGES) should not grow with STAGES. mbarrier arrays are still unrolled into one loop-body copy per stage
(tilepy_verify/mbarrier_arrays.py), but the checks ask the queries of one source op (pipeline: one pair of
ops; deadlock: one wait line; tags: one assertion) over all the stage copies as one query, their disjunction
(`Solver_.none_of`), and ask the copies one by one only when it has a model. The query count is a
deterministic, load-independent measure of the solver calls; it does not measure the terms, which still grow
with STAGES (docs/verification.md, "Not summarized yet")."""

import tilepy_verify as tv
from stdlib_kernels import gemm_hopper


def _queries(stages):
    params = {**gemm_hopper.PRESETS["sm_90a"], **gemm_hopper.SMALL_TILE, "STAGES": stages}
    report = tv.verify(gemm_hopper.gemm_hopper, target="sm_90a", **params)
    assert report.ok, str(report)
    return report.stats["queries"]


def test_queries_do_not_grow_with_stages():
    q3, q6 = _queries(3), _queries(6)
    assert q6 <= q3 + 4, (q3, q6)


def _swap_queries(stages):
    """The deadlock check's queries on gemm_splitk_swap's two-ring form (K_WAYS=2: a producer and two consumers,
    one ring each) in 2x1 clusters: its cycle search goes through all three roles, STAGES^2 chains an arrive."""
    import tilepy as tp
    from stdlib_kernels import gemm_splitk_swap

    report = tv.verify(gemm_splitk_swap.gemm_splitk_swap, target="sm_90a", checks=["deadlock"], BM=32, BN=64,
                       INSTR=tp.nv.wgmma_m64n32k16_bf16, K_WAYS=2, CLUSTER_M=2, STAGES=stages)
    assert report.ok, str(report)
    return report.stats["queries"]


def test_deadlock_chain_queries_do_not_grow_with_stages():
    # whether a wait comes before an arrive in one loop body is read off their statement counters (a constant
    # difference) instead of asked: 33 / 225 / 393 queries at 2 / 6 / 8 stages before, 10 at each now
    q2, q6 = _swap_queries(2), _swap_queries(6)
    assert q6 <= q2 + 2, (q2, q6)
