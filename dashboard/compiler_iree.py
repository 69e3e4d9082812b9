"""The Compiler page's sections for a trace `perf profile --backend iree` wrote (its `perfIree`
report, profiler.api.iree.iree_report): the compile by pass, nested as the pass managers nest,
the dispatch regions (fused linalg ops, source locations, FLOPs, bytes, mean run, floor, bound),
and eager PyTorch beside IREE by source line."""

from __future__ import annotations

import math
from typing import Any

from dash import html

from dashboard.components import fmt_ns, fmt_pct, fmt_si, grid
from profiler.api.iree import short_location

#: pass rows shown: the tree down to this depth, and within each node its largest children
DEPTH = 3
CHILDREN = 8


def iree_sections(doc: dict[str, Any]) -> list:
    """The three sections (module docstring)."""
    return [*_passes(doc), *_dispatches(doc), *_compare(doc)]


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _passes(doc: dict[str, Any]) -> list:
    total, rest = _num(doc.get("compiler_total_ns")), _num(doc.get("compiler_rest_ns"))
    rows: list[tuple] = []

    def add(node: dict, depth: int) -> None:
        wall = _num(node.get("wall_ns"))
        rows.append(("\u00a0\u00a0" * depth + str(node.get("name", "")), fmt_ns(wall), fmt_pct(wall / total)))
        if depth + 1 < DEPTH:
            kids = [c for c in node.get("children") or [] if isinstance(c, dict)]
            for c in sorted(kids, key=lambda c: -_num(c.get("wall_ns")))[:CHILDREN]:
                add(c, depth + 1)

    roots = [r for r in doc.get("passes") or [] if isinstance(r, dict)]
    for r in sorted(roots, key=lambda r: -_num(r.get("wall_ns"))):
        add(r, 0)
    rows.append(("(rest: under no pass timer)", fmt_ns(rest), fmt_pct(rest / total)))
    return [
        html.H3("IREE compile by pass"),
        html.P(
            f"iree-compile {fmt_ns(_num(doc.get('compile_ns')))} wall; the compiler's Total {fmt_ns(total)} = the "
            f"passes below + rest (docs/iree.md: how dynamic pipelines are nested).",
            className="caption",
            id="compiler-iree-total",
        ),
        grid(["pass", "wall", "share of Total"], rows, id="compiler-iree-passes"),
    ]


def _dispatches(doc: dict[str, Any]) -> list:
    rows = []
    for d in doc.get("dispatches") or []:
        if not isinstance(d, dict):
            continue
        rows.append(
            (
                d.get("name", ""),
                " + ".join(str(op).split(" ", 1)[0] for op in d.get("fused_ops") or []),
                ", ".join(short_location(str(loc)) for loc in d.get("locations") or []) or "–",
                fmt_si(_num(d.get("flops")), "FLOP"),
                fmt_si(_num(d.get("bytes")), "B"),
                fmt_ns(_num(d.get("mean_ns"))),
                fmt_ns(_num(d.get("floor_ns"))),
                d.get("bound") or "–",
                fmt_pct(_num(d.get("efficiency"))),
            )
        )
    return [
        html.H3(f"IREE dispatch regions on {doc.get('hardware') or 'the CPU'}"),
        grid(
            ["dispatch", "fused ops", "from", "FLOPs", "bytes", "mean", "floor", "bound", "efficiency"],
            rows,
            id="compiler-iree-dispatches",
        ),
    ]


def _compare(doc: dict[str, Any]) -> list:
    rows = []
    for r in doc.get("compare") or []:
        if not isinstance(r, dict):
            continue
        ratio = _num(r.get("ratio"))
        rows.append(
            (
                short_location(str(r.get("location", ""))),
                r.get("modules") or "–",
                fmt_ns(_num(r.get("eager_ns"))),
                fmt_ns(_num(r.get("iree_ns"))),
                f"{ratio:.2f}x" if math.isfinite(ratio) else "–",
            )
        )
    return [
        html.H3("Eager PyTorch vs IREE by source line"),
        html.P(
            f"Per call: eager forward {fmt_ns(_num(doc.get('eager_ns')))}, IREE call "
            f"{fmt_ns(_num(doc.get('iree_call_ns')))} (its dispatches {fmt_ns(_num(doc.get('iree_ns')))}).",
            className="caption",
        ),
        grid(["line", "modules", "eager", "IREE", "eager / IREE"], rows, id="compiler-iree-compare"),
    ]
