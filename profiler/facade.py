"""The facade: `load_trace` picks the collector for a path; `analyze` runs the analysis passes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from profiler.errors import InputError
from profiler.trace import Problems, Trace

if TYPE_CHECKING:
    from analysis.overview import Overview


@dataclass(frozen=True)
class Analysis:
    """Everything `perf analyze` reports. DataFrame columns are listed where they are built:
    device_time in analysis.busy.device_time, top_ops / top_kernels in analysis.top."""

    overview: "Overview"
    device_time: pd.DataFrame
    top_ops: pd.DataFrame
    top_kernels: pd.DataFrame
    problems: Problems


def load_trace(path: str | Path) -> Trace:
    """Load a trace file or a directory of per-rank files (Kineto / Chrome-trace JSON, gzip or not)."""
    from collectors.kineto import load_kineto

    return load_kineto(path)


def analyze(trace: Trace, *, top: int | None = 20, rank: int | None = None) -> Analysis:
    """Run the analysis passes over `trace` (or one rank of it)."""
    from analysis.busy import device_time
    from analysis.overview import overview, select_rank
    from analysis.top import top_kernels, top_ops

    if rank is not None:
        if rank not in trace.ranks:
            raise InputError(None, f"--rank {rank}: the trace has ranks {trace.ranks}")
        trace = select_rank(trace, rank)
    dt = device_time(trace)
    gpu_busy = int(dt.loc[dt["device"] != "cpu", "busy_ns"].sum())
    return Analysis(
        overview=overview(trace),
        device_time=dt,
        top_ops=top_ops(trace, gpu_busy, top),
        top_kernels=top_kernels(trace, gpu_busy, top),
        problems=trace.problems,
    )
