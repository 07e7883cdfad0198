"""Command line: render (and build) a tilepy kernel.

    python -m tilepy_hip emit FILE --kernel NAME --target TARGET [--param NAME=VALUE ...] [-o OUT] [--compile]
    python -m tilepy_hip toolchain

`emit` writes the generated HIP C++ (to OUT, else stdout). With --compile it also builds it and prints the
resource usage (registers, shared memory, spills); the binary is written next to OUT (OUT with .cubin /
.hsaco), or, without -o, stays in the kernel cache only (nothing is written to the current directory).

Exit status: 0 done; 1 the kernel does not compile (a tilepy error, file:line:col with a hint); 2 usage or
input errors (no such file, a FILE that does not import, a missing -o directory, TILEPY_HIP_CACHE not a
directory), each one line with file:line where there is one, and a hint.
Constexprs not given with --param come from FILE's `PRESETS[TARGET]` where FILE has one (a dict from target
name to constexpr values, as the stdlib kernels have), else from the kernel's defaults.
Parameter values are Python expressions evaluated with `tilepy as tp` in scope: `--param BLOCK=1024`,
`--param "INSTR=tp.nv.mma_m16n8k16_bf16"`, `--param "WARPS=(2, 2)"`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

import tilepy as tp

from .build import compile_ir
from .render import RENDER_TARGETS, render_source
from .toolchains import toolchain_info


class InputError(Exception):
    """A usage or input error: printed as one message (with file:line and a hint), exit status 2."""


def _load_module(path: str):
    p = Path(path).resolve()
    if not p.is_file():
        raise InputError(f"tilepy_hip: no such file: {path}; hint: pass the Python file that defines the kernel")
    sys.path.insert(0, str(p.parent))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise InputError(f"{path}:{exc.lineno}:{exc.offset or 0}: syntax error: {exc.msg}; hint: FILE must be a "
                         "Python module (run `python FILE` to see the error in full)") from None
    except Exception as exc:
        import traceback

        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == p]
        where = f"{path}:{frames[-1].lineno}" if frames else path
        raise InputError(f"{where}: importing it raised {type(exc).__name__}: {exc}; hint: run `python FILE` to "
                         "debug it") from None
    return module


def _check_outputs(args):
    if args.out:
        parent = Path(args.out).resolve().parent
        if not parent.is_dir():
            raise InputError(f"tilepy_hip: -o {args.out}: the directory {parent} does not exist; hint: create it "
                             f"first (mkdir -p {parent})")
    if args.compile:
        from .cache import cache_root

        root = cache_root()
        if root.exists() and not root.is_dir():
            raise InputError(f"tilepy_hip: TILEPY_HIP_CACHE={root} is a file, not a directory; hint: point it at "
                             "a directory (it is created if missing), or unset it for ~/.cache/tilepy_hip")


def _params(items) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise SystemExit(f"tilepy_hip: --param takes NAME=VALUE, got {item!r}")
        name, text = item.split("=", 1)
        try:
            out[name.strip()] = eval(text, {"tp": tp, "tilepy": tp})  # noqa: S307 - the user's own command line
        except Exception as exc:
            raise SystemExit(f"tilepy_hip: cannot evaluate --param {name}={text!r}: {exc}") from None
    return out


def _preset(module, kernel, target: str) -> dict:
    """The constexprs FILE's PRESETS gives this target (those the kernel takes), or {}."""
    presets = getattr(module, "PRESETS", None)
    values = presets.get(target) if isinstance(presets, dict) else None
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if k in kernel.constexpr_names}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tilepy_hip", description="HIP C++ backend for tilepy kernels"
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("emit", help="write a kernel's generated HIP C++ (and build it with --compile)")
    e.add_argument("file")
    e.add_argument("--kernel", required=True, help="name of the @tp.kernel in FILE")
    e.add_argument("--target", required=True, choices=sorted(RENDER_TARGETS))
    e.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a constexpr value (repeatable); overrides FILE's PRESETS[TARGET]")
    e.add_argument("-o", "--out", help="output file (default: stdout)")
    e.add_argument(
        "--compile", action="store_true", help="also build, write the binary, print resource usage"
    )
    sub.add_parser("toolchain", help="print the compilers tilepy_hip found")
    args = ap.parse_args(argv)

    if args.cmd == "toolchain":
        print(json.dumps(toolchain_info(), indent=1))
        return 0
    try:
        return _emit(args)
    except InputError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head`: the reader left; nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _emit(args) -> int:
    _check_outputs(args)
    module = _load_module(args.file)
    kernel = getattr(module, args.kernel, None)
    if not isinstance(kernel, tp.Kernel):
        names = [n for n, v in vars(module).items() if isinstance(v, tp.Kernel)]
        raise InputError(
            f"tilepy_hip: {args.file} has no kernel `{args.kernel}`; kernels: {', '.join(names) or 'none'}"
        )
    try:
        kir = kernel.ir(args.target, **{**_preset(module, kernel, args.target), **_params(args.param)})
        source, smem = render_source(kir, args.target)
        ck = compile_ir(kir, args.target) if args.compile else None
    except tp.TilepyError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if args.out:
        Path(args.out).write_text(source)
    else:
        sys.stdout.write(source)
        sys.stdout.flush()
    if ck is not None:
        ext = RENDER_TARGETS[args.target].binary_ext
        if args.out:
            binary = Path(args.out).with_suffix(f".{ext}")
            binary.write_bytes(ck.binary)
            where = f"binary {binary}"
        else:
            where = "binary kept in the kernel cache only (-o OUT writes OUT." + ext + ")"
        r = ck.resources
        spills = r.get("spill_stores", 0) + r.get("spill_loads", 0) + r.get("scratch_bytes", 0)
        print(
            f"{kir.name} [{args.target}, {ck.toolchain}]: registers {r.get('registers')}, shared memory "
            f"{smem + r.get('static_smem', 0)} bytes, spills {spills} bytes, threads {kir.num_threads}; "
            f"{where} ({len(ck.binary)} bytes), source {ck.path}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
