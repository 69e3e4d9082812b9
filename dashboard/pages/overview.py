"""Overview: what was profiled; wall, busy and idle per device; the bound breakdown; MFU/MBU; top advice."""

from __future__ import annotations

import json
from typing import Any

from dash import Dash, Input, Output, dcc, html

from dashboard import figures, tables
from dashboard.components import error_box, fmt_ns, fmt_pct, grid, guarded, kv_table
from dashboard.store import TraceStore
from profiler.model.redact import redact_text

PATH = "/"
TITLE = "Overview"


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div([html.H2("Overview"), dcc.Loading(html.Div(id="overview-body"))], id="page-overview")


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(Output("overview-body", "children"), Input("trace-select", "value"), Input("hardware", "data"))
    @guarded(lambda msg: error_box(msg, id="overview-error"))
    def render(tid: str | None, hardware: str | None) -> list:
        def build() -> list:
            entry = store.entry(tid)
            a = store.analysis(tid, hardware)
            files = [entry.label] if entry and entry.uploaded else None  # an upload's file name is ours, not the user's
            return body(a, entry.label if entry else "", store.trace(tid).metadata, hardware or "", files)

        return store.answer(tid, hardware, "overview", None, build)


def verdict_block(a: Any) -> html.Div:
    """The verdict first (analysis.verdict, computed once by the API): the bound and its share of
    wall time, every bound's share, the evidence and the top three actions."""
    v = a.verdict
    if v is None:
        return html.Div(html.P("No verdict: nothing was classified."), id="overview-verdict")
    split = " · ".join(f"{label} {fmt_pct(share)}" for _, label, _, share in v.shares if share >= 0.005)
    return html.Div(
        [
            html.H3(f"Verdict: {v.label} bounds this run — {fmt_pct(v.share)} of {fmt_ns(v.window_ns)} on {v.scope}"),
            html.P(f"Time by bound: {split}"),
            html.Ul([html.Li(redact_text(e)) for e in v.evidence]),
            html.Ol(
                [
                    html.Li(
                        [
                            html.B(redact_text(x.title)),
                            f" — saves at most {fmt_ns(x.saving_ns)}. ",
                            html.Span(redact_text("; ".join(p for p in (x.lever, x.assumption) if p))),
                        ]
                    )
                    for x in v.actions
                ]
            ),
        ],
        id="overview-verdict",
        className="verdict",
    )


def body(a: Any, label: str, metadata: dict, hardware: str = "", files: list[str] | None = None) -> list:
    """The page's content for one Analysis (facade.Analysis); `hardware`: the what-if preset, if any."""
    ov = a.overview
    kinds = ", ".join(f"{k} {n:,}" for k, n in ov.events_by_kind[:8])
    what = kv_table(
        [
            ("trace", label),
            ("source", ov.framework),
            ("files", ", ".join(files if files is not None else (f.rsplit("/", 1)[-1] for f in ov.files))),
            ("ranks", ", ".join(map(str, ov.ranks)) + (f" (world size {ov.world_size})" if ov.world_size else "")),
            (
                "devices",
                "; ".join(
                    f"rank{r}/{d} {n} -> {a.hardware.get(f'rank{r}/{d}', '') or 'no spec'}" for r, d, n in ov.devices
                ),
            ),
            ("span", fmt_ns(ov.wall_ns)),
            ("events", kinds),
            ("iterations", len(ov.steps)),
            (
                "floored on",
                f"{hardware} (what-if, chosen on the Roofline page)"
                if hardware
                else "the specs matched from the trace",
            ),
        ],
        id="overview-what",
    )
    dev = tables.device_summary(a)
    devices = grid(
        ["device", "hardware", "wall", "busy", "idle", "MFU", "MBU", "MFU / MBU over"],
        [
            (
                r.device,
                r.hardware,
                fmt_ns(r.wall_ns),
                fmt_ns(r.busy_ns),
                fmt_ns(r.idle_ns),
                fmt_pct(r.mfu),
                fmt_pct(r.mbu),
                r.mfu_over,
            )
            for r in dev.itertuples(index=False)
        ],
        id="overview-devices",
    )
    bounds = grid(
        ["bound", "units", "time", "share"],
        [(r.bound, r.units, fmt_ns(r.time_ns), fmt_pct(r.share)) for r in a.by_bound.itertuples(index=False)],
        id="overview-bounds",
    )
    advice = (
        html.Ol(
            [
                html.Li(
                    [
                        html.B(redact_text(x.title)),
                        f" — saves about {fmt_ns(x.saving_ns)}. ",
                        html.Span(redact_text(x.evidence)),
                        html.Br(),
                        html.Code(x.formula),
                    ]
                )
                for x in a.advice[:5]
            ],
            id="overview-advice",
        )
        if a.advice
        else html.P("No advice: nothing with a saving was found.")
    )
    problems = a.problems.lines() if a.problems else []
    meta = json.dumps(metadata.get("ranks", {}), indent=1, default=str)[:20_000]  # redacted when the trace was loaded
    out = [
        verdict_block(a),
        html.H3("What was profiled"),
        what,
        html.H3("Devices: wall = busy + idle"),
        devices,
        dcc.Graph(
            id="overview-equation",
            figure=figures.equation_figure(tables.equation_long(a.equation)),
            config={"displaylogo": False},
        ),
        html.H3("Time by bound"),
        bounds,
    ]
    steps = a.iterations[a.iterations["step"] >= 0] if len(a.iterations) else a.iterations
    if len(steps) and steps.groupby(["rank", "device"]).size().max() > 1:
        out.append(dcc.Graph(id="overview-iterations", figure=figures.iterations_figure(steps, a.utilization)))
    elif len(steps):  # one step per device: a chart of one point says less than a sentence
        out.append(
            html.P(
                "One profiled step: "
                + "; ".join(
                    f"rank{r.rank}/{r.device} step {r.step}: MFU {fmt_pct(r.mfu)}, MBU {fmt_pct(r.mbu)} "
                    f"over its wall time {fmt_ns(r.wall_ns)}"
                    for r in steps.itertuples(index=False)
                )
                + ".",
                id="overview-iterations",
            )
        )
    out += [html.H3("What to change first"), advice]
    if problems:
        out += [html.H3("Problems met while reading"), html.Ul([html.Li(p) for p in problems])]
    out.append(html.Details([html.Summary("Trace metadata (secrets redacted)"), html.Pre(meta, id="overview-meta")]))
    return out
