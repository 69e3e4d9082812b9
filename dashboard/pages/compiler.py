"""Compiler: what torch.compile did and what it cost. Compile phases (self time), graph breaks with
their reasons and file:line, recompilations with the guard that failed, cache lookups (hit / miss
/ bypass), and the fusion map (kernel = ATen ops, from file:line) joined to the kernels' times
and bound (profiler.api.compile_tables).

A trace `perf profile --backend iree` wrote shows IREE's pass tree, dispatch regions and the eager
comparison instead (dashboard/compiler_iree.py).

Sources: the selected trace's compile_pass events and the tables `perf profile --compile` writes
into it, or the TORCH_TRACE directory given to `perf dashboard --compile-log DIR` (whose fusion
map is then joined to the selected trace's kernels).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from dash import Dash, Input, Output, dcc, html

from dashboard import figures
from dashboard.compiler_iree import iree_sections
from dashboard.components import error_box, fmt_ns, fmt_pct, fmt_si, grid, guarded
from dashboard.store import TraceStore
from profiler.api.iree import iree_report

PATH = "/compiler"
TITLE = "Compiler"

NO_DATA = (
    "No compiler data in this trace: no compile_pass events and no torch.compile tables. Profile with "
    "`perf profile --model M --input SHAPE --compile` (or a script that calls torch.compile), or give torch.compile's "
    "structured logs with `perf dashboard --compile-log DIR` (a TORCH_TRACE directory)."
)


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div([html.H2("Compiler"), dcc.Loading(html.Div(id="compiler-body"))], id="page-compiler")


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(Output("compiler-body", "children"), Input("trace-select", "value"), Input("hardware", "data"))
    @guarded(lambda msg: error_box(msg, id="compiler-error"))
    def render(tid: str | None, hardware: str | None) -> list:
        if store.compile_report is not None and not tid:
            return _render(tid, hardware)  # the --compile-log report alone: no trace to key a cache on
        return store.answer(tid or "", hardware, "compiler", None, lambda: _render(tid, hardware))

    def _render(tid: str | None, hardware: str | None) -> list:
        source = _source(store, tid)
        iree = iree_report(store.trace(tid)) if tid and store.entry(tid) is not None else None
        if iree is not None:  # a `perf profile --backend iree` trace: IREE's passes and dispatches
            return [html.P(source, className="caption", id="compiler-source"), *iree_sections(iree)]
        t = store.compile_tables(tid, hardware or None)
        if all(df.empty for df in t.values()):
            return [html.P(source, className="caption", id="compiler-source"), html.P(NO_DATA, id="compiler-empty")]
        return [
            html.P(source, className="caption", id="compiler-source"),
            _phases(t["phases"]),
            *_phase_summary(t["phase_summary"]),
            *_compiles(t["compiles"]),
            *_breaks(t["graph_breaks"]),
            *_recompiles(t["recompiles"]),
            *_caches(t["caches"]),
            *_fusion(t["fusion"]),
        ]


def _source(store: TraceStore, tid: str | None) -> str:
    entry = store.entry(tid)
    if store.compile_report is not None:
        where = f"the TORCH_TRACE log {Path(store.compile_report.source).name or store.compile_report.source}"
        return f"From {where}" + (
            f"; kernel times from {entry.label}." if entry else " (no trace loaded: no kernel times)."
        )
    if entry is None:
        return "No trace loaded."
    ev = store.trace(entry.trace_id).events
    n = int((ev["kind"].astype(str) == "compile_pass").sum())
    return f"From {entry.label}: {n:,} compile_pass events on the compiler track(s)."


def _where(file: str, line: int) -> str:
    return f"{Path(str(file)).name}:{line}" if file else "–"


def _phases(df: pd.DataFrame) -> Any:
    """The compile phases as a bar chart; one phase is a sentence (a chart of one bar adds nothing)."""
    if len(df) == 1:
        r = df.iloc[0]
        return html.P(
            f"One compile phase: {r['phase']}, {fmt_ns(r['time_ns'])} self time in {r['steps']} steps.",
            id="compiler-phases",
            className="caption",
        )
    return dcc.Graph(id="compiler-phases", figure=figures.compile_phases_figure(df))


def _phase_summary(df: pd.DataFrame) -> list:
    if df.empty or (df["compile_id"] == "").all():
        return []
    rows = [(r.compile_id, r.phase, fmt_ns(r.time_ns), fmt_pct(r.share), r.steps) for r in df.itertuples(index=False)]
    return [
        html.H3("Phases per compile"),
        grid(["compile", "phase", "self time", "share", "steps"], rows, id="compiler-phase-summary"),
    ]


def _compiles(df: pd.DataFrame) -> list:
    if df.empty:
        return []
    rows = [
        (r.compile_id, r.function, fmt_ns(r.duration_ns), r.graph_ops, r.guards, r.fail_type or "–")
        for r in df.itertuples(index=False)
    ]
    return [
        html.H3("Frame compiles"),
        grid(["compile", "function", "compile time", "graph ops", "guards", "failed"], rows, id="compiler-compiles"),
    ]


def _breaks(df: pd.DataFrame) -> list:
    if df.empty:
        return [html.H3("Graph breaks"), html.P("None: every compiled frame is one graph.", id="compiler-breaks")]
    rows = [(r.compile_id, _where(r.file, r.line), r.reason) for r in df.itertuples(index=False)]
    return [html.H3(f"Graph breaks ({len(df)})"), grid(["compile", "where", "reason"], rows, id="compiler-breaks")]


def _recompiles(df: pd.DataFrame) -> list:
    if df.empty:
        return [html.H3("Recompilations"), html.P("None.", id="compiler-recompiles")]
    rows = [(r.compile_id, r.previous or "–", r.guard, _where(r.file, r.line)) for r in df.itertuples(index=False)]
    return [
        html.H3(f"Recompilations ({len(df)})"),
        grid(["compile", "recompiled from", "failed guard", "where"], rows, id="compiler-recompiles"),
    ]


def _caches(df: pd.DataFrame) -> list:
    if df.empty:
        return [html.H3("Cache lookups"), html.P("None logged.", id="compiler-caches")]
    rows = [
        (
            r.compile_id,
            r.cache,
            f"cache {r.state}",
            fmt_ns(r.time_saved_ns) if r.time_saved_ns >= 0 else "–",
            r.reason or "–",
        )
        for r in df.itertuples(index=False)
    ]
    return [
        html.H3("Cache lookups"),
        grid(["compile", "cache", "state", "compile time saved", "detail"], rows, id="compiler-caches"),
    ]


def _fusion(df: pd.DataFrame) -> list:
    if df.empty:
        return [html.H3("Fusion map"), html.P("No kernels in the compile log.", id="compiler-fusion")]
    timed = "time_ns" in df.columns
    header = ["compile", "kernel", "ATen ops", "from", "runs as", "FLOPs", "bytes"]
    if timed:
        header += ["calls", "time", "per graph run", "bound", "efficiency"]
    rows = []
    for r in df.itertuples(index=False):
        row = [
            r.compile_id,
            r.kernel,
            " + ".join(r.aten_ops),
            ", ".join(Path(s).name for s in r.sources) or "–",
            r.runtime_name,
            fmt_si(r.flops, "FLOP"),
            fmt_si(r.bytes_read + r.bytes_written, "B"),
        ]
        if timed:
            row += [int(r.calls), fmt_ns(r.time_ns), fmt_ns(r.per_run_ns), r.bound, fmt_pct(r.efficiency)]
        rows.append(row)
    note = (
        "Time: the kernel's events in the trace (a C++ kernel's range, a Triton kernel's device time, an extern op's "
        "work); per graph run: time / (calls / the kernel's calls per run); bound: the largest floor of one run "
        "(FLOPs / peak, bytes / bandwidth, minimum op time per call); efficiency: that floor / time per run."
        if timed
        else "Load a trace with the compiled run to see each kernel's time and bound."
    )
    return [
        html.H3("Fusion map (kernel = ATen ops, from source)"),
        grid(header, rows, id="compiler-fusion"),
        html.P(note, className="caption"),
    ]
