"""The facade: `load_trace` picks the collector for a path; `analyze` runs the analysis passes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from profiler.model.errors import InputError
from profiler.model.hardware import HardwareSpec, load_spec
from profiler.model.hardware_match import match_device
from profiler.model.trace import Problems, Trace

if TYPE_CHECKING:
    from analysis.idle_gaps import IdleGaps
    from analysis.overview import Overview
    from analysis.verdict import Verdict

#: Used for a CPU when no spec is given: nominal numbers, to be replaced by `perf calibrate`.
DEFAULT_CPU_SPEC = "generic-x86-cpu"


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


def load_trace(path: str | Path) -> Trace:
    """Load a trace file or a directory of per-rank files (Kineto / Chrome-trace JSON, gzip or not),
    or a Perfetto protobuf trace (recognised by its name or first byte; collectors.perfetto)."""
    from collectors.perfetto import is_perfetto

    if is_perfetto(path):
        from collectors.perfetto import load_perfetto

        return load_perfetto(path)
    from collectors.kineto import load_kineto

    return load_kineto(path)


def spec_resolver(trace: Trace, hardware: str | None = None) -> Callable[[int, str], HardwareSpec | None]:
    """(rank, device) -> the HardwareSpec its floors use.

    `hardware` (a preset name or a YAML file) applies to every accelerator, or to the CPU of a
    CPU-only trace; otherwise each GPU is matched from its recorded deviceProperties numbers
    (profiler.model.hardware_match.match_device) and a CPU gets the nominal generic-x86-cpu preset.
    """
    override = load_spec(hardware) if hardware else None
    cpu_only = not (trace.devices["device"] != "cpu").any()
    matched: dict[tuple[int, str], HardwareSpec | None] = {}
    for d in trace.devices.itertuples(index=False):
        if d.device == "cpu":
            spec = override if (override and cpu_only) else load_spec(DEFAULT_CPU_SPEC)
        else:
            spec = override or match_device(d.name, int(max(d.sm_count, 0)), d.compute_capability, int(max(d.memory_bytes, 0)))
        matched[(int(d.rank), str(d.device))] = spec
    return lambda rank, device: matched.get((rank, device))


#: What `perf analyze --section` can ask for; the passes a section needs run, the rest do not.
SECTIONS = ("verdict", "summary", "ops", "roofline", "timeline", "critical_path", "memory", "llm", "modules", "advice")
#: Sections that classify units first.
_CLASSIFIED = {"verdict", "roofline", "timeline", "critical_path", "modules", "advice"}
#: What the verdict is computed from (analysis.verdict).
_VERDICT_NEEDS = ("roofline", "critical_path", "advice")


def analyze(
    trace: Trace, *, top: int | None = 20, rank: int | None = None, hardware: str | None = None, dtype: str | None = None,
    sections: tuple[str, ...] = SECTIONS,
) -> Analysis:
    """Run the analysis passes over `trace` (or one rank of it).

    `hardware` floors every unit on that spec instead of the matched one (what-if); `dtype`
    re-floors GEMMs, convolutions and attention at that precision (what-if: 'bf16', 'fp8', 'int8').
    `sections` (of SECTIONS) limits the work: 'verdict' (analysis.verdict) needs the roofline,
    critical path, advice and idle gaps; 'summary' and 'ops' are the trace, device time and top tables; 'roofline' classifies units; 'timeline', 'critical_path', 'modules' and 'advice'
    build on it; 'memory' and 'llm' read the allocator samples and the serving annotations.
    """
    from analysis.busy import device_time
    from analysis.overview import overview, select_rank
    from analysis.top import top_kernels, top_ops

    if "verdict" in sections:
        sections = tuple(dict.fromkeys((*sections, *_VERDICT_NEEDS)))
    if rank is not None:
        if rank not in trace.ranks:
            raise InputError(None, f"--rank {rank}: the trace has ranks {trace.ranks}")
        trace = select_rank(trace, rank)
    dt = device_time(trace)
    gpu_busy = int(dt.loc[dt["device"] != "cpu", "busy_ns"].sum())
    base = Analysis(
        overview=overview(trace),
        device_time=dt,
        top_ops=top_ops(trace, gpu_busy, top) if "ops" in sections else pd.DataFrame(),
        top_kernels=top_kernels(trace, gpu_busy, top) if "ops" in sections else pd.DataFrame(),
        problems=trace.problems,
    )
    base = _memory_and_llm(trace, base, hardware, sections)
    if not _CLASSIFIED & set(sections):
        return base
    return _roofline(trace, base, hardware, dtype, sections)


def _memory_and_llm(trace: Trace, base: Analysis, hardware: str | None, sections: tuple[str, ...]) -> Analysis:
    """The allocator and LLM-serving sections, which need no classification."""
    from dataclasses import replace

    if "memory" in sections:
        from analysis.kv_cache import kv_cache_footprint
        from analysis.memory import memory_summary

        base = replace(base, memory=memory_summary(trace), kv_cache=kv_cache_footprint(trace))
    if "llm" in sections:
        from analysis.llm import llm_phases, llm_summary

        phases = llm_phases(trace, spec_resolver(trace, hardware))
        base = replace(base, llm_phases=phases, llm_summary=llm_summary(phases))
    return base


def _roofline(trace: Trace, base: Analysis, hardware: str | None, dtype: str | None, sections: tuple[str, ...]) -> Analysis:
    """The classification passes, and the timeline and advice that build on them."""
    from dataclasses import replace

    from analysis.advice import advise
    from analysis.attribution import attribute
    from analysis.cost import cost_table
    from analysis.cost_comm import apply_comm, comm_table
    from analysis.cost_kernels import with_kernel_costs
    from analysis.roofline import MATRIX_FAMILIES, by, classify, drop_carried_costs, groups, iterations, utilization
    from analysis.timeline import communication_overlap, launch_delays, streams
    from analysis.units import units as find_units

    spec_for = spec_resolver(trace, hardware)
    u = find_units(trace)
    # the fusion map `perf profile --compile` carries per rank (metadata 'perfCompile', as plain
    # row dicts): it costs Inductor's generated kernels, whose names the op-name model cannot
    def carried(meta: object) -> list:
        """The fusion rows of one rank's metadata ([] when absent or not a perf.compile_report doc)."""
        doc = meta.get("perfCompile") if isinstance(meta, dict) else None
        tables = doc.get("tables") if isinstance(doc, dict) else None
        rows = tables.get("fusion") if isinstance(tables, dict) else None
        return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []

    fusion = pd.DataFrame([{**row, "rank": int(r)} for r, m in trace.metadata.get("ranks", {}).items() for row in carried(m)])
    costs = with_kernel_costs(cost_table(u, tree=trace.events, flows=trace.flows), u, fusion)
    costs = apply_comm(drop_carried_costs(trace.events, u, costs), comm_table(u, _world_sizes(trace)), u["name"])
    if dtype:
        costs = costs.copy()
        costs.loc[costs["family"].isin(MATRIX_FAMILIES), "dtype"] = dtype
    classified = classify(u, costs, spec_for)
    unit_bound = pd.Series(classified["bound"].to_numpy(), index=classified["unit_id"].to_numpy())
    equation = attribute(trace, unit_bound)
    names = {f"rank{r}/{d}": (spec_for(int(r), str(d)).name if spec_for(int(r), str(d)) else "")
             for r, d in trace.devices[["rank", "device"]].itertuples(index=False)}
    top = base.top_ops
    if len(top):
        top = top.merge(groups(classified), on=["name", "shapes"], how="left", suffixes=("", "_unit"))
    out = replace(
        base, top_ops=top, units=classified, equation=equation, by_bound=by(classified, "bound"),
        by_family=by(classified, "family"), by_dtype=by(classified, "dtype"), hardware=names, whatif_dtype=dtype,
        utilization=utilization(classified, equation, spec_for),
    )
    if "critical_path" in sections:
        from analysis.critical_path import critical_path

        out = replace(out, critical_path=tuple(critical_path(trace, r, classified) for r in trace.ranks))
    if "modules" in sections:
        from analysis.modules import module_tree

        out = replace(out, modules=module_tree(trace, classified))
    if not {"timeline", "advice"} & set(sections):
        return out
    communication = communication_overlap(trace, classified)
    has_steps = bool((trace.events["step"] >= 0).any())
    out = replace(out, communication=communication)
    if "timeline" in sections:
        out = replace(
            out, streams=streams(trace), launches=launch_delays(trace),
            iterations=iterations(classified, attribute(trace, unit_bound, by_step=True), spec_for) if has_steps else pd.DataFrame(),
        )
    if "advice" in sections:
        out = replace(out, advice=tuple(advise(classified, communication, spec_for)))
    if "verdict" in sections:
        from analysis.idle_gaps import idle_gaps
        from analysis.verdict import verdict

        idle = idle_gaps(trace)
        wall = attribute(trace, unit_bound, span="rank")  # host work before the first kernel counts
        out = replace(out, idle=idle, verdict=verdict(wall, out.critical_path, out.advice, idle))
    return out


def _world_sizes(trace: Trace) -> dict[int, int]:
    """rank -> the world size its file records (distributedInfo), where it records one."""
    out = {}
    for rank, meta in trace.metadata.get("ranks", {}).items():
        info = meta.get("distributedInfo")
        if isinstance(info, dict) and isinstance(info.get("world_size"), int):
            out[int(rank)] = info["world_size"]
    return out


def perfetto_bytes(trace: Trace, units: pd.DataFrame | None = None) -> bytes:
    """`trace` as a serialized native Perfetto trace (collectors.perfetto.write.perfetto_bytes);
    `units` (Analysis.units) rides on the slices."""
    from collectors.perfetto.write import perfetto_bytes as write

    return write(trace, units)


def compile_report(path: str | Path):  # -> collectors.torch_compile.report.CompileReport
    """The torch.compile tables of a TORCH_TRACE directory or one structured-log file: phases,
    compiles, graph breaks, recompiles, caches, fusion map. Unreadable lines are counted in
    `.problems`; a path with no log raises InputError."""
    from collectors.torch_compile.report import read_compile_report

    return read_compile_report(path)


def trace_compile_report(trace: Trace):  # -> CompileReport | None
    """The compile tables a trace file carries (`perf profile --compile` writes them in its
    'perfCompile' field), with phases rebuilt from its compile_pass events; None when it has neither."""
    from collectors.torch_compile.embed import DOC_KEY
    from collectors.torch_compile.phases import phase_summary, phases_from_events
    from collectors.torch_compile.report import CompileReport, report_from_doc

    doc = next((m.get(DOC_KEY) for m in trace.metadata.get("ranks", {}).values() if isinstance(m, dict) and DOC_KEY in m), None)
    report = report_from_doc(doc, source=", ".join(trace.metadata.get("files", [])))
    phases = phases_from_events(trace.events)
    if report is None:
        if phases.empty:
            return None
        empty = pd.DataFrame()
        return CompileReport(phases=phases, phase_summary=phase_summary(phases), compiles=empty, graph_breaks=empty,
                             recompiles=empty, caches=empty, fusion=empty, source="compile_pass events")
    from dataclasses import replace

    return replace(report, phases=phases) if len(phases) else report


#: What compile_tables returns, in the order the compiler page shows it.
COMPILE_TABLES = ("phases", "phase_summary", "compiles", "graph_breaks", "recompiles", "caches", "fusion")


def compile_tables(source, *, trace: Trace | None = None, hardware: str | None = None) -> dict[str, pd.DataFrame]:
    """The compiler page's tables, from a Trace (its compile_pass events and carried tables) or a
    CompileReport (a TORCH_TRACE directory's; joined to `trace`'s kernels when given).

    phases: self time per phase over all compiles (phase, time_ns, steps, share 0..1; pipeline
    order); phase_summary: the same per compile_id; compiles, graph_breaks, recompiles, caches:
    collectors.torch_compile.breaks; fusion: collectors.torch_compile.fusion_map, plus, when a
    trace with runtime events is there, each kernel's calls, time_ns, per_call_ns, floors, bound
    and efficiency (collectors.torch_compile.match.fusion_times; floors on `hardware` or the
    matched spec). Every table is empty when the source holds no compiler data.
    """
    from collectors.torch_compile.match import fusion_times
    from collectors.torch_compile.phases import phase_summary

    if isinstance(source, Trace):
        trace = source
        report = trace_compile_report(source)
    else:
        report = source
    if report is None:
        return {name: pd.DataFrame() for name in COMPILE_TABLES}
    phases = report.phases
    overall = phase_summary(phases.assign(compile_id="")).drop(columns="compile_id") if len(phases) else pd.DataFrame(
        columns=["phase", "time_ns", "steps", "share"])
    fusion = report.fusion
    if trace is not None and len(fusion) and (trace.events["source"].astype(str) != "compiler").any():
        fusion = fusion_times(fusion, trace, spec_resolver(trace, hardware))
    return {"phases": overall, "phase_summary": report.phase_summary, "compiles": report.compiles,
            "graph_breaks": report.graph_breaks, "recompiles": report.recompiles, "caches": report.caches, "fusion": fusion}
