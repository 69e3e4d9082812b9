"""LLM serving: prefill and decode steps, throughput, TTFT/TPOT and the KV-read floor (analysis.llm)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html

from profiler.api import llm_phases, llm_summary
from dashboard import figures
from dashboard.components import error_box, fmt_ns, fmt_pct, fmt_si, grid, guarded
from dashboard.store import TraceStore, check_hardware
from profiler.api import spec_resolver

PATH = "/llm"
TITLE = "LLM"


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div([html.H2("LLM serving"), dcc.Loading(html.Div(id="llm-body"))], id="page-llm")


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(Output("llm-body", "children"), Input("trace-select", "value"), Input("hardware", "data"))
    @guarded(lambda msg: error_box(msg, id="llm-error"))
    def render(tid: str | None, hardware: str | None) -> list:
        hw = check_hardware(hardware)  # a preset name, never a path from the browser
        return store.answer(tid, hw, "llm", None, lambda: _render(tid, hw))

    def _render(tid: str | None, hw: str | None) -> list:
        trace = store.trace(tid)
        phases = store.view(tid, hw, "llm", lambda: llm_phases(trace, spec_resolver(trace, hw)))
        if phases.empty:
            return [
                html.P(
                    "No serving steps found: no step annotations (SGLang step[...], vLLM execute_...) and no "
                    "attention ops with recorded shapes.",
                    id="llm-summary",
                )
            ]
        s = llm_summary(phases)
        rows = [
            (
                r.rank,
                r.phase,
                r.steps,
                f"{r.tokens:,.0f}" if r.tokens == r.tokens else "–",
                fmt_ns(r.time_ns),
                f"{r.tokens_per_s:,.1f}" if r.tokens_per_s == r.tokens_per_s else "–",
                fmt_ns(r.ttft_ns),
                fmt_ns(r.tpot_ns),
                fmt_si(r.kv_read_bytes, "B"),
                fmt_pct(r.kv_floor_efficiency),
                r.note,
            )
            for r in s.itertuples(index=False)
        ]
        table = grid(
            [
                "rank",
                "phase",
                "steps",
                "tokens",
                "time",
                "tokens/s",
                "TTFT (lower bound)",
                "TPOT",
                "KV read / step",
                "KV floor / busy",
                "note",
            ],
            rows,
            id="llm-summary",
        )
        if len(phases) == 1:  # one step: the table says it all, a chart of one point adds nothing
            return [
                table,
                html.P("One serving step: no chart of steps over time.", className="caption", id="llm-graph"),
            ]
        return [table, dcc.Graph(id="llm-graph", figure=figures.llm_steps_figure(phases))]
