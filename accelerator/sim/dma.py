"""A kernel's DMA traffic on the simulated accelerator: transfers between HBM, shared and local
memory, streamed by every core at once, with the setup latency of each transfer and the level's
bandwidth shared among the cores (docs/accelerator.md, "Simulating a program").

    streams:     the kernel runs on all `cores`, each moving 1/cores of every transfer's bytes
                 through its own DMA engines, all at once
    per core:    stream_bandwidth(engines x DMA bandwidth, level bandwidth, cores)
                 = min(engines x b, B_level / cores)                       (timing.py)
    streaming:   bytes / cores / that, per transfer; a level's time is the sum (one DMA queue)
    contention:  what sharing the level costs: timing.contention_seconds(bytes / cores,
                 engines x b, B_level, cores) = streaming - bytes / cores / min(engines x b, B_level)
    setup:       a core issues its transfers over its `engines` engines in waves of `engines`;
                 each wave waits one setup latency before its data moves:
                 waves = ceil(transfers / engines). The first wave's setup is the kernel's exposed
                 `dma_latency` (nothing to overlap it with); later waves add theirs to the memory time.
    tile loop:   a tiled kernel's loads and stores split evenly over its T tiles, each tile's
                 transfers one wave per engines (setups of the T tiles spread over the cores:
                 ceil(loads / engines) x setup / cores per tile), double-buffered by
                 timing.double_buffered (compute on tile i overlaps the load of tile i+1 and the
                 store of tile i-1), the load and the store on one queue, one after the other
                 (both stream through the same levels' bandwidth: never faster than its bytes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from accelerator.hardware import AccelSpec
from accelerator.sim.timing import TileLoop, contention_seconds, double_buffered, stream_bandwidth, tile_intervals


def level_bandwidth(accel: AccelSpec, level: str) -> float:
    """Bytes/s of a memory level: hbm, shared (an unknown level reads as hbm)."""
    return {"hbm": accel.hbm.bandwidth, "shared": accel.shared_memory.bandwidth}.get(level, accel.hbm.bandwidth)


def streaming_seconds(accel: AccelSpec, nbytes: float, level: str) -> float:
    """A transfer of `nbytes` split over all cores, each streaming its share at once:
    (nbytes / cores) / min(engines x DMA bandwidth, B_level / cores)."""
    per_core = accel.dma.engines * accel.dma.bandwidth
    return nbytes / accel.cores / stream_bandwidth(per_core, level_bandwidth(accel, level), accel.cores)


def contention(accel: AccelSpec, nbytes: float, level: str) -> float:
    """Seconds sharing the level among the cores adds to streaming `nbytes` (module docstring)."""
    per_core = accel.dma.engines * accel.dma.bandwidth
    return contention_seconds(nbytes / accel.cores, per_core, level_bandwidth(accel, level), accel.cores)


def transfer_level(src: str, dst: str) -> str:
    """The memory level a transfer streams from or to: its source when it loads into local
    memory, else its destination."""
    return src if dst == "local" else dst


def waves(transfers: int, engines: int) -> int:
    """Setup waves of `transfers` on `engines` DMA engines: ceil(transfers / engines)."""
    return math.ceil(transfers / engines) if transfers else 0


@dataclass(frozen=True)
class KernelMemory:
    """A kernel's DMA time (seconds). `level_s`: level -> streaming seconds of its transfers;
    `load_s`/`store_s`: streaming seconds of its loads / stores; `setup_s`: setups of the waves
    after the first (added to the memory time); `exposed_setup_s`: the first wave's setup;
    `contention_s`: of the streaming seconds, what sharing the levels among the cores costs;
    `memory_s`: streaming + setup_s (one DMA queue)."""

    level_s: dict[str, float]
    load_s: float
    store_s: float
    setup_s: float
    exposed_setup_s: float
    contention_s: float

    @property
    def memory_s(self) -> float:
        return sum(self.level_s.values()) + self.setup_s

    @property
    def level(self) -> str:
        """The level with the most streaming time ('hbm' when none)."""
        return max(self.level_s, key=lambda lv: self.level_s[lv]) if self.level_s else "hbm"


def kernel_memory(accel: AccelSpec, loads: Sequence, stores: Sequence) -> KernelMemory:
    """The streaming, setup and contention seconds of a kernel's `loads` and `stores`
    (program Transfers: src, dst, bytes), as the module docstring says."""
    level_s: dict[str, float] = {}
    load_s = store_s = shared = 0.0
    for t in (*loads, *stores):
        level = transfer_level(t.src, t.dst)
        s = streaming_seconds(accel, t.bytes, level)
        level_s[level] = level_s.get(level, 0.0) + s
        shared += contention(accel, t.bytes, level)
        if t.dst == "local":
            load_s += s
        else:
            store_s += s
    n = waves(len(loads) + len(stores), accel.dma.engines)
    setup = accel.dma.setup_latency_s
    return KernelMemory(level_s, load_s, store_s, max(0, n - 1) * setup, setup if n else 0.0, shared)


def tile_parts(
    accel: AccelSpec, compute_s: float, load_s: float, store_s: float, tiles: int, n_loads: int, n_stores: int
) -> tuple[list[float], list[float], list[float]]:
    """Per tile (compute, load, store) seconds of a kernel of `tiles` tiles: compute_s / T, load
    load_s / T + ceil(n_loads / engines) x setup / cores (tile 0 one wave less: its first is the
    exposed setup), store store_s / T + ceil(n_stores / engines) x setup / cores."""
    setup = accel.dma.setup_latency_s / accel.cores
    load_wave = waves(n_loads, accel.dma.engines) * setup
    store_wave = waves(n_stores, accel.dma.engines) * setup
    load = [load_s / tiles + load_wave] * tiles
    load[0] -= setup if n_loads else 0.0  # its first wave waited the exposed setup, before the loop
    store = [store_s / tiles + store_wave] * tiles
    return [compute_s / tiles] * tiles, load, store


def tile_loop(
    accel: AccelSpec, compute_s: float, mem: KernelMemory, tiles: int, n_loads: int, n_stores: int
) -> TileLoop:
    """The double-buffered loop of a kernel of `tiles` tiles (`tile_parts`), on one DMA queue."""
    return double_buffered(
        *tile_parts(accel, compute_s, mem.load_s, mem.store_s, tiles, n_loads, n_stores), one_queue=True
    )


def tile_schedule(accel: AccelSpec, loop: tuple) -> list[tuple[int, str, float, float]]:
    """(tile, 'compute'|'load'|'store', start s from the loop's start, seconds) of the tile loop
    `SimKernel.tile_loop` = (tiles, compute_s, load_s, store_s, n_loads, n_stores) describes
    (timing.tile_intervals: the schedule `tile_loop` sums)."""
    tiles, compute_s, load_s, store_s, n_loads, n_stores = loop
    return tile_intervals(*tile_parts(accel, compute_s, load_s, store_s, tiles, n_loads, n_stores), one_queue=True)
