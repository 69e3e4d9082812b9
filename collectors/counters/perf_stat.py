"""Linux `perf stat` around a CPU workload (`perf profile --counters`), and reading its CSV.

`record(out)` attaches `perf stat -x, -p PID` to this process while the block runs and writes its
CSV to `out`. Hardware events (cycles, instructions, cache and branch misses) need a PMU the kernel
lets us read (`/proc/sys/kernel/perf_event_paranoid`, and none on most VMs): where they are not
allowed perf writes '<not supported>' and the software events (task-clock, context switches, CPU
migrations, page faults) still count. Threads started after perf attaches are counted too (perf
stat inherits to new threads by default).

`perf stat -x,` CSV (perf-stat(1), "CSV FORMAT"): value, unit, event, run time, % of the run the
event was counted, then an optional derived metric and its unit; '#' lines are comments. Read into
the one counters table as one 'launch': the process.

The name `perf` is ours too (this suite's console script): the Linux tool is the `perf` on PATH
whose `perf --version` answers 'perf version N'.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from profiler.model.errors import InputError
from profiler.model.files import read_bounded
from profiler.model.kernel_counters import KernelCounters, build, normalise, parse_number

EVENTS = (
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branches",
    "branch-misses",
)
#: perf stat's units -> ours ('msec' of task-clock is CPU time in ms).
_UNITS = {"msec": "ms", "": "count"}


def find_linux_perf() -> str | None:
    """Path of the Linux `perf` tool on PATH, skipping this suite's own `perf` script; None when absent."""
    for d in os.environ.get("PATH", "").split(os.pathsep):
        exe = shutil.which("perf", path=d) if d else None
        if not exe:
            continue
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        if out.startswith("perf version"):
            return exe
    return None


@contextmanager
def record(out: Path, pid: int | None = None, events: tuple[str, ...] = EVENTS) -> Iterator[None]:
    """Count `events` of process `pid` (this one by default) while the block runs; perf's CSV goes
    to `out`. InputError when the Linux perf tool is absent or refuses to start."""
    exe = find_linux_perf()
    if exe is None:
        raise InputError(None, "Linux perf (the perf-events tool) is not on PATH: no CPU counters recorded")
    out = Path(out)
    out.unlink(missing_ok=True)
    cmd = [exe, "stat", "-x,", "-o", str(out), "-e", ",".join(events), "-p", str(pid or os.getpid())]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 5
    while not (out.exists() and out.stat().st_size) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # perf writes its '# started on' line once attached
    if proc.poll() is not None:
        err = " ".join((proc.stderr.read() if proc.stderr else "").split())[:200]
        raise InputError(None, f"perf stat did not start: {err or 'exit ' + str(proc.returncode)}")
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def is_perf_stat(first_line: str) -> bool:
    return first_line.startswith("# started on")


def read_perf_stat(path: str | Path, max_bytes: int | None = None) -> KernelCounters:
    """The counters of a `perf stat -x,` file: one launch (the process), one row per event;
    '<not supported>' / '<not counted>' events kept as text rows."""
    data = read_bounded(path, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "not a text file (perf stat -x, output is text)") from None
    lines = [r for r in csv.reader(io.StringIO(text)) if r and not r[0].startswith("#")]
    rows = []
    for i, r in enumerate(lines):
        if len(r) < 3:
            raise InputError(path, f"line {i + 1}: expected value,unit,event,... (perf stat -x, output)")
        raw, unit, event = r[0].strip(), r[1].strip(), r[2].strip()
        number = parse_number(raw)
        recorded = _UNITS.get(unit, unit)
        if number is None:
            rows.append((0, "process", event, float("nan"), recorded, unit, raw, "cpu"))
        else:
            value, base = normalise(number, recorded)
            rows.append((0, "process", event, value, base, unit, "", "cpu"))
    if not rows:
        raise InputError(path, "no events in the perf stat output")
    launch = [(0, "process", 0, "cpu", -1, -1, float("nan"), "", "")]
    return build(rows, launch, source="perf-stat", path=str(path))
