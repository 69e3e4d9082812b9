"""Rich tables for the insight sections of `perf analyze`: critical path, memory, LLM serving and
the module tree. Each prints nothing when its section has nothing to show."""

from __future__ import annotations

import math

import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler.api import Analysis
from profiler.model.redact import redact_text
from profiler.model.numfmt import fmt_bytes, fmt_ns

MAX_RANKS = 8
MAX_MODULE_ROWS = 12


def render_insight(a: Analysis, console: Console, shown: set[str]) -> None:
    if "critical_path" in shown:
        render_critical_path(a, console)
    if "memory" in shown:
        render_memory(a, console)
    if "llm" in shown:
        render_llm(a, console)
    if "modules" in shown:
        render_modules(a, console)


def render_critical_path(a: Analysis, console: Console) -> None:
    """Per rank: the path's length against the wall, its split by class, and the verdict."""
    if not a.critical_path:
        return
    classes = list(a.critical_path[0].by_class["class"])
    short = {
        "compute": "comp",
        "memory": "mem",
        "communication": "comm",
        "runtime": "rt",
        "unknown": "unk",
        "host": "host",
        "waiting": "wait",
    }
    t = Table(
        box=box.SIMPLE_HEAD,
        title="Critical path (longest chain of dependent work; % of the path by class)",
        title_justify="left",
        padding=(0, 1),
        pad_edge=False,
    )
    for col in ("rank", "path", "wall", *[short.get(c, c) for c in classes], "verdict"):
        t.add_column(col, justify="left" if col == "verdict" else "right", no_wrap=True)
    for cp in a.critical_path[:MAX_RANKS]:
        share = dict(zip(cp.by_class["class"], cp.by_class["share"]))
        t.add_row(
            str(cp.rank),
            fmt_ns(cp.length_ns),
            fmt_ns(cp.wall_ns),
            *[f"{100 * share.get(c, 0.0):.0f}" for c in classes],
            cp.verdict,
        )
    console.print(t)
    longest = a.critical_path[0].segments
    if len(longest):
        top = longest[longest["event_id"] >= 0].nlargest(5, "dur_ns")
        s = Table(
            box=box.SIMPLE_HEAD,
            title=f"Longest stretches on rank {a.critical_path[0].rank}'s path",
            title_justify="left",
        )
        for col in ("name", "on", "class", "time"):
            s.add_column(
                col,
                justify="right" if col == "time" else "left",
                overflow="ellipsis",
                no_wrap=col == "name",
                max_width=60 if col == "name" else None,
            )
        for r in top.to_dict(orient="records"):
            s.add_row(escape(redact_text(str(r["name"]))), str(r["on"]), str(r["class"]), fmt_ns(r["dur_ns"]))
        console.print(s)


def render_memory(a: Analysis, console: Console) -> None:
    """Allocator peak per device (from [memory] samples) and the KV-cache footprint."""
    if len(a.memory):
        t = Table(box=box.SIMPLE_HEAD, title="Memory (allocator samples)", title_justify="left")
        for col in (
            "rank",
            "device",
            "samples",
            "peak allocated",
            "of capacity",
            "peak reserved",
            "final",
            "op at peak",
        ):
            t.add_column(col, justify="left" if col in ("device", "op at peak") else "right", overflow="ellipsis")
        for r in a.memory.head(MAX_RANKS).to_dict(orient="records"):
            peak = r["peak_allocated_bytes"]
            if not _known(peak):  # older traces record only per-sample bytes: the peak above the start
                peak = r["peak_above_start_bytes"]
            t.add_row(
                str(r["rank"]),
                str(r["device"]),
                f"{r['samples']:,}",
                _bytes(peak),
                _pct(r["peak_fraction"]),
                _bytes(r["peak_reserved_bytes"]),
                _bytes(r["final_allocated_bytes"]),
                escape(redact_text(str(r["peak_op"] or "")))[:48],
            )
        console.print(t)
    kv = a.kv_cache
    if len(kv):
        k = Table(box=box.SIMPLE_HEAD, title="KV cache", title_justify="left")
        for col in ("rank", "device", "layers", "bytes/token", "footprint", "of capacity", "note"):
            k.add_column(col, justify="left" if col in ("device", "note") else "right", overflow="fold")
        for r in kv.head(MAX_RANKS).to_dict(orient="records"):
            k.add_row(
                str(r["rank"]),
                str(r["device"]),
                _int(r["layers"]),
                _int(r["bytes_per_token"]),
                _bytes(r["kv_cache_bytes"]),
                _pct(r["share"]),
                escape(redact_text(str(r["note"] or ""))),
            )
        console.print(k)


def render_llm(a: Analysis, console: Console) -> None:
    """Prefill vs decode: tokens per second, TTFT, TPOT and the decode steps' KV-read floor."""
    s = a.llm_summary
    if not len(s):
        return
    t = Table(box=box.SIMPLE_HEAD, title="LLM serving (per phase; TTFT a lower bound)", title_justify="left")
    for col in ("rank", "phase", "steps", "tokens", "tok/s", "TTFT", "TPOT", "device", "host", "KV read", "KV eff"):
        t.add_column(
            col, justify="left" if col == "phase" else "right", no_wrap=True, min_width=7 if col == "phase" else None
        )
    for r in s.to_dict(orient="records"):
        t.add_row(
            str(r["rank"]),
            str(r["phase"]),
            f"{r['steps']:,}",
            _int(r["tokens"]),
            _num(r["tokens_per_s"]),
            _ns(r["ttft_ns"]),
            _ns(r["tpot_ns"]),
            _ns(r.get("tpot_device_ns")),
            _ns(r.get("tpot_host_ns")),
            _bytes(r["kv_read_bytes"]),
            _pct(r["kv_floor_efficiency"]),
        )
    console.print(t)
    notes = sorted({str(n) for n in s["note"] if isinstance(n, str) and n})
    for n in notes:
        console.print(f"  [dim]{escape(redact_text(n))}[/]")


def render_modules(a: Analysis, console: Console) -> None:
    """The nn.Module tree's top (roots and their children) and the time by module type (summed
    self time over every instance: a decoder's 36 layers are one row); the whole tree is in --json."""
    m = a.modules
    if not len(m):
        return
    cols = ("calls", "total", "self", "compute", "memory", "runtime", "unknown")
    t = Table(box=box.SIMPLE_HEAD, title="Modules (time of the units inside each nn.Module call)", title_justify="left")
    t.add_column("module", overflow="ellipsis", no_wrap=True, max_width=48)
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    top = m[m["depth"] <= 1].head(MAX_MODULE_ROWS)
    for r in top.to_dict(orient="records"):
        t.add_row(
            escape(redact_text("  " * int(r["depth"]) + str(r["name"]))),
            f"{r['calls']:,}",
            fmt_ns(r["total_ns"]),
            fmt_ns(r["self_ns"]),
            *[fmt_ns(r[f"{c}_ns"]) for c in cols[3:]],
        )
    console.print(t)
    kind = m["name"].astype(str).str.replace(r"_\d+$", "", regex=True)
    by = m.assign(type=kind).groupby("type")[["calls", "self_ns"]].sum().sort_values("self_ns", ascending=False)
    k = Table(box=box.SIMPLE_HEAD, title="Time by module type (self time over every instance)", title_justify="left")
    k.add_column("type", overflow="ellipsis", no_wrap=True, max_width=48)
    k.add_column("calls", justify="right", no_wrap=True)
    k.add_column("self", justify="right", no_wrap=True)
    for name, r in by.head(10).iterrows():
        k.add_row(escape(redact_text(str(name))), f"{int(r['calls']):,}", fmt_ns(r["self_ns"]))
    console.print(k)


def _known(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v)) and not pd.isna(v) and v >= 0


def _bytes(v) -> str:
    """Bytes, in the one base of every output (profiler.model.numfmt: decimal SI)."""
    return fmt_bytes(v) if _known(v) else "-"


def _pct(v) -> str:
    return f"{100 * v:.1f}%" if _known(v) else "-"


def _int(v) -> str:
    return f"{int(v):,}" if _known(v) else "-"


def _num(v) -> str:
    return f"{v:,.0f}" if _known(v) else "-"


def _ns(v) -> str:
    return fmt_ns(v) if _known(v) else "-"
