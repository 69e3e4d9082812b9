"""The one declaration of the columns of every table an `Analysis` holds: dtype, unit, meaning.

Input tables are declared in profiler/model/schema.py; output tables here, with the same
`Column`. docs/json-schema.md's "Analysis tables" section is generated from `OUTPUT_TABLES`
(`python -m profiler.docs`; tests/test_docs_generated.py checks it is up to date and that each
table an analysis builds has exactly these columns, in this order). The JSON report writes
these tables' rows under the names its schema lists: a JSON builder takes a table's columns
from here (`columns(name)`) rather than from whatever the DataFrame happens to hold.
"""

from __future__ import annotations

from profiler.model.schema import Column

NS, BYTE, FLOP = "ns", "byte", "FLOP"
_RANK = Column("rank", "int64", "", "Rank (process) the row belongs to.")
_DEVICE = Column("device", "str", "", "'cpu' or 'gpu<N>'.")
_BOUNDS = tuple(
    Column(f"{b}_ns", "int64", NS, f"Busy time whose share went to units bound by {b}.")
    for b in ("compute", "memory", "communication", "runtime", "unknown")
)
_FLOORS = (
    Column("t_compute_ns", "float64", NS, "flops_effective / peak(dtype, matrix for gemm/conv/attention else vector)."),
    Column("t_memory_ns", "float64", NS, "Max over memory levels of bytes at that level / its bandwidth."),
    Column(
        "t_comm_ns",
        "float64",
        NS,
        "Collectives: latency + steps * hop latency + algorithm bytes / link bandwidth; else 0.",
    ),
    Column("t_runtime_ns", "float64", NS, "The device's min_op_time: one op's minimum time."),
)
_TOP = (
    Column("kind", "str", "", "'op' for host ops; 'kernel', 'memcpy' or 'memset' for device work."),
    Column("name", "str", "", "Op or kernel name as recorded (secrets redacted on output)."),
    Column("shapes", "str", "", "Input Dims as recorded (compact JSON); '' when not recorded or for device work."),
    Column("count", "int64", "", "Calls with this name and shapes."),
    Column("total_ns", "int64", NS, "Summed duration (host ops: inclusive of child ops)."),
    Column("mean_ns", "int64", NS, "total_ns / count, rounded."),
    Column(
        "device_ns",
        "int64",
        NS,
        "Host ops: summed duration of the device work their calls launched; device work: total_ns.",
    ),
    Column("share", "float64", "", "device_ns over the summed accelerator busy time (0 on CPU-only traces)."),
)

OUTPUT_TABLES: dict[str, tuple[Column, ...]] = {
    "device_time": (
        _RANK,
        _DEVICE,
        Column("start_ns", "int64", NS, "First work start on the device."),
        Column("end_ns", "int64", NS, "Last work end on the device."),
        Column("window_ns", "int64", NS, "end_ns - start_ns."),
        Column("busy_ns", "int64", NS, "Union of the device's work intervals (overlapping streams count once)."),
        Column("idle_ns", "int64", NS, "window_ns - busy_ns."),
        Column("work_events", "int64", "", "Work events on the device."),
    ),
    "top_kernels": _TOP,
    "top_ops": _TOP
    + (
        Column("time_ns", "int64", NS, "The units' measured time: device time on accelerators, self time on a CPU."),
        Column("flops", "float64", FLOP, "Dense FLOPs summed over the group's units; NaN when any is unknown."),
        Column("flops_effective", "float64", FLOP, "FLOPs with causal masks applied, summed."),
        Column("bytes", "float64", BYTE, "Compulsory bytes read + written, summed."),
        *_FLOORS,
        Column("floor_ns", "float64", NS, "Summed largest floors."),
        Column("family", "str", "", "Cost-model family: gemm, conv, attention, norm, ... or unknown."),
        Column("dtype", "str", "", "Normalised compute dtype or unknown."),
        Column("memory_level", "str", "", "The memory level whose traffic sets the memory floor ('' when unknown)."),
        Column("bound", "str", "", "The largest summed floor: compute, memory, communication, runtime, or unknown."),
        Column("intensity", "float64", "FLOP/byte", "flops_effective / bytes."),
        Column("efficiency", "float64", "", "floor_ns / time_ns."),
        Column(
            "above_ceiling",
            "bool",
            "",
            "Achieved rate above its ceiling by more than 10% (analysis.ceiling): efficiency is no efficiency then.",
        ),
        Column(
            "ceiling_note",
            "str",
            "",
            "Above the ceiling: the likely cause (wrong shape, dtype or preset; a cache level the spec lacks).",
        ),
        Column("algo_bytes", "float64", BYTE, "Collectives: bytes each rank sends (the algorithm's); NaN otherwise."),
        Column("algo_bw", "float64", "byte/s", "Collectives: achieved bus bandwidth, algo_bytes / time."),
        Column("enqueue", "bool", "", "A c10d:: op that only hands the collective to its backend's thread."),
    ),
    "units": (
        Column("unit_id", "int64", "", "The op's event id (or the device event's own when no op launched it)."),
        Column("rank", "int32", "", "Rank."),
        _DEVICE,
        Column("kind", "str", "", "'op', or the work's kind for a unit with no launching op."),
        Column("name", "str", "", "Of the op (or of the work) as recorded."),
        Column("shapes", "str", "", "Input Dims as recorded (compact JSON)."),
        Column("dtypes", "str", "", "Input type as recorded (compact JSON)."),
        Column("concrete", "str", "", "Concrete Inputs as recorded (compact JSON)."),
        Column("collective", "str", "", "Collective name as recorded; '' when none."),
        Column("msg_dtype", "str", "", "Collective message dtype as recorded; '' when none."),
        Column("msg_in_nelems", "int64", "", "Collective input elements; -1 when none."),
        Column("msg_out_nelems", "int64", "", "Collective output elements; -1 when none."),
        Column("group_size", "int32", "", "Collective group size; -1 when none."),
        Column(
            "step", "int32", "", "ProfilerStep number of the op (or of the step that launched the work); -1 outside."
        ),
        Column("start_ns", "int64", NS, "First start of the unit's work."),
        Column("end_ns", "int64", NS, "Last end of the unit's work."),
        Column("time_ns", "int64", NS, "Device units: union of the work's intervals; CPU units: self time."),
        Column("work_events", "int64", "", "Device events in the unit (0 for CPU units)."),
        Column(
            "host_copy_bytes",
            "float64",
            BYTE,
            "Bytes the unit's work copies between host and device memory (HtoD, DtoH copies' recorded "
            "sizes); NaN where a host copy recorded none; 0 without one.",
        ),
        Column("family", "str", "", "Cost-model family, or unknown."),
        Column("dtype", "str", "", "Normalised compute dtype, or unknown."),
        Column("flops", "float64", FLOP, "Dense FLOPs (as torch.utils.flop_counter counts); NaN when unknown."),
        Column("flops_effective", "float64", FLOP, "FLOPs with causal masks applied."),
        Column("bytes_read", "float64", BYTE, "Compulsory bytes read."),
        Column("bytes_written", "float64", BYTE, "Compulsory bytes written."),
        Column("bytes", "float64", BYTE, "bytes_read + bytes_written."),
        Column(
            "algo_bytes",
            "float64",
            BYTE,
            "Collectives: bytes one rank moves over its link (ring algorithms); else NaN.",
        ),
        Column("algo_steps", "float64", "", "Collectives: latency steps of the fewest-step algorithm; else NaN."),
        Column(
            "carried_by",
            "int64",
            "",
            "unit_id of the nested op that carries this wrapper's cost (analysis.nesting); -1 when none.",
        ),
        Column("parent_unit", "int64", "", "unit_id of the nearest costed op this unit is nested in; -1 when none."),
        Column("intensity", "float64", "FLOP/byte", "flops_effective / bytes."),
        *_FLOORS,
        Column("hardware", "str", "", "Name of the HardwareSpec the unit is floored on; '' when none."),
        Column("memory_level", "str", "", "The memory level whose bytes / bandwidth is t_memory."),
        Column("floor_ns", "float64", NS, "The largest floor; NaN when unknown."),
        Column("bound", "str", "", "profiler.model.schema.Bound value of the largest floor."),
        Column("efficiency", "float64", "", "floor_ns / time_ns; NaN when unknown or time 0."),
        Column(
            "carried_by_name",
            "str",
            "",
            "A wrapper's implementation op that carries its cost (analysis.nesting); '' when none.",
        ),
        Column("nest_floor_ns", "float64", NS, "A wrapper: the floors of the units nested in it."),
        Column(
            "above_ceiling",
            "bool",
            "",
            "Achieved rate above its ceiling by more than 10% (analysis.ceiling): efficiency is no efficiency then.",
        ),
        Column(
            "ceiling_note",
            "str",
            "",
            "Above the ceiling: the likely cause (wrong shape, dtype or preset; a cache level the spec lacks).",
        ),
    ),
    "equation": (
        _RANK,
        _DEVICE,
        Column("window_ns", "int64", NS, "First work start to last work end."),
        Column("busy_ns", "int64", NS, "Union of the work."),
        *_BOUNDS,
        Column("idle_host_ns", "int64", NS, "Idle while the host did not launch (or, CPU-only, no op ran)."),
        Column("idle_sync_ns", "int64", NS, "Idle while the host waited in a synchronize call."),
        Column("idle_other_ns", "int64", NS, "The rest of the idle time."),
    ),
    "by_bound": (
        Column("bound", "str", "", "The bound (analysis.roofline.by: also by family, by dtype)."),
        Column("units", "int64", "", "Units with that value."),
        Column("time_ns", "int64", NS, "Their summed time (units may overlap)."),
        Column("share", "float64", "", "Of the total."),
    ),
    "utilization": (
        _RANK,
        _DEVICE,
        Column("flops", "float64", FLOP, "Effective FLOPs of the known units counted (analysis.mfu)."),
        Column("bytes", "float64", BYTE, "Memory bytes of the known units counted."),
        Column("time_ns", "float64", NS, "The time base: the profiled steps' wall time, else the trace window."),
        Column("steps", "int64", "", "ProfilerSteps in the time base; 0: the trace window."),
        Column("time_base", "str", "", "Its label: 'N steps' wall time' or 'trace window'."),
        Column("comm_bytes", "float64", BYTE, "Algorithm bytes of collectives."),
        Column("flops_per_s", "float64", "FLOP/s", "flops over time_ns."),
        Column("bytes_per_s", "float64", "byte/s", "bytes over time_ns."),
        Column("compute_util", "float64", "", "MFU: flops_per_s / matrix peak of compute_dtype."),
        Column("compute_dtype", "str", "", "The dtype with the most FLOPs."),
        Column("memory_util", "float64", "", "MBU: bytes_per_s / outermost bandwidth."),
        Column(
            "floor_ns", "float64", NS, "The known units' floors summed: their time at their floors, one after another."
        ),
        Column("unknown_ns", "float64", NS, "Measured time of units without a floor."),
    ),
    "streams": (
        _RANK,
        _DEVICE,
        Column("stream", "str", "", "Track name of the stream."),
        Column("work_events", "int64", "", "Work events on it."),
        Column("busy_ns", "int64", NS, "Union of its work."),
        Column("idle_ns", "int64", NS, "Device window - busy_ns."),
        Column("share", "float64", "", "busy_ns / device window."),
    ),
    "communication": (
        _RANK,
        _DEVICE,
        Column("comm_ns", "int64", NS, "Union of collective work."),
        Column("overlapped_ns", "int64", NS, "Collective time with other work running."),
        Column("exposed_ns", "int64", NS, "comm_ns - overlapped_ns: collectives running alone."),
    ),
    "launches": (
        _RANK,
        Column("stream", "str", "", "Track name of the stream."),
        Column("launches", "int64", "", "Launch flows to the stream's work."),
        Column("delay_p50_ns", "int64", NS, "Median of work start - launch call start."),
        Column("delay_p95_ns", "int64", NS, "95th percentile of the same."),
        Column("delay_max_ns", "int64", NS, "Largest of the same."),
        Column("queue_mean", "float64", "", "Mean launched-not-started work at each launch."),
        Column("queue_max", "int64", "", "Most launched-not-started work at a launch."),
    ),
    "kv_cache": (
        _RANK,
        _DEVICE,
        Column("op", "str", "", "The cache-write op the sizes come from."),
        Column("dtype", "str", "", "The cache's dtype."),
        Column("per_token_layer_bytes", "float64", BYTE, "Bytes one token takes in one layer's cache."),
        Column("per_layer_bytes", "float64", BYTE, "One layer's cache."),
        Column("slots", "float64", "", "Tokens one layer's cache holds."),
        Column("layers", "int64", "", "Layers (cache-write calls per step)."),
        Column("bytes_per_token", "float64", BYTE, "Over all layers."),
        Column("kv_cache_bytes", "float64", BYTE, "The whole cache."),
        Column("capacity_bytes", "float64", BYTE, "The device's memory."),
        Column("share", "float64", "", "kv_cache_bytes / capacity_bytes."),
        Column("note", "str", "", "Why a figure is missing; '' when none."),
    ),
    "llm_summary": (
        _RANK,
        Column("phase", "str", "", "prefill, decode or mixed."),
        Column("steps", "int64", "", "Serving steps."),
        Column("tokens", "float64", "", "Tokens, summed."),
        Column("time_ns", "float64", NS, "Summed step durations."),
        Column("device_busy_ns", "float64", NS, "Summed device busy time in the steps."),
        Column("tokens_per_s", "float64", "1/s", "tokens / time_ns * 1e9."),
        Column("mean_step_ns", "float64", NS, "time_ns / steps."),
        Column("ttft_ns", "float64", NS, "Prefill: the first prefill step's duration (a lower bound)."),
        Column("tpot_ns", "float64", NS, "Decode: mean step duration."),
        Column("tpot_device_ns", "float64", NS, "Decode: mean device busy time per step."),
        Column("tpot_host_ns", "float64", NS, "Decode: mean host busy time per step (serving overhead)."),
        Column(
            "tpot_wait_ns",
            "float64",
            NS,
            "Decode: mean host time per step blocked on the device (synchronize, blocking copies).",
        ),
        Column("kv_read_bytes", "float64", BYTE, "Decode: KV-cache bytes read per step."),
        Column("kv_floor_ns", "float64", NS, "kv_read_bytes / bandwidth."),
        Column("kv_floor_efficiency", "float64", "", "kv_floor_ns / device busy time."),
        Column("note", "str", "", "Why a figure is missing; '' when none."),
    ),
    "modules": (
        Column("rank", "int32", "", "Rank."),
        Column("path", "str", "", "Module path 'A_0/B_1/C_0'."),
        Column("name", "str", "", "Last part of the path."),
        Column("depth", "int64", "", "0 for a root."),
        Column("parent", "str", "", "Parent's path; '' for a root."),
        Column("calls", "int64", "", "Calls of the module."),
        Column("self_ns", "int64", NS, "Unit time directly in the module."),
        Column("total_ns", "int64", NS, "Unit time in the module and its children."),
        Column("host_ns", "int64", NS, "Host (CPU) unit time inside."),
        *_BOUNDS,
        Column("flops", "float64", FLOP, "Effective FLOPs of its units."),
        Column("bytes", "float64", BYTE, "Bytes of its units."),
        Column("units", "int64", "", "Units inside."),
    ),
}


# --------------------------------------------------------------- hardware counters (perf analyze --counters)
_PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
_LEVELS = {"dram": "DRAM (HBM)", "l2": "L2", "l1": "L1 (NVIDIA L1TEX, AMD vector L1)", "lds": "AMD LDS"}
OUTPUT_TABLES["kernel_counters"] = (
    Column("launch", "int64", "", "The launch's index in the counter file."),
    Column("kernel", "str", "", "Kernel name as the counter file records it."),
    Column("occurrence", "int64", "", "Launches of this kernel name before it in the file."),
    Column("device", "str", "", "Device as the counter file records it; '' when not."),
    Column("duration_ns", "float64", NS, "Measured kernel time; NaN when the file has none."),
    Column(
        "duration_from", "str", "", "Where the time came from (gpu__time_duration.sum, cycles / clock, timestamps)."
    ),
    *(
        Column(
            f"flops_{u}_{p}",
            "float64",
            FLOP,
            f"Measured {p} FLOPs on the {'tensor/matrix cores (MMA, MFMA)' if u == 'matrix' else 'SIMD lanes'} "
            "(docs/counters.md); NaN when not counted.",
        )
        for u in ("matrix", "vector")
        for p in _PRECISIONS
    ),
    Column("flops", "float64", FLOP, "Sum of the measured FLOPs above."),
    Column(
        "flops_mac",
        "float64",
        FLOP,
        "Multiply-accumulate FLOPs: the matrix FLOPs plus 2 x the vector FMAs (a GEMM's inner loop, "
        "epilogue excluded).",
    ),
    *(
        Column(f"bytes_{lv}", "float64", BYTE, f"Measured bytes at {name}; NaN when not counted.")
        for lv, name in _LEVELS.items()
    ),
    Column("occupancy_pct", "float64", "%", "Achieved occupancy as recorded (Nsight Compute); NaN when not."),
    Column("grid", "str", "", "Launch grid as recorded (rocprof: work-items)."),
    Column("block", "str", "", "Block / workgroup size as recorded."),
)
OUTPUT_TABLES["measured_roofline"] = (
    Column("launch", "int64", "", "The launch's index in the counter file."),
    Column("kernel", "str", "", "Kernel name."),
    Column("duration_ns", "float64", NS, "Measured kernel time."),
    Column("precision", "str", "", "Precision of the launch's dominant FLOPs."),
    Column("unit", "str", "", "'matrix' or 'vector': the unit of its dominant FLOPs."),
    Column("flops", "float64", FLOP, "Measured FLOPs, all precisions."),
    Column("achieved_flops_per_s", "float64", "FLOP/s", "flops / duration."),
    Column("peak_flops_per_s", "float64", "FLOP/s", "The spec's peak for that precision and unit."),
    Column("compute_pct", "float64", "%", "100 * achieved / peak."),
    *(Column(f"intensity_{lv}", "float64", "FLOP/byte", f"flops / bytes at {name}.") for lv, name in _LEVELS.items()),
    *(
        Column(f"{lv}_pct", "float64", "%", f"100 * bytes at {name} / duration / the level's bandwidth.")
        for lv, name in _LEVELS.items()
    ),
    Column("roof_flops_per_s", "float64", "FLOP/s", "min(peak, intensity * bandwidth over the measured levels)."),
    Column("bound", "str", "", "The unit closest to its peak, from counters: compute, memory (level), or latency."),
    Column("occupancy_pct", "float64", "%", "Achieved occupancy as recorded; NaN when not."),
)
OUTPUT_TABLES["counters_vs_model"] = (
    _RANK,
    _DEVICE,
    Column("unit_id", "int64", "", "The unit (op) whose kernels carry counters."),
    Column("name", "str", "", "Op name."),
    Column("shapes", "str", "", "Input Dims as recorded."),
    Column("family", "str", "", "Cost-model family."),
    Column("dtype", "str", "", "Cost-model dtype."),
    Column("launches", "int64", "", "Counter launches joined to the unit's kernels."),
    Column("kernel", "str", "", "The first of those kernels' names."),
    Column("flops_model", "float64", FLOP, "The cost model's FLOPs of the unit."),
    Column("flops_measured", "float64", FLOP, "Measured FLOPs summed over the joined launches."),
    Column("flops_ratio", "float64", "", "flops_measured / flops_model."),
    Column("matrix_share", "float64", "", "Share of the measured FLOPs on tensor/matrix cores."),
    Column("bytes_dram_model", "float64", BYTE, "Modelled bytes at the outermost memory level."),
    Column("bytes_dram_measured", "float64", BYTE, "Measured DRAM bytes summed over the joined launches."),
    Column("bytes_ratio", "float64", "", "bytes_dram_measured / bytes_dram_model."),
    Column("bytes_l2_measured", "float64", BYTE, "Measured L2 bytes."),
    Column("reason", "str", "", "Why the FLOPs differ, when a GEMM's macro tile explains it; else ''."),
)


# --------------------------------------------------------------- cross-rank (analysis.cross_rank)
OUTPUT_TABLES["collectives"] = (
    Column("group", "int64", "", "The collective's group: its device stream, numbered by first use on each rank."),
    Column("seq", "int64", "", "The instance's index within its group (0, 1, ...), the same on every rank."),
    Column("name", "str", "", "Collective: all_reduce, all_gather, all_to_all, ...; 'a|b' when the ranks disagree."),
    Column("ranks", "int64", "", "Ranks that ran this instance."),
    Column("bytes", "float64", BYTE, "Message bytes (input; output for all_gather); NaN when unknown."),
    Column("algo_bytes", "float64", BYTE, "Bytes one rank sends: NCCL's bus-bandwidth factor x bytes."),
    Column("first_arrival_ns", "int64", NS, "Earliest start of the collective's kernel over the ranks."),
    Column("last_arrival_ns", "int64", NS, "Latest start: no data moves before it."),
    Column("last_rank", "int64", "", "The rank that arrived last (ties: the higher rank)."),
    Column("end_ns", "int64", NS, "Latest end over the ranks."),
    Column("wait_ns", "int64", NS, "Sync skew: last_arrival_ns - first_arrival_ns, the earliest rank's wait."),
    Column("transfer_ns", "int64", NS, "end_ns - last_arrival_ns: the collective's own time."),
    Column("delay_ns", "int64", NS, "last_arrival_ns - the second-latest arrival: what the last rank alone cost."),
    Column("bus_bandwidth", "float64", "byte/s", "algo_bytes / transfer_ns (nccl-tests doc/PERFORMANCE.md busbw)."),
    Column("link_bandwidth", "float64", "byte/s", "The slowest rank's link bandwidth per direction (hardware spec)."),
    Column("link_share", "float64", "", "bus_bandwidth / link_bandwidth."),
)
OUTPUT_TABLES["stragglers"] = (
    _RANK,
    Column("delay_ns", "int64", NS, "Mean delay_ns over the collectives this rank arrived last at."),
    Column("collectives", "int64", "", "Collectives this rank arrived last at (delay_ns > 0)."),
    Column("total_delay_ns", "int64", NS, "delay_ns x collectives."),
    Column("share", "float64", "", "collectives / all matched collectives."),
)
OUTPUT_TABLES["rank_summary"] = (
    _RANK,
    Column("window_ns", "int64", NS, "Summed window of the rank's accelerators (analysis.attribution)."),
    Column("busy_ns", "int64", NS, "Summed busy time of its accelerators."),
    *_BOUNDS,
    Column("collectives", "int64", "", "Matched collective instances the rank ran."),
    Column("wait_ns", "int64", NS, "Summed wait at them: the last arrival minus the rank's own."),
    Column("late_ns", "int64", NS, "Summed delay_ns of the collectives it arrived last at."),
    Column("sets_step", "bool", "", "The rank that waits least: the others wait for it, it sets the step time."),
)
OUTPUT_TABLES["comm_matrix"] = (
    Column("src", "int64", "", "Sending rank."),
    Column("dst", "int64", "", "Receiving rank."),
    Column("bytes", "float64", BYTE, "Bytes sent src -> dst (all_to_all over the world, split evenly)."),
    Column("collectives", "int64", "", "All-to-all instances summed."),
)


def columns(table: str) -> list[str]:
    """The declared column names of `table`, in order."""
    return [c.name for c in OUTPUT_TABLES[table]]


def markdown() -> str:
    """The tables' column reference as Markdown (docs/json-schema.md's generated section)."""
    out = [
        "## Analysis tables",
        "",
        "Generated from `analysis/columns.py` by `python -m profiler.docs`; do not edit by hand.",
        "Each `Analysis` table (profiler/api/result.py) has these columns, in this order.",
        "",
    ]
    for table, cols in OUTPUT_TABLES.items():
        out += [f"### {table}", "", "| column | dtype | unit | meaning |", "|---|---|---|---|"]
        out += [f"| `{c.name}` | {c.dtype} | {c.unit} | {c.meaning} |" for c in cols]
        out.append("")
    return "\n".join(out)
