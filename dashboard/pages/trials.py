"""Autotune: the trials databases given to `perf dashboard --trials DB` (perf autotune --db):
per study the best time so far per strategy, every trial as a point of time against accuracy
error, and the winning plan (its choices, its time against the baseline's, per kernel). The
databases are read by the CLI (profiler.autotune.report.trials_document, read-only) and handed
to the app as plain documents."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html

from dashboard.components import error_box, fmt_ns, grid, guarded, kv_table
from dashboard.figures.autotune import best_so_far_figure, trials_figure
from dashboard.store import TraceStore

PATH = "/trials"
TITLE = "Autotune"
NO_DATA = (
    "No trials database loaded: start with `perf dashboard --trials trials.sqlite` (written by perf autotune --db)."
)
KERNELS_SHOWN = 20


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div([html.H2("Autotune trials"), dcc.Loading(html.Div(id="trials-body"))], id="page-trials")


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(Output("trials-body", "children"), Input("url", "pathname"))
    @guarded(lambda msg: error_box(msg, id="trials-error"))
    def render(path: str | None) -> list:
        return body(getattr(store, "trials_docs", None))


def _label(doc: dict[str, Any], s: dict[str, Any], many: bool) -> str:
    name = f"{s['model']} ({s['runner']})"
    return f"{doc['path'].rsplit('/', 1)[-1]}: {name}" if many else name


def body(docs: list[dict[str, Any]] | None) -> list:
    """The page's content for the trials documents (or the how-to when none was given)."""
    if not docs:
        return [html.P(NO_DATA, id="trials-empty")]
    many = len(docs) > 1
    studies = [(_label(d, s, many), s) for d in docs for s in d["studies"]]
    if not studies:
        return [html.P(f"{', '.join(d['path'] for d in docs)}: no study stored yet", id="trials-empty")]
    out: list = [
        html.P(
            f"{len(studies)} studies in {len(docs)} database(s); "
            f"{sum(len(s['trials']) for _, s in studies)} trials, "
            f"{sum(s['summary']['failed'] for _, s in studies)} failed (never a winner).",
            className="caption",
            id="trials-source",
        ),
        dcc.Graph(id="trials-best-so-far", figure=best_so_far_figure(studies), config={"displaylogo": False}),
        dcc.Graph(id="trials-points", figure=trials_figure(studies), config={"displaylogo": False}),
    ]
    for i, (label, s) in enumerate(studies):
        out += _winner(label, s, i)
    return out


def _winner(label: str, s: dict[str, Any], i: int) -> list:
    """The winning plan of one study: its choices, time, error and speedup, then per kernel."""
    doc = s["summary"]
    best, base = doc.get("best"), doc.get("baseline")
    head = html.H3(f"{label} on {s['hardware']}: winning plan")
    if not best:
        return [head, html.P("no trial passed its check", id=f"trials-winner-{i}")]
    rows = [
        ("candidate", best["candidate_hash"][:16]),
        ("trial", best["seq"]),
        ("time", fmt_ns(best["time_ns"])),
        ("baseline", fmt_ns(base["time_ns"]) if base and base["time_ns"] is not None else "failed"),
        ("speedup", f"{doc['speedup']:.3f}x" if doc.get("speedup") else "-"),
        ("accuracy error", f"{best['accuracy_error']:.3g}" if best["accuracy_error"] is not None else "-"),
        ("found by", best["finding"] or "-"),
    ]
    spread = best.get("spread")
    if spread:
        rows.append(("spread", f"IQR {fmt_ns(spread['iqr_ns'])}, min {fmt_ns(spread['min_ns'])}, "
                     f"max {fmt_ns(spread['max_ns'])} ({spread['repeats']} repeats)"))  # fmt: skip
    choices = [(k, str(v)) for k, v in best["candidate"].items()] or [("(all)", "the compiler's own plan")]
    kernels = [
        (
            r["kernel"][:80],
            fmt_ns(r["baseline_ns"]) if r["baseline_ns"] is not None else "-",
            fmt_ns(r["tuned_ns"]) if r["tuned_ns"] is not None else "-",
            f"{r['speedup']:.2f}x" if r["speedup"] else "-",
            r["changed"],
        )
        for r in doc["kernels"][:KERNELS_SHOWN]
    ]
    return [
        head,
        kv_table(rows, id=f"trials-winner-{i}"),
        html.H4("Choices (those that differ from the baseline)"),
        grid(["dimension", "option"], choices, id=f"trials-plan-{i}"),
        html.H4("Per kernel, baseline against the winner"),
        grid(["kernel", "baseline", "tuned", "speedup", "changed"], kernels, id=f"trials-kernels-{i}"),
    ]
