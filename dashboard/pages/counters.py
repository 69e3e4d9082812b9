"""Counters: the hardware counters given to `perf dashboard --counters FILE_OR_DIR` (Nsight
Compute, rocprof, CUPTI): the measured hierarchical roofline per kernel and the per-kernel table
of measured FLOPs, bytes, utilisation and bound (profiler.api.counters_report). All from the
counters; the roofs are the preset's (`--hardware`, else the device the file names)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from dash import Dash, Input, Output, dcc, html

from dashboard.components import error_box, fmt_ns, fmt_si, grid, guarded
from dashboard.figures.counters import measured_roofline_figure
from dashboard.store import TraceStore
from profiler.model.hardware import load_spec

PATH = "/counters"
TITLE = "Counters"
NO_DATA = (
    "No hardware counters loaded: start with `perf dashboard --counters FILE_OR_DIR` (ncu --csv output, a "
    "rocprof-compute workload folder, a rocprofv3 counter CSV or a Kineto trace with CUPTI counters)."
)


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div([html.H2("Hardware counters"), dcc.Loading(html.Div(id="counters-body"))], id="page-counters")


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(Output("counters-body", "children"), Input("url", "pathname"))
    @guarded(lambda msg: error_box(msg, id="counters-error"))
    def render(path: str | None) -> list:
        return body(getattr(store, "counters_report", None))


def per_kernel(report: Any) -> pd.DataFrame:
    """The roofline rows averaged per kernel name, most time first."""
    r = report.roofline
    if r.empty:
        return r
    g = r.groupby("kernel", sort=False)
    out = g.mean(numeric_only=True)
    out["launches"] = g.size()
    out["total_ns"] = g["duration_ns"].sum()
    out["bound"] = g["bound"].agg(lambda s: s.mode().iloc[0] if len(s.mode()) else "")
    out["precision"] = g["precision"].first()
    return out.reset_index().sort_values("total_ns", ascending=False)


def body(report: Any) -> list:
    """The page's content for a CountersReport (or the how-to when none was given)."""
    if report is None:
        return [html.P(NO_DATA, id="counters-empty")]
    kc = report.counters
    caption = (
        f"{kc.source}: {kc.path}: {len(kc.launches)} launches of {kc.launches['kernel'].nunique()} kernels, "
        f"{kc.rows['counter'].nunique()} counters. " + " ".join(report.notes)
    )
    if report.roofline.empty:
        return [html.P(caption, className="caption", id="counters-source")]
    from profiler.api import counter_spec_level

    spec = load_spec(report.hardware)
    roofs = []
    for level in ("dram", "l2", "l1", "lds"):
        m = counter_spec_level(spec, level)
        if m is not None:
            roofs.append((f"{level} ({m.name})", m.bandwidth))
    k = per_kernel(report)
    r = report.roofline
    peaks = sorted(
        {(f"{p} {u}", float(v)) for p, u, v in zip(r["precision"], r["unit"], r["peak_flops_per_s"]) if p and v == v}
    )
    fig = measured_roofline_figure(k, roofs, peaks, f"Measured roofline on {spec.name} (from counters)")
    rows = [
        (
            r.kernel[:90],
            r.launches,
            fmt_ns(r.duration_ns),
            fmt_si(r.flops, "FLOP"),
            f"{r.compute_pct:.1f}%" if r.compute_pct == r.compute_pct else "-",
            f"{r.dram_pct:.1f}%" if r.dram_pct == r.dram_pct else "-",
            f"{r.l2_pct:.1f}%" if r.l2_pct == r.l2_pct else "-",
            r.bound,
            f"{r.occupancy_pct:.1f}%" if r.occupancy_pct == r.occupancy_pct else "-",
        )
        for r in k.itertuples(index=False)
    ]
    return [
        html.P(caption, className="caption", id="counters-source"),
        dcc.Graph(id="counters-roofline", figure=fig, config={"displaylogo": False}, style={"height": "560px"}),
        html.H3("Per kernel (mean per launch)"),
        grid(
            ["kernel", "launches", "time", "FLOPs", "compute", "DRAM", "L2", "bound (measured)", "occupancy"],
            rows,
            id="counters-table",
        ),
    ]
