"""Issue 17's language additions on a real GPU through tilepy_hip: shared-tile transposes (tp.transpose / .T /
tp.permute, padded and swizzled), shared windows (1-D and 2-D halo stencils, a window of a stage), conditional
expressions, and the seeded corpus's correct twins that run on sm_80/sm_90a (transpose, NT GEMM through a
transposed shared view, attention-like loop, stencil ring, block reduction), against torch in float64.
Outputs are poisoned with NaN first. Skips without a GPU."""

import numpy as np
import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from tests.tilepy.test_ifexp_shared_views import halo1d, halo2d, ifexp, transpose_tile  # noqa: E402
from tests.verify import seeded_corpus as S  # noqa: E402
from tests.verify.test_corpus import inputs  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")
L = tilepy_hip.launch


def _run(kernel, grid, args, out=-1, **cx):
    """Launch with numpy `args` moved to the GPU (bf16 parameters as torch.bfloat16); returns args[out]."""
    dev = []
    for a, (_, spec, _) in zip(args, kernel.params):
        if isinstance(a, np.ndarray):
            t = torch.from_numpy(np.ascontiguousarray(a)).to(DEV)
            dev.append(t.to(torch.bfloat16) if getattr(spec, "dtype", None) == tp.bf16 else t)
        else:
            dev.append(a)
    L(kernel, grid, *dev, **cx)
    torch.cuda.synchronize()
    return dev[out].float().cpu().numpy()


@pytest.mark.parametrize("via", ["fn", "attr", "permute"])
def test_transpose_views(via):
    x = np.random.default_rng(1).standard_normal((100, 70)).astype(np.float32)
    y = np.full((70, 100), np.nan, np.float32)
    y = _run(transpose_tile, (tp.cdiv(100, 32), tp.cdiv(70, 32)), [x, y], VIA=via)
    assert np.array_equal(y, x.T)


def test_halo_windows():
    x = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    y = _run(halo1d, (tp.cdiv(1000, 64),), [x, np.full_like(x, np.nan)])
    xp = np.pad(x.astype(np.float64), 1)
    assert np.allclose(y, xp[:-2] + xp[1:-1] + xp[2:], rtol=1e-5, atol=1e-5)
    x2 = np.random.default_rng(3).standard_normal((70, 90)).astype(np.float32)
    y2 = _run(halo2d, (tp.cdiv(70, 16), tp.cdiv(90, 16)), [x2, np.full_like(x2, np.nan)])
    xp = np.pad(x2.astype(np.float64), 1)
    ref = sum(xp[di:di + 70, dj:dj + 90] for di in range(3) for dj in range(3))
    assert np.allclose(y2, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [3, 90, 200])
def test_conditional_expressions(n):
    x = np.arange(128, dtype=np.float32) - 20
    y = _run(ifexp, (2,), [x, np.full_like(x, np.nan), n], out=1)
    i = np.arange(128)
    ref = np.where(i < min(n, 100), x * 2 if n > 5 else x, 0)
    assert np.array_equal(y, np.where(i >= 64, ref, -ref))


@pytest.mark.parametrize("kernel", [S.transpose, S.gemm_nt, S.attn, S.stencil, S.block_reduce, S.ws_ring, S.tma_loop],
                         ids=lambda k: k.name)
def test_corpus_twins(kernel):
    grid, args, ref, tol = inputs(kernel)
    out = _run(kernel, grid, args)
    assert np.allclose(out, ref, rtol=max(tol, 1e-5), atol=max(tol, 1e-5))
