"""C's rows off 16 bytes in gemm_fp8 (the realigned shared -> global store, tilepy_hip/render/copies.py): the
policy's form against the staged tile stored by every warpgroup (STORE_ALL=1) and the staged epilogue on the small
and large rows, each paired replay by replay with torch._scaled_mm on operands padded to 16s (pad not timed).

    python benchmarks/profile/realign_forms.py OUT.json [M,N,K ... | --call3 | --call4 | --call5 | --call6]
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from gemm_fp8 import fp8_row, inputs  # noqa: E402

from stdlib_kernels import gemm_fp8  # noqa: E402

SHAPES = [(2051, 2045, 1008), (2051, 2045, 4096), (4096, 4090, 1024), (1000, 1001, 1024), (1536, 1530, 1536)]


def forms(M, N, K):
    """call 2: the policy's form and its staged / STORE_ALL variants."""
    p = gemm_fp8.policy(M, N, K)
    out = {"policy": p}
    if p.get("EPILOGUE") == 1 and not p.get("SWAP"):
        out["store_all"] = dict(p, STORE_ALL=1)
    elif p.get("EPILOGUE") == 2 and not p.get("SWAP") and not p.get("PERSISTENT"):
        out["staged_store_all"] = dict(p, EPILOGUE=1, STORE_ALL=1)
        out["staged"] = dict(p, EPILOGUE=1)
    elif p.get("EPILOGUE") == 0 and not p.get("SWAP"):
        out["staged_store_all"] = dict(p, EPILOGUE=1, STORE_ALL=1)
    return out


STAGED = dict(EPILOGUE=1, STORE_ALL=1)
CALL3 = {
    "u192": lambda M, N, K: dict(gemm_fp8.UNALIGNED_N_192x192, **STAGED),
    "large": lambda M, N, K: dict(gemm_fp8.policy(4096, 4090, 1024), **STAGED),
    "mid": lambda M, N, K: dict(gemm_fp8.MID_128x128, **STAGED),
    "s64x128": lambda M, N, K: dict(gemm_fp8.SMALL_64x128, **STAGED),
    "s64x64": lambda M, N, K: dict(gemm_fp8.SMALL_64x64, STAGES=4 if K <= 512 else 6, **STAGED),
}
CALL3_SHAPES = {(1536, 1530, 1536): ("policy", "u192", "mid", "s64x128", "large"),
                (2560, 2045, 1024): ("policy", "u192", "mid", "large"),
                (512, 509, 512): ("policy", "s64x64", "s64x128"),
                (768, 765, 768): ("policy", "s64x64", "s64x128", "mid"),
                (8192, 8190, 1024): ("policy", "large", "u192"),
                (3000, 3001, 2048): ("policy", "large", "u192", "mid"),
                (4096, 4090, 1024): ("large", "u192", "mid")}


CALL4_SHAPES = [(2051, 2045, 1008), (2051, 2045, 4096), (3000, 3001, 2048), (4096, 4090, 1024), (1536, 1530, 1536),
                (768, 765, 768), (1000, 1001, 1024), (2560, 2045, 1024), (8192, 8190, 1024)]


def forms_call4(M, N, K):
    """call 4: the policy after the change; LARGE_STAGED with one wgmma group in flight and / or TMA-only copies."""
    p = gemm_fp8.policy(M, N, K)
    out = {"policy": p}
    if p.get("BN") == 256 and p.get("STORE_ALL") and (M, N, K) in ((4096, 4090, 1024), (1536, 1530, 1536)):
        out["in_flight"] = dict(p, IN_FLIGHT=1)
        out["tma_only"] = dict(p, TMA_ONLY=1)
        out["in_flight_tma_only"] = dict(p, IN_FLIGHT=1, TMA_ONLY=1)
    return out


CALL5_SHAPES = [(2048, 2048, 1008), (2051, 2045, 1008)]


def forms_call5(M, N, K):
    """call 5: where 2051 x 2045 x 1008's time goes: the 192 x 192 form's epilogues on the aligned 2048^3-ish shape
    (the TMA store, the staged tile by the producer, by every warpgroup) beside the ragged one."""
    u = dict(gemm_fp8.UNALIGNED_N_192x192)
    out = {"u192_store_all": u, "u192_producer_store": dict(u, STORE_ALL=0),
           "u192_registers": dict(u, STORE_ALL=0, EPILOGUE=0)}
    if N % 8 == 0:
        out["u192_tma_store"] = dict(u, STORE_ALL=0, EPILOGUE=2)
        out["policy"] = gemm_fp8.policy(M, N, K)
    return out


CALL6_SHAPES = [(2051, 2045, 1008), (2051, 2045, 4096), (4096, 4090, 1024), (2048, 2048, 1008)]


def forms_call6(M, N, K):
    """call 6: 192 x 176 tiles (11 x 12 = 132 at 2051 x 2045) against 192 x 192 and the large row's tiles, staged for
    every warpgroup; on the aligned 2048 x 2048 x 1008 with the TMA store."""
    u176, u192 = dict(gemm_fp8.UNALIGNED_N_192x176), dict(gemm_fp8.UNALIGNED_N_192x192)
    if N % 8 == 0:
        return {"policy": gemm_fp8.policy(M, N, K), "u176_tma_store": dict(u176, STORE_ALL=0, EPILOGUE=2),
                "u192_tma_store": dict(u192, STORE_ALL=0, EPILOGUE=2)}
    return {"policy": gemm_fp8.policy(M, N, K), "u176": u176, "u192": u192, "large": dict(gemm_fp8.LARGE_STAGED)}


def forms_call3(M, N, K):
    return {name: gemm_fp8.policy(M, N, K) if name == "policy" else CALL3[name](M, N, K)
            for name in CALL3_SHAPES[(M, N, K)]}


def main():
    dest = sys.argv[1]
    plans = {"--call3": (list(CALL3_SHAPES), forms_call3), "--call4": (CALL4_SHAPES, forms_call4),
             "--call5": (CALL5_SHAPES, forms_call5), "--call6": (CALL6_SHAPES, forms_call6)}
    if sys.argv[2:3] and sys.argv[2] in plans:
        shapes, pick = plans[sys.argv[2]]
    else:
        shapes, pick = [tuple(int(x) for x in s.split(",")) for s in sys.argv[2:]] or SHAPES, forms
    g = torch.Generator(device="cuda").manual_seed(8)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    for M, N, K in shapes:
        data = inputs(M, N, K, g)
        for name, p in pick(M, N, K).items():
            try:
                r = fp8_row(M, N, K, g, params=p, data=data)
            except Exception as e:  # a form that does not build or fit: named, the rest go on
                print(f"{M}x{N}x{K} {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            r["form"] = name
            res["rows"].append(r)
            print(f"{M}x{N}x{K} {name:18} ours {r['us']:7.2f} us  peer {r['torch_us']:7.2f}  ratio {r['ratio']:.3f}  "
                  f"paired {r['ratio_pairs']:.3f}  err {r['rel_err']:.2e}  regs {r['registers']}", flush=True)
    Path(dest).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
