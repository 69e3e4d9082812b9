"""Small shared pieces of the pages: number formats, simple tables, the error box, error capture."""

from __future__ import annotations

import math
import os
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from dash import html

from profiler.model.errors import InputError
from profiler.model.numfmt import fmt_ns, fmt_si  # noqa: F401  (the one number format, re-exported to the pages)
from profiler.model.redact import redact_text


def fmt_pct(v: float | None) -> str:
    return "–" if v is None or not math.isfinite(float(v)) else f"{100 * float(v):.3g}%"


def _id(id: str | None) -> dict[str, Any]:
    """`id=` for a component only when given (Dash tells an absent id from None)."""
    return {"id": id} if id else {}


def kv_table(rows: Iterable[tuple[str, Any]], id: str | None = None) -> html.Table:
    """A two-column table of label, value (values are shown as text, redacted)."""
    body = [html.Tr([html.Th(k), html.Td(redact_text(str(v)))]) for k, v in rows]
    return html.Table(html.Tbody(body), className="kv", **_id(id))


def grid(header: Sequence[str], rows: Iterable[Sequence[Any]], id: str | None = None) -> html.Table:
    """A plain table with a header row; cells shown as redacted text."""
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(h) for h in header])),
            html.Tbody([html.Tr([html.Td(redact_text(str(c))) for c in r]) for r in rows]),
        ],
        className="grid",
        **_id(id),
    )


def error_box(message: str, id: str | None = None) -> html.Div:
    return html.Div(redact_text(message), className="error", role="alert", **_id(id))


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


# --- what the browser sends: checked before use, so junk gets a message, never an HTTP 500 ------


def as_text(value: Any, what: str) -> str:
    """A string input ('' for None); anything else is refused with a message naming `what`."""
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 10_000:
        raise InputError(None, f"{what}: expected a short text, got {type(value).__name__}")
    return value


def as_int(value: Any, what: str, default: int, lo: int = 0, hi: int = 10**9) -> int:
    """A whole number in [lo, hi] (`default` for None); bools, fractions and text are refused."""
    if value is None:
        return default
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not number or value != int(value):
        raise InputError(None, f"{what}: expected a whole number, got {value!r:.40}")
    n = int(value)
    if not lo <= n <= hi:
        raise InputError(None, f"{what}: {n} is outside {lo}..{hi}")
    return n


def as_selection(value: Any) -> dict[str, str] | None:
    """The selected-op store: None, or {'name': str, 'shapes': str}; anything else is refused."""
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("name"), str)
        or not isinstance(value.get("shapes", ""), str)
    ):
        raise InputError(None, "selected op: expected {'name': text, 'shapes': text}")
    return {"name": value["name"], "shapes": value.get("shapes", "")}


def as_dict(value: Any, what: str) -> dict:
    """A dict input ({} for None); anything else is refused."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(None, f"{what}: expected an object, got {type(value).__name__}")
    return value


def op_details(r: Any) -> html.Table:
    """The numbers behind one op_table row."""
    return kv_table(
        [
            ("op", r["label"] if "label" in r else r["name"]),
            ("shapes", r["shapes"] or "–"),
            ("family / dtype", f"{r['family']} / {r['dtype']}"),
            ("calls", int(r["count"])),
            (
                "time",
                fmt_ns(r["time_ns"])
                + (f" (total {fmt_ns(r['total_ns'])})" if "total_ns" in r and r["total_ns"] != r["time_ns"] else ""),
            ),
            ("FLOPs (effective)", fmt_si(r["flops_effective"], "FLOP")),
            ("bytes", fmt_si(r["bytes"], "B")),
            ("intensity", f"{r['intensity']:.3g} FLOP/B"),
            ("achieved", fmt_si(r["achieved_flops"], "FLOP/s")),
            (
                "floors",
                (
                    f"compute {fmt_ns(r['t_compute_ns'])}, memory {fmt_ns(r['t_memory_ns'])}, "
                    f"comm {fmt_ns(r['t_comm_ns'])}, runtime {fmt_ns(r['t_runtime_ns'])}"
                ),
            ),
            ("bound", r["bound"]),
            (
                "efficiency (floor / time)",
                r.get("ceiling_note")
                if r.get("above_ceiling") is True or r.get("above_ceiling") == 1
                else f"{r['efficiency']:.3f}"
                if r["efficiency"] == r["efficiency"]
                else "–",
            ),
        ],
        id="op-details",
    )
