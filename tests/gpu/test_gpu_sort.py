"""stdlib_kernels/sort.py on the GPU against torch.sort(stable=True) on the same device: values bit for bit,
indices exactly, for every row-length class (several rows a block, one block a row of 8192, padding), float32
and int32, ascending and descending; PICK (median / kthvalue) with torch.median's NaN rule (values: a line
holding a NaN gives NaN; 2026-11-24 H100: CUDA's median indexes some NaN of the line, not always the first)."""

import pytest
import torch

import tilepy_hip  # noqa: F401
from stdlib_kernels import sort as S

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _data(r, n, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if dtype == torch.int32:
        return torch.randint(-2**31, 2**31 - 1, (r, n), generator=g, device="cuda", dtype=torch.int64).to(torch.int32)
    x = torch.randint(-50, 50, (r, n), generator=g, device="cuda").float() / 8    # ties
    x.view(-1)[::97] = float("nan")
    x.view(-1)[5::89] = -0.0
    x.view(-1)[7::83] = float("inf")
    x.view(-1)[9::79] = float("-inf")
    return x


@pytest.mark.parametrize("r, n", [(3, 1), (777, 29), (4100, 64), (1000, 128), (65, 1000), (17, 4096), (33, 8192)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_rows_match_torch(r, n, dtype, descending):
    x = _data(r, n, dtype, r * n + descending)
    v, i = torch.empty_like(x), torch.full(x.shape, -1, dtype=torch.int64, device="cuda")
    S.launch(x, v, i, descending=descending)
    rv, ri = torch.sort(x, dim=1, stable=True, descending=descending)
    assert torch.equal(i, ri)
    assert torch.equal(v.view(torch.int32), rv.view(torch.int32))


@pytest.mark.parametrize("r, n", [(4100, 64), (300, 127), (9, 8192)])
def test_pick_is_torch_median(r, n):
    x = _data(r, n, torch.float32, n)
    v, i = torch.empty(r, 1, device="cuda"), torch.empty(r, 1, dtype=torch.int64, device="cuda")
    S.launch(x, v, i, pick=(n - 1) // 2, nan_first=True)
    rv, ri = torch.median(x, dim=1)
    assert torch.equal(v[:, 0].isnan(), rv.isnan())
    assert torch.equal(v[:, 0].nan_to_num(), rv.nan_to_num())
    # indices: where the value is (CUDA's median picks its own element among ties and among a line's NaNs; the
    # CPU's index rule, the first NaN and the stable order's element, is tested on the interpreter)
    assert torch.equal(x.gather(1, i).isnan(), v.isnan())
    assert torch.equal(x.gather(1, i).nan_to_num(), v.nan_to_num())


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("case", ["sort_long_merge", "median_mid_dim", "mode_rows", "topk_long_k64"])
def test_lowered_sort_family_on_gpu(case, tmp_path):
    """The lowered programs (sm_90a) on the GPU against torch on the same device: a line past the kernel's 8192
    (runs merged through global memory), a median over a middle dim (a row copy, PICK), mode (the run search
    on the sorted rows), topk with k > 32 of a long line."""
    import importlib.util

    from argus_agent.lower import lower_model, render_program

    g = torch.Generator(device="cuda").manual_seed(1)
    fn, x = {
        "sort_long_merge": (lambda t: torch.sort(t, dim=-1, descending=True, stable=True),
                            torch.randn(48, 20000, device="cuda", generator=g)),
        "median_mid_dim": (lambda t: torch.median(t, dim=1).values, torch.randn(16, 33, 1000, device="cuda",
                                                                                generator=g)),
        "mode_rows": (lambda t: torch.mode(t, dim=-1).values,                    # one mode a row: 7, 60 times
                      torch.randint(-20, 20, (300, 700), device="cuda", generator=g).float().index_fill_(
                          1, torch.arange(0, 700, 11, device="cuda"), 7.0)),
        "topk_long_k64": (lambda t: torch.topk(t, 64, dim=-1).values, torch.randn(32, 30000, device="cuda",
                                                                                   generator=g)),
    }[case]
    model = _Fn(fn)
    prog = lower_model(model, [x.cpu()], "sm_90a")
    assert any(type(k).__name__ == "SortTemplate" for k in prog.kernels)
    p = tmp_path / f"{case}.py"
    p.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location(f"gpu_sort_{case}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out, ref = mod.argus_forward(model, x), fn(x)
    outs, refs = (out if isinstance(out, tuple) else (out,)), (ref if isinstance(ref, tuple) else (ref,))
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and torch.equal(o, r)
