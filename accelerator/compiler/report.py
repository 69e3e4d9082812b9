"""The compile result as a JSON-able document (`perf compile --json`):

passes   one object per pass: name, wall_ns, ops_before, ops_after, skipped, decisions
         (each: op, what, why)
kernels  one per op a compute unit runs (matrix or vector), until fusion groups them:
         name, fused_ops (the op's target), unit, dtype, tile (null: no tiling pass yet),
         placement (null: no allocation pass yet), module, source
host     the ops of the host partition, with their diagnostic and the bytes each moves over
         the host link (cut_in_bytes to the host, cut_out_bytes back; partition.py)
chips    chips the program is partitioned over (1: not partitioned)
collectives  the all-reduces and all-gathers partitioning inserted: name, op, bytes (sent per
         chip), module
check    with a functional check: max_rel_error, bound, outputs, layers (name, rel_error)"""

from __future__ import annotations

from typing import Any

from accelerator.compiler.check import Check
from accelerator.compiler.pipeline import Compiled


def report(compiled: Compiled, *, model: str, accel: str, precision: str, check: Check | None = None) -> dict[str, Any]:
    program = compiled.program
    kernels = [
        {
            "name": o.name,
            "fused_ops": [o.target],
            "unit": o.attrs.get("unit"),
            "dtype": o.attrs.get("dtype"),
            "tile": None,
            "placement": None,
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
    if check is not None:
        doc["check"] = check.to_dict()
    return doc
