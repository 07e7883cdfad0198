"""Host overhead of launching tilepy kernels through tilepy_hip, next to torch's, on one GPU.

    python benchmarks/launch_overhead.py [model_new.py]

Times (CUDA events, median of 200 after warm-up): an empty-ish tilepy launch vs a tiny torch op, the stdlib
softmax kernel vs torch.softmax at 4096 x 2048, and (if given) a generated ModelNew against its Model.
"""

import statistics
import sys

import torch

from stdlib_kernels import softmax as sm
from stdlib_kernels import vector_add as va


def bench(fn, reps=200, warm=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def main():
    x = torch.randn(256, device="cuda")
    y, z = torch.randn_like(x), torch.empty_like(x)
    print(f"tiny vector_add (256): tilepy {bench(lambda: va.vector_add[(1,)](x, y, z, BLOCK=256)):7.1f} us   "
          f"torch add {bench(lambda: torch.add(x, y, out=z)):7.1f} us")
    a = torch.randn(4096, 2048, device="cuda")
    b = torch.empty_like(a)
    ours = bench(lambda: sm.softmax[(4096,)](a, b, BLOCK_N=2048))
    ref = bench(lambda: torch.softmax(a, dim=-1))
    print(f"softmax 4096x2048: tilepy {ours:7.1f} us   torch {ref:7.1f} us   ratio {ref / ours:.2f}x")
    if len(sys.argv) > 1:
        import runpy

        mod = runpy.run_path(sys.argv[1])
        torch.manual_seed(0)
        model = mod["Model"](*mod["get_init_inputs"]()).cuda()
        torch.manual_seed(0)
        new = mod["ModelNew"](*mod["get_init_inputs"]()).cuda()
        inputs = [t.cuda() for t in mod["get_inputs"]()]
        r, o = bench(lambda: model(*inputs)), bench(lambda: new(*inputs))
        print(f"{sys.argv[1]}: Model {r:7.1f} us   ModelNew {o:7.1f} us   speedup {r / o:.2f}x")
        out, ref = new(*inputs).double(), model(*inputs).double()
        print(f"relative error {float((out - ref).norm() / ref.norm()):.1e} (bf16 GEMM templates land near 3e-3)")


if __name__ == "__main__":
    main()
