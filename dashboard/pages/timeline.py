"""Timeline: one row per rank and stream (and host thread), zoomable, down-sampled on the server.

Every zoom (the graph's relayoutData) re-queries the visible window: a few intervals come back
as bars, many as per-pixel-bucket occupancy (dashboard.timeline_data). The selected op's calls
are marked on a row of their own. The export button downloads the trace for Perfetto.
"""

from __future__ import annotations

import math
from typing import Any

from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

from dashboard import figures, tables
from dashboard.components import as_selection, error_box, fmt_ns, guarded
from dashboard.export import export_trace
from dashboard.store import TraceStore
from dashboard.timeline_data import unit_marks, window
from dashboard.views import timeline_for, units_for
from profiler.model.errors import InputError

PATH = "/timeline"
TITLE = "Timeline"


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div(
        [
            html.H2("Timeline"),
            html.Div(
                [
                    html.Button("Export for Perfetto", id="export-btn", n_clicks=0),
                    dcc.Download(id="export-download"),
                    html.Span(
                        " Drag to zoom, double-click to reset; each zoom is aggregated on the server.",
                        className="caption",
                    ),
                ]
            ),
            html.Div(id="timeline-caption", className="caption"),
            dcc.Graph(id="timeline-graph", config={"displaylogo": False, "scrollZoom": False}),
            dcc.Store(id="timeline-window"),
        ],
        id="page-timeline",
    )


# Runs in the browser: an x zoom or reset becomes the window to query ([t0, t1] in ms, or
# "reset"); any other relayout (autosize, a y pan) changes nothing and costs no round trip. Done
# client side so that such events cannot supersede a pending zoom request.
ZOOM = """
function(r) {
    const nu = window.dash_clientside.no_update;
    if (!r) { return nu; }
    if (r['xaxis.autorange']) { return {reset: Date.now()}; }
    if (r['xaxis.range[0]'] !== undefined && r['xaxis.range[1]'] !== undefined) {
        return {t0: r['xaxis.range[0]'], t1: r['xaxis.range[1]']};
    }
    if (Array.isArray(r['xaxis.range']) && r['xaxis.range'].length === 2) {
        return {t0: r['xaxis.range'][0], t1: r['xaxis.range'][1]};
    }
    return nu;
}
"""


def zoom_range(win: dict | None) -> tuple[float | None, float | None]:
    """(t0, t1) in ns from the timeline-window store (ms); (None, None): the whole span."""
    if not isinstance(win, dict) or "t0" not in win:
        return None, None
    t0, t1 = win.get("t0"), win.get("t1")
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) for t in (t0, t1)):
        raise InputError(None, "zoom window: expected two finite times in ms")
    return float(t0) * 1e6, float(t1) * 1e6


def register(app: Dash, store: TraceStore) -> None:
    app.clientside_callback(ZOOM, Output("timeline-window", "data"), Input("timeline-graph", "relayoutData"))

    @app.callback(
        Output("timeline-graph", "figure"),
        Output("timeline-caption", "children"),
        Input("trace-select", "value"),
        Input("selected-op", "data"),
        Input("timeline-window", "data"),
        State("hardware", "data"),
    )
    @guarded(lambda msg: (no_update, error_box(msg, id="timeline-error")))
    def draw(tid: str | None, selected: dict | None, win: dict | None, hardware: str | None) -> tuple:
        selected = as_selection(selected)
        # a new trace starts at its whole span; a zoom or a selection keeps the window
        span = (None, None) if ctx.triggered_id == "trace-select" else zoom_range(win)
        return store.answer(tid, None, "timeline", [span, selected], lambda: _draw(tid, selected, span))

    def _draw(tid: str | None, selected: dict | None, span: tuple[float | None, float | None]) -> tuple:
        index = timeline_for(store, tid)
        view = window(index, *span)
        marks, label = None, ""
        if selected:
            units = tables.focus_units(store.analysis(tid).units)  # start and time: the same on any hardware
            mine = units[(units["name"] == selected.get("name")) & (units["shapes"] == selected.get("shapes", ""))]
            marks, label = unit_marks(mine, index.origin_ns, view.t0, view.t1), str(selected.get("name", ""))
        caption = (
            f"{len(index.tracks)} tracks, {index.events:,} outermost intervals; showing {fmt_ns(view.t0)} to "
            f"{fmt_ns(view.t1)}: {view.visible:,} intervals as "
            f"{'bars' if view.mode == 'events' else 'occupancy per pixel bucket'}."
        )
        return figures.timeline_figure(view, marks, label), caption

    @app.callback(
        Output("export-download", "data"),
        Output("timeline-caption", "children", allow_duplicate=True),
        Input("export-btn", "n_clicks"),
        State("trace-select", "value"),
        State("hardware", "data"),
        prevent_initial_call=True,
    )
    @guarded(lambda msg: (no_update, error_box(msg, id="export-error")))
    def export(n: int, tid: str | None, hardware: str | None) -> tuple:
        if not n:
            return no_update, no_update
        entry = store.entry(tid)
        data, suffix = export_trace(store.trace(tid), units_for(store, tid, hardware))
        stem = entry.label.removesuffix(".gz").removesuffix(".json") if entry else "trace"
        return dcc.send_bytes(data, f"{stem}{suffix}"), f"exported {stem}{suffix} ({len(data) / 2**20:.1f} MiB)"
