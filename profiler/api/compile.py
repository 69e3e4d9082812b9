"""The compiler collector's tables, for the CLI and the compiler page, joined to the analysis:
`compile_report` (a TORCH_TRACE directory), `trace_compile_report` (what a trace file carries),
`compile_tables` (the page's tables, kernels timed and floored), `compare_compile` (eager vs compiled)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from profiler.api.hardware import spec_resolver
from profiler.model.hardware import HardwareSpec
from profiler.model.trace import Trace

if TYPE_CHECKING:
    from collectors.torch_compile.compare import CompareResult
    from collectors.torch_compile.report import CompileReport


def compile_report(path: str | Path, *, max_bytes: int | None = None) -> CompileReport:
    """The torch.compile tables of a TORCH_TRACE directory or one structured-log file: phases,
    compiles, graph breaks, recompiles, caches, fusion map (its `flops` counted by
    analysis.cost.kernels.with_flops from the nodes the collector recorded). Unreadable lines are counted in
    `.problems`; a path with no log raises InputError (each file at most `max_bytes`)."""
    from analysis.cost.kernels import with_flops
    from collectors.torch_compile.report import read_compile_report

    report = read_compile_report(path, max_bytes)
    return replace(report, fusion=with_flops(report.fusion))


def trace_compile_report(trace: Trace) -> CompileReport | None:
    """The compile tables a trace file carries (`perf profile --compile` writes them in its
    'perfCompile' field), with phases rebuilt from its compile_pass events and the fusion map's
    `flops` counted (analysis.cost.kernels.with_flops); None when it has neither."""
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
    from analysis.cost.kernels import with_flops

    report = replace(report, fusion=with_flops(report.fusion))
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
    from analysis.cost.kernels import with_flops
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
    fusion = with_flops(report.fusion)
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
) -> CompareResult:
    """Eager vs compiled, per fused kernel: the compiler collector runs `factory_or_module` on
    `inputs` both ways (collectors.torch_compile.compare.compare_compile, which documents the
    arguments), and analysis joins each kernel to the eager ops it replaced and floors it
    (analysis.fusion.fusion_groups on the run's HardwareSpec). Needs torch."""
    from analysis.cost.kernels import with_flops
    from analysis.fusion import fusion_groups
    from collectors.torch_compile.compare import compare_compile as run_both

    res = run_both(
        factory_or_module, inputs, steps, warmup=warmup, hardware=hardware, backward=backward, workdir=workdir
    )
    res = replace(res, compile=replace(res.compile, fusion=with_flops(res.compile.fusion)))
    if res.compiled is None or res.eager is None:
        from analysis.fusion import GROUP_COLUMNS

        return replace(res, groups=pd.DataFrame(columns=GROUP_COLUMNS))
    spec = res.spec
    groups, unmatched = fusion_groups(
        res.compile.fusion, res.graphs, res.eager, res.compiled, steps, lambda rank, device: spec
    )
    return replace(res, groups=groups, unmatched=unmatched)
