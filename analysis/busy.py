"""Per-device busy and idle time: the union of the device's work intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.intervals import union_length
from profiler.model.schema import DEVICE_WORK_KINDS, Kind
from profiler.model.trace import Trace

_HOST_BUSY_KINDS = (Kind.OP.value, Kind.RUNTIME.value, Kind.COLLECTIVE.value)


def device_time(trace: Trace) -> pd.DataFrame:
    """One row per (rank, device) that did work: a device whose work events all last 0 ns (marks,
    such as a simulated trace's cache-write ops on its host track) did none and has no row.

    Columns:
      rank (int), device (str: 'cpu' or 'gpu<N>'),
      start_ns, end_ns: first work start and last work end on the device (ns, common clock),
      window_ns: end_ns - start_ns,
      busy_ns: length of the union of work intervals (device: kernels, memcpy, memset;
               cpu: ops and runtime calls on any thread), so overlapping streams count once,
      idle_ns: window_ns - busy_ns,
      work_events: number of work intervals.
    """
    ev = trace.events
    on_gpu = (ev["device"] != "cpu").to_numpy()
    device_work = ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    host_work = ev["kind"].isin(_HOST_BUSY_KINDS).to_numpy()
    work = np.where(on_gpu, device_work, host_work)
    w = ev.loc[work, ["rank", "device", "ts", "dur"]]
    rows = []
    for (rank, device), g in w.groupby(["rank", "device"], observed=True, sort=True):
        s = g["ts"].to_numpy()
        e = s + g["dur"].to_numpy()
        if not (e > s).any():
            continue
        busy = union_length(s, e)
        start, end = int(s.min()), int(e.max())
        rows.append((int(rank), str(device), start, end, end - start, busy, end - start - busy, len(g)))
    cols = ["rank", "device", "start_ns", "end_ns", "window_ns", "busy_ns", "idle_ns", "work_events"]
    return pd.DataFrame(rows, columns=cols)
