"""The analysis each exported slice carries: `units` (analysis.roofline.classify) joined to events.

A unit's own event (the op, or device work no op launched) carries the unit's figures. Device
work beneath an op carries the op's bound and efficiency, and a share of its FLOPs and bytes in
proportion to duration (docs/architecture.md: per-kernel figures are estimates, and say so):

    flops_k = flops_unit * dur_k / sum(dur of the unit's work)     (equal split when that sum is 0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from profiler.model.schema import DEVICE_WORK_KINDS


@dataclass(frozen=True)
class PerfColumns:
    """Per event row (aligned with trace.events): NaN / '' where the event carries nothing.

    flops (FLOP), bytes (byte), floor_ns (ns), efficiency (floor / measured), bound, family,
    estimate (True: a duration share of the launching op's figures).
    """

    flops: np.ndarray
    bytes: np.ndarray
    floor_ns: np.ndarray
    efficiency: np.ndarray
    bound: np.ndarray
    family: np.ndarray
    estimate: np.ndarray

    def has(self) -> np.ndarray:
        return self.bound != ""


def perf_columns(events: pd.DataFrame, units: pd.DataFrame | None) -> PerfColumns:
    """Join the classified `units` table to `events` by unit_id (own event) and op_id (work)."""
    n = len(events)
    nan = np.full(n, np.nan)
    out = PerfColumns(
        nan.copy(),
        nan.copy(),
        nan.copy(),
        nan.copy(),
        np.full(n, "", dtype=object),
        np.full(n, "", dtype=object),
        np.zeros(n, dtype=bool),
    )
    if units is None or len(units) == 0 or "bound" not in units.columns:
        return out
    u = units.drop_duplicates("unit_id").set_index("unit_id")
    ids = events["id"].to_numpy()
    own = pd.Index(u.index).get_indexer(ids)  # the unit whose own event this row is
    is_work = events["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    op_id = events["op_id"].to_numpy()
    under = np.where(is_work & (op_id >= 0) & (own < 0), pd.Index(u.index).get_indexer(op_id), -1)
    col = {c: u[c].to_numpy() for c in ("flops", "bytes", "floor_ns", "efficiency")}
    text = {c: u[c].to_numpy(dtype=object) for c in ("bound", "family")}
    rows = np.flatnonzero(own >= 0)
    for c in col:
        getattr(out, c)[rows] = col[c][own[rows]]
    for c in text:
        getattr(out, c)[rows] = text[c][own[rows]]
    work = np.flatnonzero(under >= 0)
    if len(work):
        dur = events["dur"].to_numpy()[work].astype(np.float64)
        unit = under[work]
        total = np.bincount(unit, weights=dur, minlength=len(u))[unit]
        count = np.bincount(unit, minlength=len(u))[unit]
        share = np.where(total > 0, dur / np.where(total > 0, total, 1), 1.0 / count)
        out.flops[work] = col["flops"][unit] * share
        out.bytes[work] = col["bytes"][unit] * share
        out.efficiency[work] = col["efficiency"][unit]
        out.bound[work] = text["bound"][unit]
        out.family[work] = text["family"][unit]
        out.estimate[work] = True
    return out
