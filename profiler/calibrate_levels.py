"""`perf calibrate`: the CPU's cache levels (capacity from sysfs, bandwidth measured in each).

Capacities come from /sys/devices/system/cpu/cpu0/cache/index*/ (level, type, size,
shared_cpu_list): a data or unified cache of `size` bytes shared by the CPUs in
shared_cpu_list, so the machine holds cpu_count / len(shared_cpu_list) instances of it and the
level's capacity is size * instances (partitions = instances). Instruction caches are skipped.

Bandwidth per level: the triad a = b + s*c (bytes = 3 * 4 * n) at two working sets that fit the
level, 1/8 and 1/2 of its capacity, taking the slope so a torch op's fixed dispatch time cancels:

    bandwidth = 12 * (n2 - n1) / (t2 - t1)

Where noise makes the slope meaningless, the larger set's plain rate (dispatch included: lower
than the level's bandwidth, still a safe floor). A level not faster than the DRAM is left out with
a note; one measured slower than the level outside it gets that level's figure (an inner level is
never slower), with a note.
"""

from __future__ import annotations

import os
from pathlib import Path

from profiler.model.hardware import MemoryLevel

CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


def _size_bytes(text: str) -> int:
    t = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    return int(t.rstrip("KMG")) * scale


def _cpu_count(text: str) -> int:
    """CPUs in a sysfs list such as '0-3,8-11'."""
    n = 0
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            n += int(hi) - int(lo) + 1
        elif part:
            n += 1
    return n


def cache_capacities(root: Path = CACHE_DIR, cpus: int | None = None) -> list[tuple[str, int, int]]:
    """[(name 'l1'.., capacity bytes over the machine, instances)], outermost first; [] where sysfs has none."""
    cpus = cpus or os.cpu_count() or 1
    out: dict[int, tuple[int, int]] = {}
    for d in sorted(root.glob("index*")):
        try:
            level = int((d / "level").read_text())
            kind = (d / "type").read_text().strip()
            size = _size_bytes((d / "size").read_text())
            shared = _cpu_count((d / "shared_cpu_list").read_text()) or 1
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified") or size <= 0:
            continue
        instances = max(1, cpus // shared)
        out[level] = (size * instances, instances)
    return [(f"l{lv}", cap, inst) for lv, (cap, inst) in sorted(out.items(), reverse=True)]


def _triad_time(n: int, repeats: int, inner: int) -> float:
    import torch

    from profiler.calibrate import best_time

    a, b, c = torch.empty(n), torch.randn(n), torch.randn(n)
    return best_time(lambda: torch.add(b, c, alpha=3.0, out=a), repeats, inner=inner)


def cache_levels(dram_bandwidth: float, repeats: int) -> tuple[list[MemoryLevel], list[str]]:
    """The cache levels measured here (outermost first) and a note for each one left out."""
    levels: list[MemoryLevel] = []
    notes: list[str] = []
    outer_bw = dram_bandwidth
    for name, capacity, instances in cache_capacities():
        n1, n2 = max(256, capacity // 8 // 12), max(1024, capacity // 2 // 12)  # 3 fp32 arrays of n elements
        t1, t2 = _triad_time(n1, repeats, 50), _triad_time(n2, repeats, 50)
        # the slope; where noise makes it meaningless, the larger set's plain rate (dispatch
        # included, so lower than the level's bandwidth: still a safe floor)
        bw = 12 * (n2 - n1) / (t2 - t1) if t2 > t1 else 12 * n2 / t2
        if not bw > dram_bandwidth:
            notes.append(
                f"{name} ({capacity} B) left out: measured {bw / 1e9:.3g} GB/s, not above the DRAM's "
                f"{dram_bandwidth / 1e9:.3g} GB/s (noise or a spilled working set); rerun on a quiet machine"
            )
            continue
        if bw < outer_bw:  # an inner level is never slower than the one outside it: noise
            notes.append(
                f"{name}: measured {bw / 1e9:.3g} GB/s, below the outer level's {outer_bw / 1e9:.3g} GB/s; "
                "that figure kept"
            )
            bw = outer_bw
        levels.append(MemoryLevel(name=name, capacity_bytes=capacity, bandwidth=bw, partitions=instances))
        outer_bw = bw
    return levels, notes
