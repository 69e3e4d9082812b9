"""The one declaration of every column of a `Trace`: dtype, unit and meaning.

Collectors build their tables to match it and `Trace.validate()` checks them against it; the
column reference in `docs/schema.md` is generated from it (`python -m profiler.docs`).
Like Perfetto's trace-processor tables, each column carries a unit and a sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class Column:
    """One column: its pandas dtype, its unit ('' when it has none) and what it means."""

    name: str
    dtype: str
    unit: str
    meaning: str
    required: bool = True
    missing: object = None  # the value that stands for "not recorded", when not NA


class Kind(StrEnum):
    """What an interval event is. Kineto categories map onto these (collectors/kineto/kinds.py)."""

    OP = "op"  # a framework operator on a CPU thread (aten::mm, autograd nodes)
    KERNEL = "kernel"  # device code
    MEMCPY = "memcpy"
    MEMSET = "memset"
    RUNTIME = "runtime"  # CUDA/HIP runtime or driver call on a CPU thread (launches, syncs)
    ANNOTATION = "annotation"  # record_function / ProfilerStep regions: labels, not work
    PYTHON = "python"  # python_function frames (with_stack)
    COLLECTIVE = "collective"
    COMPILE_PASS = "compile_pass"
    DMA = "dma"
    OVERHEAD = "overhead"  # the profiler's own work (activity buffer requests)
    PROFILER = "profiler"  # the profiler's span markers ("PyTorch Profiler (0)")
    OTHER = "other"  # a category this reader does not know; counted in Trace.problems


class Bound(StrEnum):
    """What limits a unit of work: its largest floor (docs/architecture.md, "How time is classified")."""

    COMPUTE = "compute"
    MEMORY = "memory"
    COMMUNICATION = "communication"
    RUNTIME = "runtime"
    UNKNOWN = "unknown"  # the cost model cannot derive the unit's FLOPs/bytes


#: Kinds that occupy a device (they make up its busy time).
DEVICE_WORK_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)

NS = "ns"

EVENT_COLUMNS: tuple[Column, ...] = (
    Column("id", "int64", "", "Row id, unique within the trace; parent_id, op_id and flows refer to it."),
    Column("name", "category", "", "Event name as recorded (op, kernel or annotation name)."),
    Column("cat", "category", "", "The source's own category string (e.g. Kineto 'cpu_op', legacy 'Operator')."),
    Column("kind", "category", "", "Normalised kind: one of profiler.model.schema.Kind."),
    Column("ts", "int64", NS, "Start time on the trace's common clock (all ranks aligned)."),
    Column("dur", "int64", NS, "Duration; never negative."),
    Column("rank", "int32", "", "Distributed rank of the process that recorded the event."),
    Column("device", "category", "", "'cpu' for host threads, 'gpu<N>' for accelerator N."),
    Column("track", "category", "", "Timeline row, e.g. 'rank0/gpu0/stream7' or 'rank0/cpu/thread123'."),
    Column("stream", "int64", "", "Device stream (or queue) id; -1 on host events.", missing=-1),
    Column("thread", "int64", "", "Host thread id; -1 on device events.", missing=-1),
    Column("parent_id", "int64", "", "Innermost enclosing host event on the same thread; -1 at top level.", missing=-1),
    Column("depth", "int16", "", "Nesting depth on the host thread (0 at top level; 0 on devices)."),
    Column(
        "correlation",
        "int64",
        "",
        "Launch correlation id joining a runtime call to its device work; -1 if none.",
        missing=-1,
    ),
    Column(
        "external_id",
        "int64",
        "",
        "Kineto 'External id' joining ops, runtime calls and kernels; -1 if none.",
        missing=-1,
    ),
    Column(
        "op_id",
        "int64",
        "",
        "For device work: the innermost host op whose runtime call launched it; -1 if unknown.",
        missing=-1,
    ),
    Column("step", "int32", "", "ProfilerStep iteration number that contains the event; -1 outside steps.", missing=-1),
    Column("source", "category", "", "Which collector layer produced it: runtime, compiler or simulator."),
    Column("shapes", "category", "", "Input shapes as recorded ('Input Dims', compact JSON); '' when not recorded."),
    Column("dtypes", "category", "", "Input dtypes as recorded ('Input type', JSON); '' when not recorded."),
    Column(
        "concrete",
        "category",
        "",
        "Scalar inputs as recorded ('Concrete Inputs', JSON: stride, padding, flags); '' when not recorded.",
    ),
    Column(
        "collective",
        "category",
        "",
        "Collective name as recorded ('Collective name': allreduce, _allgather_base...); ''.",
    ),
    Column(
        "msg_in_nelems",
        "int64",
        "element",
        "Collective input message size ('In msg nelems'); -1 if not recorded.",
        missing=-1,
    ),
    Column(
        "msg_out_nelems",
        "int64",
        "element",
        "Collective output message size ('Out msg nelems'); -1 if not recorded.",
        missing=-1,
    ),
    Column(
        "group_size",
        "int32",
        "",
        "Ranks in the collective's process group ('Group size'); -1 if not recorded.",
        missing=-1,
    ),
    Column("msg_dtype", "category", "", "Collective element type as recorded ('dtype': Float, BFloat16...); ''."),
    Column("bytes_recorded", "int64", "byte", "Bytes the source recorded for a memcpy/memset; -1 if none.", missing=-1),
    Column(
        "flops",
        "float64",
        "FLOP",
        "Floating-point operations from the cost model (filled by analysis).",
        required=False,
    ),
    Column(
        "bytes", "float64", "byte", "Bytes read plus written from the cost model (filled by analysis).", required=False
    ),
    Column(
        "comm_bytes", "float64", "byte", "Bytes a collective moves over links (filled by analysis).", required=False
    ),
)

COUNTER_COLUMNS: tuple[Column, ...] = (
    Column("track", "category", "", "Counter track, e.g. 'rank0/gpu0/memory'."),
    Column("rank", "int32", "", "Distributed rank."),
    Column("device", "category", "", "'cpu' or 'gpu<N>'."),
    Column("ts", "int64", NS, "Sample time on the common clock."),
    Column("name", "category", "", "Counter name, e.g. 'allocated' (bytes currently allocated)."),
    Column("value", "float64", "", "Sample value, in the unit the counter's name states."),
)

FLOW_COLUMNS: tuple[Column, ...] = (
    Column("src", "int64", "", "Event id the edge starts at (e.g. the runtime launch call)."),
    Column("dst", "int64", "", "Event id the edge ends at (e.g. the kernel)."),
    Column(
        "kind",
        "category",
        "",
        "'launch' (runtime call to device work), 'fwdbwd' (forward op to its backward) or 'dependency' "
        "(device work to the work that reads its result; simulated traces).",
    ),
)

DEVICE_COLUMNS: tuple[Column, ...] = (
    Column("rank", "int32", "", "Distributed rank."),
    Column("device", "category", "", "'cpu' or 'gpu<N>'."),
    Column("name", "object", "", "Device name as recorded (deviceProperties 'name'; may be empty on ROCm)."),
    Column(
        "sm_count", "int32", "", "Streaming multiprocessors (NVIDIA) or compute units (AMD); -1 if unknown.", missing=-1
    ),
    Column("compute_capability", "object", "", "'major.minor' as recorded (e.g. '8.0', '9.4'); '' if unknown."),
    Column("memory_bytes", "int64", "byte", "Device memory ('totalGlobalMem'); -1 if unknown.", missing=-1),
    Column("warp_size", "int32", "", "Threads per warp (32) or wavefront (64); -1 if unknown.", missing=-1),
)

TABLES: dict[str, tuple[Column, ...]] = {
    "events": EVENT_COLUMNS,
    "counters": COUNTER_COLUMNS,
    "flows": FLOW_COLUMNS,
    "devices": DEVICE_COLUMNS,
}


def columns(table: str, *, required_only: bool = False) -> tuple[Column, ...]:
    """The declared columns of `table` ('events', 'counters', 'flows' or 'devices')."""
    cols = TABLES[table]
    return tuple(c for c in cols if c.required) if required_only else cols


def markdown() -> str:
    """The column reference as Markdown (the source of docs/schema.md)."""
    out = [
        "# Trace columns",
        "",
        "Generated from `profiler/model/schema.py` by `python -m profiler.docs`; do not edit by hand.",
        "",
    ]
    for table, cols in TABLES.items():
        out += [f"## {table}", "", "| column | dtype | unit | meaning |", "|---|---|---|---|"]
        out += [
            f"| `{c.name}` | {c.dtype} | {c.unit} | {c.meaning}{'' if c.required else ' (optional)'} |" for c in cols
        ]
        out.append("")
    out += ["## kinds", "", *[f"- `{k.value}`" for k in Kind], ""]
    return "\n".join(out)
