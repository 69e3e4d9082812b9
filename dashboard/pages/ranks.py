"""Ranks: a multi-rank trace's ranks side by side (accelerator time by bound, waits at collectives),
the stragglers, and the slowest collectives (analysis.cross_rank, through the API's analysis)."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
from dash import Dash, Input, Output, dcc, html

from dashboard.components import error_box, fmt_ns, fmt_pct, fmt_si, grid, guarded
from dashboard.store import TraceStore

PATH = "/ranks"
TITLE = "Ranks"
BOUNDS = ("compute", "memory", "communication", "runtime", "unknown")
MAX_COLLECTIVES = 20


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div([html.H2("Ranks"), dcc.Loading(html.Div(id="ranks-body"))], id="page-ranks")


def bounds_figure(rank_summary: Any) -> go.Figure:
    """One stacked bar per rank: its accelerator time by bound, and its wait at collectives."""
    fig = go.Figure()
    ranks = [str(r) for r in rank_summary["rank"]]
    for b in BOUNDS:
        fig.add_bar(name=b, x=ranks, y=rank_summary[f"{b}_ns"] / 1e6)
    fig.add_scatter(name="waits at collectives", x=ranks, y=rank_summary["wait_ns"] / 1e6, mode="markers")
    fig.update_layout(barmode="stack", xaxis_title="rank", yaxis_title="ms", legend_orientation="h", height=380)
    return fig


def body(a: Any) -> list:
    """The page for one Analysis; a sentence on a one-rank trace."""
    rs = a.rank_summary
    if rs.empty:
        return [html.P("One rank in this trace: open a directory of per-rank files to compare ranks.", id="ranks-none")]
    setter = rs.loc[rs["sets_step"], "rank"]
    out: list = [
        html.P(
            f"Rank {int(setter.iat[0])} sets the step time: it waits least at collectives." if len(setter) else "",
            id="ranks-setter",
        ),
        dcc.Graph(id="ranks-graph", figure=bounds_figure(rs)),
        html.H3("Stragglers (arrived last at a collective)"),
        grid(
            ["rank", "collectives", "mean delay", "total delay", "share of collectives"],
            [
                (s.rank, s.collectives, fmt_ns(s.delay_ns), fmt_ns(s.total_delay_ns), fmt_pct(s.share))
                for s in a.stragglers.itertuples(index=False)
            ],
            id="ranks-stragglers",
        ),
    ]
    c = a.collectives.assign(total=a.collectives["wait_ns"] + a.collectives["transfer_ns"])
    rows = [
        (
            f"{r.group}.{r.seq}",
            r.name,
            fmt_si(r.bytes, "B") if not math.isnan(r.bytes) else "?",
            fmt_ns(r.wait_ns),
            fmt_ns(r.transfer_ns),
            r.last_rank,
            fmt_si(r.bus_bandwidth, "B/s") if not math.isnan(r.bus_bandwidth) else "?",
            fmt_pct(r.link_share) if not math.isnan(r.link_share) else "?",
        )
        for r in c.nlargest(MAX_COLLECTIVES, "total").itertuples(index=False)
    ]
    out += [
        html.H3("Slowest collectives (wait = sync skew, transfer = after the last arrival)"),
        grid(
            ["#", "collective", "bytes", "wait", "transfer", "last rank", "bus bandwidth", "of link"],
            rows,
            id="ranks-collectives",
        ),
    ]
    return out


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(Output("ranks-body", "children"), Input("trace-select", "value"), Input("hardware", "data"))
    @guarded(lambda msg: error_box(msg, id="ranks-error"))
    def render(tid: str | None, hardware: str | None) -> list:
        key = tid or ""  # none selected: the store says so (its _need)
        return store.answer(key, hardware, "ranks", None, lambda: body(store.analysis(key, hardware)))
