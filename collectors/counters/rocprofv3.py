"""rocprofv3 counter collection CSV (`rocprofv3 --pmc ... --output-format csv`, the
`*_counter_collection.csv` file): one row per counter per dispatch.

Columns (ROCm 6.2+; rocprofiler-sdk docs, "Using rocprofv3", kernel counter collection output):
Correlation_Id (6.3+), Dispatch_Id, Agent_Id, Queue_Id, Process_Id, Thread_Id, Grid_Size,
Kernel_Id, Kernel_Name, Workgroup_Size, LDS_Block_Size, Scratch_Size, VGPR_Count,
Accum_VGPR_Count (6.3+), SGPR_Count, Counter_Name, Counter_Value, Start_Timestamp,
End_Timestamp. The launch parameters repeat on each of a dispatch's rows; they are read once.
"""

from __future__ import annotations

from pathlib import Path

from collectors.counters.csvtext import read_rows, require
from profiler.model.errors import InputError
from profiler.model.kernel_counters import KernelCounters, build, occurrences, parse_number

NEEDED = ("Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value")


def is_rocprofv3_header(first_line: str) -> bool:
    return "Counter_Name" in first_line and "Counter_Value" in first_line


def read_rocprofv3(path: str | Path, max_bytes: int | None = None) -> KernelCounters:
    """The counters of a rocprofv3 counter-collection CSV (module docstring)."""
    header, body = read_rows(path, max_bytes)
    col = require(path, header, NEEDED, "a rocprofv3 counter collection CSV")
    get = lambda r, name: r[col[name]].strip() if name in col else ""  # noqa: E731
    rows, launches = [], {}
    for n, r in enumerate(body):
        d = parse_number(r[col["Dispatch_Id"]])
        value = parse_number(r[col["Counter_Value"]])
        if d is None or value is None:
            raise InputError(path, f"row {n + 2}: Dispatch_Id or Counter_Value is not a number")
        dispatch, kernel = int(d), r[col["Kernel_Name"]]
        agent = get(r, "Agent_Id")
        device = f"agent{agent}" if agent else ""
        rows.append((dispatch, kernel, r[col["Counter_Name"]].strip(), value, "count", "", "", device))
        if dispatch not in launches:
            corr = parse_number(get(r, "Correlation_Id") or "x")
            start, end = parse_number(get(r, "Start_Timestamp") or "x"), parse_number(get(r, "End_Timestamp") or "x")
            launches[dispatch] = (
                kernel,
                device,
                int(corr) if corr is not None else -1,
                int(start) if start is not None else -1,
                end - start if start is not None and end is not None else float("nan"),
                get(r, "Grid_Size"),
                get(r, "Workgroup_Size"),
            )
    if not rows:
        raise InputError(path, "no counter rows")
    order = sorted(launches)
    names = [launches[d][0] for d in order]
    out = [(d, launches[d][0], occ, *launches[d][1:]) for d, occ in zip(order, occurrences(names))]
    return build(rows, out, source="rocprofv3", path=str(path))
