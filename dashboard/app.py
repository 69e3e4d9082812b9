"""The Dash app: a header (trace picker, upload, page links), a simple router, and the pages.

`create_app(paths)` registers the traces (hashing their files; nothing is parsed until a page
asks) and returns a Dash app whose callbacks are bound to it alone, so several apps can live in
one process (tests). `serve(...)` runs it, on 127.0.0.1 unless told otherwise.

Uploads: a client-side check refuses a file over the cap before it is sent; the server checks
again (TraceStore.add_upload), and Flask refuses any request larger than the cap's base64 size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update

from dashboard.components import error_box, problem_text
from dashboard.pages import (
    compare,
    compiler,
    counters,
    llm,
    memory,
    numerics,
    ops,
    overview,
    ranks,
    roofline,
    timeline,
    trials,
)
from dashboard.store import DEFAULT_UPLOAD_CAP, TraceStore, safe_label

PAGES = (overview, roofline, timeline, ops, compare, memory, llm, compiler, counters, ranks, numerics, trials)

CSS = """
body { font-family: system-ui, sans-serif; margin: 0; }
header { background: #1f2937; color: #fff; padding: 8px 16px; display: flex; gap: 16px; \
align-items: center; flex-wrap: wrap; }
header a { color: #cfe3ff; text-decoration: none; margin-right: 10px; }
header a:hover { text-decoration: underline; }
main { padding: 8px 16px; }
.caption { color: #555; font-size: 13px; margin: 4px 0; }
.error { background: #fde0dc; color: #8a1c12; border: 1px solid #e0a39b; padding: 6px 10px; margin: 6px 0; }
table.kv th { text-align: left; padding-right: 12px; vertical-align: top; font-weight: 600; }
table.grid { border-collapse: collapse; } \
table.grid td, table.grid th { border: 1px solid #ddd; padding: 3px 8px; font-size: 13px; }
#upload { border: 1px dashed #9ca3af; padding: 4px 10px; cursor: pointer; border-radius: 4px; }
pre { max-height: 300px; overflow: auto; background: #f6f6f6; padding: 6px; }
"""

# Runs in the browser: refuse a file over the cap before its bytes travel; else hand it on.
_CHECK_UPLOAD = """
function(contents, filename, cap) {
    const nu = window.dash_clientside.no_update;
    if (!contents) { return [nu, nu]; }
    const bytes = Math.floor((contents.length - contents.indexOf(',') - 1) * 3 / 4);
    if (bytes > cap) {
        const mib = (x) => (x / 1048576).toFixed(1);
        return [nu, filename + ': file is about ' + mib(bytes) + ' MiB; the upload limit is ' + mib(cap) + \
' MiB (perf dashboard --max-upload-mb)'];
    }
    return [{filename: filename, contents: contents}, 'reading ' + filename + ' ...'];
}
"""


def create_app(
    paths: Sequence[str | Path] = (),
    *,
    upload_cap: int = DEFAULT_UPLOAD_CAP,
    store: TraceStore | None = None,
    compile_report: Any = None,
    counters_report: Any = None,
    numerics: dict[str, Any] | None = None,
    trials: Sequence[dict] = (),
) -> Dash:
    """A Dash app over `paths` (trace files or directories). Bad paths raise InputError.
    `compile_report` (profiler.api.compile_report of a TORCH_TRACE directory) feeds the compiler page;
    `counters_report` (profiler.api.counters_report) the counters page; `numerics` (a perf.numerics
    document, profiler.api.deploy.read_numerics) the numerics page; `trials` (documents of trials
    databases, perf dashboard --trials) the autotune page."""
    store = store or TraceStore(upload_cap=upload_cap)
    if compile_report is not None:
        store.compile_report = compile_report
    if counters_report is not None:
        store.counters_report = counters_report
    if numerics is not None:
        store.numerics = numerics
    if trials:
        store.trials_docs = list(trials)
    for p in paths:
        store.add_path(p)
    app = Dash(
        __name__, title="perf dashboard", suppress_callback_exceptions=True, update_title=None, serve_locally=True
    )
    app.server.config["MAX_CONTENT_LENGTH"] = store.upload_cap * 4 // 3 + 4 * 2**20  # base64 + the request's JSON
    app.index_string = app.index_string.replace("{%css%}", "{%css%}<style>" + CSS + "</style>")
    app.layout = lambda: _layout(store)  # a function: the trace list is read per page load, nothing at import
    _register(app, store)
    for page in PAGES:
        page.register(app, store)
    app.perf_store = store  # type: ignore[attr-defined]  # tests and the CLI reach the store through the app
    return app


def _options(store: TraceStore) -> list[dict[str, str]]:
    return [{"label": e.label + (" (uploaded)" if e.uploaded else ""), "value": e.trace_id} for e in store.entries()]


def _layout(store: TraceStore) -> html.Div:
    opts = _options(store)
    return html.Div(
        [
            dcc.Location(id="url"),
            dcc.Store(id="hardware", data=""),
            dcc.Store(id="selected-op", data=None),
            dcc.Store(id="upload-cap", data=store.upload_cap),
            dcc.Store(id="upload-payload"),
            html.Header(
                [
                    html.B("perf dashboard"),
                    html.Nav(
                        [dcc.Link(p.TITLE, href=p.PATH, id=f"nav-{p.__name__.rsplit('.', 1)[-1]}") for p in PAGES]
                    ),
                    dcc.Dropdown(
                        id="trace-select",
                        options=opts,
                        value=opts[0]["value"] if opts else None,
                        clearable=False,
                        placeholder="no trace loaded",
                        style={"width": "360px", "color": "#000"},
                    ),
                    dcc.Upload(id="upload", children=html.Span("Upload a trace (.json, .json.gz)"), multiple=False),
                ]
            ),
            html.Div(id="upload-msg", role="status"),
            html.Main(id="page"),
        ]
    )


def _register(app: Dash, store: TraceStore) -> None:
    @app.callback(
        Output("page", "children"), Input("url", "pathname"), State("hardware", "data"), State("selected-op", "data")
    )
    def route(path: str | None, hardware: str | None, selected: dict | None) -> Any:
        state = {"hardware": hardware if isinstance(hardware, str) else "", "selected": selected}
        path = path if isinstance(path, str) else ""
        for page in PAGES:
            if (path or "/") == page.PATH:
                return page.layout(state)
        return html.Div([html.H2("Not found"), html.P(f"No page at {path[:200]!r}.")])

    app.clientside_callback(
        _CHECK_UPLOAD,
        Output("upload-payload", "data"),
        Output("upload-msg", "children"),
        Input("upload", "contents"),
        State("upload", "filename"),
        State("upload-cap", "data"),
    )

    @app.callback(
        Output("trace-select", "options"),
        Output("trace-select", "value"),
        Output("upload-msg", "children", allow_duplicate=True),
        Output("upload", "contents"),
        Input("upload-payload", "data"),
        prevent_initial_call=True,
    )
    def upload(payload: dict | None) -> tuple:
        if not payload:
            return no_update, no_update, no_update, no_update
        if not isinstance(payload, dict) or not isinstance(payload.get("contents"), str):
            return (
                no_update,
                no_update,
                error_box("upload: expected a file's name and its contents", id="upload-error"),
                None,
            )
        name = str(payload.get("filename") or "upload")
        try:
            tid = store.add_upload(name, str(payload.get("contents") or ""))
        except Exception as e:  # noqa: BLE001 - any failure is shown in the page; the server keeps serving
            return no_update, no_update, error_box(problem_text(e, safe_label(name)), id="upload-error"), None
        entry = store.entry(tid)
        return (
            _options(store),
            tid,
            html.Div(f"loaded {entry.label if entry else name}", id="upload-ok", className="caption"),
            None,
        )


def warm(store: TraceStore, tid: str) -> None:
    """Build what the first pages need for one trace (analysis, op table, timeline index) and one
    figure of each kind (plotly loads its validators on first use), so first renders are quick."""
    from dashboard import figures, tables
    from dashboard.timeline_data import window
    from dashboard.views import ops_for, timeline_for
    from profiler.model.hardware import load_spec

    a = store.analysis(tid)
    ops = ops_for(store, tid, None)
    index = timeline_for(store, tid)
    figures.timeline_figure(window(index))  # the whole span: buckets on a big trace
    figures.timeline_figure(window(index, 0, 1))  # a 1 ns window: bars
    spec = next((load_spec(n) for n in a.hardware.values() if n), None)
    if spec is not None:
        figures.roofline_figure(tables.roofline_points(ops), tables.ceilings(spec, []))
    figures.equation_figure(tables.equation_long(a.equation))


def serve(
    paths: Sequence[str | Path] = (),
    *,
    host: str = "127.0.0.1",
    port: int = 8050,
    upload_cap: int = DEFAULT_UPLOAD_CAP,
    warm_up: bool = True,
    compile_report: Any = None,
    max_bytes: int | None = None,
    counters_report: Any = None,
    numerics: dict[str, Any] | None = None,
    trials: Sequence[dict] = (),
) -> None:
    """Run the dashboard until interrupted (Ctrl+C, SIGINT or SIGTERM); uploads are deleted on
    every exit. `warm_up` parses and analyzes the given traces in the background (see `warm`), so
    the first pages are quick. `max_bytes` bounds each trace file read (profiler.model.files)."""
    import sys
    import threading

    store = TraceStore(upload_cap=upload_cap, max_bytes=max_bytes)
    app = create_app(
        paths,
        store=store,
        compile_report=compile_report,
        counters_report=counters_report,
        numerics=numerics,
        trials=trials,
    )
    if warm_up:

        def _warm() -> None:
            for e in store.entries():
                try:
                    warm(store, e.trace_id)
                except Exception as exc:  # noqa: BLE001 - the page shows the problem when it asks
                    print(f"perf dashboard: {problem_text(exc, e.label)}", file=sys.stderr)

        threading.Thread(target=_warm, daemon=True, name="perf-dashboard-warm").start()
    try:
        with _exit_on_sigterm():
            app.run(host=host, port=port, debug=False)
    finally:
        store.close()


@contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    """SIGTERM (what `kill`, systemd and container runtimes send) ends the server as Ctrl+C does,
    through the `finally` that deletes the uploads; by default it would kill the process outright.
    SIGINT gets the same handler: Python installs its Ctrl+C handler only when the parent left
    SIGINT at its default, and a dashboard started from a process that ignores it (a background
    job of a script, a test worker) would otherwise ignore SIGINT and keep the uploads."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # signal handlers live in the main thread
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
