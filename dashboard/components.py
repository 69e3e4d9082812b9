"""Small shared pieces of the pages: number formats, simple tables, the error box, error capture."""

from __future__ import annotations

import math
import os
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from dash import html

from profiler.model.errors import InputError
from profiler.model.redact import redact_text


def fmt_ns(ns: float | None) -> str:
    """A duration: '812 ns', '3.25 µs', '14.1 ms', '2.04 s'."""
    if ns is None or (isinstance(ns, float) and not math.isfinite(ns)):
        return "–"
    v = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} ns"


def fmt_si(v: float | None, unit: str = "") -> str:
    """A quantity with an SI prefix: 3.2 TFLOP/s, 1.5 GB."""
    if v is None or not math.isfinite(float(v)):
        return "–"
    v = float(v)
    for p, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {p}{unit}"
    return f"{v:.3g} {unit}".strip()


def fmt_pct(v: float | None) -> str:
    return "–" if v is None or not math.isfinite(float(v)) else f"{100 * float(v):.3g}%"


def kv_table(rows: Iterable[tuple[str, Any]], id: str | None = None) -> html.Table:
    """A two-column table of label, value (values are shown as text, redacted)."""
    body = [html.Tr([html.Th(k), html.Td(redact_text(str(v)))]) for k, v in rows]
    return html.Table(html.Tbody(body), className="kv", **({"id": id} if id else {}))


def grid(header: Sequence[str], rows: Iterable[Sequence[Any]], id: str | None = None) -> html.Table:
    """A plain table with a header row; cells shown as redacted text."""
    return html.Table([html.Thead(html.Tr([html.Th(h) for h in header])),
                       html.Tbody([html.Tr([html.Td(redact_text(str(c))) for c in r]) for r in rows])],
                      className="grid", **({"id": id} if id else {}))


def error_box(message: str, id: str | None = None) -> html.Div:
    return html.Div(redact_text(message), className="error", role="alert", **({"id": id} if id else {}))


def problem_text(e: BaseException, label: str | None = None) -> str:
    """One line for the page: 'path: problem' for bad input, 'internal error (...)' otherwise."""
    if isinstance(e, InputError):
        where = label or (str(e.path) if e.path else "")
        return redact_text(f"{where}: {e.problem}" if where else e.problem)
    return redact_text(f"internal error ({type(e).__name__}: {e})")


def guarded(on_error: Callable[[str], Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a callback: an exception becomes `on_error(one line)`, so the page shows it and
    the server keeps serving. PERF_DEBUG=1 prints the traceback on the server's stderr."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: Any) -> Any:
            try:
                return fn(*args)
            except Exception as e:
                from dash.exceptions import PreventUpdate

                if isinstance(e, PreventUpdate):
                    raise
                if os.environ.get("PERF_DEBUG"):
                    traceback.print_exc()
                return on_error(problem_text(e))

        inner.__name__ = fn.__name__
        inner.__doc__ = fn.__doc__
        return inner

    return wrap


def op_details(r: Any) -> html.Table:
    """The numbers behind one op_table row."""
    return kv_table([
        ("op", r["name"]), ("shapes", r["shapes"] or "–"), ("family / dtype", f"{r['family']} / {r['dtype']}"),
        ("calls", int(r["count"])), ("time", fmt_ns(r["time_ns"])), ("FLOPs (effective)", fmt_si(r["flops_effective"], "FLOP")),
        ("bytes", fmt_si(r["bytes"], "B")), ("intensity", f"{r['intensity']:.3g} FLOP/B"),
        ("achieved", fmt_si(r["achieved_flops"], "FLOP/s")),
        ("floors", (f"compute {fmt_ns(r['t_compute_ns'])}, memory {fmt_ns(r['t_memory_ns'])}, "
                    f"comm {fmt_ns(r['t_comm_ns'])}, runtime {fmt_ns(r['t_runtime_ns'])}")),
        ("bound", r["bound"]), ("efficiency (floor / time)", f"{r['efficiency']:.3f}" if r["efficiency"] == r["efficiency"] else "–"),
    ], id="op-details")
