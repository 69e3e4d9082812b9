"""Put compile passes on the same `Trace` as the runtime events (one clock: time.time_ns)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from collectors.torch_compile.phases import compile_events
from profiler.model.trace import Trace


def with_compile_events(trace: Trace, phases: pd.DataFrame, rank: int = 0) -> Trace:
    """`trace` plus one `compile_pass` event per compile step (collectors.torch_compile.phases),
    on the track 'rank<rank>/compiler', ids after the trace's own. Returns a new, validated Trace."""
    if phases.empty:
        return trace
    ev = trace.events
    first = int(ev["id"].max()) + 1 if len(ev) else 0
    extra = compile_events(phases, rank=rank, first_id=first)
    cols = list(ev.columns)
    extra = extra.reindex(columns=cols)
    merged = pd.concat([_plain(ev), _plain(extra)], ignore_index=True)
    for c in cols:
        if isinstance(ev[c].dtype, pd.CategoricalDtype):
            merged[c] = pd.Categorical(merged[c].astype(object).fillna(""))
        elif c in extra.columns and merged[c].isna().any():  # an optional column the compiler rows lack
            merged[c] = merged[c].astype(np.float64)
    merged = merged.astype({c: ev[c].dtype for c in cols if not isinstance(ev[c].dtype, pd.CategoricalDtype)})
    return replace(trace, events=merged).validate()


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Categoricals as object columns, so frames with different categories concatenate cleanly."""
    out = df.copy(deep=False)
    for c in out.columns:
        if isinstance(out[c].dtype, pd.CategoricalDtype):
            out[c] = out[c].astype(object)
    return out
