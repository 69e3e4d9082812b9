"""A simulated run (`accelerator/sim/run.SimRun`) as the suite's Chrome/Kineto JSON, so
`perf analyze`, the Perfetto export and the dashboard read it as any Kineto trace.

Layout: one process per chip (pid = chip, named '<accel> chip N'); tid 0 'kernels' holds one
complete ('X') event per kernel, category `kernel` (the Kineto reader puts it on
rank0/gpu<chip>/stream0), args {unit, ops (the fused op names), targets, flops, hbm_read,
hbm_written, shared_bytes, dtype, family, limiter, stall_cycles {cause: cycles}, compute_ns,
matrix_ns, vector_ns, collective}; tid 1 'dma' one event per DMA transfer, category `dma`
(name 'DMA <route> <value>', args {route, bytes}; the Kineto reader reads it as kind `dma` on
the chip's stream 1, not a unit of work: a transfer's time is part of its kernel's).
Counters ('C' events, per chip, sampled at each kernel's start and set to 0 at its end):
'matrix utilisation (%)', 'vector utilisation (%)' (busy seconds of the unit / kernel
seconds), 'HBM bandwidth (GB/s)' (HBM bytes / kernel seconds); Perfetto and chrome://tracing
draw them (the Kineto reader does not read 'C' events).
Times: integer ns on the simulated clock (each kernel's duration rounded up), written in µs with
3 decimals, exact to the ns.

Top level: `deviceProperties` [{id, name: the accelerator's name, totalGlobalMem: HBM bytes}]
so the analysis floors the chips on the spec derived from the accelerator
(profiler/api/hardware.py resolves accelerator preset names); `perfCompile.tables.fusion` the
fusion-map rows of the kernels (runtime_name, kind 'npu', flops, bytes_read, bytes_written,
dtype, family, aten_ops), which analysis/cost/kernels.py joins by name to cost each kernel;
`perfSimulate` the summary (`summary`)."""

from __future__ import annotations

import math
from typing import Any

from accelerator.sim.run import SimRun

DOC_KEY = "perfSimulate"


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


def timeline_ns(run: SimRun) -> list[tuple[int, int]]:
    """(start_ns, dur_ns) of every kernel of `run`: durations rounded up to the ns, back to back."""
    out, at, chip = [], 0, -1
    for s in run.kernels:
        if s.chip != chip:
            at, chip = 0, s.chip
        dur = math.ceil(s.time.total * 1e9)
        out.append((at, dur))
        at += dur
    return out


def summary(run: SimRun) -> dict[str, Any]:
    """{accel, program, chips, total_ns, by_limiter {limiter: ns}, kernels: [{name, chip, unit,
    start_ns, dur_ns, limiter, stall_cycles, flops, hbm_bytes}]} (chip 0's kernels and, with
    chips > 1, every chip's)."""
    clock = run.accel.clock_hz
    rows = []
    for s, (start, dur) in zip(run.kernels, timeline_ns(run), strict=True):
        rows.append(
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
        )
    total = max((r["start_ns"] + r["dur_ns"] for r in rows), default=0)
    by_limiter: dict[str, int] = {}
    for r in rows:
        if r["chip"] == 0:
            by_limiter[r["limiter"]] = by_limiter.get(r["limiter"], 0) + r["dur_ns"]
    return {
        "accel": run.accel.name,
        "program": run.program_name,
        "chips": run.chips,
        "total_ns": total,
        "by_limiter": by_limiter,
        "kernels": rows,
    }


def fusion_rows(run: SimRun) -> list[dict[str, Any]]:
    """The fusion-map rows (analysis/cost/kernels.FUSION_COLUMNS) of chip 0's kernels."""
    return [
        {
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
        for s in run.kernels
        if s.chip == 0
    ]


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


def trace_events(run: SimRun) -> list[dict[str, Any]]:
    """The Chrome events of `run` (module docstring)."""
    clock = run.accel.clock_hz
    events: list[dict[str, Any]] = []
    for chip in range(run.chips):
        events.append(
            {"ph": "M", "name": "process_name", "pid": chip, "args": {"name": f"{run.accel.name} chip {chip}"}}
        )
        events.append({"ph": "M", "name": "thread_name", "pid": chip, "tid": 0, "args": {"name": "kernels"}})
        events.append({"ph": "M", "name": "thread_name", "pid": chip, "tid": 1, "args": {"name": "dma"}})
    for s, (start, dur) in zip(run.kernels, timeline_ns(run), strict=True):
        kt = s.time
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": s.name,
                "pid": s.chip,
                "tid": 0,
                "ts": _us(start),
                "dur": _us(dur),
                "args": {
                    "unit": s.unit,
                    "ops": list(s.ops),
                    "targets": list(s.targets),
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
                    **(_collective_args(s, run.chips) if s.collective else {}),
                },
            }
        )
        offset = start - s.start_s * 1e9  # the kernel's place on the rounded timeline
        for t in s.transfers:
            events.append(
                {
                    "ph": "X",
                    "cat": "dma",
                    "name": f"DMA {t.route} {t.value}",
                    "pid": s.chip,
                    "tid": 1,
                    "ts": _us(round(t.start_s * 1e9 + offset)),
                    "dur": _us(max(1, round(t.dur_s * 1e9))),
                    "args": {"route": t.route, "bytes": t.bytes},
                }
            )
        seconds = max(kt.total, 1e-12)
        samples = {
            "matrix utilisation (%)": 100 * s.matrix_s / seconds,
            "vector utilisation (%)": 100 * s.vector_s / seconds,
            "HBM bandwidth (GB/s)": (s.hbm_read + s.hbm_written) / seconds / 1e9,
        }
        for name, value in samples.items():
            events.append(
                {"ph": "C", "name": name, "pid": s.chip, "ts": _us(start), "args": {"value": round(value, 3)}}
            )
            events.append({"ph": "C", "name": name, "pid": s.chip, "ts": _us(start + dur), "args": {"value": 0}})
    return events


def trace_document(run: SimRun) -> dict[str, Any]:
    """The whole Chrome/Kineto JSON document (write it with orjson)."""
    return {
        "schemaVersion": 1,
        "framework": f"perf simulate (the simulated {run.accel.name}, {run.chips} chip(s))",
        "traceSource": "simulator",  # no host runtime: the reader names the chips npu<N>, expects no launches
        "deviceProperties": [
            {"id": c, "name": run.accel.name, "totalGlobalMem": run.accel.hbm.capacity_bytes} for c in range(run.chips)
        ],
        "traceEvents": trace_events(run),
        "perfCompile": {"tables": {"fusion": fusion_rows(run)}},
        DOC_KEY: {k: v for k, v in summary(run).items() if k != "kernels"},
    }
