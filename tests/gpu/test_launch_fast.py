"""The launch fast path and CUDA graphs on a real GPU: prepared launches refill pointers, scalars and tensor maps
for new tensors of a known signature; a changed signature takes the checking path (same errors as a first
call); host programs captured into graphs replay on new data and recapture for new shapes. Skips without a GPU."""

import importlib
import threading

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from argus_agent import runtime  # noqa: E402
from stdlib_kernels import gemm_hopper, rmsnorm, softmax, vector_add  # noqa: E402
from tilepy_hip.graphs import GraphCaptureError, GraphedFunction, capture  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")
hip_launch = importlib.import_module("tilepy_hip.launch")
VA = vector_add.vector_add


def _nan(*shape):
    return torch.full(shape, float("nan"), device=DEV)


def _entries(kernel) -> int:
    table = hip_launch._PREPARED.get(kernel)
    return len(table.entries) if table else 0


@tp.kernel(threads=128)
def scale_rows(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], s: tp.f32, BN: tp.constexpr):
    row = tp.block_id(0)
    x = tp.load(X[row, 0:BN])
    tp.store(Y[row, 0:BN], x * s)


def test_fast_path_refills_pointers_for_new_tensors():
    n = 3000
    grid = (tp.cdiv(n, 1024),)
    x, y, z = torch.randn(n, device=DEV), torch.randn(n, device=DEV), _nan(n)
    VA[grid](x, y, z, BLOCK=1024)
    before = _entries(VA)
    for _ in range(3):  # new tensors each time, same signature: the prepared launch
        x, y, z = torch.randn(n, device=DEV), torch.randn(n, device=DEV), _nan(n)
        VA[grid](x, y, z, BLOCK=1024)
        torch.cuda.synchronize()
        assert torch.equal(z, x + y)
    assert _entries(VA) == before


def test_shape_change_takes_the_slow_path_and_both_stay_right():
    for n in (1000, 5000, 1000, 1):
        x, y, z = torch.randn(n, device=DEV), torch.randn(n, device=DEV), _nan(n)
        tilepy_hip.launch(VA, lambda m: (tp.cdiv(m["N"], m["BLOCK"]),), x, y, z, BLOCK=1024)
        torch.cuda.synchronize()
        assert torch.equal(z, x + y), n


def test_scalars_are_filled_per_call():
    m, n = 5, 64
    x = torch.randn(m, n, device=DEV)
    for s in (2.0, -0.5, 3):  # 3: an int for an f32 scalar is accepted (a new key: checked once)
        y = _nan(m, n)
        scale_rows[(m,)](x, y, s, BN=n)
        torch.cuda.synchronize()
        assert torch.allclose(y, x * s), s


def test_rmsnorm_eps_and_weights_change_between_calls():
    m, n = 7, 300
    for eps in (1e-6, 10.0):
        x, w, y = torch.randn(m, n, device=DEV), torch.randn(n, device=DEV), _nan(m, n)
        rmsnorm.rmsnorm[(m,)](x, w, y, eps, BLOCK_N=512)
        torch.cuda.synchronize()
        ref = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + eps) * w.double()
        assert torch.allclose(y.double(), ref, rtol=1e-5, atol=1e-5), eps


def test_tensor_maps_follow_new_and_unaligned_addresses():
    """gemm_hopper's A and B go through TMA; a second pair of tensors needs new maps; a base 2 bytes off
    alignment cannot have one, and the kernel falls back for it (same signature, same prepared launch)."""
    m, k, n = 200, 256, 192
    p = {**gemm_hopper.PRESETS["sm_90a"], **gemm_hopper.SMALL_TILE}
    grid = (tp.cdiv(m, p["BM"]), tp.cdiv(n, p["BN"]))

    def check(a, b):
        c = _nan(m, n)
        gemm_hopper.gemm_hopper[grid](a, b, c, **p)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        assert float((c.double() - ref).norm() / ref.norm()) < 1e-5

    for _ in range(2):
        check(torch.randn(m, k, device=DEV).bfloat16(), torch.randn(k, n, device=DEV).bfloat16())
    odd = torch.randn(m * k + 1, device=DEV).bfloat16()[1:].view(m, k)
    check(odd, torch.randn(k, n, device=DEV).bfloat16())
    check(torch.randn(m, k, device=DEV).bfloat16(), torch.randn(k, n, device=DEV).bfloat16())


def test_errors_after_a_cached_launch_are_those_of_a_first_launch():
    x = torch.randn(100, device=DEV)
    VA[(1,)](x, x, torch.empty_like(x), BLOCK=128)  # the signature is prepared
    with pytest.raises(tp.LaunchError, match="dtype torch.float64"):
        VA[(1,)](x.double(), x, torch.empty_like(x), BLOCK=128)
    with pytest.raises(tp.LaunchError, match="dimension `N` is 100 in `X` but 99 in `Y`"):
        VA[(1,)](x, x[:99], torch.empty_like(x), BLOCK=128)
    with pytest.raises(tp.LaunchError, match="is on cpu"):
        tilepy_hip.launch(VA, (1,), x, x.cpu(), torch.empty_like(x), BLOCK=128)
    with pytest.raises(tp.LaunchError, match="must be a torch tensor"):
        tilepy_hip.launch(VA, (1,), x, x.cpu().numpy(), torch.empty_like(x), BLOCK=128)
    with pytest.raises(tp.LaunchError, match="takes 4 arguments, got 5"):
        VA[(1,)](x, x, x, x, x, BLOCK=128)
    y = torch.randn(8, 8, device=DEV)
    softmax.softmax[(8,)](y, torch.empty_like(y), BLOCK_N=16)
    with pytest.raises(tp.LaunchError, match="not contiguous"):
        softmax.softmax[(8,)](y.t(), torch.empty_like(y), BLOCK_N=16)
    with pytest.raises(tp.ConstexprError, match="constexpr `BN` of kernel `scale_rows` has no value"):
        scale_rows[(8,)](y, torch.empty_like(y), 1.0)
    with pytest.raises(tp.LaunchError, match="must be a number"):
        scale_rows[(8,)](y, torch.empty_like(y), "two", BN=8)
    with pytest.raises(tp.LaunchError, match="beyond CUDA's limits"):
        VA[(1, 70000)](x, x, torch.empty_like(x), BLOCK=128)


def test_launch_from_a_new_thread():
    n = 2048
    x, y, z = torch.randn(n, device=DEV), torch.randn(n, device=DEV), _nan(n)
    VA[(2,)](x, y, torch.empty_like(z), BLOCK=1024)
    torch.cuda.synchronize()
    errors = []

    def work():
        try:
            VA[(2,)](x, y, z, BLOCK=1024)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - reported to the test's thread
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors and torch.equal(z, x + y)


def test_fast_path_on_a_side_stream_and_under_graph_capture():
    n = 10000
    grid = (tp.cdiv(n, 1024),)
    x, y, z = torch.randn(n, device=DEV), torch.randn(n, device=DEV), _nan(n)
    VA[grid](x, y, z, BLOCK=1024)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        z.fill_(float("nan"))
        VA[grid](x, y, z, BLOCK=1024)
    s.synchronize()
    assert torch.equal(z, x + y)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        VA[grid](x, y, z, BLOCK=1024)
    for _ in range(2):  # replay with new data
        x.copy_(torch.randn(n, device=DEV))
        z.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(z, x + y)


def _host_program(x, w):
    """An argus-style host program: allocate, launch two kernels through argus's runtime."""
    m, n = x.shape
    t = torch.empty_like(x)
    runtime.launch(rmsnorm.rmsnorm, lambda meta: (meta["M"],), x, w, t, 1e-6, BLOCK_N=1024)
    out = torch.empty_like(x)
    runtime.launch(VA, lambda meta: (tp.cdiv(meta["N"], meta["BLOCK"]),), t.view(-1), x.view(-1), out.view(-1))
    return out


def _reference(x, w):
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double() + xd


def test_graphed_host_program_replays_new_data_and_recaptures_new_shapes():
    fn = GraphedFunction(_host_program)
    for shape in ((37, 1000), (37, 1000), (5, 16), (37, 1000)):
        x, w = torch.randn(*shape, device=DEV), torch.randn(shape[1], device=DEV)
        out = fn(x, w)
        torch.cuda.synchronize()
        assert torch.allclose(out.double(), _reference(x, w), rtol=1e-5, atol=1e-5), shape
    assert len(fn.graphs) == 2 and fn.why == ""


def test_captured_graph_buffers_and_replay():
    x, w = torch.randn(16, 256, device=DEV), torch.randn(256, device=DEV)
    g = capture(_host_program, x, w)
    x2 = torch.randn(16, 256, device=DEV)
    g.inputs[0].copy_(x2)
    out = g.replay()
    torch.cuda.synchronize()
    assert torch.allclose(out.double(), _reference(x2, w), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="captured for"):
        g(torch.randn(8, 256, device=DEV), w)


def test_a_host_program_that_reads_device_values_is_not_captured():
    def dynamic(x):
        n = int((x > 0).sum().item())  # a data-dependent size
        out = torch.empty(max(n, 1), device=DEV)
        VA[(1,)](out, out, out, BLOCK=1024)
        return out

    x = torch.randn(100, device=DEV)
    with pytest.raises(GraphCaptureError, match="capturing dynamic failed"):
        capture(dynamic, x)
    fn = GraphedFunction(dynamic)
    out = fn(x)
    assert out.shape == (max(int((x > 0).sum()), 1),) and "capturing dynamic failed" in fn.why
    # the device is still usable after the failed capture
    z = _nan(100)
    VA[(1,)](x, x, z, BLOCK=128)
    torch.cuda.synchronize()
    assert torch.equal(z, x + x)


def test_replay_ms_times_static_programs_and_names_dynamic_ones():
    from tilepy_hip.graphs import replay_ms

    x, w = torch.randn(16, 256, device=DEV), torch.randn(256, device=DEV)
    ms, why = replay_ms(_host_program, [x, w], warmup=2, runs=5)
    assert why == "" and ms is not None and ms > 0

    def dynamic(x, w):
        return _host_program(x[: int((x[:, 0] > 0).sum().item()) + 1], w)

    ms, why = replay_ms(dynamic, [x, w], warmup=2, runs=5)
    assert ms is None and "capturing dynamic failed" in why


def test_evaluation_times_a_model_eagerly_and_by_graph_replay():
    from argus_agent.evaluate import _time, _time_graph

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(256, device=DEV))

        def forward(self, x):
            return _host_program(x, self.w.detach())

    net, x = Net(), torch.randn(64, 256, device=DEV)
    eager = _time(net, [x], 2, 10)
    graph, note = _time_graph(net, [x], 2, 10)
    assert note == "" and 0 < graph and 0 < eager


def test_timing_rotates_input_sets_eagerly_and_by_graph_replay():
    """The agent's timers take the extra input sets in turn: eagerly each set is passed to forward; by graph
    replay each set is captured into a graph of its own (its copy of the inputs), and the replays' outputs are
    each set's own result."""
    from argus_agent.evaluate import _time, _time_graph
    from tilepy_hip import graphs
    from tilepy_hip.graphs import rotation_count

    seen = []

    class Net(torch.nn.Module):
        def forward(self, x):
            seen.append(x.data_ptr())
            return x * 2.0

    sets = [[torch.randn(1024, 1024, device=DEV)] for _ in range(3)]
    ms = _time(Net(), sets[0], 3, 6, sets[1:])
    assert ms > 0 and seen[-6:] == [s[0].data_ptr() for s in sets] * 2   # runs 0-5 cycle through the sets
    captured = []
    real_capture = graphs.capture

    def recording(fn, *xs, **kw):
        g = real_capture(fn, *xs, **kw)
        captured.append((g, xs[0]))
        return g

    graphs.capture = recording
    try:
        graph_ms, note = _time_graph(Net(), sets[0], 2, 6, sets[1:])
    finally:
        graphs.capture = real_capture
    assert note == "" and graph_ms > 0 and len(captured) == 3
    for g, x in captured:
        torch.testing.assert_close(g.replay(), x * 2.0, rtol=0, atol=0)   # each graph on its own set
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert rotation_count(8 << 20, l2) * (8 << 20) >= 2 * l2
