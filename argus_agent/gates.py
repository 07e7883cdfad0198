"""The gates a candidate passes before it is tested: the verifier (tilepy_verify), the resource estimate and
the limits of the target (tilepy.targets), and the compiler (tilepy_hip).

(Named gates, not checks: the verifier's own analyses are its checks, `tilepy_verify/checks/`.)
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import tilepy_hip
import tilepy_verify
from tilepy.targets import get_target

IR_TARGET = {"cpu": "sm_90a"}  # the interpreter runs the kernels with the default target's semantics


def ir_target(target: str) -> str:
    return IR_TARGET.get(target, target)


@dataclass
class Verdict:
    status: str                 # "verified" | "failed" | "skipped"
    message: str = ""
    findings: list = field(default_factory=list)  # dicts: kernel, check, severity, message, span, counterexample
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status != "failed"

    def to_dict(self) -> dict:
        return {"status": self.status, "message": self.message, "findings": self.findings,
                "elapsed_s": self.elapsed_s}


_VERIFIER_DIGEST: str | None = None


def verifier_digest() -> str:
    """A digest of the code a verdict depends on (tilepy's IR builder and tilepy_verify, every source file): a
    cached verdict is reused only by the same verifier."""
    global _VERIFIER_DIGEST
    if _VERIFIER_DIGEST is None:
        import tilepy

        h = hashlib.sha256()
        for pkg in (tilepy, tilepy_verify):
            root = Path(pkg.__file__).parent
            for f in sorted(root.rglob("*.py")):
                h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
        _VERIFIER_DIGEST = h.hexdigest()[:16]
    return _VERIFIER_DIGEST


def verify_cached(kernels: dict, target: str, cache_dir, source_digest: str) -> Verdict:
    """`verify_kernels`, remembered per candidate source (its kernels, their spans: the file is named by the same
    digest), target and verifier (`verifier_digest`) in `cache_dir`: the tuner's parallel pre-build verifies a
    point once, and its evaluation reuses that verdict. An unreadable entry is recomputed and rewritten."""
    path = Path(cache_dir) / f"{source_digest}-{target}-{verifier_digest()}.json"
    try:
        d = json.loads(path.read_text())
        return Verdict(d["status"], d["message"], d["findings"], d["elapsed_s"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    verdict = verify_kernels(kernels, target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{id(verdict)}.tmp")
        tmp.write_text(json.dumps(verdict.to_dict(), default=str))
        tmp.replace(path)   # atomic: a reader never sees half an entry
    except OSError:
        pass
    return verdict


def verify_kernels(kernels: dict, target: str) -> Verdict:
    """Run tilepy_verify on every kernel (default constexprs); errors fail, performance findings inform."""
    verify = tilepy_verify.verify
    t0 = time.perf_counter()
    findings, errors = [], 0
    for name, k in kernels.items():
        try:
            report = verify(k, target=ir_target(target))
        except Exception as e:  # a verifier crash is reported, not hidden
            findings.append({"kernel": name, "check": "verifier", "severity": "error",
                             "message": f"tilepy_verify raised {type(e).__name__}: {e}", "span": "",
                             "counterexample": {}})
            errors += 1
            continue
        for f in getattr(report, "findings", []):
            sev = getattr(f, "severity", "error")
            errors += sev == "error"
            findings.append({"kernel": name, "check": getattr(f, "check", "?"), "severity": sev,
                             "message": str(f), "span": str(getattr(f, "span", "")),
                             "counterexample": _plain(getattr(f, "counterexample", {}) or {})})
        if not getattr(report, "ok", True) and not any(f["kernel"] == name and f["severity"] == "error"
                                                       for f in findings):
            errors += 1
            findings.append({"kernel": name, "check": "verifier", "severity": "error",
                             "message": "report not ok", "span": "", "counterexample": {}})
    dt = time.perf_counter() - t0
    if errors:
        return Verdict("failed", f"{errors} verification error(s)", findings, dt)
    return Verdict("verified", f"{len(kernels)} kernel(s) verified", findings, dt)


def _plain(d: dict) -> dict:
    return {str(k): (v if isinstance(v, int | float | str | bool | type(None)) else repr(v)) for k, v in d.items()}


@dataclass
class Resources:
    threads: int
    shared_bytes: int
    registers: int
    source: str  # "estimate" | "compiled"
    spills: int = 0

    def to_dict(self):
        return dict(self.__dict__)


def estimate(kernel, target: str, constexprs: dict | None = None) -> Resources:
    """Before compiling: tilepy's estimate from the IR (threads, shared memory, registers with every register
    tile live at once). Raises tilepy errors."""
    import tilepy as tp

    r = tp.estimate_resources(kernel.ir(ir_target(target), **(constexprs or {})))
    return Resources(r.threads, r.shared_bytes, r.registers, "estimate")


def fits(res: Resources, target: str) -> str:
    """'' when `res` fits the target, else why not."""
    tgt = get_target(ir_target(target))
    if res.threads > tgt.max_threads or res.threads % tgt.warp_size:
        return f"{res.threads} threads per block (limit {tgt.max_threads}, multiple of {tgt.warp_size})"
    if res.shared_bytes > tgt.shared_bytes:
        return f"{res.shared_bytes} B of shared memory (limit {tgt.shared_bytes} B)"
    if res.registers > tgt.max_registers:
        return f"~{res.registers} registers per thread ({res.source}; limit {tgt.max_registers})"
    if res.spills:
        return f"{res.spills} bytes of register spills"
    return ""


def estimate_veto(res: Resources, target: str, can_compile: bool) -> str:
    """Why the estimate alone rules a kernel out, or ''. The register estimate counts every register tile live
    at once, an upper bound: where the kernel will be compiled, the compiler's count decides (a fused GEMM
    epilogue is estimated at ~470 registers and compiles to under 255), so registers alone veto nothing then."""
    why = fits(res, target)
    if why and can_compile and not fits(Resources(res.threads, res.shared_bytes, 0, res.source), target):
        return ""
    return why


def compiled_veto(res: Resources, target: str) -> str:
    """Why the compiled kernel cannot run on the target, or ''. Register spills are not a veto: they cost
    time, and the timing judges that (a conv epilogue spilling 504 bytes ran at 2.15x eager on the H100)."""
    return fits(Resources(res.threads, res.shared_bytes, res.registers, res.source), target)


def host_launched(source: str, names) -> set:
    """The kernels of `names` that the host functions of `source` name (the functions that are not kernels),
    or all of `names` when none does or the source does not parse: the build gate compiles these at their
    defaults. A kernel only used to derive another at module level (`conv_e = conv.fused(...)`) or left over
    from a template is not compiled there; anything launched is compiled at its launch anyway."""
    import ast

    names = set(names)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return names
    used = set()
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and not any(
                "kernel" in ast.unparse(d) for d in fn.decorator_list):
            used |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    return (used & names) or names


def build_check(kernels: dict, source: str, target: str, can_compile: bool) -> tuple[str, str]:
    """The build gate of a candidate's kernels: ('', '') when each builds its IR and fits the target, else
    (outcome, message) with outcome 'compile-error' or 'infeasible'. With `can_compile`, the kernels the host
    launches (`host_launched`) are compiled at their defaults and their compiled resources decide."""
    launched = host_launched(source, kernels)
    for name, k in kernels.items():
        try:
            res = estimate(k, target)
        except Exception as e:
            return "compile-error", f"{name}: {e}"
        # the interpreter (target cpu) has no register file, and the estimate is an upper bound the compiler
        # often halves (level3 minGPT / ViT reductions: ~260-290 estimated, run on the H100): no veto there
        why = estimate_veto(res, target, can_compile or target == "cpu")
        if why:
            return "infeasible", f"{name}: {why}"
        if can_compile and name in launched:
            compiled, err = compile_kernel(k, target)
            if err.startswith("compile error"):
                return "compile-error", f"{name}: {err}"
            why = compiled is not None and compiled_veto(compiled, target)
            if why:
                return "infeasible", f"{name}: compiled: {why}"
    return "", ""


def compile_kernel(kernel, target: str, constexprs: dict | None = None):
    """(Resources from the compiled kernel, '') or (None, why not). Only for GPU targets."""
    if target == "cpu":
        return None, "target cpu: kernels run on the interpreter, nothing to compile"
    try:
        ck = tilepy_hip.compile(kernel, target=target, **(constexprs or {}))
    except Exception as e:
        return None, f"compile error: {type(e).__name__}: {e}"
    r = getattr(ck, "resources", {}) or {}
    kir = kernel.ir(target, **(constexprs or {}))
    # tilepy_hip reports ptxas/clang figures: spill stores and loads, static and dynamic shared memory.
    shared = int(r.get("dynamic_smem", kir.shared_bytes)) + int(r.get("static_smem", 0))
    spills = sum(int(r.get(k, 0)) for k in ("spill_stores", "spill_loads", "vgpr_spills", "sgpr_spills"))
    return Resources(kir.num_threads, shared, int(r.get("registers", 0)), "compiled", spills), ""
