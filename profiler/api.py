"""The facade: `load_trace` picks the collector for a path; `analyze` runs the analysis passes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
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
    whatif: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.whatif.step_projection
    hardware_notes: tuple[str, ...] = ()  # which preset stands in for a device and why (hardware_notes)
    unknown_share: float = 0.0  # unknown-bound share of unit time (analysis.unknown.unknown_summary)
    unknown: pd.DataFrame = field(default_factory=pd.DataFrame)  # top unknown names and why (analysis.unknown)


def load_trace(path: str | Path, *, max_bytes: int | None = None) -> Trace:
    """Load a trace file or a directory of per-rank files (Kineto / Chrome-trace JSON, gzip or not),
    or a Perfetto protobuf trace (recognised by its name or first byte; collectors.perfetto).
    Only regular files are read, each at most `max_bytes` once decompressed (default: half the
    memory available; profiler.model.files)."""
    from collectors.perfetto import is_perfetto

    if is_perfetto(path):
        from collectors.perfetto import load_perfetto

        return load_perfetto(path, max_bytes)
    from collectors.kineto import load_kineto

    return load_kineto(path, max_bytes)


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
        spec: HardwareSpec | None
        if d.device == "cpu":
            spec = override if (override and cpu_only) else load_spec(DEFAULT_CPU_SPEC)
        else:
            spec = override or match_device(
                d.name, int(max(d.sm_count, 0)), d.compute_capability, int(max(d.memory_bytes, 0))
            )
        matched[(int(d.rank), str(d.device))] = spec
    return lambda rank, device: matched.get((rank, device))


def hardware_notes(trace: Trace, hardware: str | None = None) -> tuple[str, ...]:
    """One line per device whose spec was not chosen by name: a GPU matched by its numbers only
    (profiler.model.hardware_match.match_note), a GPU no preset fits, a CPU on the NOMINAL
    generic preset. Empty when `hardware` was given for every device it applies to."""
    from profiler.model.hardware_match import match_note

    notes = []
    cpu_only = not (trace.devices["device"] != "cpu").any()
    for d in trace.devices.itertuples(index=False):
        label = f"rank{int(d.rank)}/{d.device}"
        if d.device == "cpu":
            if cpu_only and not hardware:
                notes.append(
                    f"{label}: floored on the NOMINAL {DEFAULT_CPU_SPEC} preset (no figure measured on this CPU); "
                    "run perf calibrate and pass --hardware FILE"
                )
            continue
        if hardware:
            continue
        _, note = match_note(d.name, int(max(d.sm_count, 0)), d.compute_capability, int(max(d.memory_bytes, 0)))
        if note:
            notes.append(f"{label}: {note}")
    return tuple(dict.fromkeys(notes))


#: What `perf analyze --section` can ask for; the passes a section needs run, the rest do not.
SECTIONS = ("verdict", "summary", "ops", "roofline", "timeline", "critical_path", "memory", "llm", "modules", "advice")
#: Sections that classify units first.
_CLASSIFIED = {"verdict", "roofline", "timeline", "critical_path", "modules", "advice"}
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
        hardware_notes=hardware_notes(trace, hardware),
    )
    if not _CLASSIFIED & set(sections):
        return _memory_and_llm(trace, base, hardware, sections)
    return _roofline(trace, base, hardware, dtype, sections, collectives)


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
) -> Analysis:
    """The classification passes, and the timeline and advice that build on them."""
    from dataclasses import replace

    from analysis.attribution import attribute
    from analysis.cost import cost_table
    from analysis.cost.comm import apply_comm, comm_groups, comm_table, unit_work_names
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
    comm = comm_table(u, _world_sizes(trace), collective_patterns(collectives), unit_work_names(trace.events, u))
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
        src_names = {k: v for k, v in _spec_names(trace, spec_resolver(trace)).items()}
        whatif = step_projection(
            classified,
            attribute(trace, pd.Series(source["bound"].to_numpy(), index=source["unit_id"].to_numpy())),
            src_names,
            _spec_names(trace, spec_for),
        )
        if dtype:
            whatif["peak_used"] = [
                _peak_label(spec_for(int(r), str(d)), dtype) for r, d in zip(whatif["rank"], whatif["device"])
            ]
    unit_bound = pd.Series(classified["bound"].to_numpy(), index=classified["unit_id"].to_numpy())
    equation = attribute(trace, unit_bound)
    names = _spec_names(trace, spec_for)
    top = base.top_ops
    if len(top):
        top = top.merge(groups(classified), on=["name", "shapes"], how="left", suffixes=("", "_unit"))
        top = top.merge(
            comm_groups(classified), on=["name", "shapes"], how="left"
        )  # collectives' bytes and bus bandwidth
        top["enqueue"] = top["enqueue"].astype("boolean").fillna(False).astype(bool)
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
        utilization=utilization(classified, equation, spec_for),
        whatif=whatif,
    )
    out = _memory_and_llm(trace, out, hardware, sections)
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
            iterations=iterations(classified, attribute(trace, unit_bound, by_step=True), spec_for)
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


def _spec_names(trace: Trace, spec_for: Callable[[int, str], HardwareSpec | None]) -> dict[str, str]:
    """'rank0/gpu0' -> the name of the spec its floors use ('' when none)."""
    out = {}
    for r, d in trace.devices[["rank", "device"]].itertuples(index=False):
        spec = spec_for(int(r), str(d))
        out[f"rank{r}/{d}"] = spec.name if spec else ""
    return out


def is_whatif(trace: Trace, hardware: str | None) -> bool:
    """True when `hardware` floors a GPU that a preset matched as other hardware: the trace was
    measured elsewhere, so its times are projected, not judged. A CPU trace's --hardware (a spec
    perf calibrate measured) and a GPU no preset matched take the given spec as the real one."""
    if not hardware:
        return False
    target = load_spec(hardware)
    for d in trace.devices.itertuples(index=False):
        if d.device == "cpu":
            continue
        matched = match_device(d.name, int(max(d.sm_count, 0)), d.compute_capability, int(max(d.memory_bytes, 0)))
        if matched is not None and matched.name != target.name:
            return True
    return False


def _peak_label(spec: HardwareSpec | None, dtype: str) -> str:
    """'bf16 on v100-sxm2-32gb: no bf16 matrix unit, vector fp32 peak used' where the dtype falls back."""
    if spec is None:
        return ""
    used = spec.peak_source(dtype, "matrix")
    if used == f"matrix {dtype}":
        return f"matrix {dtype}"
    return f"{dtype} on {spec.name}: no {dtype} matrix unit, {used} peak used (fallback)"


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


def compile_report(
    path: str | Path, *, max_bytes: int | None = None
):  # -> collectors.torch_compile.report.CompileReport
    """The torch.compile tables of a TORCH_TRACE directory or one structured-log file: phases,
    compiles, graph breaks, recompiles, caches, fusion map. Unreadable lines are counted in
    `.problems`; a path with no log raises InputError (each file at most `max_bytes`)."""
    from collectors.torch_compile.report import read_compile_report

    return read_compile_report(path, max_bytes)


def trace_compile_report(trace: Trace):  # -> CompileReport | None
    """The compile tables a trace file carries (`perf profile --compile` writes them in its
    'perfCompile' field), with phases rebuilt from its compile_pass events; None when it has neither."""
    from collectors.torch_compile.embed import DOC_KEY
    from collectors.torch_compile.phases import phase_summary, phases_from_events
    from collectors.torch_compile.report import CompileReport, report_from_doc

    doc = next(
        (m.get(DOC_KEY) for m in trace.metadata.get("ranks", {}).values() if isinstance(m, dict) and DOC_KEY in m), None
    )
    report = report_from_doc(doc, source=", ".join(trace.metadata.get("files", [])))
    phases = phases_from_events(trace.events)
    if report is None:
        if phases.empty:
            return None
        empty = pd.DataFrame()
        return CompileReport(
            phases=phases,
            phase_summary=phase_summary(phases),
            compiles=empty,
            graph_breaks=empty,
            recompiles=empty,
            caches=empty,
            fusion=empty,
            source="compile_pass events",
        )
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
    and efficiency (analysis.fusion.fusion_times; floors on `hardware` or the
    matched spec). Every table is empty when the source holds no compiler data.
    """
    from analysis.fusion import fusion_times
    from collectors.torch_compile.phases import phase_summary

    if isinstance(source, Trace):
        trace = source
        report = trace_compile_report(source)
    else:
        report = source
    if report is None:
        return {name: pd.DataFrame() for name in COMPILE_TABLES}
    phases = report.phases
    overall = (
        phase_summary(phases.assign(compile_id="")).drop(columns="compile_id")
        if len(phases)
        else pd.DataFrame(columns=["phase", "time_ns", "steps", "share"])
    )
    fusion = report.fusion
    if trace is not None and len(fusion) and (trace.events["source"].astype(str) != "compiler").any():
        fusion = fusion_times(fusion, trace, spec_resolver(trace, hardware))
    return {
        "phases": overall,
        "phase_summary": report.phase_summary,
        "compiles": report.compiles,
        "graph_breaks": report.graph_breaks,
        "recompiles": report.recompiles,
        "caches": report.caches,
        "fusion": fusion,
    }


def compare_compile(
    factory_or_module,
    inputs,
    steps: int = 3,
    *,
    warmup: int = 2,
    hardware: str | HardwareSpec | None = None,
    backward: bool = False,
    workdir: str | Path | None = None,
):  # -> CompareResult
    """Eager vs compiled, per fused kernel: the compiler collector runs `factory_or_module` on
    `inputs` both ways (collectors.torch_compile.compare.compare_compile, which documents the
    arguments), and analysis joins each kernel to the eager ops it replaced and floors it
    (analysis.fusion.fusion_groups on the run's HardwareSpec). Needs torch."""
    from analysis.fusion import fusion_groups
    from collectors.torch_compile.compare import compare_compile as run_both

    res = run_both(
        factory_or_module, inputs, steps, warmup=warmup, hardware=hardware, backward=backward, workdir=workdir
    )
    if res.compiled is None or res.eager is None:
        from analysis.fusion import GROUP_COLUMNS

        return replace(res, groups=pd.DataFrame(columns=GROUP_COLUMNS))
    spec = res.spec
    groups, unmatched = fusion_groups(
        res.compile.fusion, res.graphs, res.eager, res.compiled, steps, lambda rank, device: spec
    )
    return replace(res, groups=groups, unmatched=unmatched)


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


#: What the CLI and the dashboard call of the floors below, beyond the functions above: they
#: import this facade and the model only (tests/test_architecture.py). name -> (module, name
#: there); each is imported on first use (PEP 562), so `perf --help` loads none of them.
#: The docstring of each is its home's.
FACADE: dict[str, tuple[str, str]] = {
    "units": ("analysis.units", "units"),  # one row per unit of work
    "op_groups": ("analysis.roofline", "groups"),  # classified units per (name, shapes)
    "op_times": ("analysis.diff", "op_times"),  # per (kind, name, shapes) from the top tables
    "diff": ("analysis.diff", "diff"),  # op_times A against B, changes only
    "setup": ("analysis.diff", "setup"),  # one trace's setup: hardware, ranks, dtypes...
    "compare_setup": ("analysis.diff", "compare_setup"),  # two setups side by side, like-for-like or not
    "gate_samples": ("analysis.gate", "samples"),  # per (trace, step) and op name
    "gate_compare": ("analysis.gate", "compare"),  # the regression verdicts
    "UNKNOWN_WARN_SHARE": ("analysis.unknown", "WARN_SHARE"),  # above this unknown share, the report says so
    "step_walls": ("analysis.gate", "step_walls"),  # wall-clock time per step of one trace
    "GATE_MIN_RUNS": ("analysis.gate", "MIN_RUNS"),  # runs a side for a statistical verdict
    "interval_runs": ("analysis.intervals", "runs"),  # the union of intervals as disjoint runs
    "llm_phases": ("analysis.llm", "llm_phases"),  # one row per serving step
    "llm_summary": ("analysis.llm", "llm_summary"),  # per (rank, phase)
    "memory_summary": ("analysis.memory", "memory_summary"),  # allocator peak per device
    "memory_timeline": ("analysis.memory", "memory_timeline"),  # allocator samples, down-sampled
    "kv_cache_footprint": ("analysis.memory", "kv_cache_footprint"),
    "write_perfetto": ("collectors.perfetto", "write_perfetto"),
    "write_chrome_json": ("collectors.perfetto", "write_chrome_json"),
    "run_model": ("collectors.torch_runtime", "run_model"),  # perf profile --model (torch)
    "run_script": ("collectors.torch_runtime", "run_script"),  # perf profile SCRIPT (torch)
    "prepare_model": ("collectors.torch_runtime.run_model", "prepare"),
    "load_factory": ("collectors.torch_runtime.specs", "load_factory"),  # perf compile --model (torch)
    "load_accel": ("accelerator.hardware", "load_accel"),  # perf compile --accel
    "accel_workloads": ("accelerator.workloads", "WORKLOADS"),  # perf compile's built-in models (torch)
    "compile_model": ("accelerator.compiler.pipeline", "compile_model"),  # perf compile (torch)
    "accel_check": ("accelerator.compiler.check", "check"),
    "accel_bounds": ("accelerator.compiler.check", "BOUNDS"),
    "accel_report": ("accelerator.compiler.report", "report"),
    "to_mlir": ("accelerator.compiler.mlir", "to_mlir"),
    "accel_trace_document": ("accelerator.compiler.trace_events", "trace_document"),  # perf compile --trace
    "OUTPUT_TABLES": ("analysis.columns", "OUTPUT_TABLES"),  # every Analysis table's columns
    "output_tables_markdown": ("analysis.columns", "markdown"),  # their reference (docs/json-schema.md)
}


def __getattr__(name: str):
    """The FACADE names, imported from their home on first use."""
    home = FACADE.get(name)
    if home is None:
        raise AttributeError(f"module 'profiler.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home[0]), home[1])
    globals()[name] = value
    return value
