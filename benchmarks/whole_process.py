"""Run a command as a whole process and measure what its user waits for: wall time from spawn
to exit (imports included), CPU time, and peak memory.

Peak memory is sampled every 5 ms as the RSS of the process plus the private memory
(Private_Clean + Private_Dirty) of each descendant: a forked child's own pages count, the pages
it still shares with its parent (the trace's bytes, the interpreter) count once. The larger of
that and `ru_maxrss` of the main process (wait4, exact) is reported; a sample can miss a
spike shorter than 5 ms in a child. (Linux carries `ru_maxrss` over exec from the forked
parent, so it is never below this driver's own RSS, some 15 MiB: the driver stays small.)
Standard library only: it also drives the HTA venv's python.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

KiB = 1024


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_seconds: float
    peak_bytes: int
    rc: int


def _field_kib(path: str, names: tuple[str, ...]) -> int:
    """Sum of the 'kB' fields `names` in a /proc status-style file (0 when gone)."""
    total = 0
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(names):
                    total += int(line.split()[1])
    except (OSError, ValueError):
        pass
    return total


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(c) for c in fh.read().split()]
    except (OSError, ValueError):
        return []


def _tree_memory(pid: int) -> int:
    """RSS of `pid` + private memory of its descendants, bytes."""
    total = _field_kib(f"/proc/{pid}/status", ("VmRSS:",))
    todo = _children(pid)
    while todo:
        p = todo.pop()
        total += _field_kib(f"/proc/{p}/smaps_rollup", ("Private_Clean:", "Private_Dirty:"))
        todo += _children(p)
    return total * KiB


def run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 1800) -> Run:
    """One whole-process run of `cmd`, stdout to /dev/null, stderr kept for errors."""
    peak = 0
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_memory(proc.pid))
            done.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:
        proc.kill()
        raise
    seconds = time.perf_counter() - t0
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err[-2000:]}")
    return Run(seconds, usage.ru_utime + usage.ru_stime, max(peak, usage.ru_maxrss * KiB), proc.returncode)


@dataclass(frozen=True)
class Summary:
    seconds: float  # median wall
    cpu_seconds: float  # median CPU
    peak_bytes: int  # largest peak seen (memory is not flattered)
    all_seconds: tuple[float, ...]


def median_of(cmd: list[str], n: int, **kw) -> Summary:
    """`n` runs one after another; medians of time, the worst peak."""
    runs = [run(cmd, **kw) for _ in range(n)]
    return Summary(
        statistics.median(r.seconds for r in runs),
        statistics.median(r.cpu_seconds for r in runs),
        max(r.peak_bytes for r in runs),
        tuple(r.seconds for r in runs),
    )
