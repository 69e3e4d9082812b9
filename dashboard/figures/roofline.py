"""The roofline chart: one labelled line per memory level and compute peak, ops as points."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.common import BOUND_COLORS, _empty

MEMORY_DASH = ["solid", "dash", "dot", "dashdot", "longdash"]
#: efficiency (floor / time) above which an op ran faster than its ceiling allows (issue 10: > 10% over);
#: used where the op table carries no `above_ceiling` column (analysis.ceiling sets it)
ABOVE_CEILING = 1.1


def roofline_figure(
    points: pd.DataFrame, roofs: pd.DataFrame, selected: int | None = None, title: str = "Roofline"
) -> go.Figure:
    """Log-log roofline: x = intensity (FLOP/byte), y = achieved FLOP/s = flops_effective / time.

    `points`: dashboard.tables.roofline_points (op, name, shapes, intensity, achieved_flops,
    time_ns, bound, efficiency, ...); `roofs`: dashboard.tables.ceilings (kind, name, value).
    Memory roofs: y = bandwidth * x up to the highest compute peak (ridge x = peak / bandwidth);
    compute roofs: y = peak from the fastest memory roof's ridge onwards. One trace per roof,
    named 'compute: ...' or 'memory: ...' and labelled on the chart at its right end. Points: one
    trace per bound (colour), marker area proportional to time; ops faster than their own floor
    by more than ABOVE_CEILING (efficiency = floor / time > 1.1: a wrong shape, dtype or preset,
    or data served from a cache level the spec lacks) are circled in a trace of their own;
    `selected` (an op id) is drawn again as a ring.
    """
    if points.empty and roofs.empty:
        return _empty(title, "no op with a known FLOP and byte count")
    xs = points["intensity"].to_numpy(dtype=float) if len(points) else np.array([1.0])
    compute = roofs[roofs["kind"] == "compute"]
    memory = roofs[roofs["kind"] == "memory"]
    top_peak = float(compute["value"].max()) if len(compute) else float(points["achieved_flops"].max())
    ridges = [top_peak / bw for bw in memory["value"]] or [1.0]
    x_lo = 10 ** math.floor(math.log10(max(min(xs.min(), min(ridges)) / 4, 1e-6)))
    x_hi = 10 ** math.ceil(math.log10(max(xs.max(), max(ridges)) * 4))
    fig = go.Figure()
    for i, r in enumerate(memory.itertuples(index=False)):
        ridge = top_peak / r.value
        label = f"{r.name} {r.value / 1e12:.3g} TB/s"
        fig.add_trace(
            go.Scatter(
                x=[x_lo, ridge],
                y=[r.value * x_lo, top_peak],
                mode="lines+text",
                name=f"memory: {label}",
                text=["", label],
                textposition="top left",
                textfont={"size": 10, "color": "#444"},
                line={"color": "#444", "dash": MEMORY_DASH[i % len(MEMORY_DASH)], "width": 1.5},
                hoverinfo="name",
                meta={"roof": "memory", "level": r.name, "value": r.value},
            )
        )
    fastest_bw = float(memory["value"].max()) if len(memory) else None
    for r in compute.itertuples(index=False):
        start = r.value / fastest_bw if fastest_bw else x_lo  # where the innermost level's roof meets it
        label = f"{r.name} {r.value / 1e12:.3g} TFLOP/s"
        fig.add_trace(
            go.Scatter(
                x=[start, x_hi],
                y=[r.value, r.value],
                mode="lines+text",
                name=f"compute: {label}",
                text=["", label],
                textposition="bottom left",
                textfont={"size": 10, "color": "#222"},
                line={"color": "#222", "width": 1.5},
                hoverinfo="name",
                meta={"roof": "compute", "level": r.name, "value": r.value},
            )
        )
    if len(points):
        t = points["time_ns"].to_numpy(dtype=float)
        size = 6 + 34 * np.sqrt(t / t.max())  # area ~ time
        for bound, g in points.assign(_size=size).groupby("bound", sort=False):
            fig.add_trace(
                go.Scatter(
                    x=g["intensity"],
                    y=g["achieved_flops"],
                    mode="markers",
                    name=f"{bound} ({len(g)})",
                    marker={
                        "size": g["_size"],
                        "color": BOUND_COLORS.get(bound, "#7f7f7f"),
                        "opacity": 0.75,
                        "line": {"width": 0.5, "color": "#333"},
                    },
                    customdata=np.stack(
                        [
                            g["op"],
                            g["label"] if "label" in g else g["name"],
                            g["shapes"],
                            g["time_ns"] / 1e3,
                            g["efficiency"].fillna(-1),
                            g["count"],
                        ],
                        axis=1,
                    ),
                    hovertemplate=(
                        "%{customdata[1]}<br>%{customdata[2]}<br>intensity %{x:.3g} FLOP/B<br>"
                        "achieved %{y:.3g} FLOP/s<br>time %{customdata[3]:.4g} µs in %{customdata[5]} calls<br>"
                        "efficiency %{customdata[4]:.2f}<extra>" + str(bound) + "</extra>"
                    ),
                    meta={"points": "ops"},
                )
            )
        flagged = (
            points["above_ceiling"].fillna(False).to_numpy(dtype=bool)  # analysis.ceiling flag
            if "above_ceiling" in points
            else points["efficiency"].to_numpy(dtype=float) > ABOVE_CEILING
        )
        above = points[flagged]
        if len(above):
            fig.add_trace(
                go.Scatter(
                    x=above["intensity"],
                    y=above["achieved_flops"],
                    mode="markers",
                    name=f"above its ceiling ({len(above)})",
                    marker={"size": 18, "symbol": "circle-open", "color": "#d62728", "line": {"width": 2.5}},
                    customdata=np.stack(
                        [above["op"], above["label"] if "label" in above else above["name"], above["efficiency"]],
                        axis=1,
                    ),
                    meta={"points": "above-ceiling"},  # op id first, as on the ops' traces: a click selects the op
                    hovertemplate=(
                        "%{customdata[1]}<br>%{customdata[2]:.2f}x its floor: faster than its ceiling allows "
                        "(wrong shape, dtype or preset, or a cache level the spec lacks)<extra>above ceiling</extra>"
                    ),
                )
            )
        if selected is not None and (points["op"] == selected).any():
            s = points[points["op"] == selected].iloc[0]
            fig.add_trace(
                go.Scatter(
                    x=[s["intensity"]],
                    y=[s["achieved_flops"]],
                    mode="markers",
                    name="selected",
                    marker={"size": 26, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": "#000"}},
                    hoverinfo="skip",
                    meta={"points": "selected"},
                )
            )
    fig.update_layout(
        title=title,
        xaxis={
            "type": "log",
            "title": "arithmetic intensity (FLOP/byte)",
            "range": [math.log10(x_lo), math.log10(x_hi)],
        },
        yaxis={"type": "log", "title": "achieved FLOP/s"},
        legend={"font": {"size": 10}},
        margin={"l": 60, "r": 10, "t": 40, "b": 50},
        uirevision="roofline",
        clickmode="event",
    )
    return fig
