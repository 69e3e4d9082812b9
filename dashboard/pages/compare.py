"""Compare: two traces, ops matched by (kind, name, shapes) with analysis.diff; regressions in red.

The same tables as `perf diff A B`: op_times of each side's untruncated top ops and kernels,
then diff (B - A); a positive delta is a regression.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from dash import Dash, Input, Output, dash_table, dcc, html

from profiler.api import diff, op_times
from dashboard import figures
from dashboard.components import as_text, error_box, fmt_ns, guarded, kv_table
from dashboard.store import TraceStore

PATH = "/compare"
TITLE = "Compare"
ROWS = 200  # largest changes shipped to the table; the count of all is shown


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div(
        [
            html.H2("Compare"),
            html.Div(
                [
                    html.Label("A (baseline) "),
                    dcc.Dropdown(id="compare-a", clearable=False, style={"width": "340px"}),
                    html.Label(" B (new) "),
                    dcc.Dropdown(id="compare-b", clearable=False, style={"width": "340px"}),
                ],
                style={"display": "flex", "gap": "8px", "alignItems": "center"},
            ),
            dcc.Loading(html.Div(id="compare-body")),
        ],
        id="page-compare",
    )


def busy_ns(device_time: Any) -> int:
    """Accelerator busy time summed over devices; the CPU's on a CPU-only trace (as perf diff)."""
    gpu = device_time[device_time["device"] != "cpu"]
    return int((gpu if len(gpu) else device_time)["busy_ns"].sum())


def changes_chart(changes: Any) -> Any:
    """The time change per op as a bar chart (figures.compare_figure); one changed op is a
    sentence, since a chart of one bar says less (the table below has its row)."""
    if len(changes) != 1:
        return dcc.Graph(id="compare-graph", figure=figures.compare_figure(changes))
    c = changes.iloc[0]
    return html.P(
        f"One op changed: {c['name']} {c['shapes']}".strip()
        + f", {fmt_ns(c['time_a_ns'])} -> {fmt_ns(c['time_b_ns'])} (B - A {fmt_ns(c['delta_ns'])}).",
        id="compare-graph",
        className="caption",
    )


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(
        Output("compare-a", "options"),
        Output("compare-a", "value"),
        Output("compare-b", "options"),
        Output("compare-b", "value"),
        Input("trace-select", "options"),
        Input("trace-select", "value"),
    )
    def choices(options: list | None, current: str | None) -> tuple:
        # only well-formed options of traces this server knows: junk from the browser is dropped
        opts = [
            o
            for o in (options if isinstance(options, list) else [])
            if isinstance(o, dict) and isinstance(o.get("value"), str) and store.entry(o["value"]) is not None
        ]
        opts = [{"label": store.entry(o["value"]).label, "value": o["value"]} for o in opts]
        ids = [o["value"] for o in opts]
        a = current if current in ids else (ids[0] if ids else None)
        b = next((i for i in ids if i != a), a)
        return opts, a, opts, b

    @app.callback(Output("compare-body", "children"), Input("compare-a", "value"), Input("compare-b", "value"))
    @guarded(lambda msg: error_box(msg, id="compare-error"))
    def compare(a: str | None, b: str | None) -> Any:
        a, b = as_text(a, "trace A"), as_text(b, "trace B")
        if not a or not b:
            return html.P("Load two traces (command line or upload) to compare them.")
        return store.answer(a, None, "compare", b, lambda: _compare(a, b))

    def _compare(a: str, b: str) -> Any:
        sides = [store.analysis(t) for t in (a, b)]
        changes = store.view(
            a,
            None,
            f"diff:{b}",
            lambda: diff(
                op_times(sides[0].top_ops, sides[0].top_kernels), op_times(sides[1].top_ops, sides[1].top_kernels)
            ),
        )
        busy = [busy_ns(s.device_time) for s in sides]
        names = [store.entry(t).label if store.entry(t) else t for t in (a, b)]
        summary = kv_table(
            [
                ("A", names[0]),
                ("B", names[1]),
                ("busy A", fmt_ns(busy[0])),
                ("busy B", fmt_ns(busy[1])),
                (
                    "busy B - A",
                    f"{fmt_ns(busy[1] - busy[0])} ({100 * (busy[1] - busy[0]) / busy[0]:+.1f}%)" if busy[0] else "–",
                ),
                ("changed ops", f"{len(changes):,}"),
            ],
            id="compare-summary",
        )
        shown = changes.head(ROWS).copy()
        shown["delta_pct"] = np.where(np.isfinite(shown["delta_pct"]), shown["delta_pct"].round(1), None)
        shown["time_a_us"], shown["time_b_us"] = shown["time_a_ns"] / 1e3, shown["time_b_ns"] / 1e3
        shown["delta_us"] = shown["delta_ns"] / 1e3
        cols = [
            ("change", "change"),
            ("kind", "kind"),
            ("name", "op"),
            ("shapes", "shapes"),
            ("count_a", "calls A"),
            ("count_b", "calls B"),
            ("time_a_us", "time A (µs)"),
            ("time_b_us", "time B (µs)"),
            ("delta_us", "B - A (µs)"),
            ("delta_pct", "B - A %"),
            ("bound_a", "bound A"),
            ("bound_b", "bound B"),
        ]
        table = dash_table.DataTable(
            id="compare-table",
            data=shown[[c for c, _ in cols]].to_dict("records"),
            columns=[
                {
                    "id": c,
                    "name": h,
                    "type": "numeric" if c.endswith(("_us", "pct")) or c.startswith("count") else "text",
                    "format": {"specifier": ".4~g"},
                }
                for c, h in cols
            ],
            sort_action="native",
            page_size=25,
            style_cell={
                "fontFamily": "monospace",
                "fontSize": "12px",
                "maxWidth": "360px",
                "overflow": "hidden",
                "textOverflow": "ellipsis",
            },
            style_data_conditional=[
                {"if": {"filter_query": "{delta_us} > 0"}, "backgroundColor": "#fde0dc", "className": "regression"},
                {"if": {"filter_query": "{delta_us} < 0"}, "backgroundColor": "#e3f4e1"},
            ],
        )
        return [summary, changes_chart(changes), table]
