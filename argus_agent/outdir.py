"""The `--out` directory: refused when it holds another problem's outputs (unless forced), and what a run
replaces is first moved to `OUT/.argus-backup/<UTC time>/`.

    check_out_dir(Path("out"), problem, force=False)   # raises OutDirError naming the other problem
    backup_outputs(Path("out"))                        # -> the backup directory, or None
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

OUTPUTS = ("model_new.py", "kernels.py", "summary.json", "summary.md")


class OutDirError(Exception):
    """`--out` holds outputs this run must not replace."""


def check_out_dir(out: Path, problem, force: bool = False):
    if force or not out.exists():
        return
    if not out.is_dir():
        raise OutDirError(f"{out}: exists and is not a directory; hint: name a directory for --out")
    present = [f for f in OUTPUTS if (out / f).exists()]
    if not present:
        return
    summary = out / "summary.json"
    try:
        prev = json.loads(summary.read_text()) if summary.exists() else {}
    except (OSError, ValueError):
        prev = {}
    if not isinstance(prev, dict):
        prev = {}
    same = prev.get("problem_digest") == problem.digest or (
        "problem_digest" not in prev and prev.get("problem") == problem.name
        and prev.get("problem_path") in (None, str(problem.path.resolve())))
    if prev and same:
        return
    what = (f"the outputs of problem {prev.get('problem')!r} ({prev.get('problem_path', 'path unknown')})" if prev
            else f"files argus writes ({', '.join(present)}) from an unknown source")
    raise OutDirError(f"{out / (present[0] if not prev else 'summary.json')}:1: {out} holds {what}; hint: choose "
                      "another --out, or pass --force to replace them (they are moved to "
                      f"{out / '.argus-backup'}/ first)")


def backup_outputs(out: Path) -> Path | None:
    """Move the outputs already in `out` to `out/.argus-backup/<UTC time>/`; None when there were none."""
    present = [f for f in OUTPUTS if (out / f).exists()]
    if not present:
        return None
    dest = out / ".argus-backup" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    n = 1
    while dest.exists():
        n += 1
        dest = dest.with_name(dest.name.split("-")[0] + f"-{n}")
    dest.mkdir(parents=True)
    for f in present:
        shutil.move(str(out / f), str(dest / f))
    return dest
