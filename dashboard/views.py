"""Cached per-trace products the pages share, built from the store's cached Analysis."""

from __future__ import annotations

import pandas as pd

from dashboard import tables
from dashboard.store import TraceStore, check_hardware
from dashboard.timeline_data import TimelineIndex, build_index
from profiler.api import refloor


def units_for(store: TraceStore, tid: str, hardware: str | None) -> pd.DataFrame:
    """Classified units (analysis.roofline.classify columns) with every device floored on
    `hardware` (a preset) or on its matched spec (None), cached.

    A what-if re-floors the matched analysis' units: units and costs do not depend on the
    hardware, so `profiler.api.refloor(units, trace, hardware)` (classify, the call
    `profiler.api.analyze(hardware=...)` makes) gives the same table without re-running the
    cost model (tests/test_dashboard_figures.py checks the two tables agree). The roofline and ops pages
    switch hardware this way; the overview runs the full analysis.
    """
    hw = check_hardware(hardware)
    base = store.analysis(tid).units
    if hw is None or base.empty:
        return base if hw is None else store.analysis(tid, hw).units
    return store.view(tid, hw, "units", lambda: refloor(base, store.trace(tid), hw))


def ops_for(store: TraceStore, tid: str, hardware: str | None) -> pd.DataFrame:
    """dashboard.tables.op_table of the trace's focus units under `hardware` (cached)."""
    return store.view(
        tid, hardware, "ops", lambda: tables.op_table(tables.focus_units(units_for(store, tid, hardware)))
    )


def timeline_for(store: TraceStore, tid: str) -> TimelineIndex:
    """The timeline index (dashboard.timeline_data.build_index) of the trace (cached; no hardware)."""
    return store.view(tid, None, "timeline", lambda: build_index(store.trace(tid)))
