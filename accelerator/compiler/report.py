"""The compile result as a JSON-able document (`perf compile --json`):

passes   one object per pass: name, wall_ns, ops_before, ops_after, kernels_before,
         kernels_after, skipped, decisions
         (each: op, what, why)
kernels  one per kernel the accelerator launches (matrix, vector, dma; the fusion pass's, or one
         per op when fusion was skipped), in launch order: name, ops (op names: a plan file
         takes them back, fusion.load_plan), fused_ops (their targets), why (op -> the reason it
         was fused), unit, dtype (its matrix op's, else its last op's), tile (null before
         tiling), local_bytes (the tile's local memory), attention (whole or flash, attention
         kernels), placement (where its outputs live: a list of value, level, offset, bytes; null
         before allocation or when it hands nothing to another kernel), module, source (of its main op)
memory   peak_onchip_bytes (shared memory's high-water mark, max offset + size),
         peak_hbm_bytes, capacity (bytes per level: local per core, shared, hbm per chip)
transfers count, total_bytes, by_route (src->dst: bytes) of the schedule's DMA transfers
host     the ops of the host partition, with their diagnostic and the bytes each moves over
         the host link (cut_in_bytes to the host, cut_out_bytes back; partition.py)
chips    chips the program is partitioned over (1: not partitioned)
collectives  the all-reduces and all-gathers partitioning inserted: name, op, bytes (sent per
         chip), module
check    with a functional check: max_rel_error, bound, outputs, layers (name, rel_error)"""

from __future__ import annotations

from typing import Any

from accelerator.compiler.allocate import peak_bytes
from accelerator.compiler.check import Check
from accelerator.compiler.pipeline import Compiled
from accelerator.compiler.program import Kernel, Program, default_kernels
from accelerator.compiler.schedule import route_bytes
from accelerator.hardware import AccelSpec


def kernel_entries(program: Program) -> list[dict[str, Any]]:
    """The report's `kernels` (module docstring) of the program's kernels, host kernels left out."""
    ops = {o.name: o for o in program.ops}
    kernels: tuple[Kernel, ...] = program.kernels or default_kernels(program)
    out = []
    for k in kernels:
        if k.unit == "host":
            continue
        main = next((ops[o] for o in k.ops if ops[o].attrs.get("unit") == "matrix"), ops[k.ops[-1]])
        out.append(
            {
                "name": k.name,
                "ops": list(k.ops),
                "fused_ops": [ops[o].target for o in k.ops],
                "why": dict(k.attrs.get("fused", {})),
                "unit": k.unit,
                "dtype": main.attrs.get("dtype"),
                "tile": dict(k.tile) if k.tile else None,
                "local_bytes": k.attrs.get("local_bytes"),
                "attention": k.attrs.get("attention"),
                "placement": placement_of(program, list(k.outputs)),
                "module": main.module,
                "source": main.source,
            }
        )
    return out


def placement_of(program: Program, values: list[str]) -> list[dict[str, Any]] | None:
    """Where `values` live (value, level, offset, bytes), None when none is placed."""
    out = [
        {"value": v, "level": p.level, "offset": p.offset, "bytes": p.size}
        for v in values
        if (p := program.placement.get(v)) is not None
    ]
    return out or None


def memory(program: Program, hw: AccelSpec) -> dict[str, Any]:
    return {
        "peak_onchip_bytes": peak_bytes(program.placement, "shared"),
        "peak_hbm_bytes": peak_bytes(program.placement, "hbm"),
        "capacity": {
            "local": hw.local_memory.capacity_bytes,
            "shared": hw.shared_memory.capacity_bytes,
            "hbm": hw.hbm.capacity_bytes,
        },
    }


def transfers(program: Program) -> dict[str, Any]:
    return {
        "count": len(program.transfers),
        "total_bytes": sum(t.bytes for t in program.transfers),
        "by_route": route_bytes(program.transfers),
    }


def report(
    compiled: Compiled,
    *,
    model: str,
    accel: str,
    precision: str,
    check: Check | None = None,
    hardware: AccelSpec | None = None,
) -> dict[str, Any]:
    """The document; `memory` only with `hardware` (its capacities)."""
    program = compiled.program
    kernels = kernel_entries(program)
    host = [
        {
            "name": o.name,
            "op": o.target,
            "module": o.module,
            "source": o.source,
            "diagnostic": o.attrs.get("diagnostic"),
            "cut_in_bytes": o.attrs.get("cut_in_bytes", 0),
            "cut_out_bytes": o.attrs.get("cut_out_bytes", 0),
        }
        for o in program.ops
        if o.attrs.get("unit") == "host"
    ]
    doc: dict[str, Any] = {
        "schema": "perf.accel_compile",
        "version": 1,
        "model": model,
        "accel": accel,
        "precision": precision,
        "passes": [row.to_dict() for row in compiled.log],
        "kernels": kernels,
        "host": host,
        "chips": program.chips,
        "collectives": [
            {"name": o.name, "op": o.attrs["collective"], "bytes": o.attrs["bytes"], "module": o.module}
            for o in program.ops
            if "collective" in o.attrs
        ],
    }
    if hardware is not None:
        doc["memory"] = memory(program, hardware)
    doc["transfers"] = transfers(program)
    if check is not None:
        doc["check"] = check.to_dict()
    return doc
