"""Launch helpers for the seeded kernels: arguments and a grid that contain a counterexample's block and
sizes, so the interpreter can replay it."""

from __future__ import annotations

import numpy as np

from . import oracle

RNG = np.random.default_rng(0)


def ints(shape):
    return RNG.integers(-3, 4, size=shape).astype(np.float32)


def pipe_gemm_args(kir, cex):
    c = kir.constexprs
    b = cex.get("block", (0, 0, 0))
    its = [*(cex.get("iteration") or {}).values(), *(cex.get("other_iteration") or {}).values(), 0]
    it = max(its)
    K = max(int(cex.get("dims", {}).get("K", 0)), (it + 2) * c["BK"])
    M, N = c["BM"] * (b[0] + 1), c["BN"] * (b[1] + 1)
    A, B, C = ints((M, K)), ints((K, N)), np.zeros((M, N), np.float32)
    return (b[0] + 1, b[1] + 1), [A, B, C], (A, B, C)


def rows_args(kir, cex, cols=64, rows_per_block=32):
    b = cex.get("block", (0, 0, 0))
    M = rows_per_block * (b[0] + 1)
    X = ints((M, cols))
    return (b[0] + 1,), [X, np.zeros_like(X)], (X,)


def vec_args(kir, cex, per_block, n_tensors=2):
    b = cex.get("block", (0, 0, 0))
    n = per_block * (b[0] + 2)
    xs = [ints((n,)) for _ in range(n_tensors)]
    return (b[0] + 1,), xs, xs


def args_for(name, kir, cex):
    if name == "pipe_gemm":
        return pipe_gemm_args(kir, cex)
    if name in ("stage_copy", "columns"):
        return rows_args(kir, cex)
    if name == "role_stage":
        return vec_args(kir, cex, 64)
    if name == "diverge":
        return vec_args(kir, cex, 512)
    if name == "add_tags":
        return vec_args(kir, cex, kir.constexprs["BLOCK"], 3)
    if name == "reg_mma":
        return (1,), [ints((16, 16)), ints((16, 16)), np.zeros((16, 16), np.float32)], None
    raise KeyError(name)


def observe(name, kir, cex):
    grid, args, _ = args_for(name, kir, cex)
    return oracle.run(kir, grid, args), args
