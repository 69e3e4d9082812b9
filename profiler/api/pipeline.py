"""The analysis pipeline: `load_trace` picks the collector for a path; `analyze` runs the passes
the asked sections need, in order (cost, classify, timeline, advice, verdict), into an `Analysis`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from profiler.api.hardware import hardware_notes, is_whatif, peak_label, spec_names, spec_resolver, world_sizes
from profiler.api.result import Analysis
from profiler.model.errors import InputError
from profiler.model.hardware import HardwareSpec
from profiler.model.kernel_counters import KernelCounters
from profiler.model.trace import Trace


def select_rank_of(trace: Trace, rank: int | None) -> Trace:
    """`trace`, or only `rank` of it (analysis.overview.select_rank)."""
    if rank is None:
        return trace
    from analysis.overview import select_rank

    return select_rank(trace, rank)


def load_trace(path: str | Path, *, max_bytes: int | None = None, cache: bool = True) -> Trace:
    """Load a trace file or a directory of per-rank files (Kineto / Chrome-trace JSON, gzip or not),
    or a Perfetto protobuf trace (recognised by its name or first byte; collectors.perfetto), or
    a SCALE-Sim report folder (holding COMPUTE_REPORT.csv; collectors.scalesim), or an ONNX Runtime
    profile (a JSON list opening with its Session events; collectors.onnx.ort_trace), or a QNN HTP
    profile (QNN's CSV or perf's perf.qnn_profile JSON; collectors.onnx.qnn_trace), or a trtexec
    --exportProfile JSON (collectors.onnx.tensorrt).
    Only regular files are read, each at most `max_bytes` once decompressed (default: half the
    memory available; profiler.model.files). `cache`: read and write the columnar cache
    (profiler.api.cache; also off with PERF_NO_CACHE=1)."""
    if cache:
        from profiler.api.cache import cached_load

        return cached_load(path, lambda: load_trace(path, max_bytes=max_bytes, cache=False))
    from collectors.perfetto import is_perfetto
    from collectors.scalesim import is_scalesim

    if is_scalesim(path):
        from collectors.scalesim import load_scalesim

        return load_scalesim(path)
    if is_perfetto(path):
        from collectors.perfetto import load_perfetto

        return load_perfetto(path, max_bytes)
    from collectors.onnx.ort_trace import is_ort_profile

    if is_ort_profile(Path(path)):
        from collectors.onnx.ort_trace import load_ort_profile

        return load_ort_profile(path, max_bytes)
    from collectors.onnx.qnn_trace import is_qnn_profile

    if is_qnn_profile(Path(path)):
        from collectors.onnx.qnn_trace import load_qnn_profile

        return load_qnn_profile(path, max_bytes)
    from collectors.onnx.tensorrt import is_trtexec_profile

    if is_trtexec_profile(Path(path)):
        from collectors.onnx.tensorrt import load_trtexec

        return load_trtexec(path, max_bytes)
    from collectors.kineto import load_kineto

    return load_kineto(path, max_bytes)


#: What `perf analyze --section` can ask for; the passes a section needs run, the rest do not.
SECTIONS = (
    "verdict", "summary", "ops", "roofline", "timeline", "critical_path", "memory", "llm", "modules", "advice", "ranks",
)  # fmt: skip
#: Sections that classify units first.
_CLASSIFIED = {"verdict", "roofline", "timeline", "critical_path", "modules", "advice", "ranks"}
#: What the verdict is computed from (analysis.verdict).
_VERDICT_NEEDS = ("roofline", "critical_path", "advice")


def analyze(
    trace: Trace,
    *,
    top: int | None = 20,
    rank: int | None = None,
    hardware: str | None = None,
    dtype: str | None = None,
    sections: tuple[str, ...] = SECTIONS,
    collectives: str | Path | None = None,
    counters: KernelCounters | None = None,
    instances: pd.DataFrame | None = None,
) -> Analysis:
    """Run the analysis passes over `trace` (or one rank of it).

    `hardware` floors every unit on that spec instead of the matched one (what-if); `dtype`
    re-floors GEMMs, convolutions and attention at that precision (what-if: 'bf16', 'fp8', 'int8').
    `sections` (of SECTIONS) limits the work: 'verdict' (analysis.verdict) needs the roofline,
    critical path, advice and idle gaps; 'summary' and 'ops' are the trace, device time and top
    tables; 'roofline' classifies units; 'timeline', 'critical_path', 'modules' and 'advice'
    build on it; 'memory' and 'llm' read the allocator samples and the serving annotations.
    `collectives`: a YAML file of collective names added to the bundled table
    (`collective_patterns` says where it is looked for when not given).
    `counters` (profiler.api.counters.load_counters): hardware counters of the trace's kernels,
    joined to them and set beside the cost model (profiler.api.counters.counters_report); they
    need the classified units, so the roofline runs when they are given.
    'ranks' (on two ranks or more): the cross-rank tables (profiler.api.ranks); `instances`:
    the ranks' collective instances when an engine computed them per rank (else computed here).
    """
    if counters is not None:
        from dataclasses import replace

        from profiler.api.counters import counters_report

        a = analyze(
            trace,
            top=top,
            rank=rank,
            hardware=hardware,
            dtype=dtype,
            sections=tuple(dict.fromkeys((*sections, "roofline"))),
            collectives=collectives,
            instances=instances,
        )
        report = counters_report(counters, hardware=hardware, trace=select_rank_of(trace, rank), analysis=a)
        return replace(
            a,
            kernel_counters=report.measured,
            measured_roofline=report.roofline,
            counters_vs_model=report.compare,
            counters=report,
        )
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
        hardware_notes=hardware_notes(trace, hardware),
    )
    if not _CLASSIFIED & set(sections):
        return _memory_and_llm(trace, base, hardware, sections)
    return _roofline(trace, base, hardware, dtype, sections, collectives, instances)


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


def collective_patterns(path: str | Path | None = None):  # -> analysis.comm_patterns.Patterns
    """The table of collective names: analysis/collectives.yaml with the user's rules first, from
    `path`, else the file $PERF_COLLECTIVES names, else $XDG_CONFIG_HOME/perf/collectives.yaml
    (~/.config/perf/collectives.yaml) when it exists. A bad file raises InputError naming it."""
    import os

    from analysis.comm_patterns import with_user_file

    if path is None and os.environ.get("PERF_COLLECTIVES"):
        path = os.environ["PERF_COLLECTIVES"]
    if path is None:
        config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "perf" / "collectives.yaml"
        path = config if config.is_file() else None
    return with_user_file(Path(path) if path is not None else None)


def _roofline(
    trace: Trace,
    base: Analysis,
    hardware: str | None,
    dtype: str | None,
    sections: tuple[str, ...],
    collectives: str | Path | None = None,
    instances: pd.DataFrame | None = None,
) -> Analysis:
    """The classification passes, and the timeline and advice that build on them."""
    from dataclasses import replace

    from analysis.attribution import attribute
    from analysis.cost import cost_table
    from analysis.cost.comm import apply_comm, comm_groups, comm_table, unit_work_kinds
    from analysis.mfu import rank_step_walls
    from analysis.cost.kernels import with_kernel_costs
    from analysis.precision import with_tf32
    from analysis.roofline import MATRIX_FAMILIES, by, classify, drop_carried_costs, groups, utilization
    from analysis.unknown import unknown_summary
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

    fusion = pd.DataFrame(
        [{**row, "rank": int(r)} for r, m in trace.metadata.get("ranks", {}).items() for row in carried(m)]
    )
    costs = with_kernel_costs(cost_table(u, tree=trace.events, flows=trace.flows), u, fusion)
    pats = collective_patterns(collectives)
    comm = comm_table(u, world_sizes(trace), pats, unit_work_kinds(trace.events, u, pats))
    costs = apply_comm(drop_carried_costs(trace.events, u, costs), comm, u["name"])
    costs = with_tf32(trace.events, u, costs, trace.metadata)  # fp32 GEMMs/convs that ran TF32 tensor-core kernels
    source = classify(u, costs, spec_resolver(trace)) if is_whatif(trace, hardware) or dtype else None
    if dtype:  # precision what-if: the matrix units' dtype, so their peak and their bytes
        from analysis.memory_levels import ELEMENT_BYTES
        from analysis.whatif import scale_bytes

        matrix = costs["family"].isin(MATRIX_FAMILIES).to_numpy()
        costs = scale_bytes(costs, matrix, dtype, ELEMENT_BYTES)
        costs.loc[matrix, "dtype"] = dtype
    classified = classify(u, costs, spec_for)
    whatif = pd.DataFrame()
    if source is not None:
        from analysis.whatif import project, step_projection

        classified = project(source, classified)
        src_names = {k: v for k, v in spec_names(trace, spec_resolver(trace)).items()}
        whatif = step_projection(
            classified,
            attribute(trace, pd.Series(source["bound"].to_numpy(), index=source["unit_id"].to_numpy())),
            src_names,
            spec_names(trace, spec_for),
        )
        if dtype:
            whatif["peak_used"] = [
                peak_label(spec_for(int(r), str(d)), dtype) for r, d in zip(whatif["rank"], whatif["device"])
            ]
    unit_bound = pd.Series(classified["bound"].to_numpy(), index=classified["unit_id"].to_numpy())
    equation = attribute(trace, unit_bound)
    names = spec_names(trace, spec_for)
    top = base.top_ops
    if len(top):
        top = top.merge(groups(classified), on=["name", "shapes"], how="left", suffixes=("", "_unit"))
        top = top.merge(
            comm_groups(classified), on=["name", "shapes"], how="left"
        )  # collectives' bytes and bus bandwidth
        top["enqueue"] = top["enqueue"].astype("boolean").fillna(False).astype(bool)
        # ops with no classified unit (0 ns: nothing measured) are above no ceiling
        if "above_ceiling" in top:
            top["above_ceiling"] = top["above_ceiling"].astype("boolean").fillna(False).astype(bool)
    share, unknown = unknown_summary(trace, classified)
    out = replace(
        base,
        top_ops=top,
        units=classified,
        unknown_share=share,
        unknown=unknown,
        equation=equation,
        by_bound=by(classified, "bound"),
        by_family=by(classified, "family"),
        by_dtype=by(classified, "dtype"),
        hardware=names,
        whatif_dtype=dtype,
        utilization=utilization(classified, equation, spec_for, rank_step_walls(trace.events)),
        whatif=whatif,
    )
    out = _memory_and_llm(trace, out, hardware, sections)
    if "ranks" in sections and len(trace.ranks) > 1:
        from profiler.api.ranks import cross_rank_tables, rank_instances

        if instances is None:
            instances = rank_instances(trace, u, comm)
        out = replace(out, **cross_rank_tables(trace, instances, equation, spec_for))
    if "modules" in sections:
        from analysis.modules import module_tree

        out = replace(out, modules=module_tree(trace, classified))
    if "critical_path" in sections:  # before the verdict, which cites it
        from analysis.critical_path import critical_path

        out = replace(out, critical_path=tuple(critical_path(trace, r, classified) for r in trace.ranks))
    return _timeline_and_advice(trace, out, classified, unit_bound, spec_for, sections)


def _timeline_and_advice(
    trace: Trace,
    out: Analysis,
    classified: pd.DataFrame,
    unit_bound: pd.Series,
    spec_for: Callable[[int, str], HardwareSpec | None],
    sections: tuple[str, ...],
) -> Analysis:
    """The timeline tables and the advice, on the classified units."""
    from dataclasses import replace

    from analysis.advice import advise
    from analysis.attribution import attribute
    from analysis.mfu import rank_step_walls
    from analysis.roofline import iterations
    from analysis.timeline import communication_overlap, launch_delays, streams

    if not {"timeline", "advice", "verdict"} & set(sections):
        return out
    equation = out.equation
    communication = communication_overlap(trace, classified)
    has_steps = bool((trace.events["step"] >= 0).any())
    out = replace(out, communication=communication)
    if "timeline" in sections:
        out = replace(
            out,
            streams=streams(trace),
            launches=launch_delays(trace),
            iterations=iterations(
                classified, attribute(trace, unit_bound, by_step=True), spec_for, rank_step_walls(trace.events)
            )
            if has_steps
            else pd.DataFrame(),
        )
    if "advice" in sections:
        out = replace(out, advice=tuple(advise(classified, communication, spec_for, trace=trace, equation=equation)))
    if "verdict" in sections:
        from analysis.idle_gaps import idle_gaps
        from analysis.verdict import verdict

        idle = idle_gaps(trace)
        wall = attribute(trace, unit_bound, span="rank")  # host work before the first kernel counts
        out = replace(out, idle=idle, verdict=verdict(wall, out.critical_path, out.advice, idle))
    return out


def perfetto_bytes(trace: Trace, units: pd.DataFrame | None = None) -> bytes:
    """`trace` as a serialized native Perfetto trace (collectors.perfetto.write.perfetto_bytes);
    `units` (Analysis.units) rides on the slices."""
    from collectors.perfetto.write import perfetto_bytes as write

    return write(trace, units)


def refloor(units: pd.DataFrame, trace: Trace, hardware: str | None) -> pd.DataFrame:
    """Classified `units` (Analysis.units) floored again on `hardware` (a preset or YAML; None:
    each device's matched spec), without re-running the cost model: units and costs do not
    depend on the hardware, and the classified table holds every cost column classify reads
    (analysis.roofline.classify on `spec_resolver(trace, hardware)`; the columns it lists)."""
    from analysis.roofline import classify
    from analysis.units import UNIT_COLUMNS
    from analysis.whatif import project

    target = classify(units[UNIT_COLUMNS], units, spec_resolver(trace, hardware))
    # other hardware than the trace's: projected times, no efficiency (analysis.whatif, as analyze does)
    return project(units, target) if is_whatif(trace, hardware) else target
