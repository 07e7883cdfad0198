"""Launch-argument checks (no GPU needed: they run before anything touches the device) and the CLI."""

import pytest
import torch

import tilepy as tp
import tilepy_hip
from stdlib_kernels import KERNELS
from tilepy_hip import build
from tilepy_hip.__main__ import main
from tilepy_hip.launch import pack_args

needs_nv = pytest.mark.skipif(build.nvidia_compiler() is None, reason="no NVRTC or nvcc here")


@pytest.fixture
def softmax_ck():
    return tilepy_hip.compile(KERNELS["softmax"], target="sm_90a", BLOCK_N=16)


@needs_nv
def test_signature_checks(softmax_ck):
    x = torch.randn(4, 8)
    with pytest.raises(tp.LaunchError, match="takes 2 run-time arguments"):
        pack_args(softmax_ck, [x])
    with pytest.raises(tp.LaunchError, match="must be a torch tensor"):
        pack_args(softmax_ck, [x.numpy(), x])
    with pytest.raises(tp.LaunchError, match="dtype torch.float64"):
        pack_args(softmax_ck, [x.double(), x])
    with pytest.raises(tp.LaunchError, match="has 1 dimensions"):
        pack_args(softmax_ck, [x.reshape(-1), x])
    with pytest.raises(tp.LaunchError, match="dimension `M` is 4 in `X` but 5 in `Y`"):
        pack_args(softmax_ck, [x, torch.randn(5, 8)])
    with pytest.raises(tp.LaunchError, match="not contiguous"):
        pack_args(softmax_ck, [torch.randn(8, 4).t(), x])
    with pytest.raises(tp.LaunchError, match="is on cpu"):
        pack_args(softmax_ck, [x, x])


@needs_nv
def test_scalar_argument_checks():
    ck = tilepy_hip.compile(KERNELS["rmsnorm"], target="sm_90a", BLOCK_N=16)
    x, w = torch.randn(2, 8), torch.randn(8)
    with pytest.raises(tp.LaunchError, match="must be a number"):
        pack_args(ck, [x.cuda() if torch.cuda.is_available() else x, w, x, "eps"])


def test_launch_without_a_gpu_says_so():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(tp.LaunchError, match="no CUDA device"):
        tilepy_hip.launch(KERNELS["vector_add"], (1,), torch.randn(4), torch.randn(4), torch.randn(4))


def test_cli_emit_writes_the_source(tmp_path, capsys):
    out = tmp_path / "va.cu"
    assert (
        main(
            [
                "emit",
                "stdlib_kernels/vector_add.py",
                "--kernel",
                "vector_add",
                "--target",
                "gfx942",
                "--param",
                "BLOCK=512",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    text = out.read_text()
    assert "vector_add(" in text and "BLOCK=512" in text


@needs_nv
def test_cli_compile_prints_resources_and_writes_the_binary(tmp_path, capsys):
    out = tmp_path / "gemm.cu"
    rc = main(
        [
            "emit",
            "stdlib_kernels/gemm.py",
            "--kernel",
            "gemm",
            "--target",
            "sm_80",
            "--param",
            "BK=32",
            "--param",
            "INSTR=tp.nv.mma_m16n8k16_bf16",
            "--param",
            "WARPS=(2, 2)",
            "-o",
            str(out),
            "--compile",
        ]
    )
    assert rc == 0
    err = capsys.readouterr().err
    assert "registers" in err and "shared memory 16384 bytes" in err and "spills 0 bytes" in err
    assert (tmp_path / "gemm.cubin").read_bytes()[:4] == b"\x7fELF"


def test_cli_reports_compile_errors(tmp_path, capsys):
    rc = main(
        [
            "emit",
            "stdlib_kernels/gemm.py",
            "--kernel",
            "gemm",
            "--target",
            "sm_90a",
            "--param",
            "BK=128",
            "--param",
            "INSTR=tp.nv.wgmma_m64n64k16_bf16",
            "--param",
            "WARPS=(1, 1)",
            "--param",
            "SWIZZLE_A=tp.Swizzle(3, 3, 3)",
            "-o",
            str(tmp_path / "x.cu"),
        ]
    )
    assert rc == 1 and "sm_90a" in capsys.readouterr().err


def test_cli_unknown_kernel(capsys):
    assert main(["emit", "stdlib_kernels/vector_add.py", "--kernel", "nope", "--target", "sm_90a"]) == 2
    assert "no kernel `nope`; kernels: vector_add" in capsys.readouterr().err


def test_cli_emit_uses_the_files_presets_for_the_target(tmp_path):
    # gemm.py's defaults use mma.sync, which gfx942 does not have: its PRESETS["gfx942"] picks MFMA
    from stdlib_kernels import gemm

    for target, needle in (("gfx942", "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k"), ("sm_90a", "wgmma.mma_async")):
        out = tmp_path / f"gemm_{target}.cu"
        assert main(["emit", "stdlib_kernels/gemm.py", "--kernel", "gemm", "--target", target, "-o", str(out)]) == 0
        text = out.read_text()
        assert needle in text
        assert f"BK={gemm.PRESETS[target]['BK']}," in text
    # --param overrides the preset, value by value
    out = tmp_path / "gemm_override.cu"
    argv = ["emit", "stdlib_kernels/gemm.py", "--kernel", "gemm", "--target", "sm_90a", "--param",
            "INSTR=tp.nv.mma_m16n8k16_bf16", "--param", "WARPS=(2, 2)", "-o", str(out)]
    assert main(argv) == 0
    text = out.read_text()
    assert "wgmma" not in text and "tp_mma_m16n8k16_bf16(" in text and "BK=64," in text
