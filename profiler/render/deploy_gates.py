"""`perf gate --latency` and `perf gate --config`: their JSON verdicts and text lines."""

from __future__ import annotations

from typing import Any

import orjson

from profiler.model.redact import redact


def latency_dict(result: Any) -> dict[str, Any]:
    """perf.latency_gate v1: passed, metric, value (the ratio new/base - 1), the means (ns), the
    budget (percent), the 95% interval, the rule, the candidate, kept runs, notes, and the whole
    perf.gate document it was judged from."""
    from profiler.render.json import gate_doc

    g, w = result.gate, result.wall
    return {
        "schema": "perf.latency_gate",
        "schema_version": 1,
        "passed": result.passed,
        "metric": f"{w.name}: latency per inference (ProfilerStep), ratio = mean(candidate) / mean(baseline) - 1",
        "value": w.ratio,
        "base_mean_ns": w.base_mean_ns,
        "new_mean_ns": w.new_mean_ns,
        "interval": [w.low, w.high],
        "budget_pct": g.max_regression,
        "mode": w.mode,
        "candidate": result.candidate,
        "candidate_runs": list(result.traces),
        "notes": list(result.notes),
        "gate": gate_doc(list(g.verdicts), g.max_regression, g.tolerance, list(g.runs), g.statistical, g.method),
    }


def latency_json(result: Any) -> bytes:
    return orjson.dumps(redact(latency_dict(result)), option=orjson.OPT_INDENT_2) + b"\n"


def latency_line(result: Any) -> str:
    w = result.wall
    verdict = "PASS" if result.passed else "FAIL"
    return (
        f"{verdict}: {result.candidate} latency per inference {w.new_mean_ns / 1e3:.4g} µs against the baseline's "
        f"{w.base_mean_ns / 1e3:.4g} µs ({w.ratio:+.1%}, 95% interval {w.low:+.1%}..{w.high:+.1%}); "
        f"budget +{result.gate.max_regression:g}% ({w.mode})"
    )


def pipeline_json(result: Any) -> bytes:
    """perf.gate_pipeline v1: passed, the config, the candidate, seconds per stage, and each gate's
    verdict (perf.accuracy_gate, perf.latency_gate) or null when the file has none."""
    from profiler.render.numerics import accuracy_gate_dict

    acc = accuracy_gate_dict(*result.accuracy) if result.accuracy is not None else None
    doc = {
        "schema": "perf.gate_pipeline",
        "schema_version": 1,
        "passed": result.passed,
        "config": result.config,
        "candidate": result.candidate,
        "seconds": result.seconds,
        "accuracy": acc,
        "latency": latency_dict(result.latency) if result.latency is not None else None,
    }
    return orjson.dumps(redact(doc), option=orjson.OPT_INDENT_2) + b"\n"


def _trial(result: Any, t: Any) -> dict[str, Any]:
    return {
        "plan": result.plan(t),
        "latency_ns": t.time_ns,
        "rel_error": t.accuracy_error,
        "within_budget": t.ok and t.accuracy_error is not None and t.accuracy_error <= result.budget,
        "failure": t.failure,
        "seq": t.seq,
    }


def split_json(result: Any) -> bytes:
    """perf.split v1: budget, candidate, layers searched, strategy, best (a plan: {module: 'fp32'},
    the rest int8; latency_ns, rel_error) or null, front (latency ascending), trials (as stored), notes."""
    doc = {
        "schema": "perf.split",
        "schema_version": 1,
        "passed": result.best is not None,
        "budget": result.budget,
        "candidate": result.candidate,
        "layers": list(result.layers),
        "strategy": result.strategy,
        "best": _trial(result, result.best) if result.best is not None else None,
        "front": [_trial(result, t) for t in result.front],
        "trials": [_trial(result, t) for t in result.trials],
        "notes": list(result.notes),
    }
    return orjson.dumps(redact(doc), option=orjson.OPT_INDENT_2) + b"\n"


def split_table(result: Any, out: Any) -> None:
    """The plans tried (fp32 layers, latency, error; * on the front), then the best."""
    from rich.table import Table

    on_front = {t.seq for t in result.front}
    table = Table(title=f"{result.candidate}: plans tried ({result.strategy}), budget rel_error <= {result.budget:g}")
    for col in ("#", "layers kept in fp32", "latency µs", "rel_error", "front"):
        table.add_column(col, justify="left" if col.startswith("layers") else "right")
    for t in result.trials:
        lat = f"{t.time_ns / 1e3:.4g}" if t.ok else f"failed: {t.failure}"
        err = f"{t.accuracy_error:.3g}" if t.accuracy_error is not None else "-"
        table.add_row(
            str(t.seq), ", ".join(result.plan(t)) or "(none: all int8)", lat, err, "*" if t.seq in on_front else ""
        )
    out.print(table)
    for n in result.notes:
        out.print(f"note: {n}", markup=False)
    b = result.best
    if b is None:
        out.print(f"FAIL: no plan meets rel_error <= {result.budget:g}", markup=False)
    else:
        kept = ", ".join(result.plan(b)) or "none"
        out.print(
            f"PASS: best plan keeps {kept} in fp32: latency {b.time_ns / 1e3:.4g} µs, rel_error {b.accuracy_error:.3g}",
            markup=False,
        )
