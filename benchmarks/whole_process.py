"""Run a command as a whole process and measure what its user waits for: wall time from spawn
to exit (imports included), CPU time, and peak memory.

Peak memory is sampled every 5 ms as the sum of PSS (proportional set size: a page shared by n
processes counts 1/n in each) over the process and its descendants, so a forked decoder's own
pages count and the pages it shares with its parent count once; `ru_maxrss` of the main process
(wait4) stands in when no sample was taken. A sample can miss a spike shorter than 5 ms. Standard library only: it also drives the HTA venv's python.
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


def _tree_pss(pid: int) -> int:
    """PSS of `pid` and its descendants, bytes (0 once gone)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * KiB
                        break
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            pass
    return total


def run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 1800) -> Run:
    """One whole-process run of `cmd`, stdout to /dev/null, stderr kept for errors."""
    peak = 0
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_pss(proc.pid))
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
    return Run(seconds, usage.ru_utime + usage.ru_stime, peak or usage.ru_maxrss * KiB, proc.returncode)


@dataclass(frozen=True)
class Summary:
    seconds: float       # median wall
    cpu_seconds: float   # median CPU
    peak_bytes: int      # largest peak seen (memory is not flattered)
    all_seconds: tuple[float, ...]


def median_of(cmd: list[str], n: int, **kw) -> Summary:
    """`n` runs one after another; medians of time, the worst peak."""
    runs = [run(cmd, **kw) for _ in range(n)]
    return Summary(statistics.median(r.seconds for r in runs), statistics.median(r.cpu_seconds for r in runs),
                   max(r.peak_bytes for r in runs), tuple(r.seconds for r in runs))
