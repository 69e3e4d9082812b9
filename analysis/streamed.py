"""The sections of an analysis that can be computed one chunk of events at a time, for traces
larger than memory (profiler/api/stream.py feeds the chunks).

Each chunk updates totals that merge exactly: counts and sums per name, first start and last
end per device, and each device's busy intervals kept as their union (analysis.intervals.runs):
the union of the runs so far with the chunk's intervals is the union of everything so far, so
busy time is exact. The tables come out in the in-memory functions' columns and order
(analysis.busy.device_time, analysis.top.top_kernels / top_ops), so the faces render them as is.

Memory: the runs (two int64 per maximal busy stretch of a device: at most one per device event,
far fewer where work is back to back) and one row per distinct name; not the events.

What needs every event at once is not here: an op's device time (the kernels its calls
launched, found through the whole thread's nesting), the roofline (a kernel's FLOPs and bytes
come from its launching op's shapes), the critical path and the verdict built on them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.busy import _HOST_BUSY_KINDS
from analysis.intervals import runs
from analysis.top import TOP_COLUMNS, _finish
from profiler.model.schema import DEVICE_WORK_KINDS, Kind

#: The columns `StreamTotals.add` reads of each chunk (a projection of the events table).
COLUMNS = ["name", "kind", "ts", "dur", "rank", "device", "shapes"]
_STEP = re.compile(r"ProfilerStep#(\d+)$")
_DEVICE_KINDS = [k.value for k in DEVICE_WORK_KINDS]


@dataclass
class _Place:
    """One (rank, device): the union of its work so far, and its first start and last end."""

    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ends: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    first: int = np.iinfo(np.int64).max
    last: int = np.iinfo(np.int64).min
    events: int = 0
    worked: bool = False  # some interval lasts > 0 ns (analysis.busy.device_time's rule)


@dataclass
class StreamTotals:
    """Totals over the chunks added so far. Times in ns on the chunks' clock."""

    places: dict[tuple[int, str], _Place] = field(default_factory=dict)
    kernels: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (kind, name) -> [count, total]
    ops: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (name, shapes) -> [count, total]
    kinds: Counter = field(default_factory=Counter)
    steps: set[int] = field(default_factory=set)
    start: int = np.iinfo(np.int64).max
    end: int = np.iinfo(np.int64).min
    events: int = 0

    def add(self, ev: pd.DataFrame) -> None:
        """Fold one chunk (columns COLUMNS; categoricals or strings) into the totals."""
        if not len(ev):
            return
        ts, dur = ev["ts"].to_numpy(np.int64), ev["dur"].to_numpy(np.int64)
        end = ts + dur
        self.events += len(ev)
        self.start, self.end = min(self.start, int(ts.min())), max(self.end, int(end.max()))
        kind = ev["kind"].astype(object).to_numpy()
        self.kinds.update(pd.Series(kind).value_counts().to_dict())
        names = ev["name"].astype(object).to_numpy()
        annotation = kind == Kind.ANNOTATION.value
        for n in pd.unique(names[annotation]):
            m = _STEP.match(str(n))
            if m:
                self.steps.add(int(m.group(1)))
        self._busy(ev, kind, ts, end)
        device_work = np.isin(kind, _DEVICE_KINDS)
        _fold(self.kernels, kind[device_work], names[device_work], dur[device_work])
        is_op = np.isin(kind, [Kind.OP.value, Kind.COLLECTIVE.value])
        _fold(self.ops, names[is_op], ev["shapes"].astype(object).to_numpy()[is_op], dur[is_op])

    def _busy(self, ev: pd.DataFrame, kind: np.ndarray, ts: np.ndarray, end: np.ndarray) -> None:
        device = ev["device"].astype(object).to_numpy()
        on_gpu = device != "cpu"
        work = np.where(on_gpu, np.isin(kind, _DEVICE_KINDS), np.isin(kind, list(_HOST_BUSY_KINDS)))
        rank = ev["rank"].to_numpy()[work]
        device, s, e = device[work], ts[work], end[work]
        key = pd.MultiIndex.from_arrays([rank, device])
        codes, uniq = pd.factorize(key)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
        for i, (r, d) in enumerate(uniq):
            rows = order[bounds[i] : bounds[i + 1]]
            p = self.places.setdefault((int(r), str(d)), _Place())
            gs, ge = s[rows], e[rows]
            p.starts, p.ends = runs(np.concatenate([p.starts, gs]), np.concatenate([p.ends, ge]))
            p.first, p.last = min(p.first, int(gs.min())), max(p.last, int(ge.max()))
            p.events += len(rows)
            p.worked |= bool((ge > gs).any())

    def device_time(self, shift: dict[int, int] | None = None) -> pd.DataFrame:
        """As analysis.busy.device_time; `shift` adds each rank's clock offset (ns) to its times."""
        rows = []
        for (rank, device), p in sorted(self.places.items()):
            if not p.worked:
                continue
            off = (shift or {}).get(rank, 0)
            busy = int((p.ends - p.starts).sum())
            window = p.last - p.first
            rows.append((rank, device, p.first + off, p.last + off, window, busy, window - busy, p.events))
        cols = ["rank", "device", "start_ns", "end_ns", "window_ns", "busy_ns", "idle_ns", "work_events"]
        return pd.DataFrame(rows, columns=cols)

    def top_kernels(self, busy_ns: int, n: int | None = 20) -> pd.DataFrame:
        """As analysis.top.top_kernels."""
        g = _table(self.kernels, ("kind", "name"))
        g["shapes"] = ""
        g["device_ns"] = g["total_ns"]
        return _finish(g, None, busy_ns, "total_ns", n)

    def top_ops(self, n: int | None = 20) -> pd.DataFrame:
        """Host ops by (name, shapes), most host time first, as analysis.top.top_ops's columns;
        device_ns is -1 and share NaN: not computed (the module docstring says why)."""
        g = _table(self.ops, ("name", "shapes"))
        g["device_ns"] = 0
        out = _finish(g, Kind.OP.value, 0, "total_ns", n)
        out["device_ns"] = -1
        out["share"] = np.nan
        return out[TOP_COLUMNS]


def _fold(into: dict[tuple[str, str], list[int]], a: np.ndarray, b: np.ndarray, dur: np.ndarray) -> None:
    """Add count and summed dur per (a, b) pair of this chunk."""
    if not len(a):
        return
    g = pd.DataFrame({"a": a, "b": b, "dur": dur}).groupby(["a", "b"], sort=False)["dur"].agg(["size", "sum"])
    for (x, y), count, total in zip(g.index, g["size"].to_numpy(), g["sum"].to_numpy()):
        slot = into.setdefault((str(x), str(y)), [0, 0])
        slot[0] += int(count)
        slot[1] += int(total)


def _table(totals: dict[tuple[str, str], list[int]], keys: tuple[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            keys[0]: pd.Series([k[0] for k in totals], dtype=object),
            keys[1]: pd.Series([k[1] for k in totals], dtype=object),
            "count": np.array([v[0] for v in totals.values()], dtype=np.int64),
            "total_ns": np.array([v[1] for v in totals.values()], dtype=np.int64),
        }
    )
