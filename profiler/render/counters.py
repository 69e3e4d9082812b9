"""`perf counters` and the counters section of `perf analyze --counters`: text (Rich tables) and
the JSON document (schema perf.counters, docs/json-schema.md "perf counters")."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler import __version__
from profiler.model.demangle import demangle_many
from profiler.model.numfmt import fmt_bytes, fmt_ns, fmt_si
from profiler.model.redact import redact, redact_text

SCHEMA, SCHEMA_VERSION = "perf.counters", 1
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
LEVELS = ("dram", "l2", "l1", "lds")


def _num(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**63 else f


def _kernels(report: Any) -> list[dict[str, Any]]:
    """One object per launch: name, launch, occurrence, device, duration_ns (null when unknown),
    flops by precision (matrix + vector, as measured), flops_by_unit, bytes by level, the
    roofline's utilisation, recorded utilisation, the trace event it joined, and the raw counters."""
    kc = report.counters
    raw: dict[int, dict[str, Any]] = {}
    for r in kc.rows.itertuples(index=False):
        entry: dict[str, Any] = {"value": _num(r.value), "unit": r.unit}
        if r.unit_recorded and r.unit_recorded != r.unit:
            entry["unit_recorded"] = r.unit_recorded
        if r.text:
            entry["text"] = r.text
        raw.setdefault(int(r.launch), {})[r.counter] = entry
    roof = report.roofline.set_index("launch") if len(report.roofline) else None
    rec = report.recorded.set_index("launch")
    joined = report.joined.set_index("launch") if len(report.joined) else None
    out = []
    for row in report.measured.to_dict(orient="records"):
        launch = int(row["launch"])
        flops: dict[str, Any] = {}
        by_unit: dict[str, dict[str, Any]] = {"matrix": {}, "vector": {}}
        for p in PRECISIONS:
            parts = [row[f"flops_{u}_{p}"] for u in ("matrix", "vector")]
            for u, v in zip(("matrix", "vector"), parts):
                if v == v and v is not None:
                    by_unit[u][p] = _num(v)
            known = [v for v in parts if v == v and v is not None]
            if known:
                flops[p] = _num(sum(known))
        k: dict[str, Any] = {
            "name": row["kernel"],
            "launch": launch,
            "occurrence": int(row["occurrence"]),
            "device": row["device"],
            "duration_ns": _num(row["duration_ns"]),
            "duration_from": row["duration_from"] or None,
            "flops": flops,
            "flops_by_unit": by_unit,
            "bytes": {lv: _num(row[f"bytes_{lv}"]) for lv in LEVELS if row[f"bytes_{lv}"] == row[f"bytes_{lv}"]},
            "occupancy_pct": _num(row["occupancy_pct"]),
            "recorded_pct": {c[:-4]: _num(v) for c, v in rec.loc[launch].items() if v == v},
        }
        if roof is not None:
            rr = roof.loc[launch]
            k["roofline"] = {c: _num(rr[c]) for c in roof.columns if c not in ("kernel",)}
        if launch in report.tiles:
            k["tiles"] = report.tiles[launch]
        if joined is not None:
            j = joined.loc[launch]
            k["trace_event"] = _num(j["event_id"]) if j["event_id"] >= 0 else None
            k["matched_by"] = j["matched_by"] or None
        k["counters"] = raw.get(launch, {})
        out.append(k)
    return out


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _num(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def counters_dict(report: Any) -> dict[str, Any]:
    """The perf.counters document (also the `counters` section of perf analyze --json)."""
    kc = report.counters
    return redact(
        {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "tool_version": __version__,
            "source": kc.source,
            "path": kc.path,
            "launches": len(kc.launches),
            "counters": int(kc.rows["counter"].nunique()) if len(kc.rows) else 0,
            "skipped": dict(kc.skipped),
            "timeline": kc.info.get("timeline", {}),
            "hardware": report.hardware or None,
            "notes": list(report.notes),
            "join": report.join or None,
            "kernels": _kernels(report),
            "compare": _records(report.compare) if len(report.compare) else [],
            "findings": [
                {"kind": f.kind, "unit_id": int(f.unit_id), "name": f.name, "message": f.message}
                for f in report.findings
            ],
        }
    )


def counters_json(report: Any) -> bytes:
    return orjson.dumps(counters_dict(report), option=orjson.OPT_INDENT_2) + b"\n"


def _t(s: str) -> str:
    return escape(redact_text(s))


def render_counters(report: Any, console: Console, top: int = 20) -> None:
    """The counters as text: where they came from, per kernel name the measured FLOPs, bytes and
    roofline (means over launches), then, with a trace, the join and the comparison with the model."""
    kc = report.counters
    m = report.measured
    if kc.source == "perf-stat":
        console.print(f"[bold]CPU counters[/] (Linux perf stat): {_t(kc.path)}: {kc.rows['counter'].nunique()} events")
        _render_process(kc, console)
        return
    skipped = "".join(f"; {n} {why} skipped" for why, n in kc.skipped.items())
    console.print(
        f"[bold]Hardware counters[/] ({kc.source}): {_t(kc.path)}: {len(kc.launches)} launches of "
        f"{kc.launches['kernel'].nunique()} kernels, {kc.rows['counter'].nunique()} counters{skipped}"
    )
    tl = kc.info.get("timeline") or {}
    if tl:
        console.print(
            f"timeline (timestamps.csv) joined by dispatch: {tl['matched']} matched, "
            f"{tl['counters_only']} counter rows without timeline, {tl['timeline_only']} timeline rows without counters"
        )
    for n in report.notes:
        console.print(f"[dim]{_t(n)}[/]")
    table = Table(box=box.SIMPLE, title="Measured per kernel (mean per launch; from counters)", title_justify="left")
    for c in (
        "kernel",
        "launches",
        "time",
        "FLOPs by precision",
        "DRAM",
        "L2",
        "L1",
        "TFLOP/s",
        "% peak",
        "DRAM %",
        "bound",
        "occ %",
    ):
        if c == "kernel":
            table.add_column(c, no_wrap=True, overflow="ellipsis", max_width=60)
        else:
            table.add_column(c, justify="left" if c in ("FLOPs by precision", "bound") else "right")
    roof = report.roofline.set_index("launch") if len(report.roofline) else None
    keys = list(dict.fromkeys(m["kernel"]))
    names = dict(zip(keys, demangle_many(keys)))
    groups = m.groupby("kernel", sort=False)
    # the kernels that took longest first; without durations (CUPTI ranges), the most FLOPs first
    key = "duration_ns" if m["duration_ns"].notna().any() else "flops"
    order = groups[key].sum().sort_values(ascending=False).index[:top]
    for kernel in order:
        g = groups.get_group(kernel)
        mean = g.mean(numeric_only=True)
        prec = []
        for p in PRECISIONS:
            v = sum(
                mean.get(f"flops_{u}_{p}", float("nan")) or 0
                for u in ("matrix", "vector")
                if mean.get(f"flops_{u}_{p}") == mean.get(f"flops_{u}_{p}")
            )
            if v:
                prec.append(f"{p} {fmt_si(v)}")
        r = roof.loc[g["launch"]] if roof is not None else None
        cell = lambda col, fmt: fmt(r[col].mean()) if r is not None and r[col].notna().any() else "-"  # noqa: E731
        table.add_row(
            _t(names.get(kernel, kernel)),
            str(len(g)),
            fmt_ns(mean["duration_ns"]) if mean["duration_ns"] == mean["duration_ns"] else "-",
            ", ".join(prec) or "0",
            fmt_bytes(mean["bytes_dram"]) if mean["bytes_dram"] == mean["bytes_dram"] else "-",
            fmt_bytes(mean["bytes_l2"]) if mean["bytes_l2"] == mean["bytes_l2"] else "-",
            fmt_bytes(mean["bytes_l1"]) if mean["bytes_l1"] == mean["bytes_l1"] else "-",
            cell("achieved_flops_per_s", lambda v: f"{v / 1e12:.3g}"),
            cell("compute_pct", lambda v: f"{v:.1f}"),
            cell("dram_pct", lambda v: f"{v:.1f}"),
            r["bound"].mode().iloc[0] if r is not None and (r["bound"] != "").any() else "-",
            f"{mean['occupancy_pct']:.1f}" if mean["occupancy_pct"] == mean["occupancy_pct"] else "-",
        )
    console.print(table)
    if report.tiles:
        seen = set()
        for launch, text in report.tiles.items():
            k = m.loc[m["launch"] == launch, "kernel"].iloc[0]
            if k not in seen:
                seen.add(k)
                console.print(f"tiles: {_t(names.get(k, k))[:60]}: {text}")
    console.print("[dim]bound: the unit closest to its peak, from measured counters (analysis/measured_roofline.py)[/]")
    render_comparison(report, console, top)


def _render_process(kc: Any, console: Console) -> None:
    """Linux perf stat's events of the whole process (no kernels, no FLOPs): the raw counts."""
    t = Table(box=box.SIMPLE, title="CPU counters of the process (Linux perf stat)", title_justify="left")
    for col in ("event", "value", "unit"):
        t.add_column(col, justify="right" if col == "value" else "left")
    for r in kc.rows.itertuples(index=False):
        value = r.text if r.text else (fmt_ns(r.value) if r.unit == "ns" else f"{r.value:,.0f}")
        t.add_row(_t(r.counter), value, r.unit if not r.text else "")
    console.print(t)
    if (kc.rows["text"] == "<not supported>").any():
        console.print(
            "[dim]<not supported>: the kernel or the VM exposes no hardware PMU to this process; "
            "software events still count[/]"
        )


def render_comparison(report: Any, console: Console, top: int = 20) -> None:
    """The join to the trace and the measured-vs-modelled table, with the findings."""
    if not report.join:
        return
    j = report.join
    by = ", ".join(f"{n} by {how}" for how, n in j["by"].items()) or "none"
    console.print(
        f"joined to the trace: {j['matched']} of {j['counter_launches']} counter launches ({by}); "
        f"{j['counters_unmatched']} counter launches and {j['trace_unmatched']} trace kernels unmatched"
    )
    for name, n in (j.get("unmatched_names") or {}).items():
        console.print(f"  [dim]unmatched: {n} x {_t(name)}[/]")
    c = report.compare
    if len(c):
        t = Table(box=box.SIMPLE, title="Measured vs modelled per op", title_justify="left")
        for col in (
            "op",
            "kernels",
            "FLOPs model",
            "FLOPs measured",
            "ratio",
            "tensor share",
            "DRAM model",
            "DRAM measured",
            "ratio ",
        ):
            t.add_column(col, justify="left" if col == "op" else "right")
        fr = lambda v: f"{v:.4g}" if v == v else "-"  # noqa: E731
        for r in c.sort_values("flops_measured", ascending=False).head(top).itertuples():
            t.add_row(
                _t(f"{r.name} {r.shapes}")[:60],
                str(r.launches),
                fmt_si(r.flops_model) if r.flops_model == r.flops_model else "-",
                fmt_si(r.flops_measured) if r.flops_measured == r.flops_measured else "-",
                fr(r.flops_ratio),
                f"{r.matrix_share:.0%}" if r.matrix_share == r.matrix_share else "-",
                fmt_bytes(r.bytes_dram_model) if r.bytes_dram_model == r.bytes_dram_model else "-",
                fmt_bytes(r.bytes_dram_measured) if r.bytes_dram_measured == r.bytes_dram_measured else "-",
                fr(r.bytes_ratio),
            )
        console.print(t)
    for f in report.findings[:top]:
        console.print(f"[bold]{f.kind}[/]: {_t(f.name)}: {_t(f.message)}")
