"""Compile rendered kernels: NVRTC (nvcc as fallback) for NVIDIA, an AMDGPU-capable clang for AMD; cache the
binaries on disk (`cache.py`); report resource usage (registers, shared memory, spills).

Toolchains are found, in order:
  NVIDIA  NVRTC from the nvidia-cuda-nvrtc wheel (nvidia/cu13 or nvidia/cuda_nvrtc), the CUDA toolkit, or
          the system loader; else `nvcc` on PATH or in $CUDA_HOME/bin.
  AMD     $TILEPY_HIP_CLANG; `hipcc`; clang-22 ... clang-15 and `clang` when they list the amdgcn target;
          the ziglang wheel's bundled clang (`python -m ziglang clang`).
A C++ error raises `BuildError` with the generated source's path and the tilepy line of the statement the
error is in (from the `// tilepy: file:line` comments the renderer writes).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import linecache
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tilepy.errors import CompileError, Span

from ._version import __version__
from .cache import KernelCache, make_key
from .render import get_render_target, render_kernel

INCLUDE_DIR = Path(__file__).resolve().parent / "include"


class BuildError(CompileError):
    """The C++ compiler rejected the generated source (a bug in tilepy_hip, or an unsupported construct)."""

    kind = "build error"


class ToolchainMissing(CompileError):
    kind = "toolchain error"


@dataclass
class CompiledKernel:
    """A built kernel: `.source` (HIP C++), `.binary` (cubin / AMD code object), `.resources` (registers,
    shared memory, spills ...), `.path` (the cached source file), `.binary_path`."""

    name: str
    target: str
    source: str
    binary: bytes
    resources: dict
    path: str
    binary_path: str
    key: str
    num_threads: int
    smem_bytes: int
    params: list = field(default_factory=list)  # tilepy.ir.Param list, in launch order
    toolchain: str = ""
    kir: object = None
    tensor_maps: list = field(default_factory=list)  # render.tma.TensorMapSpec per extra tensor-map parameter

    def sass(self) -> str:
        """Disassembly: SASS via cuobjdump (NVIDIA) or the AMDGPU assembly (AMD)."""
        return disassemble(self)


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

    def compile(self, source: str, src_path: Path, rt, options=()) -> tuple[bytes, str]:
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
                raise _BuildFailed(log)
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
            cubin = ctypes.create_string_buffer(size.value)
            self._check(lib.nvrtcGetCUBIN(prog, cubin))
            return cubin.raw, log
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _check(self, rc):
        if rc != 0:
            raise RuntimeError(f"NVRTC error {rc}: {self.lib.nvrtcGetErrorString(rc).decode()}")


class _BuildFailed(Exception):
    pass


class Nvcc:
    def __init__(self, path: str):
        self.path = path
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"release (\d+\.\d+)", out)
        self.version = m.group(1) if m else "unknown"
        self.name = f"nvcc {self.version}"

    def compile(self, source: str, src_path: Path, rt, options=()) -> tuple[bytes, str]:
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
                raise _BuildFailed(log)
            return out.read_bytes(), log


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

    def compile(self, source: str, src_path: Path, rt, options=()) -> tuple[bytes, str, str]:
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
                raise _BuildFailed(log)
            asm_text = asm.read_text()
            p = subprocess.run(
                [*self.cmd, "--target=amdgcn-amd-amdhsa", f"-mcpu={rt.arch}", "-c", str(asm), "-o", str(obj)],
                capture_output=True,
                text=True,
            )
            if p.returncode != 0:
                raise _BuildFailed(log + p.stdout + p.stderr)
            binary = obj.read_bytes()
            if self.lld:
                p = subprocess.run(
                    [*self.lld, "-shared", str(obj), "-o", str(hsaco)], capture_output=True, text=True
                )
                if p.returncode == 0:
                    binary = hsaco.read_bytes()
            return binary, log, asm_text


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


# ---------------------------------------------------------------------- resources
def parse_nvidia_resources(log: str) -> dict:
    res = {}
    m = re.search(r"Used (\d+) registers", log)
    if m:
        res["registers"] = int(m.group(1))
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if m:
        res["stack_bytes"], res["spill_stores"], res["spill_loads"] = map(int, m.groups())
    m = re.search(r"(\d+) bytes smem", log)
    res["static_smem"] = int(m.group(1)) if m else 0
    m = re.search(r"used (\d+) barriers", log)
    if m:
        res["barriers"] = int(m.group(1))
    return res


def parse_amd_resources(asm: str) -> dict:
    res = {}
    for key, pat in (
        ("vgprs", r"; NumVgprs: (\d+)"),
        ("agprs", r"; NumAgprs: (\d+)"),
        ("sgprs", r"; NumSgprs: (\d+)"),
        ("scratch_bytes", r"; ScratchSize: (\d+)"),
        ("occupancy", r"; Occupancy: (\d+)"),
        ("static_smem", r"; LDSByteSize: (\d+)"),
        ("vgpr_spills", r"\.vgpr_spill_count:\s+(\d+)"),
        ("sgpr_spills", r"\.sgpr_spill_count:\s+(\d+)"),
    ):
        m = re.search(pat, asm)
        if m:
            res[key] = int(m.group(1))
    res["registers"] = res.get("vgprs", 0) + res.get("agprs", 0)
    res["spill_stores"] = res.get("vgpr_spills", 0) + res.get("sgpr_spills", 0)
    return res


def disassemble(ck: CompiledKernel) -> str:
    if ck.target.startswith("gfx"):
        return ck.resources.get("_asm", "") or Path(ck.binary_path).with_suffix(".s").read_text()
    tool = find_cuobjdump()
    if tool is None:
        raise ToolchainMissing("cuobjdump not found", hint="pip install nvidia-cuda-cuobjdump")
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(tool) + os.pathsep + env.get("PATH", "")  # cuobjdump runs nvdisasm
    env.setdefault("NVDISASM_PATH", os.path.dirname(tool))
    p = subprocess.run([tool, "-sass", ck.binary_path], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"cuobjdump failed: {p.stderr}")
    return p.stdout


# ---------------------------------------------------------------------- errors
def _tilepy_line(source: str, cline: int) -> Span | None:
    lines = source.splitlines()
    for i in range(min(cline, len(lines)) - 1, -1, -1):
        m = re.search(r"// tilepy: (.*):(\d+)$", lines[i])
        if m:
            file, line = m.group(1), int(m.group(2))
            return Span(file, line, 0, linecache.getline(file, line).rstrip("\n"))
    return None


def _build_error(log: str, source: str, src_path: Path, compiler: str, target: str, kir=None) -> BuildError:
    name = re.escape(src_path.name)
    m = re.search(name + r"\((\d+)\): (?:catastrophic )?error", log) or re.search(
        name + r":(\d+):\d+: (?:fatal )?error", log
    )
    cline = int(m.group(1)) if m else 0
    span = _tilepy_line(source, cline) if cline else None
    errors = [ln for ln in log.splitlines() if "error" in ln][:8]
    where = f"{src_path}:{cline}" if cline else str(src_path)
    msg = (
        f"{compiler} could not compile the generated source {where} for {target}"
        + (f" (the statement at {span.file}:{span.line})" if span else "")
        + ":\n    "
        + "\n    ".join(errors)
    )
    if span is None and kir is not None:
        span = Span(kir.file, kir.line, 0, linecache.getline(kir.file, kir.line).rstrip("\n"))
    return BuildError(
        msg,
        span,
        f"this is a tilepy_hip bug or an unsupported construct; the generated source is at {src_path}",
    )


# ---------------------------------------------------------------------- compile with cache
_MEMO: dict = {}


def compile_ir(kir, target=None, *, cache_dir=None, options=(), force: bool = False) -> CompiledKernel:
    """Render, compile (or fetch from the cache) one specialized kernel."""
    from tilepy.printer import format_ir

    # Launch path: the same specialization (kernels cache their KernelIR objects) skips rendering and hashing,
    # which cost milliseconds per launch. The KernelIR is kept in the entry so its id is never reused.
    fast_key = (id(kir), target or kir.target, str(cache_dir), tuple(options))
    fast = _MEMO.get(fast_key)
    if fast is not None and fast[0] is kir and not force:
        return fast[1]
    rt = get_render_target(target or kir.target)
    source, smem, tensor_maps = render_kernel(kir, rt)
    if rt.vendor == "nvidia":
        tool = nvidia_compiler()
        if tool is None:
            raise ToolchainMissing(
                f"no NVIDIA compiler found to build `{kir.name}` for {rt.name}",
                Span(kir.file, kir.line, 0),
                "pip install nvidia-cuda-nvrtc (or put nvcc on PATH)",
            )
    else:
        tool = find_amd_clang()
        if tool is None:
            raise ToolchainMissing(
                f"no AMDGPU-capable clang found to build `{kir.name}` for {rt.name}",
                Span(kir.file, kir.line, 0),
                "apt-get install clang-19, or pip install ziglang, or set TILEPY_HIP_CLANG",
            )
    key = make_key(
        {
            "ir": format_ir(kir),
            "constexprs": {k: repr(v) for k, v in kir.constexprs.items()},
            "target": rt.name,
            "compiler": tool.name,
            "options": list(options),
            "source": source,
            "tilepy_hip": __version__,
        }
    )
    memo = _MEMO.get((key, str(cache_dir)))
    if memo is not None and not force:
        _MEMO[fast_key] = (kir, memo)
        return memo
    cache = KernelCache(cache_dir)
    src_path, bin_path, _ = cache.paths(key)
    hit = None if force else cache.load(key)
    if hit is not None:
        binary, meta = hit
        resources = meta["resources"]
    else:
        from .cache import write_atomic

        write_atomic(src_path, source)
        try:
            out = tool.compile(source, src_path, rt, options)
        except _BuildFailed as exc:
            raise _build_error(str(exc), source, src_path, tool.name, rt.name, kir) from None
        binary, log = out[0], out[1]
        if rt.vendor == "nvidia":
            resources = parse_nvidia_resources(log)
        else:
            resources = parse_amd_resources(out[2])
            write_atomic(bin_path.with_suffix(".s"), out[2])
        resources["dynamic_smem"] = smem
        resources["threads"] = kir.num_threads
        cache.store(
            key,
            source,
            binary,
            {
                "resources": resources,
                "kernel": kir.name,
                "target": rt.name,
                "compiler": tool.name,
                "file": kir.file,
                "line": kir.line,
            },
        )
    ck = CompiledKernel(
        kir.name,
        rt.name,
        source,
        binary,
        resources,
        str(src_path),
        str(bin_path),
        key,
        kir.num_threads,
        smem,
        list(kir.params),
        tool.name,
        kir,
        tensor_maps,
    )
    _MEMO[(key, str(cache_dir))] = ck
    _MEMO[fast_key] = (kir, ck)
    return ck


def compile(
    kernel,
    target: str | None = None,
    *,
    cache_dir=None,
    options=(),
    force: bool = False,  # noqa: A001
    **constexprs,
) -> CompiledKernel:
    """Specialize `kernel` (a tilepy.Kernel) for `target` and the constexprs, render, build and cache it.

    >>> ck = compile(stdlib_kernels.vector_add.vector_add, target="sm_90a", BLOCK=1024)   # doctest: +SKIP
    >>> ck.resources["registers"], ck.path                                                # doctest: +SKIP
    """
    kir = kernel.ir(target, **constexprs)
    return compile_ir(kir, target or kir.target, cache_dir=cache_dir, options=options, force=force)
