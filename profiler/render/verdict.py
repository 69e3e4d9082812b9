"""The verdict block that opens `perf analyze`: what bounds the run and its share of wall time,
every bound's share on one line, the evidence, and the top three actions with their saving.
A renderer over analysis.verdict.Verdict (computed once in profiler.api.analyze)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from profiler.api import Analysis
from profiler.model.numfmt import fmt_ns
from profiler.model.redact import redact_text

#: Bounds under this share of the window are left off the one-line split.
MIN_SHARE = 0.005


def verdict_lines(a: Analysis) -> list[str]:
    """The verdict as Rich-markup lines (no tables: it must stand in the first lines)."""
    v = a.verdict
    if v is None:
        return ["[bold]Verdict:[/] no device or op time was classified (no --section roofline data)"]
    out = [f"[bold]Verdict: {v.label}[/] bounds this run: [bold]{100 * v.share:.1f}%[/] of {fmt_ns(v.window_ns)} on {escape(v.scope)}"]
    split = " · ".join(f"{label} {100 * share:.1f}%" for _, label, _, share in v.shares if share >= MIN_SHARE)
    out.append(f"  time by bound: {split}")
    out += [f"  - {_t(e)}" for e in v.evidence]
    if v.actions:
        out.append("[bold]Top actions[/] (estimated wall-time saving, at most):")
        out += [f"  {i}. {fmt_ns(x.saving_ns):>8}  {_t(x.title)}  [dim]({_t(x.evidence)})[/]" for i, x in enumerate(v.actions, 1)]
    return out


def render_verdict(a: Analysis, console: Console) -> None:
    for line in verdict_lines(a):
        console.print(line, overflow="fold", crop=False)
    console.print()


def _t(s: str) -> str:
    return escape(redact_text(s))
