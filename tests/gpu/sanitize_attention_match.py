"""compute-sanitizer target: minGPT's written-out attention lowered for sm_90a (attention_match.py) once in fp32
(attention_fp32 after the TF32 splits) and once in bf16 (attention_fwd), at small sizes. Prints ok and the max
error against eager."""

import importlib.util
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from argus_agent.lower import lower_model, render_program  # noqa: E402
from tests.gpu.test_gpu_lower_attention_match import WrittenOut  # noqa: E402

for dtype, shape in ((torch.float32, (2, 3, 100, 64)), (torch.bfloat16, (2, 3, 130, 64))):
    model = WrittenOut(256).to(dtype)
    xs = [torch.randn(shape).to(dtype) for _ in range(3)]
    src = render_program(lower_model(model, xs, "sm_90a"))
    assert "bmm" not in src
    p = os.path.join(tempfile.mkdtemp(), f"attn_match_{str(dtype)[6:]}.py")
    with open(p, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(os.path.basename(p)[:-3], p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, xs = model.cuda(), [x.cuda() for x in xs]
    with torch.no_grad():
        out = mod.argus_forward(model, *xs)
        torch.cuda.synchronize()
        print("ok", dtype, float((out.double() - model(*xs).double()).abs().max()))
