"""Front-end rules of the Hopper pipeline policies: mbarrier arrays (`tp.mbarrier(n, stages=S)`, indexed by a
uniform run-time stage), `tp.mma_async` / `tp.mma_wait(n)` and `tp.setmaxnreg`: what they accept, and the
errors (naming the line, with a hint) for what they do not."""

import pytest

import tilepy as tp


def _ir(kernel, target="sm_90a", **cx):
    return kernel.ir(target, **cx)


def test_array_index_types_and_text():
    @tp.kernel(threads=64, target="sm_90a")
    def k(X: tp.Tensor[tp.f32, "N"]):
        full = tp.mbarrier(1, stages=3)
        for i in range(X.shape[0]):
            tp.mbarrier_arrive(full[i % 3])
            tp.mbarrier_wait(full[i % 3], i // 3)

    text = str(_ir(k))
    assert "mbarrier_at(" in text and "stages" in text


@pytest.mark.parametrize("body,msg", [
    ("tp.mbarrier_arrive(full)", "array of 3 mbarriers, not one"),
    ("tp.mbarrier_arrive(full[3])", "mbarrier 3 is outside 0..2"),
    ("tp.mbarrier_arrive(full[tp.thread_id() % 3])", "must be a uniform integer"),
    ("tp.mbarrier_arrive(full[1:2])", "one stage index"),
])
def test_array_misuse_is_a_clear_error(tmp_path, body, msg):
    src = f'''
import tilepy as tp

@tp.kernel(threads=64, target="sm_90a")
def k(X: tp.Tensor[tp.f32, "N"]):
    full = tp.mbarrier(1, stages=3)
    {body}
'''
    p = tmp_path / "bad_mbar.py"
    p.write_text(src)
    import importlib.util

    spec = importlib.util.spec_from_file_location("bad_mbar", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(tp.CompileError) as e:
        mod.k.ir("sm_90a")
    assert msg in str(e.value) and "bad_mbar.py:7" in str(e.value)


def test_async_mma_needs_wgmma_and_wait_counts_are_checked(tmp_path):
    src = '''
import tilepy as tp

@tp.kernel(threads=128, target="sm_80")
def k(A: tp.Tensor[tp.bf16, 64, 16], B: tp.Tensor[tp.bf16, 16, 64], C: tp.Tensor[tp.f32, 64, 64]):
    I = tp.nv.mma_m16n8k16_bf16
    a = tp.load(A[0:64, 0:16], layout=tp.mma_layout(I, "a", (64, 16), (2, 2)))
    b = tp.load(B[0:16, 0:64], layout=tp.mma_layout(I, "b", (16, 64), (2, 2)))
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(I, (64, 64), (2, 2)))
    acc = tp.mma_async(a, b, acc)
    tp.store(C[0:64, 0:64], acc)

@tp.kernel(threads=128, target="sm_90a")
def w(X: tp.Tensor[tp.f32, "N"]):
    tp.mma_wait(9)

@tp.kernel(threads=256, target="sm_90a")
def r(X: tp.Tensor[tp.f32, "N"]):
    if tp.warpgroup_id() == 0:
        tp.setmaxnreg(300)
'''
    p = tmp_path / "bad_async.py"
    p.write_text(src)
    import importlib.util

    spec = importlib.util.spec_from_file_location("bad_async", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(tp.CompileError, match="issues wgmma groups"):
        mod.k.ir("sm_80")
    with pytest.raises(tp.CompileError, match="0..7"):
        mod.w.ir("sm_90a")
    with pytest.raises(tp.CompileError, match="24..256"):
        mod.r.ir("sm_90a")
