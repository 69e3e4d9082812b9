"""One contender of bench_ingest.py, run in a fresh interpreter.

Usage: ingest_child.py CONTENDER TRACE RESULT_JSON   (CONTENDER: bare | hta | ours)

Stdlib only at module level: it also runs under the HTA venv's python, which
has no orjson. It imports the contender's library first, then takes the RSS
as baseline, resets the peak (VmHWM) so import-time spikes do not count, times
the work and writes {"status", "seconds", "peak_mib", ...} to RESULT_JSON.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

KiB = 1024
_KEEP: list[Any] = []


def proc_status_kib(field: str) -> int:
    """A 'kB' field of /proc/self/status (VmRSS, VmHWM)."""
    with open("/proc/self/status") as fh:
        m = re.search(rf"^{field}:\s+(\d+) kB", fh.read(), re.MULTILINE)
    return int(m.group(1)) if m else 0


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def read_trace_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        data = fh.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


# Each prepare_* imports what the contender needs (outside the timing) and
# returns the timed work; the work's return value is kept alive until the peak
# is read, so the parsed result counts toward memory.


def prepare_bare(path: str) -> Callable[[], Any]:
    import orjson

    return lambda: orjson.loads(read_trace_bytes(path))


def prepare_hta(path: str) -> Callable[[], Any]:
    import logging

    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.WARNING)  # HTA logs per-stage warnings; keep stderr readable
    # HTA takes a directory and picks up every *.json / *.gz in it, so give it
    # a private directory holding only a link to this trace (no copy: the
    # file may be 1 GB). The name must keep the .json / .gz ending.
    tmp = tempfile.mkdtemp(prefix="hta-bench-")
    os.symlink(os.path.abspath(path), os.path.join(tmp, os.path.basename(path)))

    def work() -> Any:
        try:
            analyzer = TraceAnalysis(trace_dir=tmp)
            breakdown = analyzer.get_temporal_breakdown(visualize=False)
            return analyzer, breakdown
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    return work


# `perf analyze` with the sections of the foundation report (what the trace is, device busy and
# idle time, the top ops and kernels): the like-for-like peer of HTA's load + temporal breakdown.
OURS_ARGS = ["--section", "summary", "--section", "ops"]


def prepare_ours(path: str, extra: list[str] | None = None) -> Callable[[], Any]:
    import importlib.util

    for mod in ("profiler", "profiler.cli"):
        try:
            found = importlib.util.find_spec(mod) is not None
        except ImportError:  # parent package missing
            found = False
        if not found:
            raise SkipContender(f"{mod} is not importable (the project's CLI does not exist yet?)")

    # The CLI imports its library lazily (so `perf --help` is instant); import it here, before
    # the clock, as HTA's TraceAnalysis import does for HTA. First-use costs inside pandas and
    # numpy still count, for both.
    import collectors.kineto  # noqa: F401
    from profiler.cli import main

    args = ["analyze", path, "--json", *(OURS_ARGS if extra is None else extra)]

    def work() -> Any:
        # the JSON report goes to /dev/null at the fd level, so C-level writes are silenced too
        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        try:
            rc = main(args)
        except SystemExit as exc:
            rc = exc.code
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
        if rc not in (0, None):
            raise RuntimeError(f"profiler analyze exited with {rc}")
        return rc

    return work


class SkipContender(Exception):
    """The contender cannot run here (not installed); reported, not a failure."""


CONTENDERS: dict[str, Callable[[str], Callable[[], Any]]] = {
    "bare": prepare_bare,
    "hta": prepare_hta,
    "ours": prepare_ours,
    "ours-full": lambda path: prepare_ours(path, extra=[]),  # every section: roofline, timeline, advice
}


def run(contender: str, path: str) -> dict[str, Any]:
    try:
        work = CONTENDERS[contender](path)
    except SkipContender as exc:
        return {"status": "skip", "reason": str(exc)}
    except ImportError as exc:
        # a missing HTA / orjson is a setup matter; a broken import inside our own CLI is a bug
        status = "error" if contender.startswith("ours") else "skip"
        return {"status": status, "reason": f"{type(exc).__name__}: {exc}"}
    baseline_kib = proc_status_kib("VmRSS")
    hwm_reset = reset_peak()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    try:
        _KEEP.append(work())  # alive until the peak is read
    except MemoryError:
        return {"status": "OOM", "reason": "MemoryError"}
    except Exception as exc:  # reported in the table rather than as a traceback only
        import traceback

        traceback.print_exc()
        if "memory" in str(exc).lower():  # orjson says "Not enough memory" via JSONDecodeError
            return {"status": "OOM", "reason": f"{type(exc).__name__}: {exc}"[:300]}
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:300]}
    seconds = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    # ru_maxrss cannot be reset, so VmHWM is the number once the reset worked
    peak_kib = proc_status_kib("VmHWM") if hwm_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # HTA forks per rank
    return {
        "status": "ok",
        "seconds": seconds,
        # CPU time shows how much of the wall time was page-fault / IO waiting
        "cpu_seconds": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
        "baseline_mib": baseline_kib / KiB,
        "peak_mib": (peak_kib - baseline_kib) / KiB,
        "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / KiB,
        "children_peak_mib": children_kib / KiB,
        # a forked child shares the parent's pages up to the fork: count only its RSS above the
        # same baseline (an upper bound on what it added; 0 when nothing was forked)
        "children_extra_mib": max(0, children_kib - baseline_kib) / KiB if children_kib else 0.0,
        "hwm_reset": hwm_reset,
        "python": sys.executable,
    }


def main() -> int:
    contender, path, result_path = sys.argv[1:4]
    res = run(contender, path)
    with open(result_path, "w") as fh:
        json.dump(res, fh)
    # skip interpreter teardown: freeing GBs of objects is slow and not part of the work
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
