"""Rich tables for `perf diff` (the changes between two traces) and `perf gate` (each compared
quantity with its change and noise interval). Strings from the traces are redacted."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from profiler.model.numfmt import fmt_ns
from profiler.render.text import _text


def render_setup(setup, console: Console) -> None:
    """What differs between the two setups (analysis.diff.SetupDiff), before any number: a
    comparison across hardware or rank counts is labelled not like-for-like."""
    if setup.like_for_like:
        console.print("setup: like-for-like (same hardware and ranks)")
    else:
        console.print(
            "[bold yellow]NOT like-for-like[/]: "
            + "; ".join(_text(r) for r in setup.reasons)
            + ". Time changes below mix the setup change with any code change."
        )
    t = Table(box=box.SIMPLE_HEAD, title="Setup", title_justify="left")
    for col in ("", "A", "B", ""):
        t.add_column(col, overflow="fold")
    for r in setup.rows.itertuples(index=False):
        t.add_row(r.field.replace("_", " "), _text(r.a) or "-", _text(r.b) or "-", "" if r.same else "differs")
    console.print(t)


def render_diff(a: str, b: str, busy: list[int], changes, total: int, console: Console) -> None:
    """The changes between two traces, largest first."""
    console.print(f"A: {_text(a)}\nB: {_text(b)}")
    console.print(f"device busy: A {fmt_ns(busy[0])}, B {fmt_ns(busy[1])} ({_signed(busy[1] - busy[0])})")
    if not total:
        console.print("no changes: the same ops and kernels, with the same counts, times and bounds")
        return
    t = Table(box=box.SIMPLE_HEAD, title=f"Changes ({total}, largest first)", title_justify="left")
    t.add_column("change", no_wrap=True, min_width=7)
    t.add_column("name", no_wrap=True, overflow="ellipsis", max_width=max(16, console.width - 72))
    for col, width in (("calls", 5), ("time A", 7), ("time B", 7), ("delta", 8), ("bound", 7)):
        t.add_column(col, justify="right", no_wrap=True, min_width=width)
    for r in changes.itertuples(index=False):
        bound = r.bound_a if r.bound_a == r.bound_b else f"{r.bound_a or '-'}>{r.bound_b or '-'}"
        calls = f"{r.count_a:,}" if r.count_a == r.count_b else f"{r.count_a:,}>{r.count_b:,}"
        t.add_row(
            r.change, _text(r.name), calls, fmt_ns(r.time_a_ns), fmt_ns(r.time_b_ns), _signed(r.delta_ns), _text(bound)
        )
    console.print(t)


def _signed(ns: float) -> str:
    return ("+" if ns > 0 else "-" if ns < 0 else "") + fmt_ns(abs(ns))


def render_gate(verdicts, max_regression: float, console: Console) -> None:
    """Each compared quantity with its change and noise interval; regressions first."""
    tolerance = bool(verdicts) and verdicts[0].mode == "tolerance"
    title = (
        f"Gate: slowdown > {max_regression:g}% (tolerance; too few runs to estimate the noise)"
        if tolerance
        else f"Gate: slowdown > {max_regression:g}% and beyond the noise (95% bootstrap)"
    )
    t = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
    t.add_column("verdict", no_wrap=True)
    t.add_column("name", no_wrap=True, overflow="ellipsis", max_width=max(16, console.width - 62))
    for col in ("base", "new", "change", "95% interval", "samples"):
        t.add_column(col, justify="right", no_wrap=True)
    for v in verdicts[:20]:
        t.add_row(
            "REGRESSION" if v.regression else "ok",
            _text(v.name),
            fmt_ns(v.base_mean_ns),
            fmt_ns(v.new_mean_ns),
            f"{100 * v.ratio:+.1f}%",
            f"{100 * v.low:+.1f}..{100 * v.high:+.1f}%",
            f"{v.samples[0]}/{v.samples[1]}",
        )
    console.print(t)
