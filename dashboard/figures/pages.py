"""The charts of the Compare, Memory, LLM and Compiler pages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.common import _empty


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
