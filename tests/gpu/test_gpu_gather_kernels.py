"""Issue 19's bar on a real GPU through tilepy_hip: embedding gather, scatter-add with atomics, 3x3 stride-2
max-pool, conv2d (stride 2, dilation 2, padding 1) and transposed conv2d (stride 2) as implicit GEMMs, and the
atomics for every element type, against torch in float64 and against the CPU interpreter. Outputs are
poisoned with NaN first. Skips without a GPU."""

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import conv, embedding, max_pool, scatter_add  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")
L = tilepy_hip.launch


def _gen(seed):
    return torch.Generator(device="cpu").manual_seed(seed)


@pytest.mark.parametrize("v,d,n", [(1000, 200, 333), (7, 64, 16), (50, 3, 1)])
def test_embedding(v, d, n):
    g = _gen(v + n)
    w, ids = torch.randn(v, d, generator=g), torch.randint(0, v, (n,), generator=g)
    y = torch.full((n, d), float("nan"), device=DEV)
    L(embedding.embedding, (tp.cdiv(n, 16),), w.to(DEV), ids.to(DEV), y)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), torch.nn.functional.embedding(ids, w))


@pytest.mark.parametrize("n,d,m", [(500, 70, 40), (4096, 64, 3), (33, 130, 1000)])
def test_scatter_add(n, d, m):
    g = _gen(n + m)
    x, index = torch.randn(n, d, generator=g), torch.randint(0, m, (n,), generator=g)
    y0 = torch.randn(m, d, generator=g)
    y = y0.clone().to(DEV)
    L(scatter_add.scatter_add, (tp.cdiv(n, 16),), x.to(DEV), index.to(DEV), y)
    torch.cuda.synchronize()
    ref = y0.double().index_add(0, index, x.double())
    torch.testing.assert_close(y.cpu().double(), ref, rtol=1e-4, atol=1e-4)  # f32 atomics in any order
    yi = y0.clone()
    scatter_add.launch(x, index, yi)
    torch.testing.assert_close(y.cpu(), yi, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pad", [0, 1])
@pytest.mark.parametrize("shape", [(2, 3, 37, 29), (1, 64, 112, 112), (3, 1, 3, 3)])
def test_max_pool(shape, pad):
    x = torch.randn(*shape, generator=_gen(sum(shape)))
    ref = torch.nn.functional.max_pool2d(x, 3, 2, pad)
    y = torch.full(ref.shape, float("nan"), device=DEV)
    grid = (tp.cdiv(ref.shape[3], 16), tp.cdiv(ref.shape[2], 16), ref.shape[0] * ref.shape[1])
    L(max_pool.max_pool2d, grid, x.to(DEV).reshape(-1, *shape[2:]), y.reshape(-1, *ref.shape[2:]), PAD=pad)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), ref)


CONVS = {
    "conv2d_s2_d2_p1": (conv.conv2d, dict(S=2, P=1, D=2), torch.nn.functional.conv2d, False),
    "conv_transpose2d_s2": (conv.conv_transpose2d, dict(S=2, P=0, D=1), torch.nn.functional.conv_transpose2d, True),
    "conv_transpose2d_s2_p1": (conv.conv_transpose2d, dict(S=2, P=1, D=1), torch.nn.functional.conv_transpose2d,
                               True),
}


@pytest.mark.parametrize("preset", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", sorted(CONVS))
@pytest.mark.parametrize("n,c,h,w,co", [(2, 6, 19, 14, 36), (1, 64, 32, 32, 64), (4, 3, 7, 9, 5)])
def test_conv(name, preset, n, c, h, w, co):
    kernel, cx, ref_fn, transposed = CONVS[name]
    g = _gen(n * c + h * w + co)
    x = torch.randn(n, c, h, w, generator=g).to(torch.bfloat16)
    wt = torch.randn(*((c, co) if transposed else (co, c)), 3, 3, generator=g).to(torch.bfloat16)
    ref = ref_fn(x.double(), wt.double(), stride=cx["S"], padding=cx["P"], dilation=cx["D"])
    y = torch.full(ref.shape, float("nan"), device=DEV)
    p = {**conv.PRESETS[preset], **cx}
    grid = (tp.cdiv(ref.shape[3], p["BOW"]), tp.cdiv(ref.shape[2], p["BOH"]), n)
    L(kernel, grid, x.to(DEV), wt.to(DEV), y, target="sm_90a", **p)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.cpu().double(), ref, rtol=1e-5, atol=1e-3)
    if n * co * h * w <= 20000:
        yi = torch.full(ref.shape, float("nan"))
        conv.launch(kernel, x, wt, yi, target="sm_90a", **p)
        torch.testing.assert_close(y.cpu(), yi, rtol=1e-5, atol=1e-4)


def _atomics(dtype):
    @tp.kernel(threads=128)
    def atomics(X: tp.Tensor[dtype, "N"], I: tp.Tensor[tp.i32, "N"], ADD: tp.Tensor[dtype, "M"],
                MX: tp.Tensor[dtype, "M"], MN: tp.Tensor[dtype, "M"], LOCK: tp.Tensor[dtype, "M"],
                WON: tp.Tensor[tp.i32, "N"]):
        i0 = tp.block_id(0) * 256
        idx = tp.load(I[i0:i0 + 256], other=-1)
        x = tp.load(X[i0:i0 + 256])
        tp.atomic_add(ADD[idx], x)
        tp.atomic_max(MX[idx], x, sem="release")
        tp.atomic_min(MN[idx], x, mask=x > -2)
        old = tp.atomic_cas(LOCK[idx], 0, 1, sem="acq_rel")     # exactly one element per index wins
        tp.store(WON[i0:i0 + 256], (old == 0).to(tp.i32), mask=idx >= 0)

    return atomics


@pytest.mark.parametrize("dtype", ["f32", "bf16", "i32"])
def test_atomics(dtype):
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32}[dtype]
    g = _gen(3)
    n, m = 3000, 37
    x = torch.randint(-2, 3, (n,), generator=g).to(tdt)   # small integers: bf16 sums (|s| < 256) stay exact
    idx = torch.randint(0, m, (n,), generator=g, dtype=torch.int32)
    add, mx, mn, lock = (torch.zeros(m, dtype=tdt), torch.full((m,), -100, dtype=tdt),
                         torch.full((m,), 100, dtype=tdt), torch.zeros(m, dtype=tdt))
    won = torch.zeros(n, dtype=torch.int32)
    dev = [t.to(DEV) for t in (x, idx, add, mx, mn, lock, won)]
    L(_atomics(getattr(tp, dtype)), (tp.cdiv(n, 256),), *dev)
    torch.cuda.synchronize()
    _, _, add, mx, mn, lock, won = (t.cpu() for t in dev)
    xd = x.double()
    assert torch.equal(add.double(), torch.zeros(m, dtype=torch.float64).index_add(0, idx.long(), xd))
    assert torch.equal(mx.double(), torch.full((m,), -100.0, dtype=torch.float64).index_reduce(
        0, idx.long(), xd, "amax"))
    keep = xd > -2
    assert torch.equal(mn.double(), torch.full((m,), 100.0, dtype=torch.float64).index_reduce(
        0, idx[keep].long(), xd[keep], "amin"))
    assert torch.equal(lock.double(), torch.ones(m, dtype=torch.float64))
    assert torch.equal(torch.zeros(m, dtype=torch.int64).index_add(0, idx.long(), won.long()),
                       torch.ones(m, dtype=torch.int64))


@tp.kernel(threads=128)
def tile_ops(X: tp.Tensor[tp.f32, 32, 64], P: tp.Tensor[tp.f32, 32], I: tp.Tensor[tp.i32, 3, 64],
             C: tp.Tensor[tp.f32, 4, 32, 64], T: tp.Tensor[tp.f32, 64, 32], R: tp.Tensor[tp.f32, 16, 128]):
    x = tp.load(X[0:32, 0:64])
    tp.store(P[0:32], tp.prod(x, axis=1))
    tp.store(I[0, 0:64], tp.argmax(x, axis=0))
    tp.store(I[1, 0:64], tp.argmin(x, axis=0))
    tp.store(I[2, 0:64], tp.any(x > 2.0, axis=0).to(tp.i32) + 2 * tp.all(x > -2.5, axis=0).to(tp.i32))
    tp.store(C[0, 0:32, 0:64], tp.cumsum(x, axis=1))
    tp.store(C[1, 0:32, 0:64], tp.cumsum(x, axis=0, reverse=True))
    tp.store(C[2, 0:32, 0:64], tp.cumprod(x, axis=1, exclusive=True))
    tp.store(C[3, 0:32, 0:64], tp.cumsum(x, axis=1, reverse=True, exclusive=True))
    tp.store(T[0:64, 0:32], x.T)
    tp.store(R[0:16, 0:128], tp.reshape(x, (16, 128)))


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_reductions_scans_and_shape_changes_match_the_interpreter(target):
    x = torch.randn(32, 64, generator=_gen(9)) * 1.1
    x[3, 5] = x[20, 5] = 9.0  # a tie: the first index wins
    shapes = [((32,), torch.float32), ((3, 64), torch.int32), ((4, 32, 64), torch.float32),
              ((64, 32), torch.float32), ((16, 128), torch.float32)]
    dev = [torch.full(s, -7, dtype=d, device=DEV) for s, d in shapes]
    L(tile_ops, (1,), x.to(DEV), *dev, target=target)
    torch.cuda.synchronize()
    cpu = [torch.full(s, -7, dtype=d) for s, d in shapes]
    tile_ops[(1,)](x, *cpu, target=target)
    for got, want in zip(dev, cpu):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    assert torch.equal(cpu[1][0], torch.argmax(x, 0).int()) and cpu[1][0, 5] == 3


@tp.kernel(threads=64)
def carried(X: tp.Tensor[tp.bf16, 64], Y: tp.Tensor[tp.bf16, 4, 64], base: tp.i32, MOVE: tp.constexpr = True):
    b = base
    i = (b + tp.arange(64)) % 64                 # an i32 index tile used in the bf16 tile's layout
    for k in range(4):
        tp.store(Y[k, (i + k * MOVE) % 64], tp.load(X[0:64]))
        if MOVE:
            b = b + 1                            # `i` keeps the value it had before the loop


@pytest.mark.parametrize("move", [True, False])
def test_recomputed_and_carried_index_tiles(move):
    x = torch.randn(64, generator=_gen(4)).to(torch.bfloat16)
    y = torch.zeros(4, 64, dtype=torch.bfloat16, device=DEV)
    L(carried, (1,), x.to(DEV), y, 5, MOVE=move)
    torch.cuda.synchronize()
    yi = torch.zeros(4, 64, dtype=torch.bfloat16)
    carried[(1,)](x, yi, 5, MOVE=move)
    assert torch.equal(y.cpu(), yi)


@pytest.mark.parametrize("n,exclusive", [(5000, False), (1 << 20, True), (1, False)])
def test_cumsum_across_blocks(n, exclusive):
    from stdlib_kernels import cumsum

    x = torch.randn(n, generator=_gen(n))
    y = torch.full((n,), float("nan"), device=DEV)
    nb = tp.cdiv(n, 1024)
    part = torch.empty(nb, device=DEV)
    xd = x.to(DEV)
    L(cumsum.block_sums, (nb,), xd, part)
    L(cumsum.block_scan, (nb,), xd, part, y, EXCLUSIVE=exclusive)
    torch.cuda.synchronize()
    ref = torch.cumsum(x.double(), 0) - (x.double() if exclusive else 0)
    torch.testing.assert_close(y.cpu().double(), ref, rtol=1e-4, atol=2e-3 * max(1.0, (n / 1e4) ** 0.5))


@tp.kernel(threads=64)
def wide_scans(X: tp.Tensor[tp.bf16, 4, 128], Z: tp.Tensor[tp.f32, 128, 16], C: tp.Tensor[tp.f32, 4, 4, 128],
               D: tp.Tensor[tp.f32, 3, 128, 16]):
    x = tp.load(X[0:4, 0:128])                    # lines of 128 split into 16 segments of 8
    tp.store(C[0, 0:4, 0:128], tp.cumsum(x, axis=1).to(tp.f32))
    tp.store(C[1, 0:4, 0:128], tp.cumprod(x * 0.125 + 1.0, axis=1, reverse=True).to(tp.f32))
    tp.store(C[2, 0:4, 0:128], tp.cumsum(x.to(tp.f32), axis=1, reverse=True, exclusive=True))
    tp.store(C[3, 0:4, 0:128], tp.cumsum(x.to(tp.f32), axis=0, exclusive=True))   # 4 long: the direct form
    z = tp.load(Z[0:128, 0:16])
    tp.store(D[0, 0:128, 0:16], tp.cumsum(z, axis=0))                  # strided lines: 16 lines of 128
    tp.store(D[1, 0:128, 0:16], tp.cumsum(z, axis=1, exclusive=True))  # 128 lines > 64 threads: a loop
    tp.store(D[2, 0:128, 0:16], tp.cumsum(z, axis=0, reverse=True, exclusive=True))


def test_segmented_scans_match_float64():
    """Scans longer than 8 run as per-thread segments plus the segments' totals (render/scans.py): every axis,
    direction and form, bf16 scanned in f32, against float64 (and the interpreter)."""
    x = (torch.randn(4, 128, generator=_gen(21))).to(torch.bfloat16)
    z = torch.randn(128, 16, generator=_gen(22))
    c = torch.full((4, 4, 128), float("nan"), device=DEV)
    d = torch.full((3, 128, 16), float("nan"), device=DEV)
    L(wide_scans, (1,), x.to(DEV), z.to(DEV), c, d)
    torch.cuda.synchronize()
    xd, zd = x.double(), z.double()
    want_c = [torch.cumsum(xd, 1), torch.flip(torch.cumprod(torch.flip(xd * 0.125 + 1.0, [1]), 1), [1]),
              torch.flip(torch.cumsum(torch.flip(xd, [1]), 1), [1]) - xd, torch.cumsum(xd, 0) - xd]
    want_d = [torch.cumsum(zd, 0), torch.cumsum(zd, 1) - zd, torch.flip(torch.cumsum(torch.flip(zd, [0]), 0), [0]) - zd]
    for got, want, tol in [(c[0], want_c[0], 3e-2), (c[1], want_c[1], 3e-2), (c[2], want_c[2], 1e-4),
                           (c[3], want_c[3], 1e-5)]:
        torch.testing.assert_close(got.cpu().double(), want, rtol=tol, atol=tol)
    for got, want in zip(d, want_d):
        torch.testing.assert_close(got.cpu().double(), want, rtol=1e-5, atol=1e-4)
    ci, di = torch.full((4, 4, 128), float("nan")), torch.full((3, 128, 16), float("nan"))
    wide_scans[(1,)](x, z, ci, di)
    torch.testing.assert_close(d.cpu(), di, rtol=1e-5, atol=1e-4)
