"""Rich tables for an IREE run (profiler.api.iree.IreeRun): the compile by pass, the dispatches
on the roofline, and eager vs IREE by source line. Text is redacted first."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table

from profiler.model.numfmt import fmt_bytes, fmt_ns, fmt_si
from profiler.model.redact import redact_text

from profiler.api.iree import short_location

if TYPE_CHECKING:
    from profiler.api.iree import IreeRun

#: pass rows shown: the tree down to this depth, and within it the largest children
DEPTH = 2
CHILDREN = 6


def _t(s: object) -> str:
    return escape(redact_text(str(s)))


def render_iree(run: IreeRun) -> RenderableType:
    """The three tables (module docstring)."""
    tree = run.passes
    ps = Table(
        title=(
            f"iree-compile: {fmt_ns(run.compile_ns)} wall; compiler Total {fmt_ns(tree.total_ns)} = passes "
            f"{fmt_ns(tree.total_ns - tree.rest_ns)} + untimed rest {fmt_ns(tree.rest_ns)}"
        ),
        box=box.SIMPLE,
        title_justify="left",
    )
    ps.add_column("pass (nested as the pass managers nest; largest first)")
    ps.add_column("wall", justify="right")
    ps.add_column("share", justify="right")

    def add(node, depth):
        share = node.wall_ns / tree.total_ns if tree.total_ns else math.nan
        ps.add_row("  " * depth + _t(node.name), fmt_ns(node.wall_ns), f"{share:.0%}")
        if depth < DEPTH:
            for c in sorted(node.children, key=lambda c: -c.wall_ns)[:CHILDREN]:
                add(c, depth + 1)

    for r in sorted(tree.roots, key=lambda r: -r.wall_ns):
        add(r, 0)
    ds = Table(title=f"Dispatches on {run.hardware}", box=box.SIMPLE, title_justify="left")
    for c in ("dispatch", "fused ops", "from", "FLOP", "bytes", "mean", "floor", "bound", "eff"):
        ds.add_column(c, justify="right" if c in ("FLOP", "bytes", "mean", "floor", "eff") else "left")
    for d in run.dispatches.itertuples(index=False):
        ds.add_row(
            _t(d.name),
            _t("\n".join(op.split(" ", 1)[0] for op in d.fused_ops)),
            _t("\n".join(short_location(loc) for loc in d.locations[:3])),
            fmt_si(d.flops),
            fmt_bytes(d.bytes),
            fmt_ns(d.mean_ns) if d.mean_ns == d.mean_ns else "-",
            fmt_ns(d.floor_ns) if d.floor_ns == d.floor_ns else "-",
            str(d.bound),
            f"{d.efficiency:.0%}" if d.efficiency == d.efficiency else "-",
        )
    cmp = Table(
        title=(
            f"Eager vs IREE per call: eager forward {fmt_ns(run.eager_ns)} ({run.eager_threads} torch threads); "
            f"IREE call {fmt_ns(run.iree_call_ns)}, of which dispatches {fmt_ns(run.iree_ns)}. By source line: "
            "eager = the torch calls made there (framework overhead included), IREE = its dispatches' run time"
        ),
        box=box.SIMPLE,
        title_justify="left",
    )
    for c in ("line", "modules", "dispatches", "eager", "IREE", "eager / IREE"):
        cmp.add_column(c, justify="left" if c in ("line", "modules") else "right")
    for r in run.compare.itertuples(index=False):
        cmp.add_row(
            _t(short_location(r.location)),
            _t(r.modules),
            str(r.dispatches),
            fmt_ns(r.eager_ns) if r.eager_ns == r.eager_ns else "-",
            fmt_ns(r.iree_ns) if r.iree_ns == r.iree_ns else "-",
            f"{r.ratio:.2f}x" if r.ratio == r.ratio else "-",
        )
    return Group(ps, ds, cmp)
