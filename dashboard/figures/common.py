"""What every figure shares: the colour of each bound and wall-equation part, and the empty figure."""

from __future__ import annotations

import plotly.graph_objects as go

BOUND_COLORS = {
    "compute": "#d62728",
    "memory": "#1f77b4",
    "communication": "#9467bd",
    "runtime": "#ff7f0e",
    "unknown": "#7f7f7f",
}
PART_COLORS = {**BOUND_COLORS, "idle_host": "#bcbd22", "idle_sync": "#17becf", "idle_other": "#dddddd"}


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title=title,
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[{"text": message, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}],
    )
    return fig
