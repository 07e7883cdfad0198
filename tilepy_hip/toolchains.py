"""The compilers tilepy_hip builds with, found once per process, each behind one interface:
`compile(source, src_path, render_target, options) -> Built` (the binary, the compiler's log and, for AMD,
the assembly), raising `BuildFailed` with the log.

Toolchains are found, in order:
  NVIDIA  NVRTC from the nvidia-cuda-nvrtc wheel (nvidia/cu13 or nvidia/cuda_nvrtc), the CUDA toolkit, or
          the system loader; else `nvcc` on PATH or in $CUDA_HOME/bin.
  AMD     $TILEPY_HIP_CLANG; `hipcc`; clang-22 ... clang-15 and `clang` when they list the amdgcn target;
          the ziglang wheel's bundled clang (`python -m ziglang clang`).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

INCLUDE_DIR = Path(__file__).resolve().parent / "include"


@dataclass(frozen=True)
class Built:
    """What a compiler produced: the binary (cubin / AMD code object), its log, and the assembly if it made one."""

    binary: bytes
    log: str
    asm: str = ""


# ---------------------------------------------------------------------- NVIDIA: NVRTC through ctypes
def _nvrtc_candidates():
    for entry in sys.path:
        for pattern in (
            "nvidia/cu13/lib/libnvrtc.so.*",
            "nvidia/cuda_nvrtc/lib/libnvrtc.so.*",
            "nvidia/cu12/lib/libnvrtc.so.*",
        ):
            yield from sorted(glob.glob(os.path.join(entry, pattern)))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            yield from sorted(glob.glob(os.path.join(home, "lib64", "libnvrtc.so*")))
    yield "libnvrtc.so"


def _is_real_lib(path: str) -> bool:
    return "builtins" not in os.path.basename(path) and ".alt." not in os.path.basename(path)


class Nvrtc:
    def __init__(self, path: str):
        # libnvrtc dlopens its builtins library by name; a wheel's copy is not on the loader's path.
        for builtins in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*"))):
            if ".alt." not in builtins:
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(path)
        self.path = path
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = f"{major.value}.{minor.value}"
        self.name = f"nvrtc {self.version}"
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def compile(self, source: str, src_path: Path, rt, options=()) -> Built:
        lib = self.lib
        prog = ctypes.c_void_p()
        self._check(
            lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), str(src_path).encode(), 0, None, None)
        )
        opts = [
            f"--gpu-architecture={rt.arch}",
            "-std=c++17",
            f"-I{INCLUDE_DIR}",
            "--ptxas-options=-v",
            "-lineinfo",
            *options,
        ]
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        try:
            if rc != 0:
                raise BuildFailed(log)
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
            cubin = ctypes.create_string_buffer(size.value)
            self._check(lib.nvrtcGetCUBIN(prog, cubin))
            return Built(cubin.raw, log)
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _check(self, rc):
        if rc != 0:
            raise RuntimeError(f"NVRTC error {rc}: {self.lib.nvrtcGetErrorString(rc).decode()}")


class BuildFailed(Exception):
    """The compiler rejected the source; the message is its log."""


class Nvcc:
    def __init__(self, path: str):
        self.path = path
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"release (\d+\.\d+)", out)
        self.version = m.group(1) if m else "unknown"
        self.name = f"nvcc {self.version}"

    def compile(self, source: str, src_path: Path, rt, options=()) -> Built:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "kernel.cubin"
            num = rt.arch.removeprefix("sm_")
            cmd = [
                self.path,
                "-cubin",
                f"-gencode=arch=compute_{num},code={rt.arch}",
                "-std=c++17",
                f"-I{INCLUDE_DIR}",
                "-Xptxas",
                "-v",
                "-lineinfo",
                "-x",
                "cu",
                str(src_path),
                "-o",
                str(out),
                *options,
            ]
            p = subprocess.run(cmd, capture_output=True, text=True)
            log = p.stdout + p.stderr
            if p.returncode != 0:
                raise BuildFailed(log)
            return Built(out.read_bytes(), log)


@functools.cache
def nvidia_compiler():
    """The NVIDIA compiler to use (NVRTC, else nvcc), or None."""
    if os.environ.get("TILEPY_HIP_NVCC_ONLY") != "1":
        for path in _nvrtc_candidates():
            if not _is_real_lib(path):
                continue
            try:
                return Nvrtc(path)
            except OSError:
                continue
    for cand in (
        shutil.which("nvcc"),
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),
    ):
        if cand and os.path.exists(cand):
            return Nvcc(cand)
    return None


@functools.cache
def find_cuobjdump() -> str | None:
    for entry in sys.path:
        for pattern in (
            "nvidia/cu13/bin/cuobjdump",
            "nvidia/cuda_cuobjdump/bin/cuobjdump",
            "nvidia/cu12/bin/cuobjdump",
        ):
            hits = glob.glob(os.path.join(entry, pattern))
            if hits:
                return hits[0]
    found = shutil.which("cuobjdump")
    if found:
        return found
    cand = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump")
    return cand if os.path.exists(cand) else None


# ---------------------------------------------------------------------- AMD: clang with the AMDGPU target
@dataclass
class AmdClang:
    cmd: list  # how to run clang
    lld: list | None  # how to run ld.lld, if found
    version: str

    @property
    def name(self) -> str:
        tool = os.path.basename(self.cmd[-1]) if self.cmd[-1] != "clang" else " ".join(self.cmd)
        return f"clang {self.version} ({tool})"

    def compile(self, source: str, src_path: Path, rt, options=()) -> Built:
        with tempfile.TemporaryDirectory() as tmp:
            asm, obj, hsaco = Path(tmp) / "k.s", Path(tmp) / "k.o", Path(tmp) / "k.hsaco"
            cmd = [
                *self.cmd,
                "-x",
                "hip",
                f"--offload-arch={rt.arch}",
                "--cuda-device-only",
                "-nogpulib",
                "-nogpuinc",
                "-O3",
                "-std=c++17",
                f"-I{INCLUDE_DIR}",
                "-S",
                str(src_path),
                "-o",
                str(asm),
                *options,
            ]
            p = subprocess.run(cmd, capture_output=True, text=True)
            log = p.stdout + p.stderr
            if p.returncode != 0:
                raise BuildFailed(log)
            asm_text = asm.read_text()
            p = subprocess.run(
                [*self.cmd, "--target=amdgcn-amd-amdhsa", f"-mcpu={rt.arch}", "-c", str(asm), "-o", str(obj)],
                capture_output=True,
                text=True,
            )
            if p.returncode != 0:
                raise BuildFailed(log + p.stdout + p.stderr)
            binary = obj.read_bytes()
            if self.lld:
                p = subprocess.run(
                    [*self.lld, "-shared", str(obj), "-o", str(hsaco)], capture_output=True, text=True
                )
                if p.returncode == 0:
                    binary = hsaco.read_bytes()
            return Built(binary, log, asm_text)


def _clang_version(cmd) -> str | None:
    try:
        p = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"clang version (\S+)", p.stdout)
    return m.group(1) if m else None


def _has_amdgpu(cmd) -> bool:
    try:
        p = subprocess.run([*cmd, "-print-targets"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "amdgcn" in p.stdout


@functools.cache
def find_amd_clang() -> AmdClang | None:
    """An AMDGPU-capable clang, or None (see the module docstring for the search order)."""
    cands = []
    if os.environ.get("TILEPY_HIP_CLANG"):
        cands.append(os.environ["TILEPY_HIP_CLANG"].split())
    for name in ("hipcc", *(f"clang-{v}" for v in range(22, 14, -1)), "clang"):
        path = shutil.which(name)
        if path:
            cands.append([path])
    for cmd in cands:
        version = _clang_version(cmd)
        if version and _has_amdgpu(cmd):
            m = re.match(r"(\d+)", version)
            lld = None
            for name in (f"ld.lld-{m.group(1)}" if m else None, "ld.lld"):
                if name and shutil.which(name):
                    lld = [shutil.which(name)]
                    break
            return AmdClang(cmd, lld, version)
    try:
        import ziglang  # noqa: F401  (the ziglang wheel bundles clang with every LLVM target)

        cmd = [sys.executable, "-m", "ziglang", "clang"]
        version = _clang_version(cmd)
        if version:
            return AmdClang(cmd, [sys.executable, "-m", "ziglang", "ld.lld"], version)
    except ImportError:
        pass
    return None


def toolchain_info() -> dict:
    nv = nvidia_compiler()
    amd = find_amd_clang()
    return {
        "nvidia": nv.name if nv else None,
        "nvidia_path": getattr(nv, "path", None),
        "cuobjdump": find_cuobjdump(),
        "amd": amd.name if amd else None,
        "amd_cmd": " ".join(amd.cmd) if amd else None,
    }
