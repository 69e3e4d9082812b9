"""`Trace`: the one currency between collectors, analysis and the faces.

Columnar: four pandas tables declared in `profiler.model.schema`, plus per-rank metadata (secrets
already redacted by the collector) and the count of event-level problems met while reading.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from profiler.model.schema import TABLES, Column


class TraceInvalid(ValueError):
    """A table does not match its declaration in profiler.model.schema."""


@dataclass
class Problems:
    """Event-level problems met while reading, counted by reason; reported, never hidden.

    A reason reads as a phrase that follows a count: "3 events skipped: missing dur".
    """

    counts: Counter = field(default_factory=Counter)

    def add(self, reason: str, n: int = 1) -> None:
        if n:
            self.counts[reason] += int(n)

    def merge(self, other: Problems) -> None:
        self.counts.update(other.counts)

    def __bool__(self) -> bool:
        return bool(self.counts)

    def lines(self) -> list[str]:
        return [f"{n} {reason}" for reason, n in sorted(self.counts.items(), key=lambda kv: -kv[1])]


@dataclass(frozen=True)
class Trace:
    """A loaded trace.

    events:   one row per interval; columns in profiler.model.schema.EVENT_COLUMNS (ns, int64).
    counters: one row per sample; profiler.model.schema.COUNTER_COLUMNS.
    flows:    dependency edges between event ids; profiler.model.schema.FLOW_COLUMNS.
    devices:  one row per (rank, device); profiler.model.schema.DEVICE_COLUMNS.
    metadata: per rank, the source's top-level fields (redacted), plus 'files'.
    problems: event-level problems met while reading.
    """

    events: pd.DataFrame
    counters: pd.DataFrame
    flows: pd.DataFrame
    devices: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    problems: Problems = field(default_factory=Problems)

    def validate(self) -> Trace:
        """Check every table against its declaration and the model's invariants; return self."""
        for table, cols in TABLES.items():
            _check_table(table, getattr(self, table), cols)
        ev = self.events
        if len(ev):
            if (ev["dur"].to_numpy() < 0).any():
                raise TraceInvalid("events: negative dur")
            ids = ev["id"].to_numpy()
            increasing = bool((ids[1:] > ids[:-1]).all())  # how collectors number them; else sort
            if not increasing and (np.diff(np.sort(ids)) == 0).any():
                raise TraceInvalid("events: id is not unique")
            for ref in ("parent_id", "op_id"):
                r = ev[ref].to_numpy()
                bad = (r != -1) & ~np.isin(r, ids)
                if bad.any():
                    raise TraceInvalid(f"events: {ref} refers to {int(bad.sum())} missing ids")
        if len(self.flows):
            ids = ev["id"].to_numpy()
            for end in ("src", "dst"):
                if not np.isin(self.flows[end].to_numpy(), ids).all():
                    raise TraceInvalid(f"flows: {end} refers to missing event ids")
        return self

    @property
    def ranks(self) -> list[int]:
        return sorted(int(r) for r in pd.unique(self.devices["rank"]))


def _check_table(table: str, df: pd.DataFrame, cols: tuple[Column, ...]) -> None:
    for c in cols:
        if c.name not in df.columns:
            if c.required:
                raise TraceInvalid(f"{table}: missing column {c.name!r}")
            continue
        dtype = str(df[c.name].dtype)
        if dtype != c.dtype:
            raise TraceInvalid(f"{table}.{c.name}: dtype {dtype}, declared {c.dtype}")
        if c.dtype.startswith("int") and df[c.name].isna().any():  # defensive: ints cannot be NA
            raise TraceInvalid(f"{table}.{c.name}: has missing values")
    extra = set(df.columns) - {c.name for c in cols}
    if extra:
        raise TraceInvalid(f"{table}: undeclared columns {sorted(extra)}")


def empty_table(table: str) -> pd.DataFrame:
    """An empty DataFrame with the declared required columns and dtypes of `table`."""
    return pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in TABLES[table] if c.required})
