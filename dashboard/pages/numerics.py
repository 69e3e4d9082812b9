"""Numerics: error per layer along the network, from `perf dashboard --numerics FILE` (a
`perf diff --numerics --json` document, or a `perf gate --accuracy --json` / `--config --json`
one that holds it; profiler.api.deploy.read_numerics). Per layer in network order: rel_error
(log scale) with the threshold, SQNR in dB, the first diverging layer marked."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from dash import Dash, Input, Output, dcc, html

from dashboard.components import error_box, grid, guarded
from dashboard.store import TraceStore

PATH = "/numerics"
TITLE = "Numerics"
NO_DATA = (
    "No numerical diff loaded: run `perf diff --numerics MODEL --candidate BACKEND[:PRECISION] --json > n.json` "
    "and start with `perf dashboard --numerics n.json`."
)


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div([html.H2("Numerics per layer"), dcc.Loading(html.Div(id="numerics-body"))], id="page-numerics")


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(Output("numerics-body", "children"), Input("url", "pathname"))
    @guarded(lambda msg: error_box(msg, id="numerics-error"))
    def render(path: str | None) -> list:
        return body(getattr(store, "numerics", None))


def error_figure(doc: dict[str, Any]) -> go.Figure:
    """x: the layers in network order; y (log): rel_error, the threshold as a dashed line, the
    first diverging layer in red; SQNR (dB) on the right axis."""
    layers = doc["layers"]
    names = [x["name"] for x in layers]
    rel = [x["rel_error"] if x["rel_error"] is not None else float("nan") for x in layers]
    first = (doc.get("first_diverging") or {}).get("name")
    colors = ["#c0392b" if n == first else "#1f77b4" for n in names]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=names, y=rel, mode="lines+markers", name="rel_error", marker={"color": colors, "size": 9})
    )
    sqnr = [x["sqnr_db"] for x in layers]
    fig.add_trace(
        go.Scatter(x=names, y=sqnr, mode="lines", name="SQNR dB", yaxis="y2", line={"dash": "dot", "color": "#7f7f7f"})
    )
    fig.add_hline(y=doc["threshold"], line_dash="dash", line_color="#c0392b", annotation_text="threshold")
    fig.update_layout(
        title=f"{doc.get('candidate', '')} against {doc.get('reference', '')}: error per layer",
        xaxis_title="layer (network order)",
        yaxis={"title": "rel_error (normwise)", "type": "log"},
        yaxis2={"title": "SQNR dB", "overlaying": "y", "side": "right"},
        margin={"t": 40},
    )
    return fig


def _num(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)  # JSON has no infinity: null stands for it


def body(doc: dict[str, Any] | None) -> list:
    """The page's content for a perf.numerics document (or the how-to when none was given)."""
    if doc is None:
        return [html.P(NO_DATA, id="numerics-empty")]
    first = doc.get("first_diverging")
    out = doc.get("output") or {}
    caption = (
        f"first diverging (rel_error > {doc['threshold']:g}): "
        + (f"{first['name']} ({first['op']}), rel_error {first['rel_error']:.3g}" if first else "none")
        + (f"; output rel_error {out['rel_error']:.3g}" if out.get("rel_error") is not None else "")
        + ". "
        + " ".join(doc.get("notes") or [])
    )
    rows = [
        (
            x["name"] + (" <" if first and x["name"] == first["name"] else ""),
            x["op"],
            _num(x["rel_error"], ".3g"),
            _num(x["max_abs_error"], ".3g"),
            _num(x["cosine"], ".6f"),
            "exact" if x["sqnr_db"] is None else _num(x["sqnr_db"], ".1f"),
        )
        for x in doc["layers"]
    ]
    return [
        html.P(caption, className="caption", id="numerics-caption"),
        dcc.Graph(id="numerics-figure", figure=error_figure(doc)),
        grid(("layer", "op", "rel_error", "max_abs_error", "cosine", "SQNR dB"), rows, id="numerics-table"),
    ]
