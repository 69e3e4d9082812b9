"""Rich tables for a compile report and for eager vs compiled (stdout). Text is redacted first.
A renderer over the compiler collector's result objects, as the facade lends them (profiler.api:
CompileReport, CompareResult): the collector reads, this prints."""

from __future__ import annotations

import math

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table

from profiler.model.numfmt import fmt_ns
from profiler.model.redact import redact_text

if TYPE_CHECKING:
    from profiler.api import CompareResult, CompileReport


def _t(s: object) -> str:
    return escape(redact_text(str(s)))


def render_report(r: CompileReport) -> RenderableType:
    """Phases, compiles, graph breaks, recompiles, caches and the fusion map of one compile log."""
    parts: list[RenderableType] = []
    ph = Table(title="Compile phases (self time)", box=box.SIMPLE, title_justify="left")
    for c in ("compile", "phase", "time", "share", "steps"):
        ph.add_column(c, justify="right" if c in ("time", "share", "steps") else "left")
    for x in r.phase_summary.itertuples(index=False):
        ph.add_row(
            _t(x.compile_id), x.phase, fmt_ns(x.time_ns), f"{x.share:.0%}" if x.share == x.share else "-", str(x.steps)
        )
    parts.append(ph)
    if len(r.graph_breaks):
        parts.append(
            _table(
                "Graph breaks",
                ("compile", "where", "reason"),
                (
                    (_t(x.compile_id), _t(f"{x.file}:{x.line}"), _t(x.reason))
                    for x in r.graph_breaks.itertuples(index=False)
                ),
            )
        )
    if len(r.recompiles):
        parts.append(
            _table(
                "Recompilations (failed guard)",
                ("compile", "was", "guard", "where"),
                (
                    (_t(x.compile_id), _t(x.previous), _t(x.guard), _t(f"{x.file}:{x.line}" if x.file else ""))
                    for x in r.recompiles.itertuples(index=False)
                ),
            )
        )
    if len(r.caches):
        parts.append(
            _table(
                "Cache lookups",
                ("compile", "cache", "state", "saved"),
                (
                    (_t(x.compile_id), x.cache, x.state, fmt_ns(x.time_saved_ns) if x.time_saved_ns >= 0 else "")
                    for x in r.caches.itertuples(index=False)
                ),
            )
        )
    if len(r.fusion):
        parts.append(
            _table(
                "Fusion map (kernel = ATen ops, from source)",
                ("kernel", "ATen ops", "source"),
                (
                    (_t(x.kernel), _t(" + ".join(x.aten_ops)), _t(", ".join(_short(s) for s in x.sources)))
                    for x in r.fusion.itertuples(index=False)
                ),
            )
        )
    return Group(*parts)


def _short(source: str) -> str:
    """'…/model.py:42' -> 'model.py:42'."""
    return source.rsplit("/", 1)[-1]


def render_compare(res: CompareResult) -> RenderableType:
    """Eager vs compiled: the summary line, the fused groups, then the compile report."""
    head = Table(box=box.SIMPLE, show_header=False, title="Eager vs compiled", title_justify="left")
    head.add_column(style="bold")
    head.add_column()
    speed = res.eager_step_ns / res.compiled_step_ns if res.compiled_ok and res.compiled_step_ns else math.nan
    head.add_row(
        "step time",
        f"eager {fmt_ns(res.eager_step_ns)}, compiled {fmt_ns(res.compiled_step_ns)}"
        + (f" ({speed:.2f}x)" if not math.isnan(speed) else ""),
    )
    total = float(res.compile.compiles["duration_ns"].clip(lower=0).sum()) if len(res.compile.compiles) else math.nan
    head.add_row("compile time", fmt_ns(total))
    head.add_row("floors from", _t(res.spec.name if res.spec else "no hardware spec"))
    parts: list[RenderableType] = [head]
    if len(res.groups):
        t = Table(title="What fused (per step)", box=box.SIMPLE, title_justify="left")
        for c in ("kernel", "= ATen ops", "from", "before (eager)", "after", "saving", "bound after", "eff."):
            t.add_column(c, justify="right" if c in ("before (eager)", "after", "saving", "eff.") else "left")
        for x in res.groups.sort_values("eager_ns", ascending=False, na_position="last").itertuples(index=False):
            t.add_row(
                _t(x.kernel),
                _t(x.aten_ops),
                _t(", ".join(_short(s) for s in x.sources.split(", ") if s)),
                fmt_ns(x.eager_ns) + ("~" if x.estimate else ""),
                fmt_ns(x.compiled_ns),
                fmt_ns(x.saving_ns),
                x.bound,
                f"{x.efficiency:.0%}" if x.efficiency == x.efficiency else "-",
            )
        parts.append(t)
    parts.append(render_report(res.compile))
    for m in res.messages:
        parts.append(f"[yellow]note:[/] {_t(m)}")
    if res.unmatched:
        parts.append(f"[dim]Dynamo nodes with no eager op: {_t(', '.join(res.unmatched[:10]))}[/]")
    return Group(*parts)


def render_summary(r: CompileReport) -> RenderableType:
    """A few lines after `perf profile`'s analysis: compile time and its phases, graph breaks,
    recompiles, cache lookups, kernels generated."""
    t = Table(title="torch.compile", box=box.SIMPLE, show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    main = r.phases[r.phases["depth"] == 0] if len(r.phases) else r.phases
    total = (
        float(r.compiles["duration_ns"].clip(lower=0).sum())
        if len(r.compiles)
        else float(main["dur_ns"].sum())
        if len(main)
        else math.nan
    )
    t.add_row("compiles", f"{len(r.compiles)} frame compile(s), {fmt_ns(total)}")
    by_phase = r.phase_summary.groupby("phase", sort=False)["time_ns"].sum() if len(r.phase_summary) else None
    if by_phase is not None and by_phase.sum() > 0:
        top = by_phase.sort_values(ascending=False)
        t.add_row(
            "phases (self time)",
            ", ".join(f"{p} {fmt_ns(v)} ({v / by_phase.sum():.0%})" for p, v in top.items() if v > 0),
        )
    where = ", ".join(f"{_short(str(x.file))}:{x.line}" for x in r.graph_breaks.itertuples(index=False))
    t.add_row("graph breaks", f"{len(r.graph_breaks)}" + (f" at {_t(where)}" if where else ""))
    guards = ", ".join(_t(g) for g in r.recompiles["guard"].head(3)) if len(r.recompiles) else ""
    t.add_row("recompiles", f"{len(r.recompiles)}" + (f" (failed guard: {guards})" if guards else ""))
    if len(r.caches):
        counts = r.caches.groupby(["cache", "state"]).size()
        t.add_row("cache lookups", ", ".join(f"{c} {s} x{n}" for (c, s), n in counts.items()))
    else:
        t.add_row("cache lookups", "none logged")
    t.add_row("kernels", f"{len(r.fusion)} (fusion map, kernel times and bounds: perf dashboard TRACE, Compiler page)")
    return t


def _table(title: str, columns: tuple[str, ...], rows) -> Table:
    """A left-aligned table of text rows under `title`."""
    t = Table(title=title, box=box.SIMPLE, title_justify="left")
    for c in columns:
        t.add_column(c)
    for row in rows:
        t.add_row(*row)
    return t
