"""Per-dispatch execution times from IREE's HAL profiling: iree-benchmark-module runs the module
with `--device_profiling_mode=host-execution` (the local CPU device records each dispatch's start
and end on the host clock; 'dispatch-events' is for devices with their own timestamps), writing
a .ireeprof bundle; `iree-profile dispatch --format=jsonl --dispatch_events` reads one
`host_dispatch_event` per dispatch run (key = the export name, start/end_host_time_ns).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from collectors.iree.capture import SCOPE
from collectors.iree.compile import first_error
from profiler.model.errors import InputError

EVENT_COLUMNS = ["dispatch", "start_ns", "dur_ns", "submission", "workgroups"]


def tool(name: str) -> str:
    """An IREE runtime tool: on PATH, else beside this Python (the venv's bin)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        raise InputError(None, f"{name} not found (it comes with iree-base-runtime; pip install '.[iree]')")
    return found


def profile_dispatches(
    vmfb: Path, params: Path, inputs: tuple[str, ...], workdir: Path, runs: int = 20, timeout_s: float = 600
) -> tuple[pd.DataFrame, float]:
    """Run `main` `runs` times under HAL profiling: (one row per dispatch run, the mean wall time
    of one call in ns as iree-benchmark-module reports it (real_time: the VM call, its dispatches
    and the waits between them, profiling on); NaN when it prints none).

    Columns of the rows: dispatch (export name), start_ns (host clock of the runtime, ns), dur_ns (ns),
    submission (the queue submission: one per call of the function), workgroups (x*y*z).
    """
    prof = workdir / "run.ireeprof"
    cmd = [
        tool("iree-benchmark-module"),
        f"--module={vmfb}",
        "--device=local-task",
        "--function=main",
        f"--parameters={SCOPE}={params}",
        *(f"--input={i}" for i in inputs),
        f"--benchmark_min_time={runs}x",
        "--device_profiling_mode=host-execution",
        f"--device_profiling_output={prof}",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if run.returncode != 0:
        raise InputError(vmfb, f"iree-benchmark-module failed: {first_error(run.stderr or run.stdout)}")
    read = subprocess.run(
        [tool("iree-profile"), "dispatch", "--format=jsonl", "--dispatch_events", str(prof)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if read.returncode != 0:
        raise InputError(prof, f"iree-profile failed: {first_error(read.stderr)}")
    return dispatch_events(read.stdout), call_ns(run.stdout)


_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def call_ns(stdout: str) -> float:
    """The real time per iteration of google-benchmark's `BM_main.../real_time  0.119 ms ...` line."""
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].startswith("BM_") and parts[0].endswith("real_time") and parts[2] in _UNIT_NS:
            try:
                return float(parts[1]) * _UNIT_NS[parts[2]]
            except ValueError:
                continue
    return float("nan")


def dispatch_events(jsonl: str) -> pd.DataFrame:
    """The `host_dispatch_event` rows of iree-profile's JSONL (valid ones), EVENT_COLUMNS."""
    rows = []
    for line in jsonl.splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        if e.get("type") != "host_dispatch_event" or not e.get("valid", False):
            continue
        wg = e.get("workgroup_count") or [1]
        n = 1
        for w in wg:
            n *= int(w)
        rows.append([str(e["key"]), int(e["start_host_time_ns"]), int(e["duration_ns"]), int(e["submission_id"]), n])
    df = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    return df.sort_values("start_ns", kind="stable").reset_index(drop=True)
