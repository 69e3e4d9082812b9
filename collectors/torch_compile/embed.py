"""torch.compile inside `perf profile`: capture its structured log during the run, then write the
compile passes and tables into the Kineto trace file the profiler wrote.

In the file (Kineto's dialect, so any Chrome-trace viewer shows them and `collectors.kineto`
reads them back):

- one complete ('X') event per timed compile step, category `compile_pass` (read back as kind
  compile_pass, source compiler, track 'rank<r>/compiler', worker threads
  'rank<r>/compiler/worker<k>'), pid = the profiled process, tid = the lane (0 the compiling
  thread, k the k-th worker thread, by step count), args {phase, compile_id, self_us};
  ts_us = (start_ns - baseTimeNanoseconds) / 1000, dur_us = dur_ns / 1000 (negative ts: the
  compile ran before the recording started, in the warm-up);
- 'M' thread_name events naming the lanes ('torch.compile', 'torch.compile worker <k>');
- a top-level `perfCompile` field: the report's tables (`report.report_doc`, redacted), so graph
  breaks, recompiles, caches and the fusion map travel with the trace.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pandas as pd

from collectors.torch_compile.report import CompileReport, compile_report, report_doc
from collectors.torch_compile.tlparse import Log, capture
from profiler.model.errors import InputError
from profiler.model.files import GZIP_MAGIC, default_max_bytes, gunzip_bounded, read_bounded, write_atomic

CATEGORY = "compile_pass"
DOC_KEY = "perfCompile"


@contextmanager
def capturing() -> Iterator[Log]:
    """Capture the structured log of every torch.compile in the body, with Inductor set so the
    fusion map and kernel times can be joined: provenance tracking on (kernel -> post-grad nodes)
    and C++ kernels profiled as record_function ranges 'graph_<g>_<kernel>'. Caches stay as the
    user configured them (a cache hit is reported as such)."""
    import torch._inductor.config as ic

    with capture() as log, ic.patch({"cpp.enable_kernel_profile": True, "trace.provenance_tracking_level": 1}):
        yield log


def has_compiles(log: Log) -> bool:
    """Did anything compile (any record but interned file names)?"""
    return any(r.kind != "str" for r in log.records)


def attach(path: str | Path, log: Log) -> CompileReport | None:
    """Add the compile passes and tables of `log` to the Kineto trace at `path` (rewritten in
    place, gzip kept). Returns the report; None (file untouched) when nothing compiled."""
    if not has_compiles(log):
        return None
    report = compile_report(log)
    path = Path(path)
    try:
        raw = read_bounded(path, gunzip=False)
        gz = raw[:2] == GZIP_MAGIC
        doc = orjson.loads(gunzip_bounded(raw, default_max_bytes(), path) if gz else raw)
    except orjson.JSONDecodeError as e:
        raise InputError(path, f"cannot add the compile passes to the trace: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InputError(path, "cannot add the compile passes: not a Kineto trace (no traceEvents list)")
    base = doc.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) and not isinstance(base, bool) else 0
    doc["traceEvents"].extend(kineto_events(report.phases, base, _host_pid(doc["traceEvents"])))
    doc[DOC_KEY] = report_doc(report, with_phases=False)
    data = orjson.dumps(doc)
    # our own file, just written: replaced whole or not at all, a reader never sees half a file
    write_atomic(path, gzip.compress(data, compresslevel=6) if gz else data, force=True)
    return report


def kineto_events(phases: pd.DataFrame, base_ns: int, pid: int) -> list[dict]:
    """The compile steps as Kineto 'X' events plus the lanes' thread_name events (module docstring)."""
    if phases.empty:
        return []
    lanes = {t: k for k, t in enumerate(phases["thread"].value_counts().index.tolist())}  # busiest thread first
    out: list[dict] = []
    for r in phases.itertuples(index=False):
        # µs with 3 decimals: exact to the ns (|ts| < 1e12 µs needs at most 15 significant digits)
        out.append(
            {
                "ph": "X",
                "cat": CATEGORY,
                "name": r.name,
                "pid": pid,
                "tid": lanes[r.thread],
                "ts": round((r.start_ns - base_ns) / 1000, 3),
                "dur": round(r.dur_ns / 1000, 3),
                "args": {"phase": r.phase, "compile_id": r.compile_id, "self_us": round(r.self_ns / 1000, 3)},
            }
        )
    for k in lanes.values():
        out.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": k,
                "args": {"name": "torch.compile" if k == 0 else f"torch.compile worker {k}"},
            }
        )
    return out


def _host_pid(events: list) -> int:
    """The pid of the profiled process's host events (cpu_op), else this process's."""
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "cpu_op" and isinstance(e.get("pid"), int):
            return e["pid"]
    return os.getpid()
