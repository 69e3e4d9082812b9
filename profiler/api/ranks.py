"""The cross-rank tables of a multi-rank `Analysis` (analysis.cross_rank): each rank's collective
instances (computed here, or handed in by an engine that computed them per rank on its workers)
matched across ranks, and set beside each rank's bound breakdown."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from profiler.api.hardware import world_sizes
from profiler.model.hardware import HardwareSpec
from profiler.model.trace import Trace

#: The cross-rank tables an Analysis holds (analysis/columns.py declares their columns).
CROSS_RANK_TABLES = ("collectives", "stragglers", "rank_summary", "comm_matrix")


def rank_instances(trace: Trace, units: pd.DataFrame | None = None, comm: pd.DataFrame | None = None, patterns=None):
    """The collective instances of every rank of `trace` (analysis.collective_instances); `units`
    and `comm` (analysis.units.units, analysis.cost.comm.comm_table) when already at hand."""
    from analysis.collective_instances import collective_instances
    from analysis.cost.comm import comm_table, unit_work_kinds
    from analysis.units import units as find_units

    if units is None or comm is None:
        from profiler.api.pipeline import collective_patterns

        pats = patterns if patterns is not None else collective_patterns(None)
        units = find_units(trace)
        comm = comm_table(units, world_sizes(trace), pats, unit_work_kinds(trace.events, units, pats))
    return collective_instances(trace, units, comm, world_sizes(trace))


def cross_rank_tables(
    trace: Trace,
    instances: pd.DataFrame,
    equation: pd.DataFrame,
    spec_for: Callable[[int, str], HardwareSpec | None],
) -> dict[str, pd.DataFrame]:
    """CROSS_RANK_TABLES of `trace`'s ranks from their `instances` and the wall `equation`
    (analysis.attribution.attribute); the link of each rank is its accelerator's spec's first."""
    from analysis.cross_rank import comm_matrix, match_collectives, rank_summary, stragglers

    link: dict[int, float] = {}
    for r, d in zip(trace.devices["rank"], trace.devices["device"].astype(str)):
        spec = spec_for(int(r), d) if d != "cpu" else None
        if spec is not None and spec.links:
            link.setdefault(int(r), spec.links[0].bandwidth)
    matched = match_collectives(instances, link)
    world = max(world_sizes(trace).values(), default=len(trace.ranks))
    return {
        "collectives": matched,
        "stragglers": stragglers(matched),
        "rank_summary": rank_summary(instances, matched, equation),
        "comm_matrix": comm_matrix(instances, world),
    }
