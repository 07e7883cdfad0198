"""Generated kernels for the soundness tests: kernel source text from a few parameters, written to a file
(tilepy reads kernel source through inspect) and imported once per distinct source."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from pathlib import Path

_DIR = Path(tempfile.mkdtemp(prefix="tilepy_verify_gen_"))
_LOADED: dict = {}


def load(source: str, name: str):
    key = hashlib.sha1(source.encode()).hexdigest()[:16]
    if key not in _LOADED:
        path = _DIR / f"gen_{key}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(f"gen_{key}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"gen_{key}"] = mod
        spec.loader.exec_module(mod)
        _LOADED[key] = mod
    return getattr(_LOADED[key], name)


SWIZZLES = {"none": "None", "sw2": "tp.Swizzle(2, 2, 3)", "sw3": "tp.Swizzle(3, 0, 4)"}


def pipeline_source(stages, prologue, wait_n, barrier_after_wait, barrier_end, order, nk_off, read_off,
                    commit, modulo, add, swizzle, read_layout):
    """A ring of `stages` shared stages fed by cp.async, read back by other threads and stored. The correct
    kernel is stages>=2, prologue=stages-1, wait_n=stages-2, barrier_after_wait, order="wait_copy_read",
    nk_off=0, read_off=0, commit, modulo, add=0 (barrier_end is then not needed)."""
    sw = SWIZZLES[swizzle]
    idx = "(nk) % S" if modulo else "nk"
    lines = [
        "import tilepy as tp",
        "",
        f"S = {stages}",
        "",
        "@tp.kernel(threads=64)",
        "def gen(X: tp.Tensor[tp.f32, 'M', 'N'], Y: tp.Tensor[tp.f32, 'M', 'N']):",
        f"    s = tp.shared((8, 16), tp.f32, stages=S, swizzle={sw})",
        "    k_tiles = tp.cdiv(X.shape[1], 16)",
    ]
    for p in range(prologue):
        lines += [f"    tp.copy_async(X[0:8, {p * 16}:{(p + 1) * 16}], s[{p % stages}])", "    tp.commit_async()"]
    lines.append("    for k in range(k_tiles):")
    copy = [f"        nk = k + {prologue + nk_off}",
            f"        tp.copy_async(X[0:8, nk * 16:(nk + 1) * 16], s[{idx}{' + 1' if add else ''}])"]
    if commit:
        copy.append("        tp.commit_async()")
    wait = [f"        tp.wait_async({wait_n})"] + (["        tp.barrier()"] if barrier_after_wait else [])
    layout = "tp.blocked((8, 16), 64, 1)" if read_layout == "other" else "tp.blocked((8, 16), 64, 4)"
    read = [f"        y = tp.load(s[(k + {read_off}) % S], layout={layout})",
            "        tp.store(Y[0:8, k * 16:(k + 1) * 16], y)"]
    body = {"wait_copy_read": wait + copy + read, "copy_wait_read": copy + wait + read,
            "wait_read_copy": wait + read + copy}[order]
    if barrier_end:
        body.append("        tp.barrier()")
    lines += body
    return "\n".join(lines) + "\n"


def staging_source(loops, barrier_mid, barrier_end, same_layout, role_write, diverge):
    """Store a tile into shared memory and read it back, `loops` times."""
    read_layout = "tp.blocked((16, 16), 128, 4)" if same_layout else "tp.blocked((16, 16), 128, 1)"
    lines = [
        "import tilepy as tp",
        "",
        "@tp.kernel(threads=128)",
        "def gen(X: tp.Tensor[tp.f32, 'M', 'N'], Y: tp.Tensor[tp.f32, 'M', 'N']):",
        "    s = tp.shared((16, 16), tp.f32)",
        f"    for i in range({loops}):",
        "        x = tp.load(X[0:16, i * 16:(i + 1) * 16])",
    ]
    if role_write:
        lines += ["        if tp.warp_id() == 0:", "            tp.store(s, tp.load(X[0:16, i * 16:(i + 1) * 16], "
                  "layout=tp.blocked((16, 16), 32, 4)))"]
        if diverge:
            lines.append("            tp.barrier()")
    else:
        lines.append("        tp.store(s, x)")
    if barrier_mid:
        lines.append("        tp.barrier()")
    lines += [f"        y = tp.load(s, layout={read_layout})",
              "        tp.store(Y[0:16, i * 16:(i + 1) * 16], y)"]
    if barrier_end:
        lines.append("        tp.barrier()")
    return "\n".join(lines) + "\n"


def tags_source(x_off, y_off, block):
    return "\n".join([
        "import tilepy as tp",
        "",
        "@tp.kernel(threads=64)",
        "def gen(X: tp.Tensor[tp.f32, 'N'], Y: tp.Tensor[tp.f32, 'N'], Z: tp.Tensor[tp.f32, 'N']):",
        f"    i0 = tp.block_id(0) * {block}",
        "    tp.tag(X, lambda i: ('x', i))",
        "    tp.tag(Y, lambda i: ('y', i))",
        f"    x = tp.load(X[i0 + {x_off}:i0 + {x_off} + {block}])",
        f"    y = tp.load(Y[i0 + {y_off}:i0 + {y_off} + {block}])",
        "    z = x + y",
        "    tp.assert_tag(z, lambda t: t[0][1] == t[1][1])",
        f"    tp.store(Z[i0:i0 + {block}], z)",
    ]) + "\n"


def bulk_source(stages, roles, wait_off, sync, stage_off, read_layout, producer_waits):
    """A ring of `stages` shared stages fed by bulk copies on mbarriers `full[s]`, read back and stored.

    roles="uniform": every thread waits for `full[s]`, reads, synchronizes (`sync`: "barrier", "mbar" (an
    arrive on `empty[s]` and a wait for it by every thread), or "none"), and the first thread issues the next
    copy into the stage. roles="ws": warp 0 produces (waiting on `empty[s]` when `producer_waits`), warps 1..
    consume and arrive on `empty[s]`. The correct kernel has wait_off=0, sync != "none", stage_off=0 and
    producer_waits."""
    S = stages
    lines = ["import tilepy as tp", "", f"S = {S}", "", "@tp.kernel(threads=96, target='sm_90a')",
             "def gen(X: tp.Tensor[tp.f32, 'N'], Y: tp.Tensor[tp.f32, 'R', 32]):",
             "    buf = tp.shared((32,), tp.f32, stages=S)"]
    for s in range(S):
        lines += [f"    full{s} = tp.mbarrier(1)", f"    empty{s} = tp.mbarrier(1)"]
    lines += [f"    full = ({', '.join(f'full{s}' for s in range(S))},)",
              f"    empty = ({', '.join(f'empty{s}' for s in range(S))},)",
              "    rounds = X.shape[0] // (S * 32)"]
    tgt = "buf[(s + 1) % S]" if stage_off else "buf[s]"
    if roles == "uniform":
        threads = 96
        layout = f"tp.blocked((32,), {threads}, 1)" if read_layout == "other" else f"tp.blocked((32,), {threads}, 4)"
        lines += ["    for s in tp.static_range(S):",
                  "        tp.copy_bulk(X[s * 32:(s + 1) * 32], buf[s], full[s])",
                  "        tp.mbarrier_arrive(full[s])",
                  "    for j in range(rounds):",
                  "        for s in tp.static_range(S):",
                  "            k = j * S + s",
                  f"            tp.mbarrier_wait(full[s], j + {wait_off})",
                  f"            y = tp.load(buf[s], layout={layout})",
                  "            tp.store(Y[k, 0:32], y)"]
        if sync == "barrier":
            lines.append("            tp.barrier()")
        elif sync == "mbar":
            lines += ["            tp.mbarrier_arrive(empty[s])", "            tp.mbarrier_wait(empty[s], j)"]
        lines += ["            nk = k + S",
                  f"            tp.copy_bulk(X[nk * 32:(nk + 1) * 32], {tgt}, full[s])",
                  "            tp.mbarrier_arrive(full[s])"]
    else:
        layout = "tp.blocked((32,), 64, 1)" if read_layout == "other" else "tp.blocked((32,), 64, 4)"
        lines += ["    if tp.warp_id() == 0:",
                  "        for j in range(rounds):",
                  "            for s in tp.static_range(S):",
                  "                k = j * S + s"]
        if producer_waits:
            lines += ["                if j > 0:", "                    tp.mbarrier_wait(empty[s], j - 1)"]
        lines += [f"                tp.copy_bulk(X[k * 32:(k + 1) * 32], {tgt}, full[s])",
                  "                tp.mbarrier_arrive(full[s])",
                  "    else:",
                  "        for j in range(rounds):",
                  "            for s in tp.static_range(S):",
                  "                k = j * S + s",
                  f"                tp.mbarrier_wait(full[s], j + {wait_off})",
                  f"                y = tp.load(buf[s], layout={layout})",
                  "                tp.store(Y[k, 0:32], y)"]
        if sync != "none":
            lines.append("                tp.mbarrier_arrive(empty[s])")
    return "\n".join(lines) + "\n"
