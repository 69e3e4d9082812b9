"""Rich tables for the roofline part of `perf analyze`: the wall equation per device and the
measured time by bound, op family and dtype."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler.api import Analysis
from profiler.model.redact import redact_text
from profiler.model.numfmt import fmt_ns, fmt_si

MAX_DEVICES = 8
_PARTS = [
    ("compute", "compute_ns"),
    ("memory", "memory_ns"),
    ("comm", "communication_ns"),
    ("runtime", "runtime_ns"),
    ("unknown", "unknown_ns"),
    ("idle host", "idle_host_ns"),
    ("idle sync", "idle_sync_ns"),
    ("idle other", "idle_other_ns"),
]


def render_advice(a: Analysis, console: Console) -> None:
    """The advice first: what to change, what it should save, and why."""
    if not a.advice:
        return
    t = Table(box=box.SIMPLE_HEAD, title="Advice (estimated saving; formulas in --json)", title_justify="left")
    for col in ("saving", "kind", "change", "evidence"):
        t.add_column(col, justify="right" if col == "saving" else "left", overflow="fold")
    for x in a.advice[:6]:
        t.add_row(fmt_ns(x.saving_ns), x.kind, escape(redact_text(x.title)), escape(redact_text(x.evidence)))
    console.print(t)


def render_roofline(a: Analysis, console: Console, shown: set[str]) -> None:
    """The advice, the wall equation, utilization and the by-bound tables ('roofline'), and the
    iterations, communication and launch tables ('timeline'), as far as `shown` asks."""
    if "advice" in shown:
        render_advice(a, console)
    if "roofline" in shown:
        _render_whatif(a, console)
        render_equation(a, console)
    if "timeline" in shown:
        _render_timeline(a, console)
    if "roofline" in shown:
        _render_by(a, console)
        _render_above_floor(a, console)


def _render_whatif(a: Analysis, console: Console) -> None:
    """What-if (analysis.whatif): projected step time per device and the ops with the most projected time."""
    w = getattr(a, "whatif", None)
    if w is None or w.empty:
        return
    t = Table(
        box=box.SIMPLE_HEAD,
        title="What-if: projected time (each op scaled by its bound's floor ratio; runtime and idle kept)",
        title_justify="left",
    )
    for col in ("device", "measured on", "projected on", "window", "projected", "precision"):
        t.add_column(col, justify="right" if col in ("window", "projected") else "left")
    for r in w.to_dict(orient="records"):
        t.add_row(
            f"rank{r['rank']}/{r['device']}",
            r["source"],
            r["target"],
            fmt_ns(r["window_ns"]),
            fmt_ns(r["projected_ns"]),
            escape(str(r.get("peak_used", "") or "-")),
        )
    console.print(t)
    u = a.units
    g = u.groupby(["name", "projection"], sort=False).agg(
        time_ns=("time_ns", "sum"), projected_ns=("projected_ns", "sum")
    )
    g = g.sort_values("projected_ns", ascending=False).head(10).reset_index()
    t = Table(
        box=box.SIMPLE_HEAD,
        title="What-if per op (projected = measured x floor ratio of its bound)",
        title_justify="left",
    )
    for col in ("op", "measured", "projected", "method"):
        t.add_column(col, justify="right" if col in ("measured", "projected") else "left", overflow="fold")
    for r in g.to_dict(orient="records"):
        t.add_row(escape(redact_text(str(r["name"]))), fmt_ns(r["time_ns"]), fmt_ns(r["projected_ns"]), r["projection"])
    console.print(t)


def render_equation(a: Analysis, console: Console) -> None:
    """The wall equation per device, and utilization against the peaks."""
    if not a.equation.empty:
        title = "Where the time goes: window = compute + memory + comm + runtime + unknown + idle"
        if a.whatif_dtype:
            title += f"  [what-if: GEMMs at {a.whatif_dtype}]"
        console.print(title)  # above, not as the table's title: a narrow table would wrap it
        t = Table(box=box.SIMPLE_HEAD)
        rows = a.equation.head(MAX_DEVICES).to_dict(orient="records")
        t.add_column("")
        for r in rows:
            label = f"rank{r['rank']}/{r['device']}"
            t.add_column(f"{label}\n{a.hardware.get(label, '') or 'no spec'}", justify="right")
        t.add_row("window", *[fmt_ns(r["window_ns"]) for r in rows])
        wide = len(rows) > 3  # many devices: shares only, so the columns stay narrow
        for name, col in _PARTS:
            t.add_row(
                name,
                *[
                    _pct(r[col], r["window_ns"]) if wide else f"{fmt_ns(r[col])} {_pct(r[col], r['window_ns'])}"
                    for r in rows
                ],
            )
        console.print(t)
        if len(a.equation) > MAX_DEVICES:
            console.print(
                f"  ... and {len(a.equation) - MAX_DEVICES} more devices (--json has them all; --rank R shows one)"
            )
    if not a.utilization.empty:
        bases = set(a.utilization["time_base"])  # analysis.mfu: the steps' wall time, else the window
        t = Table(
            box=box.SIMPLE_HEAD,
            title=f"MFU, MBU (achieved / peak) over {bases.pop() if len(bases) == 1 else 'each time base'}; "
            "time at the floors",
            title_justify="left",
        )
        for col in ("device", "over", "achieved", "MFU", "bandwidth", "MBU", "at floors", "no floor"):
            t.add_column(col, justify="left" if col == "device" else "right")
        mixed = len(set(a.utilization["time_base"])) > 1
        for r in a.utilization.to_dict(orient="records"):
            t.add_row(
                f"rank{r['rank']}/{r['device']}",
                fmt_ns(r["time_ns"]) + (f" ({r['time_base']})" if mixed else ""),
                fmt_si(r["flops_per_s"], "FLOP/s"),
                f"{_util(r['compute_util'])} {r['compute_dtype']}",
                fmt_si(r["bytes_per_s"], "B/s"),
                _util(r["memory_util"]),
                fmt_ns(r["floor_ns"]),
                fmt_ns(r["unknown_ns"]),
            )
        console.print(t)


def _render_timeline(a: Analysis, console: Console) -> None:
    if not a.iterations.empty:
        t = Table(
            box=box.SIMPLE_HEAD,
            title="Iterations (ProfilerStep): each step's device work, its bounds, MFU / MBU over the step's wall time",
            title_justify="left",
        )
        for col in ("device", "step", "wall", "device window", "busy", "top bound", "idle", "MFU", "MBU"):
            t.add_column(col, justify="left" if col in ("device", "top bound") else "right")
        for r in a.iterations.head(16).to_dict(orient="records"):
            parts = {name: r[col] for name, col in _PARTS[:5]}
            top = max(parts, key=parts.get)
            idle = r["idle_host_ns"] + r["idle_sync_ns"] + r["idle_other_ns"]
            t.add_row(
                f"rank{r['rank']}/{r['device']}",
                str(r["step"]),
                fmt_ns(r["wall_ns"]) if r["wall_ns"] == r["wall_ns"] else "-",  # NaN: outside every step
                fmt_ns(r["window_ns"]),
                _pct(r["busy_ns"], r["window_ns"]),
                f"{top} {_pct(parts[top], r['window_ns'])}",
                _pct(idle, r["window_ns"]),
                _util(r["mfu"]),
                _util(r["mbu"]),
            )
        console.print(t)
    if not a.communication.empty:
        t = Table(box=box.SIMPLE_HEAD, title="Communication (union of collective work)", title_justify="left")
        for col in ("device", "communication", "overlapped", "exposed", "exposed %"):
            t.add_column(col, justify="left" if col == "device" else "right")
        for r in a.communication.to_dict(orient="records"):
            t.add_row(
                f"rank{r['rank']}/{r['device']}",
                fmt_ns(r["comm_ns"]),
                fmt_ns(r["overlapped_ns"]),
                fmt_ns(r["exposed_ns"]),
                _pct(r["exposed_ns"], r["comm_ns"]),
            )
        console.print(t)
    if not a.launches.empty:
        t = Table(
            box=box.SIMPLE_HEAD,
            title="Launch delay (work start - launch call) and queue depth per stream",
            title_justify="left",
        )
        for col in ("stream", "launches", "p50", "p95", "max", "queue mean", "queue max"):
            t.add_column(col, justify="left" if col == "stream" else "right")
        for r in a.launches.head(12).to_dict(orient="records"):
            t.add_row(
                r["stream"],
                f"{r['launches']:,}",
                fmt_ns(r["delay_p50_ns"]),
                fmt_ns(r["delay_p95_ns"]),
                fmt_ns(r["delay_max_ns"]),
                f"{r['queue_mean']:.1f}",
                str(r["queue_max"]),
            )
        console.print(t)


def _render_above_floor(a: Analysis, console: Console) -> None:
    """One line per bound for units above their ceiling (analysis.ceiling), with the likely cause."""
    u = a.units
    if u.empty or "above_ceiling" not in u:
        return
    fast = u[u["above_ceiling"].to_numpy(dtype=bool)]
    for (bound, note), n in fast.groupby(["bound", "ceiling_note"]).size().items():
        console.print(
            f"[dim]{n} {bound}-bound units ran more than 10% above their ceiling; "
            f"likely cause: {note} (docs/roofline.md)[/]"
        )


def _render_by(a: Analysis, console: Console) -> None:
    for title, frame, key in (
        ("Unit time by bound", a.by_bound, "bound"),
        ("by op family", a.by_family, "family"),
        ("by dtype", a.by_dtype, "dtype"),
    ):
        if frame.empty:
            continue
        t = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
        for col in (key, "units", "time", "share %"):
            t.add_column(col, justify="left" if col == key else "right")
        for r in frame.head(8).to_dict(orient="records"):
            t.add_row(str(r[key]), f"{r['units']:,}", fmt_ns(r["time_ns"]), f"{100 * r['share']:.1f}")
        console.print(t)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _util(v: float) -> str:
    """MFU / MBU as the dashboard writes them (3 significant digits: 0.0306%, 28.6%)."""
    return "-" if v != v else f"{100 * v:.3g}%"
