"""The timeline chart: tracks against time, bars or occupancy buckets, with its legend."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.timeline_data import TimelineView
from profiler.model.demangle import demangle_many


def timeline_figure(view: TimelineView, marks: pd.DataFrame | None = None, mark_label: str = "") -> go.Figure:
    """Tracks (rows) against time in ms from the trace start, at the zoom of `view`.

    Events mode: one bar per visible interval, device work and host work in two colours, named
    in the legend. Buckets mode: a heatmap of occupancy per pixel bucket with its colour scale
    (share of the bucket busy), hover naming the interval with most time in the bucket. `marks`
    (unit_marks: start_ns, time_ns, count) are drawn on an extra row at the top for the selected op.
    """
    rows = list(view.tracks)
    fig = go.Figure()
    if view.mode == "events" and len(view.bars):
        host = view.bars["track"].astype(str).str.contains("/cpu/").to_numpy()
        for part, label, colour in (
            (~host, "device work (kernels, copies)", "#1f77b4"),
            (host, "host work (CPU ops, runtime calls)", "#ff7f0e"),
        ):
            b = view.bars[part]
            if not len(b):
                continue
            fig.add_trace(
                go.Bar(
                    y=b["track"],
                    base=b["start_ns"] / 1e6,
                    x=b["dur_ns"] / 1e6,
                    orientation="h",
                    name=label,
                    marker={"color": colour},
                    customdata=np.stack([demangle_many(b["name"].astype(str)), b["dur_ns"] / 1e3], axis=1),
                    hovertemplate="%{customdata[0]}<br>%{customdata[1]:.4g} µs<extra>%{y}</extra>",
                    meta={"mode": "events"},
                )
            )
    elif view.mode == "buckets":
        centers = (view.t0 + (np.arange(view.occupancy.shape[1]) + 0.5) * view.bucket_ns) / 1e6
        fig.add_trace(
            go.Heatmap(
                z=np.round(view.occupancy, 3),
                x=centers,
                y=rows,
                text=view.top_name,
                zmin=0,
                zmax=1,
                colorscale="Blues",
                showscale=True,
                name="share of each bucket busy",
                colorbar={"title": {"text": "busy", "side": "right"}, "tickformat": ".0%", "len": 0.8, "thickness": 12},
                meta={"mode": "buckets"},
                hovertemplate="%{y}<br>%{x:.4g} ms: %{z:.0%} busy<br>%{text}<extra></extra>",
            )
        )
    if marks is not None and len(marks):
        label = f"selected: {mark_label[:40]}"
        rows = [label, *rows]
        fig.add_trace(
            go.Scatter(
                x=marks["start_ns"] / 1e6,
                y=[label] * len(marks),
                mode="markers",
                name="selected op",
                marker={"symbol": "line-ns-open", "size": 14, "color": "#d62728", "line": {"width": 2}},
                customdata=np.stack([marks["count"], marks["time_ns"] / 1e3], axis=1),
                hovertemplate="%{customdata[0]} calls, %{customdata[1]:.4g} µs<extra></extra>",
                meta={"mode": "marks"},
            )
        )
    fig.update_layout(
        barmode="overlay",
        showlegend=True,
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
        height=max(260, 60 + 28 * len(rows)),
        xaxis={"title": "ms from trace start", "range": [view.t0 / 1e6, view.t1 / 1e6]},
        yaxis={"categoryorder": "array", "categoryarray": rows[::-1], "type": "category", "automargin": True},
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        dragmode="zoom",
        title={"text": f"{view.visible:,} intervals in view ({view.mode})", "font": {"size": 12}},
    )
    return fig
