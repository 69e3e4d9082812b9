"""Every `--json` document: `perf analyze` (perf.analyze, the versioned JSON form of an
`Analysis`), `perf diff` (perf.diff), `perf gate` (perf.gate), `perf profile --compare-compile`
(perf.compare_compile) and `perf compile-report` (perf.compile_report).

The schemas are described in docs/json-schema.md; bump a SCHEMA_VERSION on any change to it.
Every string that came from the trace passes through `redact` on the way out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pandas as pd

from profiler import __version__
from profiler.api import Analysis
from profiler.model.redact import redact, redact_text

SCHEMA = "perf.analyze"
SCHEMA_VERSION = 8  # 2: roofline fields; 3: timeline (streams, communication, launches, iterations); 4: advice;
#                    5: ops[].memory_level, critical_path, memory, llm, modules; 6: verdict, idle_gaps;
#                    7: counters (perf analyze --counters: the perf.counters document);
#                    8: stragglers, collectives, cross_rank (multi-rank traces)


def to_dict(a: Analysis, metadata: dict[str, Any]) -> dict[str, Any]:
    ov = a.overview
    dt = a.device_time
    label = [f"rank{r}/{d}" for r, d in zip(dt["rank"], dt["device"])]
    devices = [
        {k: (int(v) if k != "device" else str(v)) for k, v in row.items()} for row in dt.to_dict(orient="records")
    ]
    ops = [_op(row) for frame in (a.top_ops, a.top_kernels) for row in frame.to_dict(orient="records")]
    out = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "verdict": _verdict(a.verdict),
        "trace": {
            "framework": ov.framework,
            "files": list(ov.files),
            "ranks": list(ov.ranks),
            "world_size": ov.world_size,
            "devices": [{"rank": r, "device": d, "name": n} for r, d, n in ov.devices],
            "start_ns": ov.start_ns,
            "end_ns": ov.end_ns,
            "events_by_kind": dict(ov.events_by_kind),
            "steps": list(ov.steps),
        },
        "summary": {
            "wall_ns": ov.wall_ns,
            "busy_ns": dict(zip(label, map(int, dt["busy_ns"]))),
            "idle_ns": dict(zip(label, map(int, dt["idle_ns"]))),
            "devices": devices,
            "hardware": a.hardware,
            "hardware_notes": list(a.hardware_notes),
            "whatif_dtype": a.whatif_dtype,
            "whatif": records(a.whatif) if hasattr(a, "whatif") else [],
            "equation": [_equation(row) for row in a.equation.to_dict(orient="records")],
            "utilization": [
                {k: (_num(v) if not isinstance(v, str) else v) for k, v in row.items()}
                for row in a.utilization.to_dict(orient="records")
            ],
            "above_floor": _above_floor(a),
            "by_bound": _by(a.by_bound, "bound"),
            "by_family": _by(a.by_family, "family"),
            "by_dtype": _by(a.by_dtype, "dtype"),
        },
        "timeline": {
            "streams": records(a.streams),
            "communication": records(a.communication),
            "launches": records(a.launches),
            "iterations": records(a.iterations),
        },
        "advice": [
            {
                "kind": x.kind,
                "title": x.title,
                "saving_ns": float(x.saving_ns),
                "evidence": x.evidence,
                "formula": x.formula,
                "units": list(x.units),
                "assumption": x.assumption,
                "count": x.count,
                "devices": list(x.devices),
            }
            for x in a.advice
        ],
        "critical_path": [_critical_path(cp) for cp in a.critical_path],
        "memory": {"devices": records(a.memory), "kv_cache": records(a.kv_cache)},
        "llm": {"phases": records(a.llm_phases), "summary": records(a.llm_summary)},
        "modules": records(a.modules),
        "idle_gaps": _idle(a),
        "unknown": {"share": _num(a.unknown_share), "top": records(a.unknown)},  # analysis.unknown
        "ops": ops,
        "counters": _counters(a),
        **_cross_rank(a),
        "problems": _problems(a),
        "metadata": metadata,
    }
    return redact(out)


#: The short forms `stragglers` and `collectives` carry (docs/json-schema.md); `cross_rank` has every column.
STRAGGLER_KEYS = ("rank", "delay_ns", "collectives")
COLLECTIVE_KEYS = ("name", "bytes", "wait_ns", "transfer_ns", "bus_bandwidth")


def _cross_rank(a: Analysis) -> dict[str, Any]:
    """`stragglers` and `collectives` (one object per collective instance), and `cross_rank`: the
    whole tables (analysis.cross_rank); empty lists on a one-rank trace."""
    full: dict[str, Any] = {
        "ranks": records(a.rank_summary),
        "instances": records(a.collectives),
        "comm_matrix": _matrix(a.comm_matrix),
        "stragglers": records(a.stragglers),
    }
    return {
        "stragglers": [{k: row[k] for k in STRAGGLER_KEYS} for row in full["stragglers"]],
        "collectives": [{k: row[k] for k in COLLECTIVE_KEYS} for row in full["instances"]],
        "cross_rank": full,
    }


def _matrix(m: Any) -> dict[str, Any]:
    """comm_matrix as {ranks, bytes}: bytes[i][j] sent ranks[i] -> ranks[j] (0 when none known);
    dense, as n^2 records would be five times larger on 1,024 ranks."""
    if m.empty:
        return {"ranks": [], "bytes": []}
    ranks = sorted(set(m["src"].tolist()) | set(m["dst"].tolist()))
    grid = m.pivot_table(index="src", columns="dst", values="bytes", aggfunc="sum").reindex(index=ranks, columns=ranks)
    return {"ranks": ranks, "bytes": [[_num(v) or 0.0 for v in row] for row in grid.to_numpy()]}


def _counters(a: Analysis) -> dict[str, Any] | None:
    """perf analyze --counters: the perf.counters document (profiler.render.counters); else null."""
    if getattr(a, "counters", None) is None:
        return None
    from profiler.render.counters import counters_dict

    return counters_dict(a.counters)


def _verdict(v: Any) -> dict[str, Any] | None:
    """analysis.verdict.Verdict: the bound, its share of the summed windows, every bound's
    share, the evidence and the actions (null when nothing was classified)."""
    if v is None:
        return None
    return {
        "bound": v.bound,
        "label": v.label,
        "share": float(v.share),
        "window_ns": int(v.window_ns),
        "scope": v.scope,
        "shares": [{"bound": b, "label": lab, "time_ns": int(t), "share": float(sh)} for b, lab, t, sh in v.shares],
        "evidence": list(v.evidence),
        "path_agrees": v.path_agrees,
        "actions": [
            {
                "title": x.title,
                "saving_ns": float(x.saving_ns),
                "lever": x.lever,
                "assumption": x.assumption,
                "source": x.source,
            }
            for x in v.actions
        ],
    }


def _idle(a: Analysis) -> dict[str, Any]:
    """analysis.idle_gaps.IdleGaps: by category per device, the largest gaps, the host work in them."""
    g = a.idle
    if g is None:
        return {"by_category": [], "top_gaps": [], "activity": []}
    return {
        "by_category": records(g.by_category),
        "top_gaps": records(g.top_gaps),
        "activity": records(g.activity.head(50)),
    }


def _above_floor(a: Analysis) -> dict[str, int]:
    """Units measured more than 10% faster than their floor (analysis.ceiling), by bound: the
    floor's assumptions did not hold (docs/roofline.md: data served from a cache, a convolution
    run with Winograd)."""
    u = a.units
    if u.empty or "efficiency" not in u:
        return {}
    fast = u[u["above_ceiling"].to_numpy(dtype=bool)] if "above_ceiling" in u else u[u["efficiency"] > 1.1]
    return {str(k): int(v) for k, v in fast["bound"].value_counts().items()}


def _problems(a: Analysis) -> dict[str, int]:
    """Problem reasons quote the trace (an unknown category's name); redact() keeps dict keys."""
    out: dict[str, int] = {}
    for reason, n in a.problems.counts.items():
        key = redact_text(reason)
        out[key] = out.get(key, 0) + int(n)
    return out


def _op(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": row["name"],
        "kind": row["kind"],
        "shapes": row["shapes"],
        "count": int(row["count"]),
        "total_ns": int(row["total_ns"]),
        "mean_ns": int(row["mean_ns"]),
        "device_ns": int(row["device_ns"]),
        "share": float(row["share"]),
    } | _roofline(row)


def _num(v: Any) -> float | None:
    """JSON has no NaN or infinity: unknown (or unbounded) numbers are null."""
    return None if v is None or not np.isfinite(v) else float(v)


def _roofline(row: dict[str, Any]) -> dict[str, Any]:
    """The roofline fields of an op row (absent for kernels, which are costed through their op)."""
    if row.get("kind") != "op" or "bound" not in row:
        return {}
    return {
        "family": row.get("family") if isinstance(row.get("family"), str) else "unknown",
        "dtype": row.get("dtype") if isinstance(row.get("dtype"), str) else "unknown",
        "flops": _num(row.get("flops_effective")),
        "flops_dense": _num(row.get("flops")),
        "bytes": _num(row.get("bytes")),
        "intensity": _num(row.get("intensity")),
        "floors": {k: _num(row.get(f"t_{k}_ns")) for k in ("compute", "memory", "comm", "runtime")},
        "memory_level": row.get("memory_level") if isinstance(row.get("memory_level"), str) else "",
        "floor_ns": _num(row.get("floor_ns")),
        "unit_time_ns": _num(row.get("time_ns")),
        "bound": row["bound"] if isinstance(row["bound"], str) else "unknown",
        # above the ceiling (analysis.ceiling) the ratio is no efficiency: null, with the likely cause
        "efficiency": None if _true(row.get("above_ceiling")) else _num(row.get("efficiency")),
        "above_ceiling": _true(row.get("above_ceiling")),
        "ceiling_note": row.get("ceiling_note") if isinstance(row.get("ceiling_note"), str) else "",
        "algo_bytes": _num(row.get("algo_bytes")),  # a collective's bytes sent per rank (docs/roofline.md)
        "algo_bw": _num(row.get("algo_bw")),  # its achieved bus bandwidth, byte/s
        "enqueue": bool(row.get("enqueue") is True),  # a c10d:: op that only enqueues the backend's work
    }


def _true(v: Any) -> bool:
    """A bool column's value as a bool (NaN where a merge found no row: False)."""
    return isinstance(v, (bool, np.bool_)) and bool(v)


def _equation(row: dict[str, Any]) -> dict[str, Any]:
    bound = {k[:-3]: int(row[k]) for k in ("compute_ns", "memory_ns", "communication_ns", "runtime_ns", "unknown_ns")}
    idle = {k[5:-3]: int(row[k]) for k in ("idle_host_ns", "idle_sync_ns", "idle_other_ns")}
    return {
        "rank": int(row["rank"]),
        "device": str(row["device"]),
        "window_ns": int(row["window_ns"]),
        "busy_ns": int(row["busy_ns"]),
        "bound_ns": bound,
        "idle_ns": idle,
    }


#: The longest stretches of each critical path listed in the JSON (the whole path can be long).
PATH_SEGMENTS = 50


def _critical_path(cp: Any) -> dict[str, Any]:
    seg = cp.segments
    longest = seg.nlargest(PATH_SEGMENTS, "dur_ns").sort_values("start_ns") if len(seg) else seg
    return {
        "rank": int(cp.rank),
        "length_ns": int(cp.length_ns),
        "wall_ns": int(cp.wall_ns),
        "work_ns": int(cp.work_ns),
        "on_host_ns": int(cp.on_host_ns),
        "on_device_ns": int(cp.on_device_ns),
        "waiting_ns": int(cp.waiting_ns),
        "verdict": cp.verdict,
        "by_class": {str(c): int(t) for c, t in zip(cp.by_class["class"], cp.by_class["time_ns"])},
        "segments": len(seg),
        "longest_segments": records(longest),
    }


def records(frame: Any) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: numpy numbers as Python ones, NaN as null."""
    return [{k: _value(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _value(v: Any) -> Any:
    if isinstance(v, str) or v is None:
        return v
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, float):  # numpy float64 is a float too
        return _num(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, dict):
        return {str(k): _value(x) for k, x in v.items()}
    return None if v is pd.NA or v is pd.NaT else str(v)


def _by(frame: Any, key: str) -> list[dict[str, Any]]:
    return [
        {key: str(r[key]), "units": int(r["units"]), "time_ns": int(r["time_ns"]), "share": float(r["share"])}
        for r in frame.to_dict(orient="records")
    ]


def to_json(a: Analysis, metadata: dict[str, Any]) -> bytes:
    return orjson.dumps(to_dict(a, metadata), option=orjson.OPT_INDENT_2) + b"\n"


def gate_json(
    verdicts: list[Any], max_regression: float, tolerance: float, runs: list[int], statistical: bool, method: str
) -> bytes:
    """`perf gate --json`: schema perf.gate v2 (docs/json-schema.md): `mode` bootstrap (3 runs a side or
    more) or tolerance (fewer), `test` says which rule judged."""
    doc = gate_doc(verdicts, max_regression, tolerance, runs, statistical, method)
    return orjson.dumps(redact(doc), option=orjson.OPT_INDENT_2) + b"\n"


def gate_doc(
    verdicts: list[Any], max_regression: float, tolerance: float, runs: list[int], statistical: bool, method: str
) -> dict[str, Any]:
    """The perf.gate v2 document (gate_json's body; perf gate --latency nests it)."""
    return {
        "schema": "perf.gate",
        "schema_version": 2,
        "max_regression_pct": max_regression,
        "tolerance_pct": tolerance,
        "runs": runs,
        "mode": "bootstrap" if statistical else "tolerance",
        "test": method,
        "regression": any(v.regression for v in verdicts),
        "verdicts": [v.__dict__ | {"samples": list(v.samples)} for v in verdicts],
    }


def compare_compile_json(result: Any) -> bytes:
    """`perf profile --compare-compile --json`: schema perf.compare_compile v1."""
    doc = {
        "schema": "perf.compare_compile",
        "schema_version": 1,
        "steps": result.steps,
        "eager_step_ns": result.eager_step_ns,
        "compiled_step_ns": result.compiled_step_ns,
        "compiled": result.compiled_ok,
        "messages": list(result.messages),
        "groups": records(result.groups.drop(columns=["eager_event_ids"], errors="ignore")),
    }
    return orjson.dumps(redact(doc), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n"


def compile_report_json(report: Any) -> bytes:
    """`perf compile-report --json`: schema perf.compile_report v1, the document a trace file
    carries in its 'perfCompile' field (profiler.api.compile_report_doc, redacted there)."""
    from profiler.api import compile_report_doc

    return orjson.dumps(compile_report_doc(report), option=orjson.OPT_INDENT_2) + b"\n"


def diff_json(a: str, b: str, busy: list[int], changes: Any, setup: Any = None) -> bytes:
    """`perf diff --json`: schema perf.diff v2 (docs/json-schema.md); v2 adds `setup`
    (analysis.diff.SetupDiff: like_for_like, reasons, fields)."""
    doc = {
        "schema": "perf.diff",
        "schema_version": 2,
        "tool_version": __version__,
        "a": a,
        "b": b,
        "setup": None
        if setup is None
        else {"like_for_like": setup.like_for_like, "reasons": list(setup.reasons), "fields": records(setup.rows)},
        "busy_ns": {"a": busy[0], "b": busy[1]},
        "changes": records(changes),
    }
    return orjson.dumps(redact(doc), option=orjson.OPT_INDENT_2) + b"\n"
