"""Per-target facts the front end, interpreter, verifier, backends and the agent share: warp size,
shared-memory capacity and banks, register limits, and which instructions exist. Differences between targets
live here as data; this is the one target model (tilepy_hip's `RenderTarget` adds only how to spell things)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    name: str
    vendor: str  # "nvidia" | "amd"
    warp_size: int
    shared_bytes: int  # most dynamic shared memory (LDS) one block may use
    banks: int
    bank_bytes: int
    max_threads: int
    features: frozenset = field(default_factory=frozenset)  # instruction families available
    max_registers: int = 255  # 32-bit registers one thread may hold (NVIDIA 255; AMD 512 VGPRs with AGPRs)
    register_file: int = 65536  # 32-bit registers per SM (NVIDIA) / per SIMD's wave slots (AMD: VGPRs per CU / 4)

    def has(self, feature: str) -> bool:
        return feature in self.features


SM_80 = Target("sm_80", "nvidia", 32, 163 * 1024, 32, 4, 1024, frozenset({"mma_sync", "cp_async", "ldmatrix"}))
SM_90A = Target(
    "sm_90a", "nvidia", 32, 227 * 1024, 32, 4, 1024,
    frozenset({"mma_sync", "cp_async", "ldmatrix", "wgmma", "bulk_copy", "mbarrier", "cluster"}),
)
GFX942 = Target("gfx942", "amd", 64, 64 * 1024, 32, 4, 1024, frozenset({"mfma", "lds", "cp_async"}), max_registers=512)

TARGETS = {t.name: t for t in (SM_80, SM_90A, GFX942)}
DEFAULT_TARGET = "sm_90a"


def get_target(name: str | Target) -> Target:
    if isinstance(name, Target):
        return name
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; known targets: {', '.join(TARGETS)}") from None
