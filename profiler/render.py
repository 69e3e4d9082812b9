"""Rich tables for `perf analyze` (stdout). Strings from the trace are redacted before display."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler.api import Analysis
from profiler.model.redact import redact_text


def _text(s: str) -> str:
    """A string from the trace, made safe to print: secrets redacted, '[...]' shown as typed
    (Rich would read it as markup: eat '[bold]', raise on '[/]')."""
    return escape(redact_text(s))


def fmt_ns(ns: float) -> str:
    """Human time: 812 ns, 3.40 us, 12.1 ms, 1.73 s."""
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{ns:.0f} ns"


def render(a: Analysis, console: Console, sections: tuple[str, ...] | None = None) -> None:
    """Print the sections asked for (all by default) as Rich tables; problems always."""
    from profiler.api import SECTIONS

    shown = set(sections or SECTIONS)
    if "summary" in shown:
        _render_summary(a, console)
    render_unknown(a, console)
    if "ops" in shown:
        _render_top(a, console)

    from profiler.render_insight import render_insight
    from profiler.render_roofline import render_roofline

    render_roofline(a, console, shown)
    render_insight(a, console, shown)

    if a.problems:
        console.print("[bold yellow]Problems met while reading[/] (counted, not hidden):")
        for line in a.problems.lines():
            console.print(f"  {_text(line)}")


def _render_summary(a: Analysis, console: Console) -> None:
    ov = a.overview
    head = Table(box=box.SIMPLE, show_header=False, title="Trace", title_justify="left")
    head.add_column(style="bold")
    head.add_column()
    head.add_row("source", _text(ov.framework))
    head.add_row("files", "\n".join(_text(f) for f in ov.files))
    ranks = f"{len(ov.ranks)} ({', '.join(map(str, ov.ranks))})" if len(ov.ranks) <= 16 else str(len(ov.ranks))
    head.add_row("ranks", ranks + (f" of world size {ov.world_size}" if ov.world_size else ""))
    names = sorted({_text(f"{d}: {n or 'unnamed'}") for _, d, n in ov.devices if d != "cpu"})
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


def render_unknown(a: Analysis, console: Console) -> None:
    """When more than 20% of unit time has no floor (analysis.unknown.WARN_SHARE): say so, with the
    top unknown names and why each is unknown."""
    from analysis.unknown import WARN_SHARE

    if a.unknown_share <= WARN_SHARE or a.unknown.empty:
        return
    console.print(f"[bold yellow]{100 * a.unknown_share:.0f}% of the unit time has no floor[/] (unknown-bound): "
                  "the verdict and utilization below leave it out. Largest:")
    for r in a.unknown.head(5).itertuples(index=False):
        console.print(f"  {100 * r.share:5.1f}%  {_text(r.name[:70])}: {_text(r.reason)}")


def _render_top(a: Analysis, console: Console) -> None:
    tables = (("Top ops (device = time of the device work each call launched)", a.top_ops, True),
              ("Top kernels and copies", a.top_kernels, False))
    for title, frame, is_ops in tables:
        if frame.empty:
            continue
        if is_ops and not frame["device_ns"].any():  # CPU-only trace: no device columns
            title = "Top ops (host time, inclusive of child ops)"
            frame = frame.drop(columns=["device_ns"])
        t = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
        device_cols = ("share %",) if not is_ops else ("device", "share %") if "device_ns" in frame else ()
        roofline = ("bound", "eff") if is_ops and "bound" in frame else ()
        comm = ("comm",) if is_ops and "algo_bytes" in frame and (frame["algo_bytes"].notna().any() or frame["enqueue"].any()) else ()
        room = max(24, console.width - 12 * (3 + len(device_cols) + len(roofline) + 2 * len(comm)) - 4)  # what the number columns leave
        t.add_column("name", no_wrap=True, overflow="ellipsis", max_width=min(64, room * 3 // 5 if is_ops else room))
        if is_ops:
            t.add_column("shapes", no_wrap=True, overflow="ellipsis", max_width=min(40, room * 2 // 5))
        for col in ("count", "total", "mean") + device_cols + roofline + comm:
            t.add_column(col, justify="right", no_wrap=True)
        for r in frame.itertuples(index=False):
            cells = [_text(r.name)] + ([_text(r.shapes)] if is_ops else [])
            cells += [f"{r.count:,}", fmt_ns(r.total_ns), fmt_ns(r.mean_ns)]
            if is_ops and "device" in device_cols:
                cells.append(fmt_ns(r.device_ns))
            if device_cols:
                cells.append(f"{100 * r.share:.1f}")
            if roofline:
                eff = r.efficiency
                cells += [str(r.bound) if isinstance(r.bound, str) else "unknown", "-" if eff != eff or eff is None else f"{eff:.2f}"]
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
    return f"{_si(algo_bytes)}B @ {_si(algo_bw)}B/s"


def _si(v: float) -> str:
    """3 significant digits with an SI prefix: 12.6 M, 31.6 k."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}"
    return f"{v:.3g} "


def render_setup(setup, console: Console) -> None:
    """What differs between the two setups (analysis.diff.SetupDiff), before any number: a
    comparison across hardware or rank counts is labelled not like-for-like."""
    if setup.like_for_like:
        console.print("setup: like-for-like (same hardware and ranks)")
    else:
        console.print("[bold yellow]NOT like-for-like[/]: " + "; ".join(_text(r) for r in setup.reasons)
                      + ". Time changes below mix the setup change with any code change.")
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
        t.add_row(r.change, _text(r.name), calls, fmt_ns(r.time_a_ns), fmt_ns(r.time_b_ns), _signed(r.delta_ns), _text(bound))
    console.print(t)


def _signed(ns: float) -> str:
    return ("+" if ns > 0 else "-" if ns < 0 else "") + fmt_ns(abs(ns))


def render_gate(verdicts, max_regression: float, console: Console) -> None:
    """Each compared quantity with its change and noise interval; regressions first."""
    tolerance = bool(verdicts) and verdicts[0].mode == "tolerance"
    title = (f"Gate: slowdown > {max_regression:g}% (tolerance; too few runs to estimate the noise)" if tolerance
             else f"Gate: slowdown > {max_regression:g}% and beyond the noise (95% bootstrap)")
    t = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
    t.add_column("verdict", no_wrap=True)
    t.add_column("name", no_wrap=True, overflow="ellipsis", max_width=max(16, console.width - 62))
    for col in ("base", "new", "change", "95% interval", "samples"):
        t.add_column(col, justify="right", no_wrap=True)
    for v in verdicts[:20]:
        t.add_row("REGRESSION" if v.regression else "ok", _text(v.name), fmt_ns(v.base_mean_ns), fmt_ns(v.new_mean_ns),
                  f"{100 * v.ratio:+.1f}%", f"{100 * v.low:+.1f}..{100 * v.high:+.1f}%", f"{v.samples[0]}/{v.samples[1]}")
    console.print(t)
