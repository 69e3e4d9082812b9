"""The Overview page's charts: the wall equation per device, and MFU / MBU per ProfilerStep."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.common import PART_COLORS, _empty


def equation_figure(parts: pd.DataFrame) -> go.Figure:
    """Stacked horizontal bars per device of the wall equation (dashboard.tables.equation_long:
    device, part, ns, share). Bars are in ms; they sum to each device's window."""
    if parts.empty:
        return _empty("Where the wall time goes", "no device work in this trace")
    fig = go.Figure()
    for part, g in parts.groupby("part", sort=False):
        fig.add_trace(
            go.Bar(
                y=g["device"],
                x=g["ns"] / 1e6,
                orientation="h",
                name=part,
                marker={"color": PART_COLORS.get(part, "#999")},
                customdata=g["share"] * 100,
                hovertemplate="%{y}: %{x:.4g} ms (%{customdata:.1f}%)<extra>" + part + "</extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title="Where the wall time goes (ms)",
        xaxis={"title": "ms"},
        height=150 + 40 * parts["device"].nunique(),
        margin={"l": 110, "r": 10, "t": 40, "b": 40},
        legend={"orientation": "h", "y": -0.35},
    )
    return fig


def iterations_figure(iterations: pd.DataFrame, utilization: pd.DataFrame) -> go.Figure:
    """MFU and MBU per ProfilerStep and device (analysis.roofline.iterations: rank, device, step,
    wall_ns, mfu, mbu: each step's FLOPs and bytes over its wall time), in percent, with each
    device's MFU (Analysis.utilization compute_util over time_base, the one definition of
    analysis.mfu that the devices table and the reports show) as a dashed line. Work outside
    every step (step -1, no wall time) is not drawn."""
    steps = iterations[iterations["step"] >= 0] if len(iterations) else iterations
    if steps.empty:
        return _empty("MFU / MBU per iteration", "no ProfilerStep iterations in this trace")
    fig = go.Figure()
    overall = {(int(r.rank), str(r.device)): r for r in utilization.itertuples(index=False)}
    for (rank, device), g in steps.groupby(["rank", "device"], sort=True):
        for col, dash in (("mfu", "solid"), ("mbu", "dot")):
            fig.add_trace(
                go.Scatter(
                    x=g["step"],
                    y=g[col] * 100,
                    mode="lines+markers",
                    line={"dash": dash},
                    name=f"{col.upper()} rank{rank}/{device} (each step's wall time)",
                )
            )
        u = overall.get((int(rank), str(device)))
        if u is None:
            continue
        m = float(u.compute_util)
        fig.add_trace(
            go.Scatter(
                x=[g["step"].min(), g["step"].max()],
                y=[m * 100, m * 100],
                mode="lines",
                line={"dash": "dash", "color": "#555"},
                name=f"MFU rank{rank}/{device} over {u.time_base}: {100 * m:.3g}%",
                meta={"mfu": "device", "time_base": u.time_base},
            )
        )
    fig.update_layout(
        title="MFU / MBU per iteration (% of peak, over each step's wall time)",
        xaxis={"title": "step"},
        yaxis={"title": "% of peak"},
        margin={"l": 50, "r": 10, "t": 40, "b": 40},
    )
    return fig
