"""Command line: render (and build) a tilepy kernel.

    python -m tilepy_hip emit FILE --kernel NAME --target TARGET [--param NAME=VALUE ...] [-o OUT] [--compile]
    python -m tilepy_hip toolchain

`emit` writes the generated HIP C++ (to OUT, else stdout). With --compile it also builds it, writes the
binary next to OUT (OUT with .cubin / .hsaco) and prints the resource usage: registers, shared memory, spills.
Parameter values are Python expressions evaluated with `tilepy as tp` in scope: `--param BLOCK=1024`,
`--param "INSTR=tp.nv.mma_m16n8k16_bf16"`, `--param "WARPS=(2, 2)"`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import tilepy as tp

from .build import compile_ir, toolchain_info
from .render import RENDER_TARGETS, render_source


def _load_module(path: str):
    p = Path(path).resolve()
    if not p.exists():
        raise SystemExit(f"tilepy_hip: no such file: {path}")
    sys.path.insert(0, str(p.parent))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tilepy_hip", description="HIP C++ backend for tilepy kernels"
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("emit", help="write a kernel's generated HIP C++ (and build it with --compile)")
    e.add_argument("file")
    e.add_argument("--kernel", required=True, help="name of the @tp.kernel in FILE")
    e.add_argument("--target", required=True, choices=sorted(RENDER_TARGETS))
    e.add_argument("--param", action="append", metavar="NAME=VALUE", help="a constexpr value (repeatable)")
    e.add_argument("-o", "--out", help="output file (default: stdout)")
    e.add_argument(
        "--compile", action="store_true", help="also build, write the binary, print resource usage"
    )
    sub.add_parser("toolchain", help="print the compilers tilepy_hip found")
    args = ap.parse_args(argv)

    if args.cmd == "toolchain":
        print(json.dumps(toolchain_info(), indent=1))
        return 0
    module = _load_module(args.file)
    kernel = getattr(module, args.kernel, None)
    if not isinstance(kernel, tp.Kernel):
        names = [n for n, v in vars(module).items() if isinstance(v, tp.Kernel)]
        raise SystemExit(
            f"tilepy_hip: {args.file} has no kernel `{args.kernel}`; kernels: {', '.join(names) or 'none'}"
        )
    try:
        kir = kernel.ir(args.target, **_params(args.param))
        source, smem = render_source(kir, args.target)
        ck = compile_ir(kir, args.target) if args.compile else None
    except tp.TilepyError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if args.out:
        Path(args.out).write_text(source)
    else:
        sys.stdout.write(source)
    if ck is not None:
        ext = RENDER_TARGETS[args.target].binary_ext
        binary = (
            Path(args.out).with_suffix(f".{ext}") if args.out else Path(f"{kir.name}.{args.target}.{ext}")
        )
        binary.write_bytes(ck.binary)
        r = ck.resources
        spills = r.get("spill_stores", 0) + r.get("spill_loads", 0) + r.get("scratch_bytes", 0)
        print(
            f"{kir.name} [{args.target}, {ck.toolchain}]: registers {r.get('registers')}, shared memory "
            f"{smem + r.get('static_smem', 0)} bytes, spills {spills} bytes, threads {kir.num_threads}; "
            f"binary {binary} ({len(ck.binary)} bytes), source {ck.path}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
