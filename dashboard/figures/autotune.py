"""The autotune figures of a trials database (profiler/autotune/report.trials_document): the best
time so far against trials stored, one line per study and strategy, and every passed trial as a
point of time against accuracy error."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from dashboard.figures.common import _empty

#: The smallest error the log axis shows: a trial that matched its reference exactly (error 0)
#: is drawn there (its hover says 0).
ERROR_FLOOR = 1e-12


def best_so_far_figure(studies: list[tuple[str, dict[str, Any]]]) -> go.Figure:
    """x = trials stored by a strategy (the baseline first), y = the best time so far (us);
    `studies`: (label, study) with the study's `curves` {strategy: [(trials, best_ns)]}."""
    fig = go.Figure()
    for label, s in studies:
        for strategy, curve in s["curves"].items():
            if curve:
                fig.add_trace(
                    go.Scatter(
                        x=[n for n, _ in curve],
                        y=[t / 1e3 for _, t in curve],
                        mode="lines+markers",
                        line={"shape": "hv"},
                        name=f"{label}: {strategy}",
                    )
                )
    if not fig.data:
        return _empty("Best so far", "no trial passed its check")
    fig.update_layout(
        title="Best time so far per strategy",
        xaxis_title="trials stored (baseline = 1)",
        yaxis_title="best time so far (us)",
        margin={"t": 40, "l": 60, "r": 10, "b": 40},
    )
    return fig


def trials_figure(studies: list[tuple[str, dict[str, Any]]]) -> go.Figure:
    """Every passed trial: x = time (us), y = accuracy error (log; 0 drawn at ERROR_FLOOR), one
    trace per study and strategy; the best of each study a star."""
    fig = go.Figure()
    for label, s in studies:
        ok = [t for t in s["trials"] if t["time_ns"] is not None]
        for strategy in dict.fromkeys(t["strategy"] for t in ok):
            mine = [t for t in ok if t["strategy"] == strategy]
            fig.add_trace(
                go.Scatter(
                    x=[t["time_ns"] / 1e3 for t in mine],
                    y=[max(t["accuracy_error"] or 0.0, ERROR_FLOOR) for t in mine],
                    mode="markers",
                    name=f"{label}: {strategy}",
                    text=[f"trial {t['seq']} {t['candidate_hash'][:12]} error {t['accuracy_error']}" for t in mine],
                    hoverinfo="text+x",
                )
            )
        best = (s["summary"] or {}).get("best")
        if best:
            fig.add_trace(
                go.Scatter(
                    x=[best["time_ns"] / 1e3],
                    y=[max(best["accuracy_error"] or 0.0, ERROR_FLOOR)],
                    mode="markers",
                    marker={"symbol": "star", "size": 16, "line": {"width": 1}},
                    name=f"{label}: best",
                )
            )
    if not fig.data:
        return _empty("Trials", "no trial passed its check")
    fig.update_layout(
        title="Trials: time against accuracy error",
        xaxis_title="time (us)",
        yaxis_title="relative error against the reference",
        yaxis_type="log",
        margin={"t": 40, "l": 60, "r": 10, "b": 40},
    )
    return fig
