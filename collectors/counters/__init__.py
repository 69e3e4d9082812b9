"""Hardware counters per kernel launch, read into one `KernelCounters` table
(profiler.model.kernel_counters), one reader per format:

    ncu.py              Nsight Compute `ncu --csv` long form
    rocprof_compute.py  rocprof-compute (omniperf) workload folders, rocprof v1 wide CSVs
    rocprofv3.py        rocprofv3 counter collection CSV (one row per counter per dispatch)
    kineto_cupti.py     Kineto traces with CUPTI counters (cuda_profiler_range events)
    simulator.py        `perf simulate -o` traces: the simulated accelerator's per-kernel ground truth
    perf_stat.py        Linux `perf stat -x,` around a CPU workload (perf profile --counters)

`read_counters(path)` picks the reader from the path and the file's first line.
"""

from __future__ import annotations

from pathlib import Path

from collectors.counters.kineto_cupti import read_kineto_cupti
from collectors.counters.ncu import is_ncu_header, read_ncu
from collectors.counters.perf_stat import is_perf_stat, read_perf_stat
from collectors.counters.rocprof_compute import is_rocprof_folder, read_rocprof_folder, read_wide
from collectors.counters.rocprofv3 import is_rocprofv3_header, read_rocprofv3
from collectors.counters.simulator import is_simulator_trace, read_simulator
from profiler.model.errors import InputError
from profiler.model.files import open_regular, read_bounded
from profiler.model.kernel_counters import KernelCounters, build, occurrences

__all__ = ["read_counters"]


def read_counters(path: str | Path, max_bytes: int | None = None) -> KernelCounters:
    """The kernel counters in `path`: a rocprof-compute folder (holding pmc_perf.csv), an ncu
    CSV, a rocprofv3 or rocprof v1 CSV, a Kineto trace (.json, .json.gz) with CUPTI counters, a
    simulated trace (`perf simulate -o`: top-level traceSource 'simulator'), or Linux `perf stat -x,` output.
    Anything else: InputError naming the path and what was expected."""
    p = Path(path)
    if p.is_dir():
        if is_rocprof_folder(p):
            return read_rocprof_folder(p, max_bytes)
        csvs = sorted(p.glob("*counter_collection.csv"))
        if len(csvs) == 1:
            return read_rocprofv3(csvs[0], max_bytes)
        raise InputError(
            p,
            "not a counter folder: expected pmc_perf.csv (rocprof-compute) or one *counter_collection.csv (rocprofv3)",
        )
    if p.name.endswith((".json", ".json.gz", ".gz")):
        return _read_trace(p, max_bytes)
    with open_regular(p) as f:
        head = f.read(4096)
    if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        return _read_trace(p, max_bytes)
    if is_perf_stat(head.decode("utf-8", "replace").lstrip()):
        return read_perf_stat(p, max_bytes)
    first = next(
        (
            ln
            for ln in head.decode("utf-8", "replace").splitlines()
            if ln.lstrip('"').startswith(("ID", "Dispatch", "Correlation", "Index"))
        ),
        "",
    )
    if is_ncu_header(first):
        return read_ncu(p, max_bytes)
    if is_rocprofv3_header(first):
        return read_rocprofv3(p, max_bytes)
    if "Kernel_Name" in first or "KernelName" in first:
        rows, launches = read_wide(p, max_bytes)
        order = sorted(launches)
        occ = occurrences([launches[d]["kernel"] for d in order])
        out = [
            (
                d,
                launches[d]["kernel"],
                o,
                launches[d]["device"],
                -1,
                launches[d]["start"],
                launches[d]["duration"],
                launches[d]["grid"],
                launches[d]["block"],
            )
            for d, o in zip(order, occ)
        ]
        return build(rows, out, source="rocprof", path=str(p))
    raise InputError(
        p,
        "unknown counter file: expected an Nsight Compute CSV ('Metric Name' column), a rocprofv3 CSV "
        "('Counter_Name'), a rocprof CSV ('Kernel_Name'), a rocprof-compute folder or a Kineto trace",
    )


def _read_trace(p: Path, max_bytes: int | None) -> KernelCounters:
    """A JSON trace: the simulator's (traceSource 'simulator') or a Kineto trace with CUPTI counters."""
    data = read_bounded(p, max_bytes)
    if is_simulator_trace(data):
        return read_simulator(p, data=data)
    return read_kineto_cupti(p, max_bytes)
