"""`perf diff --numerics` and `perf gate --accuracy` output: a per-layer table, or JSON
(schemas perf.numerics and perf.accuracy_gate, version 1, docs/deploy.md).

JSON has no infinity: an SQNR of +inf (the candidate equals the reference) is written as null,
and so is a rel_error of inf (a zero reference with a non-zero candidate).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from profiler.model.redact import redact


def _num(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else x


def layer_dict(layer: Any) -> dict[str, Any]:
    return {
        "name": layer.name,
        "op": layer.op,
        "rel_error": _num(layer.rel_error),
        "max_abs_error": _num(layer.max_abs_error),
        "cosine": _num(layer.cosine),
        "sqnr_db": _num(layer.sqnr_db),
    }


def numerics_dict(report: Any) -> dict[str, Any]:
    return {
        "reference": report.reference,
        "candidate": report.candidate,
        "threshold": report.threshold,
        "layers": [layer_dict(x) for x in report.layers],
        "first_diverging": layer_dict(report.first_diverging) if report.first_diverging else None,
        "output": layer_dict(report.output),
        "largest_growth": [{"name": n, "ratio": _num(r)} for n, r in report.growth],
        "notes": list(report.notes),
    }


def numerics_json(report: Any) -> bytes:
    doc = {"schema": "perf.numerics", "schema_version": 1, **numerics_dict(report)}
    return orjson.dumps(redact(doc), option=orjson.OPT_INDENT_2) + b"\n"


def accuracy_gate_json(report: Any, budget: float, passed: bool) -> bytes:
    return orjson.dumps(redact(accuracy_gate_dict(report, budget, passed)), option=orjson.OPT_INDENT_2) + b"\n"


def accuracy_gate_dict(report: Any, budget: float, passed: bool) -> dict[str, Any]:
    """perf.accuracy_gate v1 (perf gate --config nests it)."""
    return {
        "schema": "perf.accuracy_gate",
        "schema_version": 1,
        "passed": passed,
        "metric": (
            f"{report.metric[0]} (the user's task metric on the model outputs)"
            if report.metric
            else "rel_error of the model output (normwise, against eager fp32)"
        ),
        "value": _num(report.metric[1] if report.metric else report.output.rel_error),
        "budget": budget,
        "first_diverging": layer_dict(report.first_diverging) if report.first_diverging else None,
        "numerics": numerics_dict(report),
    }


def render_numerics(report: Any, out: Any) -> None:
    """The per-layer table in network order, then the verdict lines."""
    from rich.table import Table

    t = Table(title=f"{report.candidate} against {report.reference}, per layer (network order)")
    for col in ("layer", "op", "rel_error", "max_abs_error", "cosine", "SQNR dB"):
        t.add_column(col, justify="left" if col in ("layer", "op") else "right")
    for x in report.layers:
        mark = " <" if report.first_diverging is not None and x.name == report.first_diverging.name else ""
        t.add_row(
            x.name + mark, x.op, f"{x.rel_error:.3g}", f"{x.max_abs_error:.3g}", f"{x.cosine:.6f}", f"{x.sqnr_db:.1f}"
        )
    out.print(t)
    o = report.output
    out.print(f"output: rel_error {o.rel_error:.3g}, SQNR {o.sqnr_db:.1f} dB, cosine {o.cosine:.6f}", markup=False)
    f = report.first_diverging
    out.print(
        f"first diverging (rel_error > {report.threshold:g}): {f.name} ({f.op}), rel_error {f.rel_error:.3g}"
        if f
        else f"no layer's rel_error exceeds {report.threshold:g}",
        markup=False,
    )
    if report.growth:
        out.print("largest error growth: " + ", ".join(f"{n} x{r:.3g}" for n, r in report.growth), markup=False)
    for note in report.notes:
        out.print(f"note: {note}", markup=False)
