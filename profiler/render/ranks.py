"""The cross-rank section of `perf analyze` on a multi-rank trace: each rank's bound breakdown
side by side, the stragglers, and the slowest collectives (analysis.cross_rank)."""

from __future__ import annotations

import math

from rich import box
from rich.console import Console
from rich.table import Table

from profiler.api import Analysis
from profiler.model.numfmt import fmt_bytes, fmt_ns, fmt_si

#: Ranks shown side by side (the ranks that wait least, then most, when there are more) and
#: collectives listed.
MAX_RANKS, MAX_COLLECTIVES = 16, 5


def render_ranks(a: Analysis, console: Console, *, short: bool = False) -> None:
    """Nothing on a one-rank trace. `short` (the default report): the rank that sets the step, the
    stragglers and the 3 slowest collectives; the side-by-side table (the bound columns repeat the
    wall equation's) behind --section ranks / --full."""
    rs = a.rank_summary
    if rs.empty:
        return
    if short:
        console.print("Ranks (late: after the next-latest rank to arrive; --section ranks: side by side)")
        _render_setter_and_stragglers(a, console)
        _render_collectives(a, console, 3)
        return
    shown = rs.sort_values("wait_ns", kind="stable")
    if len(shown) > MAX_RANKS:
        shown = shown.iloc[list(range(MAX_RANKS // 2)) + list(range(len(shown) - MAX_RANKS // 2, len(shown)))]
    t = Table(box=box.SIMPLE_HEAD, title="Ranks side by side (accelerator time by bound)", title_justify="left")
    for col in ("rank", "window", "compute", "memory", "comm", "runtime", "unknown", "waits at coll.", "delays others"):
        t.add_column(col, justify="right")
    for r in shown.sort_values("rank").itertuples(index=False):
        t.add_row(
            f"{r.rank}{' *' if r.sets_step else ''}",
            fmt_ns(r.window_ns),
            *(fmt_ns(getattr(r, f"{b}_ns")) for b in ("compute", "memory", "communication", "runtime", "unknown")),
            fmt_ns(r.wait_ns),
            fmt_ns(r.late_ns),
        )
    console.print(t)
    console.print("  (late: after the next-latest rank to arrive at the collective)")
    _render_setter_and_stragglers(a, console)
    _render_collectives(a, console, MAX_COLLECTIVES)


def _render_setter_and_stragglers(a: Analysis, console: Console) -> None:
    rs = a.rank_summary
    setter = rs.loc[rs["sets_step"]]
    if len(setter):
        r = setter.iloc[0]
        console.print(
            f"  * rank {int(r['rank'])} sets the step time: it waits least at collectives ({fmt_ns(r['wait_ns'])})"
        )
    for s in a.stragglers.head(3).itertuples(index=False):
        console.print(
            f"  straggler: rank {s.rank}, last at {s.collectives} of {len(a.collectives)} collectives, "
            f"{fmt_ns(s.delay_ns)} late on average ({fmt_ns(s.total_delay_ns)} in all)"
        )


def _render_collectives(a: Analysis, console: Console, limit: int) -> None:
    c = a.collectives
    if c.empty:
        return
    slow = c.assign(total=c["wait_ns"] + c["transfer_ns"]).nlargest(limit, "total")
    t = Table(box=box.SIMPLE_HEAD, title="Slowest collectives (wait = sync skew)", title_justify="left")
    for col in ("#", "collective", "bytes", "wait", "transfer", "last rank", "bus bw", "of link"):
        t.add_column(col, justify="left" if col == "collective" else "right")
    for r in slow.itertuples(index=False):
        t.add_row(
            f"{r.group}.{r.seq}",
            r.name,
            fmt_bytes(r.bytes) if not math.isnan(r.bytes) else "?",
            fmt_ns(r.wait_ns),
            fmt_ns(r.transfer_ns),
            str(r.last_rank),
            fmt_si(r.bus_bandwidth, "B/s") if not math.isnan(r.bus_bandwidth) else "?",
            f"{100 * r.link_share:.1f}%" if not math.isnan(r.link_share) else "?",
        )
    console.print(t)
