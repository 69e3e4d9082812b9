"""Figure builders: DataFrames in (dashboard.tables, dashboard.timeline_data), plotly Figure out.

Pure functions: no server, no I/O, no global state, so they are tested on their own
(tests/test_dashboard_figures.py). Colours are fixed per bound so every page agrees.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.timeline_data import TimelineView
from profiler.model.demangle import demangle_many

BOUND_COLORS = {
    "compute": "#d62728",
    "memory": "#1f77b4",
    "communication": "#9467bd",
    "runtime": "#ff7f0e",
    "unknown": "#7f7f7f",
}
PART_COLORS = {**BOUND_COLORS, "idle_host": "#bcbd22", "idle_sync": "#17becf", "idle_other": "#dddddd"}
MEMORY_DASH = ["solid", "dash", "dot", "dashdot", "longdash"]
#: efficiency (floor / time) above which an op ran faster than its ceiling allows (issue 10: > 10% over)
ABOVE_CEILING = 1.1


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title=title,
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[{"text": message, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}],
    )
    return fig


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
        above = points[points["efficiency"].to_numpy(dtype=float) > ABOVE_CEILING]
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


def iterations_figure(iterations: pd.DataFrame) -> go.Figure:
    """MFU and MBU per ProfilerStep iteration and device (analysis.roofline.iterations: rank,
    device, step, window_ns, mfu, mbu), in percent, with each device's MFU over all steps
    (dashboard.tables.over_steps, the figure the devices table shows) as a dashed line."""
    from dashboard.tables import over_steps

    if iterations.empty:
        return _empty("MFU / MBU per iteration", "no ProfilerStep iterations in this trace")
    fig = go.Figure()
    overall = {(r.rank, r.device): r.mfu for r in over_steps(iterations, "mfu").itertuples(index=False)}
    for (rank, device), g in iterations.groupby(["rank", "device"], sort=True):
        for col, dash in (("mfu", "solid"), ("mbu", "dot")):
            fig.add_trace(
                go.Scatter(
                    x=g["step"],
                    y=g[col] * 100,
                    mode="lines+markers",
                    line={"dash": dash},
                    name=f"{col.upper()} rank{rank}/{device}",
                )
            )
        m = overall.get((rank, str(device)), float("nan"))
        fig.add_trace(
            go.Scatter(
                x=[g["step"].min(), g["step"].max()],
                y=[m * 100, m * 100],
                mode="lines",
                line={"dash": "dash", "color": "#555"},
                name=f"MFU over all steps rank{rank}/{device}: {100 * m:.3g}%",
                meta={"mfu": "over steps"},
            )
        )
    fig.update_layout(
        title="MFU / MBU per iteration (%)",
        xaxis={"title": "step"},
        yaxis={"title": "% of peak"},
        margin={"l": 50, "r": 10, "t": 40, "b": 40},
    )
    return fig


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


def compare_figure(changes: pd.DataFrame, top: int = 20) -> go.Figure:
    """The largest time changes (analysis.diff.diff: name, shapes, delta_ns, change), B - A in ms;
    regressions (slower) red, improvements green."""
    if changes.empty:
        return _empty("Time change per op (B - A)", "no change between the two traces")
    c = changes.head(top).iloc[::-1]
    labels = [f"{n[:50]} {s[:30]}".strip() for n, s in zip(c["name"].astype(str), c["shapes"].astype(str))]
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=c["delta_ns"] / 1e6,
            orientation="h",
            marker={"color": np.where(c["delta_ns"] > 0, "#d62728", "#2ca02c")},
            customdata=np.stack([c["change"], c["time_a_ns"] / 1e6, c["time_b_ns"] / 1e6], axis=1),
            hovertemplate="%{y}<br>%{customdata[0]}: %{customdata[1]:.4g} -> %{customdata[2]:.4g} ms"
            "<br>delta %{x:.4g} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title="Time change per op (B - A, ms)",
        height=120 + 22 * len(c),
        xaxis={"title": "ms"},
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        yaxis={"automargin": True},
    )
    return fig


def memory_figure(timeline: pd.DataFrame, summary: pd.DataFrame, origin_ns: int) -> go.Figure:
    """Allocated (solid) and reserved (dotted) bytes per device over ms from the trace start
    (analysis.memory.memory_timeline, down-sampled there keeping peaks and troughs); where the
    trace records only deltas, allocated above the start of recording (dashed). The peak of
    each device (analysis.memory.memory_summary) is marked."""
    if timeline.empty:
        return _empty("Device memory", "no allocator samples: record with profile_memory=True")
    fig = go.Figure()
    for (rank, device), g in timeline.groupby(["rank", "device"], sort=True):
        x = (g["ts"].to_numpy() - origin_ns) / 1e6
        alloc = g["allocated_bytes"].to_numpy(dtype=float)
        col, label, dash = (
            ("allocated_bytes", "allocated", "solid")
            if np.isfinite(alloc).any()
            else ("above_start_bytes", "allocated above start", "dash")
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=g[col] / 2**30,
                mode="lines",
                line={"dash": dash, "shape": "hv"},
                name=f"rank{rank}/{device} {label}",
                meta={"memory": label},
            )
        )
        if g["reserved_bytes"].notna().any():
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=g["reserved_bytes"] / 2**30,
                    mode="lines",
                    line={"dash": "dot", "shape": "hv"},
                    name=f"rank{rank}/{device} reserved",
                    meta={"memory": "reserved"},
                )
            )
    for r in summary.itertuples(index=False):
        use_alloc = np.isfinite(r.peak_allocated_bytes)
        peak, ts = (
            (r.peak_allocated_bytes, r.peak_allocated_ts)
            if use_alloc
            else (r.peak_above_start_bytes, r.peak_above_start_ts)
        )
        if ts is not None and ts >= 0 and np.isfinite(peak):
            fig.add_trace(
                go.Scatter(
                    x=[(ts - origin_ns) / 1e6],
                    y=[peak / 2**30],
                    mode="markers",
                    name=f"peak rank{r.rank}/{r.device}",
                    marker={"symbol": "star", "size": 14, "color": "#d62728"},
                    meta={"memory": "peak"},
                    hovertemplate=f"peak {peak / 2**30:.3f} GiB<br>{str(r.peak_op)[:60]}<extra></extra>",
                )
            )
    fig.update_layout(
        title="Device memory (GiB)",
        xaxis={"title": "ms from trace start"},
        yaxis={"title": "GiB"},
        margin={"l": 60, "r": 10, "t": 40, "b": 40},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def llm_steps_figure(phases: pd.DataFrame) -> go.Figure:
    """Duration and device-busy time of each serving step (analysis.llm.llm_phases), ms, one
    colour per phase (prefill, decode, mixed)."""
    if phases.empty:
        return _empty("Serving steps", "no prefill/decode steps found")
    colours = {"prefill": "#d62728", "decode": "#1f77b4", "mixed": "#9467bd"}
    fig = go.Figure()
    for phase, g in phases.groupby("phase", sort=True):
        fig.add_trace(
            go.Scatter(
                x=g["step"],
                y=g["duration_ns"] / 1e6,
                mode="markers",
                name=f"{phase} duration",
                marker={"color": colours.get(phase, "#7f7f7f")},
                meta={"phase": phase},
                customdata=np.stack([g["tokens"].fillna(-1), g["device_busy_ns"] / 1e6], axis=1),
                hovertemplate="step %{x}: %{y:.4g} ms, %{customdata[0]} tokens, "
                "device busy %{customdata[1]:.4g} ms<extra>" + str(phase) + "</extra>",
            )
        )
    fig.update_layout(
        title="Serving steps",
        xaxis={"title": "step"},
        yaxis={"title": "ms", "rangemode": "tozero"},
        margin={"l": 60, "r": 10, "t": 40, "b": 40},
    )
    return fig


PHASE_COLORS = {
    "dynamo_tracing": "#1f77b4",
    "guards": "#aec7e8",
    "aot_autograd": "#ff7f0e",
    "inductor_lowering": "#2ca02c",
    "scheduling_fusion": "#98df8a",
    "codegen": "#d62728",
    "kernel_compile": "#9467bd",
    "autotune": "#8c564b",
    "cache": "#17becf",
    "other": "#7f7f7f",
}


def compile_phases_figure(phases: pd.DataFrame) -> go.Figure:
    """Horizontal bars: self time per torch.compile phase, seconds, pipeline order top to bottom
    (profiler.api.compile_tables 'phases': phase, time_ns, steps, share). A step's self time
    is its duration less its nested steps', so the bars sum to the compile's wall time per thread."""
    if phases.empty:
        return _empty("Compile phases", "no torch.compile phases in this trace")
    p = phases.iloc[::-1]  # plotly draws the first category at the bottom
    share = p["share"].fillna(0).to_numpy()
    fig = go.Figure(
        go.Bar(
            x=p["time_ns"] / 1e9,
            y=p["phase"],
            orientation="h",
            marker={"color": [PHASE_COLORS.get(x, "#7f7f7f") for x in p["phase"]]},
            customdata=np.stack([share * 100, p["steps"].to_numpy()], axis=1),
            text=[f"{s:.0%}" for s in share],
            textposition="auto",
            hovertemplate="%{y}: %{x:.4g} s self time, %{customdata[0]:.3g}% of the compile, "
            "%{customdata[1]} steps<extra></extra>",
        )
    )
    fig.update_layout(
        title="Compile phases (self time)",
        xaxis={"title": "s", "rangemode": "tozero"},
        yaxis={"title": ""},
        margin={"l": 130, "r": 10, "t": 40, "b": 40},
        height=80 + 32 * len(p),
    )
    return fig
