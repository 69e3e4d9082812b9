"""The roofline `HardwareSpec` of one chip of an `AccelSpec` (issue 13, section 1), so
`perf analyze`, the roofline and the what-ifs floor the simulated accelerator as any GPU preset.

    peak_flops.matrix[dtype] = cores x macs_per_cycle[dtype] x 2 x clock_hz      (FLOP/s; OP/s int8)
    peak_flops.vector[dtype] = cores x lanes x ops_per_cycle[dtype].add_mul x clock_hz
                               (one add or multiply = one FLOP; exp and reciprocal run slower and
                               are not the peak)
    memory, outermost first (bytes, bytes/s, per chip):
      hbm    = chip.hbm.capacity_bytes, chip.hbm.bandwidth
      shared = chip.shared_memory.capacity_bytes, chip.shared_memory.bandwidth
      local  = cores x core.local_memory.capacity_bytes, cores x core.local_memory.bandwidth,
               partitions = cores (one scratchpad per core)
    links (chips > 1): bandwidth = chips.link.bandwidth per direction, latency 0 per collective,
      hop_latency = chips.link.latency_s per step (the alpha of accelerator/sim/timing.py),
      topology = chips.topology
    min_op_time = dispatch_overhead_s (a kernel costs at least its dispatch)

Built through `profiler.model.hardware.from_dict`, so it passes the same validation as a preset.
"""

from __future__ import annotations

from accelerator.hardware import AccelSpec
from profiler.model.hardware import HardwareSpec, from_dict


def hardware_dict(accel: AccelSpec) -> dict:
    """The YAML layout of `hardware_spec(accel)` (profiler/model/presets/*.yaml)."""
    clock, cores = accel.clock_hz, accel.cores
    matrix = {d: cores * accel.matrix.macs_per_cycle[d] * 2 * clock for d in accel.matrix_dtypes()}
    vector = {
        d: cores * accel.vector.lanes * accel.vector.ops_per_cycle[d]["add_mul"] * clock for d in accel.vector_dtypes()
    }
    links = []
    if accel.link is not None:
        links.append(
            {
                "name": f"{accel.name}-link",
                "bandwidth": accel.link.bandwidth,
                "latency": 0.0,
                "hop_latency": accel.link.latency_s,
                "topology": accel.topology,
            }
        )
    mx = accel.matrix
    return {
        "name": accel.name,
        "kind": "npu",
        "vendor": "simulated",
        "description": f"{accel.description} (one chip of {accel.chips}; derived by accelerator/sim/spec.py)",
        "peak_flops": {"matrix": matrix, "vector": vector},
        "memory": [
            {"name": "hbm", "capacity_bytes": accel.hbm.capacity_bytes, "bandwidth": accel.hbm.bandwidth},
            {
                "name": "shared",
                "capacity_bytes": accel.shared_memory.capacity_bytes,
                "bandwidth": accel.shared_memory.bandwidth,
            },
            {
                "name": "local",
                "capacity_bytes": cores * accel.local_memory.capacity_bytes,
                "bandwidth": cores * accel.local_memory.bandwidth,
                "partitions": cores,
            },
        ],
        "links": links,
        "min_op_time": accel.dispatch_overhead_s,
        "sources": [
            f"accelerator/presets/{accel.name}.yaml (or the user's file): {cores} cores x {mx.rows}x{mx.cols} "
            f"{mx.dataflow} arrays at {clock:g} Hz; matrix peak = cores x MACs/cycle x 2 x clock"
        ],
    }


def hardware_spec(accel: AccelSpec) -> HardwareSpec:
    """The roofline spec of one chip of `accel` (see the module docstring for every formula)."""
    return from_dict(hardware_dict(accel))
