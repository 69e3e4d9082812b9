"""How work sits on the timeline: streams, communication overlap, launch delays.

- Per stream: busy (union of its work) and idle within the device's window.
- Communication: collective work overlapped by other work on the same device vs exposed
  (running alone): overlapped = |comm ∩ other|, exposed = |comm| - overlapped, with comm and
  other each the union of their intervals (so exposed <= total communication always).
- Launch delay: device work start minus the start of the runtime call that launched it; queue
  depth: on each stream, the launched work not yet started when a launch is issued.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.intervals import union_length
from profiler.model.schema import DEVICE_WORK_KINDS
from profiler.model.trace import Trace


def streams(trace: Trace) -> pd.DataFrame:
    """Per stream of each device: rank, device, stream (track name), work_events, busy_ns,
    idle_ns (device window - busy: the stream waits while other streams work), share (of window)."""
    ev = trace.events
    work = ev.loc[
        ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy(), ["rank", "device", "track", "ts", "dur"]
    ]
    rows = []
    for (rank, device), w in work.groupby(["rank", "device"], observed=True, sort=True):
        window = int((w["ts"] + w["dur"]).max() - w["ts"].min())
        for track, s in w.groupby("track", observed=True, sort=True):
            busy = union_length(s["ts"].to_numpy(), (s["ts"] + s["dur"]).to_numpy())
            rows.append(
                (int(rank), str(device), str(track), len(s), busy, window - busy, busy / window if window else 0.0)
            )
    return pd.DataFrame(rows, columns=["rank", "device", "stream", "work_events", "busy_ns", "idle_ns", "share"])


def communication_overlap(trace: Trace, classified: pd.DataFrame) -> pd.DataFrame:
    """Per device: comm_ns (union of collective work), overlapped_ns, exposed_ns.

    Collective work: the device events (or, on a CPU-only rank, the collective regions) of the
    units whose family is 'collective'."""
    ev = trace.events
    coll_units = set(classified.loc[classified["family"] == "collective", "unit_id"].tolist())
    is_work = ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    unit = np.where(ev["op_id"].to_numpy() >= 0, ev["op_id"].to_numpy(), ev["id"].to_numpy())
    is_coll_work = is_work & np.isin(unit, list(coll_units))
    is_coll_region = (ev["kind"] == "collective").to_numpy()
    rows = []
    keep = is_coll_work | is_coll_region | is_work
    if not (is_coll_work | is_coll_region).any():
        return pd.DataFrame(columns=["rank", "device", "comm_ns", "overlapped_ns", "exposed_ns"])
    devices = ev["device"].cat
    frame = pd.DataFrame(
        {
            "rank": ev["rank"].to_numpy()[keep],
            "device": devices.codes.to_numpy()[keep],
            "s": ev["ts"].to_numpy()[keep],
            "e": (ev["ts"] + ev["dur"]).to_numpy()[keep],
            "coll": (is_coll_work | is_coll_region)[keep],
            "other": (is_work & ~is_coll_work)[keep],
        }
    )
    for (rank, code), g in frame.groupby(["rank", "device"], sort=True):
        device = devices.categories[code]
        comm = g[g["coll"]]
        if comm.empty:
            continue
        other = g[g["other"]]
        c_len = union_length(comm["s"].to_numpy(), comm["e"].to_numpy())
        both = union_length(g["s"].to_numpy(), g["e"].to_numpy())
        o_len = union_length(other["s"].to_numpy(), other["e"].to_numpy())
        overlapped = c_len + o_len - both  # |A ∩ B| = |A| + |B| - |A ∪ B|
        rows.append((int(rank), str(device), c_len, overlapped, c_len - overlapped))
    return pd.DataFrame(rows, columns=["rank", "device", "comm_ns", "overlapped_ns", "exposed_ns"])


def launch_delays(trace: Trace) -> pd.DataFrame:
    """Per stream: launches (linked device events), delay p50/p95/max (ns: work start - launch
    call start) and queue depth mean/max (launched, not yet started, at each launch)."""
    ev = trace.events
    fl = trace.flows[trace.flows["kind"] == "launch"]
    if fl.empty:
        return pd.DataFrame(
            columns=[
                "rank",
                "stream",
                "launches",
                "delay_p50_ns",
                "delay_p95_ns",
                "delay_max_ns",
                "queue_mean",
                "queue_max",
            ]
        )
    pos = pd.Index(ev["id"].to_numpy())
    src, dst = pos.get_indexer(fl["src"].to_numpy()), pos.get_indexer(fl["dst"].to_numpy())
    ts = ev["ts"].to_numpy()
    df = pd.DataFrame(
        {
            "rank": ev["rank"].to_numpy()[dst],
            "stream": ev["track"].cat.codes.to_numpy()[dst],
            "launch": ts[src],
            "start": ts[dst],
        }
    )
    names = ev["track"].cat.categories
    rows = []
    for (rank, stream), g in df.groupby(["rank", "stream"], sort=True):
        delay = g["start"].to_numpy() - g["launch"].to_numpy()
        launch, start = np.sort(g["launch"].to_numpy()), np.sort(g["start"].to_numpy())
        # at each launch: issued so far (incl. this one) minus started by then
        depth = np.arange(1, len(launch) + 1) - np.searchsorted(start, launch, side="right")
        depth = np.maximum(depth, 0)
        rows.append(
            (
                int(rank),
                str(names[stream]),
                len(g),
                int(np.percentile(delay, 50)),
                int(np.percentile(delay, 95)),
                int(delay.max()),
                float(depth.mean()),
                int(depth.max()),
            )
        )
    return pd.DataFrame(
        rows,
        columns=[
            "rank",
            "stream",
            "launches",
            "delay_p50_ns",
            "delay_p95_ns",
            "delay_max_ns",
            "queue_mean",
            "queue_max",
        ],
    )
