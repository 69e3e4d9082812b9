"""Server-side down-sampling of the timeline: raw events never go to the browser.

`build_index(trace)` keeps, per track (rank/device/stream or host thread), the outermost work
intervals sorted by start (events nested inside an earlier one on the same track are dropped:
a host op's children, a launch inside its op), and their union as disjoint runs with a prefix
sum of run lengths. `window(index, t0, t1)` answers one zoom level:

- few intervals visible (<= detail_limit): each as a bar (events mode);
- otherwise per track and pixel bucket [b_i, b_i+1): occupancy = covered / bucket width, with
  covered(x) = C[k-1] + clip(x - s[k-1], 0, len[k-1]), k = #runs starting <= x, C = prefix sum
  of run lengths, so each bucket costs two binary searches; and the name of the interval with
  the most time in the bucket (for the hover).

Both outputs are bounded: events mode by detail_limit, buckets mode by tracks x buckets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from profiler.api import interval_runs as runs
from profiler.model.trace import Trace

#: Kinds drawn on the timeline: device work, host ops, collectives and runtime calls.
TIMELINE_KINDS = ("kernel", "memcpy", "memset", "op", "collective", "runtime", "dma", "compile_pass")
#: Cells (tracks x buckets) one bucketed view may hold: the payload bound.
MAX_CELLS = 24_000


@dataclass(frozen=True)
class Track:
    """One row: outermost intervals (ns from trace start), their name codes, and the union's runs."""

    name: str
    start: np.ndarray
    end: np.ndarray
    name_code: np.ndarray
    max_dur: int
    run_start: np.ndarray
    run_end: np.ndarray
    run_prefix: np.ndarray  # run_prefix[k] = total length of runs 0..k-1


@dataclass(frozen=True)
class TimelineIndex:
    origin_ns: int  # the trace's first event start: x = 0
    span_ns: int
    tracks: tuple[Track, ...]
    names: np.ndarray  # name code -> text

    @property
    def events(self) -> int:
        return int(sum(len(t.start) for t in self.tracks))


@dataclass(frozen=True)
class TimelineView:
    """One zoom level. mode 'events': `bars` (track, start_ns, dur_ns, name); mode 'buckets':
    `occupancy` (tracks x buckets, 0..1) and `top_name` (same shape; '' where empty).
    Times are ns from the trace start; `bucket_ns` is the bucket width."""

    mode: str
    t0: int
    t1: int
    tracks: tuple[str, ...]
    visible: int  # outermost intervals overlapping the window
    bars: pd.DataFrame
    occupancy: np.ndarray
    top_name: np.ndarray
    bucket_ns: float


def build_index(trace: Trace) -> TimelineIndex:
    """Per track: the outermost intervals of TIMELINE_KINDS (see the module docstring)."""
    return index_events(trace.events)


def index_events(ev: pd.DataFrame) -> TimelineIndex:
    """`build_index` of an events table (columns used: kind, track, name (categoricals), ts, dur)."""
    keep = ev["kind"].isin(TIMELINE_KINDS).to_numpy() & (ev["dur"].to_numpy() >= 0)
    origin = int(ev["ts"].min()) if len(ev) else 0
    end_all = int((ev["ts"] + ev["dur"]).max()) if len(ev) else 0
    ts = ev["ts"].to_numpy()[keep] - origin
    te = ts + ev["dur"].to_numpy()[keep]
    track_codes = ev["track"].cat.codes.to_numpy()[keep]
    name_codes = ev["name"].cat.codes.to_numpy()[keep].astype(np.int32)
    track_names = ev["track"].cat.categories
    order = np.lexsort((-te, ts, track_codes))  # by track, start; the longer first at equal starts
    ts, te, track_codes, name_codes = ts[order], te[order], track_codes[order], name_codes[order]
    bounds = np.flatnonzero(np.diff(track_codes)) + 1
    tracks = []
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(ts)]):
        if hi <= lo:
            continue
        s, e, n = ts[lo:hi], te[lo:hi], name_codes[lo:hi]
        reach = np.maximum.accumulate(e)
        outer = np.ones(len(s), dtype=bool)
        outer[1:] = e[1:] > reach[:-1]  # ends inside an earlier interval: nested, not drawn
        s, e, n = s[outer], e[outer], n[outer]
        rs, re_ = runs(s, e)
        prefix = np.concatenate([[0], np.cumsum(re_ - rs)])
        tracks.append(Track(str(track_names[track_codes[lo]]), s, e, n, int((e - s).max()), rs, re_, prefix))
    tracks.sort(key=_track_order)
    return TimelineIndex(origin, end_all - origin, tuple(tracks), np.asarray(ev["name"].cat.categories, dtype=object))


def _track_order(t: Track) -> tuple:
    """rank, then device rows before host threads, then by name (natural: stream7 before stream13)."""
    parts = t.name.split("/")
    key = [(0, int(p[4:])) if p.startswith("rank") and p[4:].isdigit() else (1, p) for p in parts[:1]]
    host = 1 if len(parts) > 1 and parts[1] == "cpu" else 0
    digits = [int(x) for x in "".join(c if c.isdigit() else " " for c in t.name).split()]
    return (key, host, digits, t.name)


def window(
    index: TimelineIndex,
    t0: float | None = None,
    t1: float | None = None,
    *,
    buckets: int = 600,
    detail_limit: int = 2000,
) -> TimelineView:
    """The view of [t0, t1) ns (from the trace start; None: the whole span), bounded in size."""
    lo = int(max(0, t0 if t0 is not None else 0))
    hi = int(min(index.span_ns, t1 if t1 is not None else index.span_ns))
    if hi <= lo:
        hi = lo + 1
    names = tuple(t.name for t in index.tracks)
    picks = [_overlapping(t, lo, hi) for t in index.tracks]
    visible = int(sum(len(p) for p in picks))
    if visible <= detail_limit:
        frames = [
            pd.DataFrame(
                {
                    "track": t.name,
                    "start_ns": np.maximum(t.start[p], lo),
                    "dur_ns": np.minimum(t.end[p], hi) - np.maximum(t.start[p], lo),
                    "name": index.names[t.name_code[p]],
                }
            )
            for t, p in zip(index.tracks, picks)
            if len(p)
        ]
        bars = (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame(columns=["track", "start_ns", "dur_ns", "name"])
        )
        return TimelineView(
            "events", lo, hi, names, visible, bars, np.zeros((0, 0)), np.zeros((0, 0), dtype=object), 0.0
        )
    nb = max(50, min(buckets, MAX_CELLS // max(1, len(index.tracks))))
    edges = np.linspace(lo, hi, nb + 1)
    occ = np.zeros((len(index.tracks), nb))
    top = np.full((len(index.tracks), nb), "", dtype=object)
    width = (hi - lo) / nb
    for i, (t, p) in enumerate(zip(index.tracks, picks)):
        covered = _covered(t, edges)
        occ[i] = np.diff(covered) / width
        if len(p):
            s = np.maximum(t.start[p], lo)
            d = np.minimum(t.end[p], hi) - s
            b = np.minimum(((s - lo) / width).astype(np.int64), nb - 1)
            order = np.lexsort((d, b))  # by bucket, then time: the last of each bucket has the most
            last = np.r_[np.flatnonzero(np.diff(b[order])), len(order) - 1]
            top[i, b[order][last]] = [str(x)[:60] for x in index.names[t.name_code[p][order][last]]]
        # an interval longer than a bucket names every bucket whose middle it covers
        mid = (edges[:-1] + edges[1:]) / 2
        k = np.searchsorted(t.start, mid, side="right") - 1
        kk = np.maximum(k, 0)
        long = (k >= 0) & (t.end[kk] > mid) & (t.end[kk] - t.start[kk] >= width) if len(t.start) else np.zeros(nb, bool)
        if long.any():
            top[i, long] = [str(x)[:60] for x in index.names[t.name_code[kk[long]]]]
    return TimelineView("buckets", lo, hi, names, visible, pd.DataFrame(), np.clip(occ, 0, 1), top, width)


def _overlapping(t: Track, lo: int, hi: int) -> np.ndarray:
    """Positions of the track's intervals that overlap [lo, hi): start < hi and end > lo."""
    a = np.searchsorted(t.start, lo - t.max_dur, side="left")  # nothing earlier can reach lo
    b = np.searchsorted(t.start, hi, side="left")
    pos = np.arange(a, b)
    return pos[t.end[a:b] > lo]


def _covered(t: Track, x: np.ndarray) -> np.ndarray:
    """Length of the track's union lying before each x (see the module docstring)."""
    k = np.searchsorted(t.run_start, x, side="right")
    prev = np.maximum(k - 1, 0)
    partial = np.clip(x - t.run_start[prev], 0, t.run_end[prev] - t.run_start[prev])
    return np.where(k > 0, t.run_prefix[prev] + partial, 0.0)


def unit_marks(units: pd.DataFrame, origin_ns: int, t0: int, t1: int, buckets: int = 600) -> pd.DataFrame:
    """The selected op's units in [t0, t1), at most one mark per bucket (bounded payload).

    `units`: rows of analysis.units for one op. Columns: start_ns (ns from the trace start,
    the bucket's first unit), time_ns (summed unit time in the bucket), count (units in it).
    """
    s = units["start_ns"].to_numpy(dtype=np.int64) - origin_ns
    keep = (s >= t0) & (s < t1)
    s, t = s[keep], units["time_ns"].to_numpy(dtype=np.int64)[keep]
    if len(s) == 0:
        return pd.DataFrame(columns=["start_ns", "time_ns", "count"])
    b = ((s - t0) * buckets // max(1, t1 - t0)).astype(np.int64)
    g = pd.DataFrame({"b": b, "start_ns": s, "time_ns": t}).groupby("b", sort=True)
    return pd.DataFrame(
        {"start_ns": g["start_ns"].min(), "time_ns": g["time_ns"].sum(), "count": g.size()}
    ).reset_index(drop=True)
