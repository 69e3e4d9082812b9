"""The compile result as a JSON-able document (`perf compile --json`):

passes   one object per pass: name, wall_ns, ops_before, ops_after, skipped, decisions
         (each: op, what, why)
kernels  one per op a compute unit runs (matrix or vector), until fusion groups them:
         name, fused_ops (the op's target), unit, dtype, tile (null: no tiling pass yet),
         placement (where its outputs live: a list of value, level, offset, bytes; null
         before allocation or when it hands nothing to another kernel), module, source
memory   peak_onchip_bytes (shared memory's high-water mark, max offset + size),
         peak_hbm_bytes, capacity (bytes per level: local per core, shared, hbm per chip)
transfers count, total_bytes, by_route (src->dst: bytes) of the schedule's DMA transfers
host     the ops of the host partition, with their diagnostic
check    with a functional check: max_rel_error, bound, outputs, layers (name, rel_error)"""

from __future__ import annotations

from typing import Any

from accelerator.compiler.allocate import peak_bytes
from accelerator.compiler.check import Check
from accelerator.compiler.pipeline import Compiled
from accelerator.compiler.program import Program
from accelerator.compiler.schedule import route_bytes
from accelerator.hardware import AccelSpec


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
    kernels = [
        {
            "name": o.name,
            "fused_ops": [o.target],
            "unit": o.attrs.get("unit"),
            "dtype": o.attrs.get("dtype"),
            "tile": None,
            "placement": placement_of(program, [o.name]),
            "module": o.module,
            "source": o.source,
        }
        for o in program.ops
        if o.attrs.get("unit") in ("matrix", "vector")
    ]
    host = [
        {
            "name": o.name,
            "op": o.target,
            "module": o.module,
            "source": o.source,
            "diagnostic": o.attrs.get("diagnostic"),
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
    }
    if hardware is not None:
        doc["memory"] = memory(program, hardware)
    doc["transfers"] = transfers(program)
    if check is not None:
        doc["check"] = check.to_dict()
    return doc
