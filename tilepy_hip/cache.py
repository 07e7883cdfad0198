"""On-disk cache of compiled kernels.

Layout: `<root>/<key[:2]>/<key>.cu` (the generated source), `<key>.bin` (cubin or AMD code object) and
`<key>.json` (metadata with the binary's sha256). The key hashes the kernel's IR, its constexprs, the
target, the compiler and its version, the build options and the generated source.

Concurrency: every file is written to a unique temporary name and moved into place with `os.replace`
(atomic on POSIX), the metadata last; two processes building the same kernel write identical files and
neither can observe a half-written one. A reader verifies the binary against the metadata's hash, so a
truncated or corrupt entry reads as a miss and is rebuilt.

The root is `$TILEPY_HIP_CACHE`, or `~/.cache/tilepy_hip`.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path


def cache_root() -> Path:
    env = os.environ.get("TILEPY_HIP_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tilepy_hip"


def make_key(parts: dict) -> str:
    """A stable hex key from a dict of JSON-serializable parts."""
    text = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(tmp, mode) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class KernelCache:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else cache_root()

    def paths(self, key: str) -> tuple[Path, Path, Path]:
        d = self.root / key[:2]
        return d / f"{key}.cu", d / f"{key}.bin", d / f"{key}.json"

    def load(self, key: str):
        """(binary, metadata) of a valid entry, or None (missing, partial or corrupt)."""
        _, bin_path, meta_path = self.paths(key)
        try:
            meta = json.loads(meta_path.read_text())
            binary = bin_path.read_bytes()
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("binary_sha256") != sha256(binary):
            return None
        return binary, meta

    def store(self, key: str, source: str, binary: bytes, meta: dict) -> dict:
        src_path, bin_path, meta_path = self.paths(key)
        meta = {**meta, "binary_sha256": sha256(binary), "binary_bytes": len(binary)}
        write_atomic(src_path, source)
        write_atomic(bin_path, binary)
        write_atomic(meta_path, json.dumps(meta, indent=1, sort_keys=True))
        return meta
