"""Rich tables for `perf analyze` (stdout). Strings from the trace are redacted before display."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from profiler.facade import Analysis
from profiler.redact import redact_text


def fmt_ns(ns: float) -> str:
    """Human time: 812 ns, 3.40 us, 12.1 ms, 1.73 s."""
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{ns:.0f} ns"


def render(a: Analysis, console: Console) -> None:
    ov = a.overview
    head = Table(box=box.SIMPLE, show_header=False, title="Trace", title_justify="left")
    head.add_column(style="bold")
    head.add_column()
    head.add_row("source", ov.framework)
    head.add_row("files", "\n".join(redact_text(f) for f in ov.files))
    ranks = f"{len(ov.ranks)} ({', '.join(map(str, ov.ranks))})" if len(ov.ranks) <= 16 else str(len(ov.ranks))
    head.add_row("ranks", ranks + (f" of world size {ov.world_size}" if ov.world_size else ""))
    names = sorted({f"{d}: {n or 'unnamed'}" for _, d, n in ov.devices if d != "cpu"})
    head.add_row("devices", "\n".join(names) or "cpu only")
    head.add_row("span", fmt_ns(ov.wall_ns))
    head.add_row("events", ", ".join(f"{k} {v:,}" for k, v in ov.events_by_kind))
    if ov.steps:
        head.add_row("steps", f"{len(ov.steps)} (ProfilerStep#{ov.steps[0]}..#{ov.steps[-1]})")
    console.print(head)

    dev = Table(box=box.SIMPLE_HEAD, title="Device time (busy = union of work intervals)", title_justify="left")
    for col in ("rank", "device", "window", "busy", "idle", "busy %", "work events"):
        dev.add_column(col, justify="left" if col == "device" else "right")
    for r in a.device_time.itertuples(index=False):
        pct = 100 * r.busy_ns / r.window_ns if r.window_ns else 0.0
        dev.add_row(str(r.rank), r.device, fmt_ns(r.window_ns), fmt_ns(r.busy_ns), fmt_ns(r.idle_ns), f"{pct:.1f}", f"{r.work_events:,}")
    console.print(dev)

    tables = (("Top ops (device = time of the device work each call launched)", a.top_ops, True),
              ("Top kernels and copies", a.top_kernels, False))
    for title, frame, is_ops in tables:
        if frame.empty:
            continue
        t = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
        room = max(24, console.width - (62 if is_ops else 40))  # what the number columns leave
        t.add_column("name", no_wrap=True, overflow="ellipsis", max_width=min(64, room * 2 // 3 if is_ops else room))
        if is_ops:
            t.add_column("shapes", no_wrap=True, overflow="ellipsis", max_width=min(32, room // 3))
        for col in ("count", "total", "mean") + (("device",) if is_ops else ()) + ("share %",):
            t.add_column(col, justify="right", no_wrap=True)
        for r in frame.itertuples(index=False):
            cells = [redact_text(r.name)] + ([redact_text(r.shapes)] if is_ops else [])
            cells += [f"{r.count:,}", fmt_ns(r.total_ns), fmt_ns(r.mean_ns)]
            cells += ([fmt_ns(r.device_ns)] if is_ops else []) + [f"{100 * r.share:.1f}"]
            t.add_row(*cells)
        console.print(t)

    if a.problems:
        console.print("[bold yellow]Problems met while reading[/] (counted, not hidden):")
        for line in a.problems.lines():
            console.print(f"  {redact_text(line)}")
