"""One launch each of the fused LLM ops at benchmarks/llm_ops.py's shapes and defaults, for `ncu`:

    ncu --section SpeedOfLight --section Occupancy --section WarpStateStats -k regex:'layer_norm|merge_attn|rotary' \
        python3 benchmarks/profile/llm_ops_kernels.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from stdlib_kernels import llm_ops as L  # noqa: E402

d, bf = torch.device("cuda"), torch.bfloat16
x = torch.randn(32768, 4096, device=d).to(bf)
w, b = torch.randn(4096, device=d).to(bf), torch.randn(4096, device=d).to(bf)
L.launch_layer_norm(x, w, b, torch.empty_like(x), 1e-5)
del x
po, so = torch.randn(16384, 32, 128, device=d).to(bf), torch.randn(16384, 32, 128, device=d).to(bf)
pl, sl = torch.randn(16384, 32, device=d), torch.randn(16384, 32, device=d)
L.launch_merge_attn_states_lse(po, pl, so, sl, torch.empty_like(po), torch.empty_like(pl))
del po, so
t = 32768
pos = torch.randint(0, t, (t,), device=d)
cs = torch.randn(t, 128, device=d)
q, k = torch.randn(t, 32 * 128, device=d).to(bf), torch.randn(t, 8 * 128, device=d).to(bf)
for neox in (True, False):
    L.launch_rotary(pos, q, k, cs, 128, neox)
torch.cuda.synchronize()
print("ok")
