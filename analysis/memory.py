"""Device memory from the allocator's samples: timeline, peak, and the op at the peak.

With ``profile_memory=True`` the PyTorch profiler writes one ``[memory]`` instant event per
allocation and free: ``Bytes`` (+ allocated, - freed), and in newer Kineto ``Total Allocated``
and ``Total Reserved`` (the caching allocator's totals after the event) with ``Device Type`` /
``Device Id``. The Kineto reader turns them into rows of the ``counters`` table on the track
``rank<R>/<device>/memory``: ``allocated``, ``reserved`` and ``alloc_delta`` (bytes).

Definitions (per rank and device; t is a sample's time, ns):

- ``allocated(t)``, ``reserved(t)``: the recorded totals after the sample (NaN where the trace
  records only ``Bytes``, as 2021-era traces do).
- ``above_start(t) = sum of Bytes over samples up to and including t``: allocated bytes relative
  to the level when recording started. Derivable from ``Bytes`` alone, so also for old traces;
  where totals are recorded, ``above_start(t) = allocated(t) - (allocated(t0) - Bytes(t0))``.
- ``peak_allocated = max_t allocated(t)`` (exact: the totals only grow at allocations, and every
  allocation is a sample), at the first sample that reaches it; likewise ``peak_reserved``.
- ``peak_above_start = max(0, max_t above_start(t))``.
- ``peak_fraction = peak_allocated / capacity`` with ``capacity = devices.memory_bytes``
  (``totalGlobalMem``); NaN when either is unknown.
- The op at the peak: the innermost host op (kind ``op``) whose interval ``[ts, ts + dur]``
  holds the peak sample's time. The counters table does not keep the allocating thread, so the
  op is reported only when ops on exactly one host thread of the rank hold that time; otherwise
  ``peak_op`` is '' and ``peak_op_note`` says why.

The KV-cache footprint of LLM servers is derived from recorded op shapes, not from these
samples: see ``analysis.kv_cache.kv_cache_footprint`` (re-exported here).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.kv_cache import kv_cache_footprint
from profiler.model.errors import InputError
from profiler.model.schema import Kind
from profiler.model.trace import Trace

__all__ = ["SUMMARY_COLUMNS", "TIMELINE_COLUMNS", "kv_cache_footprint", "memory_summary", "memory_timeline"]

#: counter names the Kineto reader writes for `[memory]` samples -> timeline columns
_COUNTERS = {"allocated": "allocated_bytes", "reserved": "reserved_bytes", "alloc_delta": "delta_bytes"}
TIMELINE_COLUMNS = ["rank", "device", "ts", "allocated_bytes", "reserved_bytes", "delta_bytes", "above_start_bytes"]
SUMMARY_COLUMNS = [
    "rank",
    "device",
    "samples",
    "peak_allocated_bytes",
    "peak_allocated_ts",
    "peak_reserved_bytes",
    "peak_reserved_ts",
    "final_allocated_bytes",
    "final_reserved_bytes",
    "peak_above_start_bytes",
    "peak_above_start_ts",
    "capacity_bytes",
    "peak_fraction",
    "reserved_fraction",
    "peak_op",
    "peak_op_id",
    "peak_op_note",
]


def memory_timeline(trace: Trace, max_points: int | None = None) -> pd.DataFrame:
    """One row per allocator sample (exact), or at most about `max_points` rows per device.

    Columns: rank, device ('cpu' / 'gpu<N>'), ts (ns), allocated_bytes and reserved_bytes (the
    totals after the sample; NaN where not recorded), delta_bytes (+ alloc / - free),
    above_start_bytes (running sum of delta_bytes: allocated relative to the start of recording).

    Downsampling (`max_points` set and a device has more samples): the device's time span is cut
    into max_points // 2 - 1 equal bins and each bin keeps its samples of highest and lowest
    allocated (above_start where allocated is not recorded), plus the first and last sample,
    so the peak and the troughs survive. Rows stay in time order.
    """
    wide = _samples(trace)
    if max_points is None or wide.empty:
        return wide
    if max_points < 2:
        raise InputError(None, f"max_points must be at least 2, not {max_points}")
    keep = [_downsample(g, max_points) for _, g in wide.groupby(["rank", "device"], sort=True)]
    return wide.loc[np.sort(np.concatenate(keep))].reset_index(drop=True)


def memory_summary(trace: Trace) -> pd.DataFrame:
    """One row per (rank, device) with allocator samples.

    Columns: rank, device, samples,
      peak_allocated_bytes, peak_allocated_ts (ns; -1 when none): highest recorded total
        allocated, and the first sample that reached it;
      peak_reserved_bytes, peak_reserved_ts: the same for the allocator's reserved total;
      final_allocated_bytes, final_reserved_bytes: totals after the last sample;
      peak_above_start_bytes, peak_above_start_ts: highest running sum of Bytes (>= 0; derivable
        without totals);
      capacity_bytes: device memory (deviceProperties totalGlobalMem; NaN if unknown),
      peak_fraction = peak_allocated / capacity, reserved_fraction = peak_reserved / capacity,
      peak_op, peak_op_id: innermost host op enclosing the peak ('' / -1 when not derivable),
      peak_op_note: why not, '' when derived.
    NaN where the trace does not record the total a column needs.
    """
    groups = _sample_groups(trace)
    if not groups:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SUMMARY_COLUMNS})
    cap = {
        (int(r), str(d)): float(m) if m > 0 else np.nan
        for r, d, m in trace.devices[["rank", "device", "memory_bytes"]].itertuples(index=False)
    }
    rows = []
    for rank, device, g in groups:
        ts, alloc, res, above = g["ts"], g["allocated_bytes"], g["reserved_bytes"], g["above_start_bytes"]
        peak_a, peak_a_ts = _peak(alloc, ts)
        peak_r, peak_r_ts = _peak(res, ts)
        peak_s, peak_s_ts = _peak(above, ts)
        if not np.isnan(peak_s) and peak_s < 0:  # never above the starting level
            peak_s, peak_s_ts = 0.0, -1
        capacity = cap.get((int(rank), str(device)), np.nan)
        at = peak_a_ts if peak_a_ts >= 0 else peak_s_ts
        op, op_id, note = _op_at(trace, int(rank), at)
        rows.append(
            {
                "rank": int(rank),
                "device": str(device),
                "samples": len(ts),
                "peak_allocated_bytes": peak_a,
                "peak_allocated_ts": peak_a_ts,
                "peak_reserved_bytes": peak_r,
                "peak_reserved_ts": peak_r_ts,
                "final_allocated_bytes": alloc[-1],
                "final_reserved_bytes": res[-1],
                "peak_above_start_bytes": peak_s,
                "peak_above_start_ts": peak_s_ts,
                "capacity_bytes": capacity,
                "peak_fraction": peak_a / capacity,
                "reserved_fraction": peak_r / capacity,
                "peak_op": op,
                "peak_op_id": op_id,
                "peak_op_note": note,
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _samples(trace: Trace) -> pd.DataFrame:
    """The memory counters, one row per sample (TIMELINE_COLUMNS), in time order per device."""
    groups = _sample_groups(trace)
    if not groups:
        return pd.DataFrame(
            {
                col: pd.Series(dtype="int64" if col in ("rank", "ts") else (object if col == "device" else "float64"))
                for col in TIMELINE_COLUMNS
            }
        )
    cols = {c: np.concatenate([g[c] for _, _, g in groups]) for c in TIMELINE_COLUMNS[2:]}
    return pd.DataFrame(
        {
            "rank": np.concatenate([np.full(len(g["ts"]), r, dtype=np.int64) for r, _, g in groups]),
            "device": np.concatenate([np.full(len(g["ts"]), d, dtype=object) for _, d, g in groups]),
            **cols,
        }
    )


def _sample_groups(trace: Trace) -> list[tuple[int, str, dict[str, np.ndarray]]]:
    """The memory counters as samples, per (rank, device) in sorted order: (rank, device,
    {ts, allocated_bytes, reserved_bytes, delta_bytes, above_start_bytes} arrays), each in
    (ts, file) order.

    The reader writes one counter row per recorded field of a sample; rows of one sample share
    (rank, device, ts), and samples at the same ts keep file order, so the k-th row of each name
    at that ts belongs to the k-th sample there. Plain numpy (sorts and scatters): pandas'
    groupby / unstack over string keys took most of the memory section's time.
    """
    c = trace.counters
    keep = _per_string(c["name"], lambda v: v.isin(list(_COUNTERS))) & _per_string(
        c["track"], lambda v: v.str.endswith("/memory")
    )
    if not keep.any():
        return []
    rank = c["rank"].to_numpy(dtype=np.int64)[keep]
    ts = c["ts"].to_numpy()[keep]
    value = c["value"].to_numpy(dtype=np.float64)[keep]
    dev_key, devices = _sorted_codes(c["device"].astype(object).to_numpy()[keep])
    name_key, names = _sorted_codes(c["name"].astype(object).to_numpy()[keep])
    # k: the row's place among the rows of its (rank, device, name, ts), in file order (stable sort)
    o = np.lexsort((ts, name_key, dev_key, rank))
    new = _starts(rank[o], dev_key[o], name_key[o], ts[o])
    k = np.empty(len(o), dtype=np.int64)
    k[o] = np.arange(len(o)) - np.maximum.accumulate(np.where(new, np.arange(len(o)), 0))
    # one sample per (rank, device, ts, k), in that order; each name's value scattered into it
    o = np.lexsort((k, ts, dev_key, rank))
    sample = np.empty(len(o), dtype=np.int64)
    sample[o] = np.cumsum(_starts(rank[o], dev_key[o], ts[o], k[o])) - 1
    n = int(sample.max()) + 1
    first = np.full(n, -1, dtype=np.int64)
    first[sample[o][::-1]] = o[::-1]  # a row of each sample, for its keys
    wide = {col: np.full(n, np.nan) for col in _COUNTERS.values()}
    for i, name in enumerate(names):
        at = name_key == i
        wide[_COUNTERS[name]][sample[at]] = value[at]
    s_rank, s_dev, s_ts = rank[first], dev_key[first], ts[first]
    out = []
    for lo, hi in zip(*_bounds(_starts(s_rank, s_dev))):
        delta = wide["delta_bytes"][lo:hi]
        above = np.nancumsum(delta)  # a running sum that skips missing deltas, as pandas' cumsum does
        above[np.isnan(delta)] = np.nan
        out.append(
            (
                int(s_rank[lo]),
                devices[s_dev[lo]],
                {"ts": s_ts[lo:hi], **{col: v[lo:hi] for col, v in wide.items()}, "above_start_bytes": above},
            )
        )
    return out


def _per_string(col: pd.Series, test) -> np.ndarray:
    """`test` (Series of str -> bool Series) per row; once per category when the column is categorical."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        per_category = test(pd.Series(col.cat.categories.astype(object))).to_numpy(dtype=bool)
        return np.append(per_category, False)[col.cat.codes.to_numpy()]  # code -1 (missing) -> False
    return test(col.astype(object)).to_numpy(dtype=bool)


def _sorted_codes(values: np.ndarray) -> tuple[np.ndarray, list]:
    """Codes that sort as the values do, and the distinct values in that order."""
    codes, uniques = pd.factorize(values)
    order = np.argsort(np.asarray(uniques, dtype=object), kind="stable")
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    return place[codes], [uniques[i] for i in order]


def _starts(*keys: np.ndarray) -> np.ndarray:
    """True where a row's keys differ from the previous row's (and at the first row)."""
    new = np.zeros(len(keys[0]), dtype=bool)
    new[:1] = True
    for key in keys:
        new[1:] |= key[1:] != key[:-1]
    return new


def _bounds(new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs that `new` (from _starts) begins."""
    lo = np.flatnonzero(new)
    return lo, np.append(lo[1:], len(new))


def _peak(values: np.ndarray, ts: np.ndarray) -> tuple[float, int]:
    """(max value, ts of its first sample); (NaN, -1) when nothing is recorded."""
    if np.isnan(values).all():
        return np.nan, -1
    i = int(np.nanargmax(values))
    return float(values[i]), int(ts[i])


def _downsample(g: pd.DataFrame, max_points: int) -> np.ndarray:
    """Index labels of the rows of one device's samples to keep (see memory_timeline)."""
    if len(g) <= max_points:
        return g.index.to_numpy()
    level = g["allocated_bytes"] if g["allocated_bytes"].notna().any() else g["above_start_bytes"]
    ts = g["ts"].to_numpy()
    bins = max(max_points // 2 - 1, 1)  # two rows a bin, plus the first and last sample
    b = ((ts - ts[0]) * bins // (ts[-1] - ts[0] + 1)).astype(np.int64)
    lv = level.fillna(-np.inf)
    hi, lo = lv.groupby(b).idxmax().to_numpy(), lv.groupby(b).idxmin().to_numpy()
    return np.unique(np.concatenate([hi, lo, g.index.to_numpy()[[0, -1]]]))


def _op_at(trace: Trace, rank: int, t: int) -> tuple[str, int, str]:
    """(name, id, note) of the innermost host op enclosing time t on the rank (see module doc)."""
    if t < 0:
        return "", -1, "no peak above the starting level"
    ev = trace.events
    ts = ev["ts"].to_numpy()
    mask = (
        (ev["kind"] == Kind.OP.value).to_numpy()
        & (ev["rank"].to_numpy() == rank)
        & (ev["thread"].to_numpy() >= 0)
        & (ts <= t)
        & (ts + ev["dur"].to_numpy() >= t)
    )
    rows = np.flatnonzero(mask)
    threads = np.unique(ev["thread"].to_numpy()[rows])
    if len(threads) == 0:
        return "", -1, "no host op encloses the peak sample"
    if len(threads) > 1:
        return (
            "",
            -1,
            (
                f"ops on {len(threads)} host threads enclose the peak sample; "
                "the memory counters do not record the allocating thread"
            ),
        )
    # deepest = innermost; of two at that depth (one ends as the next starts) the later one
    inner = rows[np.lexsort((ts[rows], ev["depth"].to_numpy()[rows]))[-1]]
    return str(ev["name"].iloc[inner]), int(ev["id"].iloc[inner]), ""
