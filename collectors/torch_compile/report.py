"""All compile tables of one structured log: from a TORCH_TRACE directory or an in-process capture."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from collectors.torch_compile import breaks
from collectors.torch_compile.fusion_map import fusion_map
from collectors.torch_compile.phases import phase_summary, phase_table
from collectors.torch_compile.tlparse import Log, read_torch_trace
from profiler.trace import Problems


@dataclass(frozen=True)
class CompileReport:
    """Tables of one compile session (columns: see each builder's docstring).

    phases: collectors.torch_compile.phases.phase_table; phase_summary: phase_summary;
    compiles / graph_breaks / recompiles / caches: collectors.torch_compile.breaks;
    fusion: collectors.torch_compile.fusion_map.fusion_map.
    """

    phases: pd.DataFrame
    phase_summary: pd.DataFrame
    compiles: pd.DataFrame
    graph_breaks: pd.DataFrame
    recompiles: pd.DataFrame
    caches: pd.DataFrame
    fusion: pd.DataFrame
    source: str = ""
    problems: Problems = field(default_factory=Problems)


def compile_report(log: Log) -> CompileReport:
    """Build every table from the records of `log`."""
    phases = phase_table(log)
    return CompileReport(
        phases=phases, phase_summary=phase_summary(phases), compiles=breaks.compiles(log),
        graph_breaks=breaks.graph_breaks(log), recompiles=breaks.recompiles(log), caches=breaks.caches(log),
        fusion=fusion_map(log), source=log.source, problems=log.problems,
    )


def read_compile_report(path: str | Path) -> CompileReport:
    """The tables of a TORCH_TRACE directory (or one of its .log files)."""
    return compile_report(read_torch_trace(path))
