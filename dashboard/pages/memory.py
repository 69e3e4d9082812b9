"""Memory: the allocator's timeline per device, its peak and the op at the peak, and the KV cache
(analysis.memory, analysis.llm.kv_cache_footprint)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html

from profiler.api import kv_cache_footprint, memory_summary, memory_timeline
from dashboard import figures
from dashboard.components import error_box, fmt_ns, fmt_pct, fmt_si, grid, guarded
from dashboard.store import TraceStore

PATH = "/memory"
TITLE = "Memory"
MAX_POINTS = 2000  # per device: the timeline is down-sampled on the server (peaks and troughs kept)


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div([html.H2("Memory"), dcc.Loading(html.Div(id="memory-body"))], id="page-memory")


def memory_chart(timeline: Any, summary: Any, origin: int) -> Any:
    """Memory over time (figures.memory_figure); with one allocator sample per device, a sentence:
    a chart of one point says less than the peaks table below it."""
    if timeline.empty or timeline.groupby(["rank", "device"]).size().max() > 1:
        return dcc.Graph(id="memory-graph", figure=figures.memory_figure(timeline, summary, origin))
    return html.P(
        "One allocator sample per device: no chart of memory over time (the peaks are below).",
        id="memory-graph",
        className="caption",
    )


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(Output("memory-body", "children"), Input("trace-select", "value"))
    @guarded(lambda msg: error_box(msg, id="memory-error"))
    def render(tid: str | None) -> list:
        return store.answer(tid, None, "memory", None, lambda: _render(tid))

    def _render(tid: str | None) -> list:
        trace = store.trace(tid)
        summary, timeline, kv = store.view(
            tid,
            None,
            "memory",
            lambda: (memory_summary(trace), memory_timeline(trace, MAX_POINTS), kv_cache_footprint(trace)),
        )
        origin = int(trace.events["ts"].min()) if len(trace.events) else 0
        rows = [
            (
                f"rank{r.rank}/{r.device}",
                r.samples,
                fmt_si(r.peak_allocated_bytes, "B"),
                fmt_si(r.peak_reserved_bytes, "B"),
                fmt_si(r.peak_above_start_bytes, "B"),
                fmt_si(r.capacity_bytes, "B"),
                fmt_pct(r.peak_fraction),
                fmt_ns((r.peak_allocated_ts if r.peak_allocated_ts >= 0 else r.peak_above_start_ts) - origin)
                if max(r.peak_allocated_ts, r.peak_above_start_ts) >= 0
                else "–",
                r.peak_op or r.peak_op_note,
            )
            for r in summary.itertuples(index=False)
        ]
        out = [
            memory_chart(timeline, summary, origin),
            html.H3("Peaks"),
            grid(
                [
                    "device",
                    "samples",
                    "peak allocated",
                    "peak reserved",
                    "peak above start",
                    "capacity",
                    "peak / capacity",
                    "peak at",
                    "op at the peak",
                ],
                rows,
                id="memory-summary",
            )
            if rows
            else html.P("No allocator samples in this trace (record with profile_memory=True).", id="memory-summary"),
        ]
        if len(kv):
            out += [
                html.H3("KV cache (from the cache-write ops' shapes)"),
                grid(
                    ["rank", "op", "dtype", "bytes / token", "slots", "layers", "KV cache", "share of memory", "note"],
                    [
                        (
                            r.rank,
                            r.op,
                            r.dtype,
                            fmt_si(r.bytes_per_token, "B"),
                            r.slots,
                            r.layers,
                            fmt_si(r.kv_cache_bytes, "B"),
                            fmt_pct(r.share),
                            r.note,
                        )
                        for r in kv.itertuples(index=False)
                    ],
                    id="memory-kv",
                ),
            ]
        return out
