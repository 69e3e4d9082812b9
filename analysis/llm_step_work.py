"""The work inside each LLM serving step window (analysis.llm_steps finds the windows): the device
work its launches ran and the host's busy and waiting time (`device_work`; the definitions are in
analysis.llm_steps' docstring), and the window helpers step finding shares (`assign_windows`,
`name_mask`, `has_ancestor_in`, `loads_json`)."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import orjson
import pandas as pd

from analysis.intervals import grouped_union_length
from profiler.model.schema import DEVICE_WORK_KINDS, Kind
from profiler.model.trace import Trace

#: host calls that block until the device catches up (attribution.SYNC_CALL also counts
#: streamWaitEvent, which makes the device wait, not the host); a memcpy without Async blocks
_HOST_WAIT = re.compile(r"(?i)synchronize|memcpy(?!\w*async)")


def name_mask(ev: pd.DataFrame, match: Callable[[str], object]) -> np.ndarray:
    """Rows whose name matches, tested once per distinct name."""
    cats = ev["name"].cat.categories
    hit = np.array([bool(match(str(c))) for c in cats], dtype=bool)
    codes = ev["name"].cat.codes.to_numpy()
    return hit[codes] & (codes >= 0)


def device_work(trace: Trace, steps: pd.DataFrame) -> pd.DataFrame:
    """Adds end_ns, duration_ns, device, device_busy_ns to step windows (module doc)."""
    ev = trace.events
    steps = steps.copy()
    n = len(steps)
    win_rank, win_thread = steps["rank"].to_numpy(np.int64), steps["thread"].to_numpy(np.int64)
    win_start, win_end = steps["start_ns"].to_numpy(np.int64), steps["annot_end"].to_numpy(np.int64)
    pos = pd.Index(ev["id"].to_numpy())
    fl = trace.flows[(trace.flows["kind"] == "launch").to_numpy()]
    src, dst = pos.get_indexer(fl["src"].to_numpy()), pos.get_indexer(fl["dst"].to_numpy())
    ok = (src >= 0) & (dst >= 0)
    src, dst = src[ok], dst[ok]
    which = assign_windows(
        win_rank,
        win_thread,
        win_start,
        win_end,
        ev["rank"].to_numpy()[src],
        ev["thread"].to_numpy()[src],
        ev["ts"].to_numpy()[src],
    )
    src, dst, which = src[which >= 0], dst[which >= 0], which[which >= 0]
    is_work = ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()[dst]
    dst, which = dst[is_work], which[is_work]
    sim_dst, sim_which = _simulated_work(ev, win_rank, win_start, win_end)
    dst, which = np.concatenate([dst, sim_dst]), np.concatenate([which, sim_which])
    start = ev["ts"].to_numpy()[dst]
    end = start + ev["dur"].to_numpy()[dst]
    busy = np.zeros(n, np.int64)
    if len(dst):
        busy = grouped_union_length(which, start, end).reindex(np.arange(n), fill_value=0).to_numpy()
    last = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(last, which, end)
    device = np.full(n, "", dtype=object)
    if len(dst):
        d = pd.DataFrame({"w": which, "device": ev["device"].astype(object).to_numpy()[dst]})
        mode = d.groupby("w")["device"].agg(lambda s: s.value_counts().index[0])
        device[mode.index.to_numpy()] = mode.to_numpy()
    ranks_with_work = ev.loc[ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy(), "rank"].unique()
    cpu_only = (device == "") & ~np.isin(win_rank, ranks_with_work)
    if cpu_only.any():  # the CPU is the device: union of host ops inside the step, clipped to it
        ops = np.flatnonzero((ev["kind"] == Kind.OP.value).to_numpy())
        w = assign_windows(
            win_rank,
            win_thread,
            win_start,
            win_end,
            ev["rank"].to_numpy()[ops],
            ev["thread"].to_numpy()[ops],
            ev["ts"].to_numpy()[ops],
        )
        ops, w = ops[w >= 0], w[w >= 0]
        keep = cpu_only[w]
        ops, w = ops[keep], w[keep]
        if len(ops):
            s = ev["ts"].to_numpy()[ops]
            e = np.minimum(s + ev["dur"].to_numpy()[ops], win_end[w])
            u = grouped_union_length(w, s, e)
            busy[u.index.to_numpy()] = u.to_numpy()
        device[cpu_only] = "cpu"
    steps["host_busy_ns"], steps["host_wait_ns"] = _host_time(ev, win_rank, win_thread, win_start, win_end)
    steps["end_ns"] = np.maximum(win_end, last)
    steps["duration_ns"] = steps["end_ns"] - steps["start_ns"]
    steps["device"] = device
    steps["device_busy_ns"] = busy.astype(np.int64)
    for c in ("start_ns", "end_ns", "duration_ns"):
        steps[c] = steps[c].astype(np.int64)
    steps["rank"] = steps["rank"].astype(np.int64)
    return steps


def _simulated_work(
    ev: pd.DataFrame, w_rank: np.ndarray, w_start: np.ndarray, w_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, window) of a simulator's device work (source 'simulator': no host runtime, so no
    launches to follow): each piece of work belongs to the step on its rank whose window holds
    its start, whatever the step's thread (a simulated serving loop has one)."""
    rows = np.flatnonzero(
        (ev["source"] == "simulator").to_numpy() & ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    )
    if len(rows) == 0 or len(w_start) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    which = assign_windows(
        w_rank,
        np.zeros(len(w_rank), np.int64),
        w_start,
        w_end,
        ev["rank"].to_numpy()[rows],
        np.zeros(len(rows), np.int64),
        ev["ts"].to_numpy()[rows],
    )
    return rows[which >= 0], which[which >= 0]


def _host_time(
    ev: pd.DataFrame, w_rank: np.ndarray, w_thread: np.ndarray, w_start: np.ndarray, w_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(host_busy_ns, host_wait_ns) per window (module doc): the union of the host ops and runtime
    calls on its thread inside it, and of its blocking calls, clipped to the window."""
    host = np.flatnonzero(ev["kind"].isin([Kind.OP.value, Kind.RUNTIME.value]).to_numpy())
    w = assign_windows(
        w_rank,
        w_thread,
        w_start,
        w_end,
        ev["rank"].to_numpy()[host],
        ev["thread"].to_numpy()[host],
        ev["ts"].to_numpy()[host],
    )
    host, w = host[w >= 0], w[w >= 0]
    s = ev["ts"].to_numpy()[host]
    e = np.minimum(s + ev["dur"].to_numpy()[host], w_end[w])
    waits = name_mask(ev, _HOST_WAIT.search)[host] & (ev["kind"].to_numpy()[host] == Kind.RUNTIME.value)
    out = []
    for mask in (np.ones(len(host), dtype=bool), waits):
        t = np.zeros(len(w_start), np.int64)
        if mask.any():
            u = grouped_union_length(w[mask], s[mask], e[mask])
            t[u.index.to_numpy()] = u.to_numpy()
        out.append(t)
    return out[0], out[1]


def assign_windows(
    w_rank: np.ndarray,
    w_thread: np.ndarray,
    w_start: np.ndarray,
    w_end: np.ndarray,
    rank: np.ndarray,
    thread: np.ndarray,
    ts: np.ndarray,
) -> np.ndarray:
    """For each (rank, thread, ts): the position of the window on that thread holding ts
    (w_start <= ts <= w_end), -1 when none. Windows on one thread do not overlap."""
    out = np.full(len(ts), -1, dtype=np.int64)
    for r, t in set(zip(w_rank.tolist(), w_thread.tolist())):
        wpos = np.flatnonzero((w_rank == r) & (w_thread == t))
        wpos = wpos[np.argsort(w_start[wpos], kind="stable")]
        sel = np.flatnonzero((rank == r) & (thread == t))
        k = np.searchsorted(w_start[wpos], ts[sel], side="right") - 1
        ok = (k >= 0) & (ts[sel] <= w_end[wpos[np.maximum(k, 0)]])
        out[sel[ok]] = wpos[k[ok]]
    return out


def has_ancestor_in(ev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For each of `rows`: is any host ancestor (parent_id chain) also among `rows`?"""
    if len(rows) == 0:
        return np.zeros(0, dtype=bool)
    ids = ev["id"].to_numpy()
    members = set(ids[rows].tolist())
    parent = pd.Series(ev["parent_id"].to_numpy(), index=ids)
    cur = ev["parent_id"].to_numpy()[rows]
    hit = np.zeros(len(rows), dtype=bool)
    while (cur >= 0).any():
        hit |= np.isin(cur, list(members))
        cur = np.where(cur >= 0, parent.reindex(cur).fillna(-1).to_numpy(dtype=np.int64), -1)
    return hit


def loads_json(text: object) -> object:
    """A recorded JSON value (shapes, dtypes) parsed; None when empty or not JSON."""
    try:
        return orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return None
