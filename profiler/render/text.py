"""Rich tables for `perf analyze` (stdout): the report's order, and the trace, device-time and top
op tables. Strings from the trace are redacted before display."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler.api import Analysis
from profiler.model.demangle import demangle_many
from profiler.model.numfmt import fmt_bytes, fmt_ns, fmt_si
from profiler.model.redact import redact_text

#: Top ops and kernels in the short default report (--full lists --top of them).
SHORT_TOP = 5


def _text(s: str) -> str:
    """A string from the trace, made safe to print: secrets redacted, '[...]' shown as typed
    (Rich would read it as markup: eat '[bold]', raise on '[/]')."""
    return escape(redact_text(s))


def render(a: Analysis, console: Console, sections: tuple[str, ...] | None = None) -> None:
    """The full report, or the sections asked for, as Rich tables; the verdict first; problems always."""
    from profiler.api import SECTIONS
    from profiler.render.insight import render_insight
    from profiler.render.roofline import render_roofline
    from profiler.render.verdict import render_verdict

    shown = set(sections or SECTIONS)
    if "verdict" in shown:
        render_verdict(a, console)
    if "summary" in shown:
        _render_summary(a, console)
    render_unknown(a, console)
    if "ops" in shown:
        _render_top(a, console)
    render_roofline(a, console, shown)
    render_insight(a, console, shown)
    if "ranks" in shown:
        from profiler.render.ranks import render_ranks

        render_ranks(a, console)
    _render_problems(a, console)


def render_short(a: Analysis, console: Console) -> None:
    """The default report: the verdict, then the trace in brief, device time, the wall equation
    and the top ops and kernels; the rest behind --full / --section."""
    from profiler.api import SECTIONS
    from profiler.render.roofline import render_equation
    from profiler.render.verdict import render_verdict

    render_verdict(a, console)
    render_unknown(a, console)
    _render_summary(a, console)
    render_equation(a, console)
    _render_top(a, console, limit=SHORT_TOP)
    from profiler.render.ranks import render_ranks

    render_ranks(a, console, short=True)  # multi-rank traces only
    console.print(
        f"[dim]Full report: --full; one part: --section NAME ({', '.join(SECTIONS)}); --json for every number.[/]"
    )
    _render_problems(a, console)


def _render_problems(a: Analysis, console: Console) -> None:
    if a.problems:
        console.print("[bold yellow]Problems met while reading[/] (counted, not hidden):")
        for line in a.problems.lines():
            console.print(f"  {_text(line)}")


def _files_line(files: tuple[str, ...] | list[str]) -> str:
    """Every file on its own line; more than 3 in one folder: the folder, the count, first and last."""
    from pathlib import PurePath

    parents = {str(PurePath(f).parent) for f in files}
    if len(files) <= 3 or len(parents) != 1:
        return "\n".join(_text(f) for f in files)
    first, last = PurePath(files[0]).name, PurePath(files[-1]).name
    return _text(f"{len(files)} files in {parents.pop()}/\n{first} .. {last}")


def _device_lines(devices) -> list[str]:
    """One line per device name: 'gpu0-gpu7 (8): Tesla V100-SXM2-32GB' when several share it."""
    import re

    by_name: dict[str, list[str]] = {}
    for _, d, n in devices:
        if d != "cpu" and d not in by_name.setdefault(n or "unnamed", []):
            by_name[n or "unnamed"].append(d)

    def index(d: str) -> tuple[str, int]:
        m = re.fullmatch(r"([a-z]+)(\d+)", d)
        return (m[1], int(m[2])) if m else (d, -1)

    lines = []
    for name, devs in sorted(by_name.items(), key=lambda kv: sorted(map(index, kv[1]))):
        devs = sorted(set(devs), key=index)
        label = devs[0] if len(devs) == 1 else f"{devs[0]}-{devs[-1]} ({len(devs)})"
        lines.append(_text(f"{label}: {name}"))
    return lines


def _render_summary(a: Analysis, console: Console) -> None:
    ov = a.overview
    head = Table(box=box.SIMPLE, show_header=False, title="Trace", title_justify="left")
    head.add_column(style="bold")
    head.add_column()
    head.add_row("source", _text(ov.framework))
    head.add_row("files", _files_line(ov.files))
    ranks = f"{len(ov.ranks)} ({', '.join(map(str, ov.ranks))})" if len(ov.ranks) <= 16 else str(len(ov.ranks))
    head.add_row("ranks", ranks + (f" of world size {ov.world_size}" if ov.world_size else ""))
    head.add_row("devices", "\n".join(_device_lines(ov.devices)) or "cpu only")
    head.add_row("span", fmt_ns(ov.wall_ns))
    head.add_row("events", ", ".join(f"{k} {v:,}" for k, v in ov.events_by_kind))
    if ov.steps:
        head.add_row("steps", f"{len(ov.steps)} (ProfilerStep#{ov.steps[0]}..#{ov.steps[-1]})")
    if getattr(a, "hardware_notes", ()):  # which preset stands in for a device, and why
        head.add_row("hardware", "\n".join(_text(n) for n in a.hardware_notes))
    console.print(head)

    dev = Table(box=box.SIMPLE_HEAD, title="Device time (busy = union of work intervals)", title_justify="left")
    for col in ("rank", "device", "window", "busy", "idle", "busy %", "work events"):
        dev.add_column(col, justify="left" if col == "device" else "right")
    for r in a.device_time.itertuples(index=False):
        pct = 100 * r.busy_ns / r.window_ns if r.window_ns else 0.0
        dev.add_row(
            str(r.rank),
            r.device,
            fmt_ns(r.window_ns),
            fmt_ns(r.busy_ns),
            fmt_ns(r.idle_ns),
            f"{pct:.1f}",
            f"{r.work_events:,}",
        )
    console.print(dev)


def render_unknown(a: Analysis, console: Console) -> None:
    """When more than 20% of unit time has no floor (analysis.unknown.WARN_SHARE): say so, with the
    top unknown names and why each is unknown."""
    from profiler.api import UNKNOWN_WARN_SHARE as WARN_SHARE

    if a.unknown_share <= WARN_SHARE or a.unknown.empty:
        return
    console.print(
        f"[bold yellow]{100 * a.unknown_share:.0f}% of the unit time has no floor[/] (unknown-bound): "
        "its time is counted, its floor and efficiency are not. Largest:"
    )
    for r in a.unknown.head(5).itertuples(index=False):
        console.print(f"  {100 * r.share:5.1f}%  {_text(r.name[:70])}: {_text(r.reason)}")


def _render_top(a: Analysis, console: Console, limit: int | None = None) -> None:
    tables = (
        ("Top ops (device = time of the device work each call launched)", a.top_ops, True),
        ("Top kernels and copies", a.top_kernels, False),
    )
    for title, frame, is_ops in tables:
        if frame.empty:
            continue
        if limit is not None and len(frame) > limit:
            frame = frame.head(limit)
            title += f" (top {limit}; --full for more)"
        if is_ops and not frame["device_ns"].any():  # CPU-only trace: no device columns
            title = "Top ops (host time, inclusive of child ops)"
            frame = frame.drop(columns=["device_ns"])
        t = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
        device_cols = ("share %",) if not is_ops else ("device", "share %") if "device_ns" in frame else ()
        roofline = ("bound", "eff") if is_ops and "bound" in frame else ()
        comm = (
            ("comm",)
            if is_ops and "algo_bytes" in frame and (frame["algo_bytes"].notna().any() or frame["enqueue"].any())
            else ()
        )
        room = max(
            24, console.width - 12 * (3 + len(device_cols) + len(roofline) + 2 * len(comm)) - 4
        )  # what the number columns leave
        t.add_column("name", no_wrap=True, overflow="ellipsis", max_width=min(64, room * 3 // 5 if is_ops else room))
        if is_ops:
            t.add_column("shapes", no_wrap=True, overflow="ellipsis", max_width=min(40, room * 2 // 5))
        for col in ("count", "total", "mean") + device_cols + roofline + comm:
            t.add_column(col, justify="right", no_wrap=True)
        # kernels as people read them: ROCm/HIP and CUDA symbols demangled (the JSON keeps them as recorded)
        shown = frame["name"].astype(str).tolist() if is_ops else demangle_many(frame["name"].astype(str))
        for shown_name, r in zip(shown, frame.itertuples(index=False)):
            cells = [_text(shown_name)] + ([_text(r.shapes)] if is_ops else [])
            cells += [f"{r.count:,}", fmt_ns(r.total_ns), fmt_ns(r.mean_ns)]
            if is_ops and "device" in device_cols:
                cells.append(fmt_ns(r.device_ns))
            if device_cols:
                cells.append(f"{100 * r.share:.1f}")
            if roofline:
                eff = r.efficiency
                above = bool(getattr(r, "above_ceiling", False))  # analysis.ceiling: never a plain efficiency > 1.1
                cells += [
                    str(r.bound) if isinstance(r.bound, str) else "unknown",
                    "above ceiling" if above else "-" if eff != eff or eff is None else f"{eff:.2f}",
                ]
            if comm:
                cells.append(comm_cell(r.algo_bytes, r.algo_bw, r.enqueue))
            t.add_row(*cells)
        console.print(t)


def comm_cell(algo_bytes: float, algo_bw: float, enqueue: bool) -> str:
    """A collective's bytes sent per rank and achieved bus bandwidth ('8.39 MB @ 3.2 GB/s'); an
    enqueue op says so (the run waits on the backend's work, its own row)."""
    if enqueue:
        return "enqueue only"
    if algo_bytes != algo_bytes or algo_bytes is None:
        return ""
    return f"{fmt_bytes(algo_bytes)} @ {fmt_si(algo_bw, 'B/s')}"
