"""2-D convolution and transposed convolution as implicit GEMMs: the im2col matrix is never built; each K
step gathers its tile straight from the input into the MMA operand layout.

GEMM view (one image n per block row of the grid): rows are output pixels (oh, ow) of a BOH x BOW patch,
columns are output channels, the reduction runs over k = (c, kh, kw) with c the input channel:

    conv2d:           A[(oh, ow), k] = X[n, c, oh * S - P + kh * D, ow * S - P + kw * D]
                      B[k, co]       = Wt[co, c, kh, kw]
    conv_transpose2d: A[(oh, ow), k] = X[n, c, (oh + P - kh * D) / S, (ow + P - kw * D) / S]  where divisible
                      B[k, co]       = Wt[c, co, kh, kw]

Padding, the tile edges and k past C * KH * KW are all indices outside X or Wt, which read 0. The output
channels are looped over inside the block, so each block owns its output pixels (the verifier proves no
two blocks write one element). bf16 in, f32 accumulate, like torch's bf16 convolutions on tensor cores.
"""

import numpy as np

import tilepy as tp


def _threads(c):
    return c["WARPS"][0] * c["WARPS"][1] * c["INSTR"].threads


@tp.kernel(threads=_threads)
def conv2d(X: tp.Tensor[tp.bf16, "N", "C", "H", "W"], Wt: tp.Tensor[tp.bf16, "CO", "C", "kh", "kw"],
           Y: tp.Tensor[tp.f32, "N", "CO", "OH", "OW"], S: tp.constexpr = 2, P: tp.constexpr = 1,
           D: tp.constexpr = 2, KH: tp.constexpr = 3, KW: tp.constexpr = 3, BOH: tp.constexpr = 8,
           BOW: tp.constexpr = 8, BN: tp.constexpr = 32,
           BK: tp.constexpr = 32, INSTR: tp.constexpr = tp.nv.mma_m16n8k16_bf16, WARPS: tp.constexpr = (2, 2)):
    BM = BOH * BOW
    LA = tp.mma_layout(INSTR, "a", (BM, BK), WARPS)
    LB = tp.mma_layout(INSTR, "b", (BK, BN), WARPS)
    LC = tp.accumulator(INSTR, (BM, BN), WARPS)
    tp.tag(X, lambda n, c, h, w: ("X", c, h, w))
    tp.tag(Wt, lambda o, c, h, w: ("W", c, h, w))
    n = tp.block_id(2)
    K = Wt.shape[1] * KH * KW
    # the input row and column each A row (output pixel) starts from: kept in the A operand's layout
    r = tp.zeros((BM, BK), tp.i32, layout=LA) + tp.arange(BM)[:, None]
    ih0 = (tp.block_id(1) * BOH + r // BOW) * S - P
    iw0 = (tp.block_id(0) * BOW + r % BOW) * S - P
    for co0 in range(0, Y.shape[1], BN):
        acc = tp.zeros((BM, BN), tp.f32, layout=LC)
        for k0 in range(0, K, BK):
            k = tp.zeros((BM, BK), tp.i32, layout=LA) + (k0 + tp.arange(BK))[None, :]
            kk = k % (KH * KW)
            a = tp.load(X[n, k // (KH * KW), ih0 + kk // KW * D, iw0 + kk % KW * D], layout=LA)   # im2col tile
            kb = tp.zeros((BK, BN), tp.i32, layout=LB) + (k0 + tp.arange(BK))[:, None]
            co = tp.zeros((BK, BN), tp.i32, layout=LB) + (co0 + tp.arange(BN))[None, :]
            b = tp.load(Wt[co, kb // (KH * KW), kb % (KH * KW) // KW, kb % KW], layout=LB)
            acc = tp.mma(a, b, acc)
            tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[1] == b[1], message="input and weight channels agree")
        # output pixel (oh, ow) of each row, written inline: an index expression of tp.arange costs no
        # registers (a variable in another layout than the accumulator's would go through shared memory)
        tp.store(Y[n, co0 + tp.arange(BN)[None, :], tp.block_id(1) * BOH + tp.arange(BM)[:, None] // BOW,
                   tp.block_id(0) * BOW + tp.arange(BM)[:, None] % BOW], acc)


@tp.kernel(threads=_threads)
def conv_transpose2d(X: tp.Tensor[tp.bf16, "N", "C", "H", "W"], Wt: tp.Tensor[tp.bf16, "C", "CO", "kh", "kw"],
                     Y: tp.Tensor[tp.f32, "N", "CO", "OH", "OW"], S: tp.constexpr = 2, P: tp.constexpr = 0,
                     D: tp.constexpr = 1, KH: tp.constexpr = 3, KW: tp.constexpr = 3, BOH: tp.constexpr = 8,
                     BOW: tp.constexpr = 8, BN: tp.constexpr = 32, BK: tp.constexpr = 32,
                     INSTR: tp.constexpr = tp.nv.mma_m16n8k16_bf16, WARPS: tp.constexpr = (2, 2)):
    BM = BOH * BOW
    LA = tp.mma_layout(INSTR, "a", (BM, BK), WARPS)
    LB = tp.mma_layout(INSTR, "b", (BK, BN), WARPS)
    LC = tp.accumulator(INSTR, (BM, BN), WARPS)
    tp.tag(X, lambda n, c, h, w: ("X", c, h, w))
    tp.tag(Wt, lambda c, o, h, w: ("W", c, h, w))
    n = tp.block_id(2)
    K = Wt.shape[0] * KH * KW
    # oh + P and ow + P of each A row (output pixel), in the A operand's layout
    r = tp.zeros((BM, BK), tp.i32, layout=LA) + tp.arange(BM)[:, None]
    th = tp.block_id(1) * BOH + r // BOW + P
    tw = tp.block_id(0) * BOW + r % BOW + P
    for co0 in range(0, Y.shape[1], BN):
        acc = tp.zeros((BM, BN), tp.f32, layout=LC)
        for k0 in range(0, K, BK):
            k = tp.zeros((BM, BK), tp.i32, layout=LA) + (k0 + tp.arange(BK))[None, :]
            kk = k % (KH * KW)
            h = th - kk // KW * D              # = ih * S: input row ih feeds output row oh through tap kh
            w = tw - kk % KW * D
            a = tp.load(X[n, k // (KH * KW), h // S, w // S], mask=(h % S == 0) & (w % S == 0), layout=LA)
            kb = tp.zeros((BK, BN), tp.i32, layout=LB) + (k0 + tp.arange(BK))[:, None]
            co = tp.zeros((BK, BN), tp.i32, layout=LB) + (co0 + tp.arange(BN))[None, :]
            b = tp.load(Wt[kb // (KH * KW), co, kb % (KH * KW) // KW, kb % KW], layout=LB)
            acc = tp.mma(a, b, acc)
            tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[1] == b[1], message="input and weight channels agree")
        tp.store(Y[n, co0 + tp.arange(BN)[None, :], tp.block_id(1) * BOH + tp.arange(BM)[:, None] // BOW,
                   tp.block_id(0) * BOW + tp.arange(BM)[:, None] % BOW], acc)


PRESETS = {
    "sm_80": dict(INSTR=tp.nv.mma_m16n8k16_bf16, WARPS=(2, 2), BOH=8, BOW=8, BN=32, BK=32),
    "sm_90a": dict(INSTR=tp.nv.mma_m16n8k16_bf16, WARPS=(2, 2), BOH=8, BOW=8, BN=32, BK=32),
    "gfx942": dict(INSTR=tp.amd.mfma_f32_32x32x8_bf16, WARPS=(2, 1), BOH=8, BOW=8, BN=32, BK=32),
}


def conv2d_out(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def conv_transpose2d_out(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n - 1) * s - 2 * p + d * (k - 1) + 1


def launch(kernel, x, w, y, target: str = "sm_80", **constexprs):
    """Run `conv2d` or `conv_transpose2d` (y: the output, of the size torch gives)."""
    params = {**PRESETS[target], "KH": int(w.shape[2]), "KW": int(w.shape[3]), **constexprs}
    grid = (tp.cdiv(y.shape[3], params["BOW"]), tp.cdiv(y.shape[2], params["BOH"]), y.shape[0])
    return kernel[grid](x, w, y, target=target, **params)


def reference(kernel, x, w, stride, padding, dilation):
    import torch

    x, w = torch.as_tensor(np.asarray(x, np.float64)), torch.as_tensor(np.asarray(w, np.float64))
    fn = torch.nn.functional.conv2d if kernel is conv2d else torch.nn.functional.conv_transpose2d
    return fn(x, w, stride=stride, padding=padding, dilation=dilation).numpy()


if __name__ == "__main__":
    import torch

    x = torch.randn(2, 5, 13, 11).to(torch.bfloat16)
    for kernel, w, cx in ((conv2d, torch.randn(20, 5, 3, 3), dict(S=2, P=1, D=2)),
                          (conv_transpose2d, torch.randn(5, 20, 3, 3), dict(S=2, P=0, D=1))):
        w = w.to(torch.bfloat16)
        ref = reference(kernel, x.float(), w.float(), cx["S"], cx["P"], cx["D"])
        y = torch.empty(ref.shape)
        launch(kernel, x, w, y, **cx)
        print(kernel.name, "max |err| =", float(np.abs(y.numpy() - ref).max()))
