"""What `perf analyze` returns: the `Analysis` result object (profiler.api.pipeline builds it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from profiler.model.trace import Problems

if TYPE_CHECKING:
    from analysis.idle_gaps import IdleGaps
    from analysis.overview import Overview
    from analysis.verdict import Verdict


@dataclass(frozen=True)
class Analysis:
    """Everything `perf analyze` reports. DataFrame columns are listed where they are built:
    device_time in analysis.busy.device_time, top_ops / top_kernels in analysis.top, units in
    analysis.roofline.classify, equation in analysis.attribution.attribute, by_* in
    analysis.roofline.by."""

    overview: Overview
    device_time: pd.DataFrame
    top_ops: pd.DataFrame
    top_kernels: pd.DataFrame
    problems: Problems
    units: pd.DataFrame = field(default_factory=pd.DataFrame)
    equation: pd.DataFrame = field(default_factory=pd.DataFrame)
    by_bound: pd.DataFrame = field(default_factory=pd.DataFrame)
    by_family: pd.DataFrame = field(default_factory=pd.DataFrame)
    by_dtype: pd.DataFrame = field(default_factory=pd.DataFrame)
    hardware: dict[str, str] = field(default_factory=dict)  # 'rank0/gpu0' -> spec name
    whatif_dtype: str | None = None
    utilization: pd.DataFrame = field(default_factory=pd.DataFrame)
    streams: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.timeline.streams
    communication: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.timeline.communication_overlap
    launches: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.timeline.launch_delays
    iterations: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.roofline.iterations
    advice: tuple = ()  # analysis.advice.Advice, most saving first
    critical_path: tuple = ()  # analysis.critical_path.CriticalPath, one per rank
    memory: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.memory.memory_summary
    kv_cache: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.kv_cache.kv_cache_footprint
    llm_phases: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.llm.llm_phases
    llm_summary: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.llm.llm_summary
    modules: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.modules.module_tree
    idle: IdleGaps | None = None  # analysis.idle_gaps.idle_gaps: the host's work while devices idle
    verdict: Verdict | None = None  # analysis.verdict.verdict: what bounds the run, shown first
    whatif: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.whatif.step_projection
    hardware_notes: tuple[str, ...] = ()  # which preset stands in for a device and why (hardware_notes)
    unknown_share: float = 0.0  # unknown-bound share of unit time (analysis.unknown.unknown_summary)
    unknown: pd.DataFrame = field(default_factory=pd.DataFrame)  # top unknown names and why (analysis.unknown)
    # hardware counters (perf analyze --counters; profiler.api.counters.CountersReport)
    kernel_counters: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.counters.measured
    measured_roofline: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.measured_roofline
    counters_vs_model: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.counters_compare.compare
    counters: Any = None  # the whole CountersReport (join summary, findings, raw counters)
    # cross-rank, on a multi-rank trace (profiler.api.ranks; analysis.cross_rank)
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per collective instance
    stragglers: pd.DataFrame = field(default_factory=pd.DataFrame)  # ranks that arrive last, by delay
    rank_summary: pd.DataFrame = field(default_factory=pd.DataFrame)  # per-rank bounds and waits
    comm_matrix: pd.DataFrame = field(default_factory=pd.DataFrame)  # bytes rank -> rank, where known
