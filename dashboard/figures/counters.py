"""The measured hierarchical roofline: each kernel (mean over its launches) placed once per memory
level by its measured intensity at that level, under the spec's roofs (analysis.measured_roofline)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.common import _empty

LEVEL_SYMBOLS = {"dram": "circle", "l2": "square", "l1": "diamond", "lds": "triangle-up"}


def measured_roofline_figure(
    kernels: pd.DataFrame, roofs: list[tuple[str, float]], peaks: list[tuple[str, float]], title: str
) -> go.Figure:
    """Log-log: x = measured FLOPs / bytes at a level, y = measured FLOPs / duration.

    `kernels`: one row per kernel with `kernel`, `achieved_flops_per_s` and `intensity_<level>`
    (analysis.measured_roofline columns, averaged per kernel); `roofs`: (level, bytes/s);
    `peaks`: (label, FLOP/s). One marker trace per level (a kernel appears once per level, the
    points of one kernel on one horizontal line); memory roofs rise to the highest peak."""
    cols = [c for c in kernels.columns if c.startswith("intensity_")]
    have = kernels.dropna(subset=["achieved_flops_per_s"])
    have = have[have["achieved_flops_per_s"] > 0]
    if have.empty or not cols:
        return _empty(title, "no kernel with measured FLOPs and a duration")
    xs = have[cols].to_numpy(dtype=float)
    xs = xs[np.isfinite(xs) & (xs > 0)]
    lo, hi = (xs.min() / 4, xs.max() * 4) if len(xs) else (0.01, 1000.0)
    top = max((v for _, v in peaks), default=float(have["achieved_flops_per_s"].max()))
    fig = go.Figure()
    for name, bw in roofs:
        ridge = top / bw
        x = [min(lo, ridge / 100), max(ridge, lo)]
        fig.add_trace(
            go.Scatter(x=x, y=[bw * v for v in x], mode="lines", name=f"memory: {name}", line={"dash": "dash"})
        )
    for label, value in peaks:
        fig.add_trace(go.Scatter(x=[lo, hi], y=[value, value], mode="lines", name=f"compute: {label}"))
    for col in cols:
        level = col.removeprefix("intensity_")
        pts = have[np.isfinite(have[col].to_numpy(dtype=float)) & (have[col] > 0)]
        if pts.empty:
            continue
        fig.add_trace(
            go.Scatter(
                x=pts[col],
                y=pts["achieved_flops_per_s"],
                mode="markers",
                name=f"kernels at {level}",
                marker={"symbol": LEVEL_SYMBOLS.get(level, "circle"), "size": 10},
                text=pts["kernel"].str.slice(0, 80),
                hovertemplate="%{text}<br>%{x:.3g} FLOP/B, %{y:.3g} FLOP/s<extra>" + level + "</extra>",
            )
        )
    fig.update_layout(
        title=title,
        xaxis={"type": "log", "title": "measured intensity (FLOP / byte at the level)"},
        yaxis={"type": "log", "title": "measured FLOP/s"},
        legend={"orientation": "v"},
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
    )
    return fig
