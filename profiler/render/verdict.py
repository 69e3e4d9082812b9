"""The verdict block that opens `perf analyze`: what bounds the run and its share of wall time,
every bound's share on one line, the evidence, and the top three actions with their saving.
A renderer over analysis.verdict.Verdict (computed once in profiler.api.analyze)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from profiler.api import Analysis
from profiler.model.numfmt import fmt_ns, fmt_pct
from profiler.model.redact import redact_text

#: Bounds under this share of the window are left off the one-line split.
MIN_SHARE = 0.005
#: The width the block is written for (a line longer than this is cut with '…' in the text
#: output; the JSON keeps every word).
WIDTH = 100
#: Short names for the split line.
SHORT = {
    "compute": "compute",
    "memory": "memory",
    "communication": "comm",
    "runtime": "runtime",
    "unknown": "unknown-bound",
    "host": "host/input",
    "sync": "sync",
    "idle": "idle, no cause",
}


def verdict_lines(a: Analysis) -> list[str]:
    """The verdict as Rich-markup lines (no tables: it must stand in the first 15 lines, each
    within 100 columns where the names allow): the bound, the split, the evidence, and each
    action as 'N. saving  title' over one line with its lever and assumption."""
    v = a.verdict
    if v is None:
        return ["[bold]Verdict:[/] no device or op time was classified (no --section roofline data)"]
    out = [
        f"[bold]Verdict: {v.label}[/] bounds this run: [bold]{fmt_pct(v.share)}[/] of {fmt_ns(v.window_ns)} "
        f"on {escape(v.scope)}"
    ]
    split = " · ".join(
        f"{SHORT.get(b, label)} {fmt_pct(share)}"
        for b, label, _, share in [s for s in v.shares if s[0] != v.bound][:5]
        if share >= MIN_SHARE
    )
    if split:
        out.append(f"  then: {split}")
    out += [f"  - {_t(e)}" for e in v.evidence]
    if v.actions:
        out.append("[bold]Top actions[/] (wall-time saving, at most; each alone, not to be added):")
        for i, x in enumerate(v.actions, 1):
            out.append(f"  {i}. {fmt_ns(x.saving_ns):>8}  {_t(_short(x.title, WIDTH - 16))}")
            detail = "; ".join(p for p in (x.lever, x.assumption) if p)
            if detail:
                out.append(f"     [dim]{_t(_short(detail, WIDTH - 5))}[/]")
    return out


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def render_verdict(a: Analysis, console: Console) -> None:
    for line in verdict_lines(a):
        console.print(line, overflow="fold", crop=False)
    console.print()


def _t(s: str) -> str:
    return escape(redact_text(s))
