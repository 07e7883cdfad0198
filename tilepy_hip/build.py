"""The build pipeline: render a kernel's IR, compile it with the target's toolchain (`toolchains.py`: NVRTC or
nvcc for NVIDIA, an AMDGPU-capable clang for AMD), cache the binaries on disk (`cache.py`), and report
resource usage (registers, shared memory, spills).

A C++ error raises `BuildError` with the generated source's path and the tilepy line of the statement the
error is in (from the `// tilepy: file:line` comments the renderer writes).
"""

from __future__ import annotations

import functools
import hashlib
import linecache
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tilepy.errors import CompileError, Span

from ._version import __version__
from .cache import KernelCache, make_key
from .render import get_render_target, render_kernel
from .toolchains import INCLUDE_DIR, BuildFailed, find_amd_clang, find_cuobjdump, nvidia_compiler


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
        raise ToolchainMissing("cuobjdump not found",
                               hint="pip install 'tilepy-hip[nvidia]' (or put a CUDA toolkit's cuobjdump on PATH)")
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


@functools.cache
def _headers_digest() -> str:
    """sha256 over the runtime headers (tilepy_hip/include), part of every kernel's cache key."""
    h = hashlib.sha256()
    for path in sorted(INCLUDE_DIR.iterdir()):
        if path.is_file():
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


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
                "pip install 'tilepy-hip[nvidia]' (NVRTC), or put a CUDA toolkit's nvcc on PATH",
            )
    else:
        tool = find_amd_clang()
        if tool is None:
            raise ToolchainMissing(
                f"no AMDGPU-capable clang found to build `{kir.name}` for {rt.name}",
                Span(kir.file, kir.line, 0),
                "pip install 'tilepy-hip[amd]' (clang from the ziglang wheel), or apt-get install clang-19, or set "
                "TILEPY_HIP_CLANG",
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
            "headers": _headers_digest(),  # the kernel #includes them: a header edit must not reuse old binaries
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
        except BuildFailed as exc:
            raise _build_error(str(exc), source, src_path, tool.name, rt.name, kir) from None
        binary = out.binary
        if rt.vendor == "nvidia":
            resources = parse_nvidia_resources(out.log)
        else:
            resources = parse_amd_resources(out.asm)
            write_atomic(bin_path.with_suffix(".s"), out.asm)
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
