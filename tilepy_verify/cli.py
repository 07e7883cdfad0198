"""`tilepy-verify FILE [--kernel NAME] [--param NAME=VALUE ...] [--target T] [--json] [--checks a,b]`

Exit status: 0 verified (performance findings do not fail), 1 violations, 2 usage or compile errors."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import sys
from pathlib import Path


class UsageError(Exception):
    pass


def _load_module(path: str):
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no such file: {path}")
    sys.path.insert(0, str(p.resolve().parent))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def _kernels(mod) -> dict:
    import tilepy

    return {name: obj for name, obj in vars(mod).items() if isinstance(obj, tilepy.Kernel)}


def _value(text: str, mod):
    """A --param value: a Python literal, or an expression over tilepy (tp) and the module's names."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    import tilepy

    env = {"tp": tilepy, "tilepy": tilepy, **vars(mod)}
    try:
        return eval(text, env)  # noqa: S307 - the user's own command line
    except NameError:
        if text.isidentifier():
            return text  # a bare word: a string constexpr (BUG=wait)
        raise UsageError(f"cannot evaluate parameter value {text!r}") from None
    except Exception as exc:
        raise UsageError(f"cannot evaluate parameter value {text!r}: {exc}") from None


def main(argv=None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # `tilepy-verify ... --json | head`: the reader closed the pipe. Point stdout at /dev/null so the
        # interpreter's final flush does not fail again, and keep the verdict's exit status.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _LAST_STATUS[0]


_LAST_STATUS = [0]


def _main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tilepy-verify", description="Verify tilepy kernels at compile time.")
    ap.add_argument("file", help="a Python file defining @tilepy.kernel functions")
    ap.add_argument("--kernel", help="which kernel (default: every kernel in the file)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a constexpr value (Python literal or expression, e.g. INSTR=tp.nv.mma_m16n8k16_bf16)")
    ap.add_argument("--target", help="sm_80 | sm_90a | gfx942 (default: the kernel's)")
    ap.add_argument("--checks", help="comma-separated subset of checks")
    ap.add_argument("--json", action="store_true", help="print a JSON document instead of text")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    import tilepy
    import tilepy_verify

    try:
        mod = _load_module(args.file)
        kernels = _kernels(mod)
        if not kernels:
            raise UsageError(f"{args.file} defines no @tilepy.kernel")
        if args.kernel:
            if args.kernel not in kernels:
                raise UsageError(f"no kernel {args.kernel!r} in {args.file}; kernels: {', '.join(kernels)}")
            kernels = {args.kernel: kernels[args.kernel]}
        params = {}
        for p in args.param:
            if "=" not in p:
                raise UsageError(f"--param takes NAME=VALUE, got {p!r}")
            k, v = p.split("=", 1)
            params[k.strip()] = _value(v.strip(), mod)
        checks = [c.strip() for c in args.checks.split(",")] if args.checks else None
        reports = []
        for k in kernels.values():
            mine = {n: v for n, v in params.items() if n in k.constexpr_names}
            unknown = set(params) - set().union(*(set(x.constexpr_names) for x in kernels.values()))
            if unknown:
                raise UsageError(f"unknown parameter(s) {', '.join(sorted(unknown))}")
            reports.append(tilepy_verify.verify(k, target=args.target, checks=checks, **mine))
    except UsageError as exc:
        _fail(args, f"usage error: {exc}")
        return 2
    except tilepy.CompileError as exc:
        _fail(args, str(exc))
        return 2
    except (ValueError, TypeError) as exc:
        _fail(args, f"error: {exc}")
        return 2
    except SyntaxError as exc:
        _fail(args, f"{exc.filename}:{exc.lineno}: syntax error: {exc.msg}")
        return 2
    ok = all(r.ok for r in reports)
    _LAST_STATUS[0] = 0 if ok else 1
    if args.json:
        print(json.dumps({"ok": ok, "reports": [r.to_dict() for r in reports]}, indent=2))
    else:
        print("\n\n".join(str(r) for r in reports))
    return 0 if ok else 1


def _fail(args, message: str):
    if getattr(args, "json", False):
        print(json.dumps({"ok": False, "error": message}))
    else:
        print(message, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
