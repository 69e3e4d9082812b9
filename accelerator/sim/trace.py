"""A simulated run (`accelerator/sim/run.SimRun`) as the suite's Chrome/Kineto JSON, so
`perf analyze`, the Perfetto export and the dashboard read it as any Kineto trace.

Layout: one process per chip (pid = chip, named '<accel> chip N'); tid 0 'kernels' holds one
complete ('X') event per kernel, category `kernel` (the Kineto reader puts it on
rank0/gpu<chip>/stream0), args {unit, ops (the fused op names), targets, flops, hbm_read,
hbm_written, shared_bytes, dtype, family, limiter, stall_cycles {cause: cycles}, compute_ns,
matrix_ns, vector_ns, collective}; tid 1 'dma' one event per DMA transfer, category `dma`
(name 'DMA <route> <value>', args {route, bytes}; the Kineto reader reads it as kind `dma` on
the chip's stream 1, not a unit of work: a transfer's time is part of its kernel's).
tid 2 'link' holds the collectives (they run beside the cores' kernels that do not need them).
Cores: every kernel runs on all of the chip's cores at once (run.py splits its GEMM's output
columns, its vector elements and its DMA bytes evenly over them), so the 'kernels' thread is every
core's. Per-tile activity on request (`tiles=True`, `perf simulate --tiles`): one thread per core
(tid 3 + core, 'core <c>'), holding each tiled kernel's double-buffered loop
(dma.tile_schedule) as category `tile` events 'load|compute|store <kernel> tile <i>' (args {kernel,
tile, bytes: the core's share of that tile's transfers}); the cores work in lockstep on their
shares, so their rows hold the same intervals. The Kineto reader reads `tile` as device
annotations (labels, not work) on stream 3 + core.
Counters ('C' events, per chip, a sample where the value changes; `counter_samples`): matrix
and vector utilisation (%), HBM bandwidth (GB/s), shared memory used (MiB), local memory used
per core (KiB), DMA queue depth; the Kineto reader reads them into the counters table (track
'rank0/gpu<chip>/counters'). Flows (category `dependency`, 's'/'f'): producer kernel -> each
kernel that reads its result.
Times: integer ns on the simulated clock (each kernel's duration rounded up), written in µs with
3 decimals, exact to the ns.

Top level: `deviceProperties` [{id, name: the accelerator's name, totalGlobalMem: HBM bytes}]
so the analysis floors the chips on the spec derived from the accelerator
(profiler/api/hardware.py resolves accelerator preset names); `perfCompile.tables.fusion` the
fusion-map rows of the kernels (runtime_name, kind 'npu', flops, bytes_read, bytes_written,
dtype, family, aten_ops), which analysis/cost/kernels.py joins by name to cost each kernel;
`perfSimulate` the summary (`summary`)."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


from accelerator.sim.dma import tile_schedule
from accelerator.sim.run import SimRun
from accelerator.sim.trace_counters import COUNTERS, counter_events, counter_samples, transfer_times

__all__ = ["COUNTERS", "counter_events", "counter_samples", "timeline_ns", "trace_document", "trace_events"]

DOC_KEY = "perfSimulate"


def _us(ns: int) -> float:
    """Integer ns as µs: ns / 1000 is the double nearest the 3-decimal value (what round(.., 3) gives)."""
    return ns / 1000


def timeline_ns(run: SimRun) -> list[tuple[int, int]]:
    """(start_ns, dur_ns) of every kernel of `run`: durations rounded up to the ns, each kernel
    starting at the rounded end of the kernel it waited for (`SimKernel.after`; 0 for none), so
    kernels on one resource run back to back and a kernel that overlaps a collective does so."""
    out: list[tuple[int, int]] = []
    first = 0  # index in run.kernels of the chip's first kernel
    for i, s in enumerate(run.kernels):
        if i and s.chip != run.kernels[i - 1].chip:
            first = i
        at = sum(out[first + s.after]) if s.after >= 0 else 0
        out.append((at, math.ceil(s.time.total * 1e9)))
    return out


def summary(run: SimRun, kernels: bool = True) -> dict[str, Any]:
    """{accel, program, chips, total_ns, by_limiter {limiter: ns}, kernels: [{name, chip, unit,
    start_ns, dur_ns, limiter, stall_cycles, flops, hbm_bytes}]} (chip 0's kernels and, with
    chips > 1, every chip's); without `kernels` the list is left out (the trace document's)."""
    clock = run.accel.clock_hz
    spans = timeline_ns(run)
    total = max((start + dur for start, dur in spans), default=0)
    by_limiter: dict[str, int] = {}
    for s, (_, dur) in zip(run.kernels, spans, strict=True):
        if s.chip == 0:
            by_limiter[s.time.limiter] = by_limiter.get(s.time.limiter, 0) + dur
    out = {
        "accel": run.accel.name,
        "program": run.program_name,
        "chips": run.chips,
        "total_ns": total,
        "by_limiter": by_limiter,
    }
    if kernels:
        out["kernels"] = [
            {
                "name": s.name,
                "chip": s.chip,
                "unit": s.unit,
                "start_ns": start,
                "dur_ns": dur,
                "limiter": s.time.limiter,
                "stall_cycles": s.time.stall_cycles(clock),
                "flops": s.flops,
                "hbm_bytes": s.hbm_read + s.hbm_written,
            }
            for s, (start, dur) in zip(run.kernels, spans, strict=True)
        ]
    return out


def fusion_rows(run: SimRun) -> list[dict[str, Any]]:
    """The fusion-map rows (analysis/cost/kernels.FUSION_COLUMNS) of chip 0's kernels, one per
    kernel name (the first kernel of that name: the analysis joins the rows by name, and a
    serving run's names repeat step after step with the same cost, serving_trace.distinct_names)."""
    rows: dict[str, dict[str, Any]] = {}
    for s in run.kernels:
        if s.chip != 0 or s.name in rows:
            continue
        rows[s.name] = {
            "runtime_name": s.name,
            "kernel": s.name,
            "kind": "npu",
            "flops": s.flops,
            "bytes_read": s.hbm_read,
            "bytes_written": s.hbm_written,
            "dtype": s.dtype,
            "family": s.family,
            "aten_ops": [t.split(".")[1] if t.startswith("aten.") else t for t in s.targets],
        }
    return list(rows.values())


#: Kineto's names of a collective's dtype ('dtype' arg of NCCL records).
KINETO_DTYPES = {"fp32": "Float", "bf16": "BFloat16", "fp16": "Half", "int8": "Char", "fp8": "Float8_e4m3fn"}


def _collective_args(s, chips: int) -> dict[str, Any]:
    """The args a Kineto collective kernel carries, so the analysis costs it as one: its kind,
    message elements (in = out: an all-reduce's; an all-gather's whole result), group, dtype."""
    return {
        "collective": s.collective,
        "Collective name": s.collective.replace("_", ""),
        "In msg nelems": s.comm_elements,
        "Out msg nelems": s.comm_elements,
        "Group size": chips,
        "dtype": KINETO_DTYPES.get(s.dtype, "Float"),
    }


#: Chrome thread of each resource of a chip: the cores' kernels, DMA transfers, the links' collectives
TIDS = {"cores": 0, "dma": 1, "link": 2}
CORE_TID0 = 3  # core c's thread (per-tile activity): CORE_TID0 + c


def trace_events(run: SimRun, tiles: bool = False) -> list[dict[str, Any]]:
    """The Chrome events of `run` (module docstring); with `tiles` each core's tile activity."""
    events: list[dict[str, Any]] = []
    for chip in range(run.chips):
        events.append(
            {"ph": "M", "name": "process_name", "pid": chip, "args": {"name": f"{run.accel.name} chip {chip}"}}
        )
        for name, tid in (("kernels", 0), ("dma", 1), ("link", 2)):
            events.append({"ph": "M", "name": "thread_name", "pid": chip, "tid": tid, "args": {"name": name}})
        for core in range(run.accel.cores if tiles else 0):
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": chip,
                    "tid": CORE_TID0 + core,
                    "args": {"name": f"core {core}"},
                }
            )
    spans = timeline_ns(run)
    with paused_gc():  # a million acyclic dicts: a collection among them finds nothing to free
        events += _work_events(run, spans)
        if tiles:
            events += tile_events(run, spans)
        events += counter_events(run, spans)
        events += flow_events(run, spans)
    return events


def tile_events(run: SimRun, spans: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Each tiled kernel's loop (dma.tile_schedule) on every core's thread (module docstring):
    the loop starts after the kernel's dispatch and exposed DMA setup; a load or store moves
    1/cores of the tile's share (1/T) of the kernel's load or store bytes."""
    accel, cores = run.accel, run.accel.cores
    out: list[dict[str, Any]] = []
    for s, (start, _) in zip(run.kernels, spans, strict=True):
        if not s.tile_loop:
            continue
        n = s.tile_loop[0]
        loop_ns = start + (accel.dispatch_overhead_s + s.time.stalls.get("dma_latency", 0.0)) * 1e9
        loaded = sum(t.bytes for t in s.transfers if t.route.endswith("->local"))
        moved = {"load": loaded // n // cores, "store": (sum(t.bytes for t in s.transfers) - loaded) // n // cores}
        for tile, what, at, dur in tile_schedule(accel, s.tile_loop):
            args = {"kernel": s.name, "tile": tile}
            if what != "compute":
                args["bytes"] = moved[what]
            ts, us = _us(round(loop_ns + at * 1e9)), _us(max(1, round(dur * 1e9)))
            for core in range(cores):
                out.append(
                    {"ph": "X", "cat": "tile", "name": f"{what} {s.name} tile {tile}", "pid": s.chip,
                     "tid": CORE_TID0 + core, "ts": ts, "dur": us, "args": args}
                )  # fmt: skip
    return out


@contextmanager
def paused_gc() -> Iterator[None]:
    """The garbage collector paused (if it ran): building the events allocates millions of
    objects, none in a cycle, and every collection would rescan the program's graph too."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _work_events(run: SimRun, spans: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Each kernel's 'X' event and its DMA transfers' (module docstring). A kernel's args but its
    `ops` derive from its KernelTime's kernel: copies of one timed kernel (reuse.py: every layer's
    copy shares its `time`) share one dict of them, built once."""
    clock, chips = run.accel.clock_hz, run.chips
    out: list[dict[str, Any]] = []
    append = out.append
    shared: dict[int, dict[str, Any]] = {}
    dma_tid = TIDS["dma"]
    moves = transfer_times(run, spans)
    t_ts, t_dur = iter((moves["start"] / 1000).tolist()), iter((moves["dur"] / 1000).tolist())
    for s, (start, dur) in zip(run.kernels, spans, strict=True):
        kt = s.time
        rest = shared.get(id(kt))
        if rest is None:
            rest = shared[id(kt)] = {
                "targets": s.targets,
                "flops": s.flops,
                "hbm_read": s.hbm_read,
                "hbm_written": s.hbm_written,
                "shared_bytes": s.shared_bytes,
                "dtype": s.dtype,
                "family": s.family,
                "limiter": kt.limiter,
                "stall_cycles": kt.stall_cycles(clock),
                "compute_ns": round(kt.compute * 1e9, 3),
                "matrix_ns": round(s.matrix_s * 1e9, 3),
                "vector_ns": round(s.vector_s * 1e9, 3),
                "contention_ns": round(s.contention_s * 1e9, 3),
                **(_collective_args(s, chips) if s.collective else {}),
            }
        chip = s.chip
        append(
            {
                "ph": "X", "cat": "kernel", "name": s.name, "pid": chip, "tid": TIDS.get(s.resource, 0),
                "ts": start / 1000, "dur": dur / 1000, "args": {"unit": s.unit, "ops": s.ops, **rest},
            }
        )  # fmt: skip
        for t in s.transfers:
            append(
                {
                    "ph": "X", "cat": "dma", "name": f"DMA {t.route} {t.value}", "pid": chip, "tid": dma_tid,
                    "ts": next(t_ts), "dur": next(t_dur), "args": {"route": t.route, "bytes": t.bytes},
                }
            )  # fmt: skip
    return out


def flow_events(run: SimRun, spans: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """A Chrome flow (category `dependency`, 's' at the producer's start, 'f' bound to the
    consumer's start) for every kernel a kernel reads the result of (SimKernel.deps)."""
    out: list[dict[str, Any]] = []
    append = out.append
    first, n = 0, 0
    kernels = run.kernels
    for i, s in enumerate(kernels):
        if i and s.chip != kernels[i - 1].chip:
            first = i
        if not s.deps:
            continue
        chip, tid, ts = s.chip, TIDS.get(s.resource, 0), spans[i][0] / 1000
        for d in s.deps:
            n += 1
            src_tid, src_ts = TIDS.get(kernels[first + d].resource, 0), spans[first + d][0] / 1000
            append(
                {
                    "cat": "dependency",
                    "name": "dependency",
                    "id": n,
                    "pid": chip,
                    "ph": "s",
                    "tid": src_tid,
                    "ts": src_ts,
                }
            )
            append(
                {
                    "cat": "dependency",
                    "name": "dependency",
                    "id": n,
                    "pid": chip,
                    "ph": "f",
                    "bp": "e",
                    "tid": tid,
                    "ts": ts,
                }
            )
    return out


def trace_document(run: SimRun, tiles: bool = False) -> dict[str, Any]:
    """The whole Chrome/Kineto JSON document (write it with orjson); `tiles`: per-core tile activity."""
    with paused_gc():
        return _document(run, tiles)


def _document(run: SimRun, tiles: bool) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "framework": f"perf simulate (the simulated {run.accel.name}, {run.chips} chip(s))",
        "traceSource": "simulator",  # no host runtime: the reader names the chips npu<N>, expects no launches
        "deviceProperties": [
            {"id": c, "name": run.accel.name, "totalGlobalMem": run.accel.hbm.capacity_bytes} for c in range(run.chips)
        ],
        "traceEvents": trace_events(run, tiles),
        "perfCompile": {"tables": {"fusion": fusion_rows(run)}},
        DOC_KEY: summary(run, kernels=False),
    }
