"""Export a loaded trace for Perfetto (ui.perfetto.dev).

The native protobuf writer lives in collectors/perfetto, which the dashboard may not import
(docs/architecture.md: the dashboard imports the facade and the model). When the facade offers it
(`profiler.api.perfetto_bytes(trace, units)`), the export uses it; otherwise it writes
Chrome trace-event JSON, which Perfetto and chrome://tracing open as well.
"""

from __future__ import annotations

import gzip

import numpy as np
import orjson
import pandas as pd

from profiler.model.trace import Trace


def export_trace(trace: Trace, units: pd.DataFrame | None = None) -> tuple[bytes, str]:
    """(gzip bytes, file suffix): Perfetto protobuf through the facade when it has a writer, else Chrome JSON."""
    from profiler import api

    writer = getattr(api, "perfetto_bytes", None)
    if callable(writer):
        return gzip.compress(writer(trace, units), compresslevel=6), ".perfetto-trace.gz"
    return gzip.compress(chrome_json(trace), compresslevel=6), ".chrome.json.gz"


def chrome_json(trace: Trace) -> bytes:
    """Chrome trace-event JSON: one 'X' event per interval (ts, dur in µs from the trace start,
    exact to the ns as 3 decimals), pid = rank, tid = a number per track named by 'M' events,
    and the redacted metadata (with baseTimeNanoseconds = the start, so absolute times can be
    recovered: t_ns = ts * 1000 + baseTimeNanoseconds)."""
    ev = trace.events
    origin = int(ev["ts"].min()) if len(ev) else 0
    tracks = ev["track"].cat.categories
    tid = ev["track"].cat.codes.to_numpy()
    rank = ev["rank"].to_numpy()
    ts = (ev["ts"].to_numpy() - origin) / 1e3
    dur = ev["dur"].to_numpy() / 1e3
    names = ev["name"].astype(object).to_numpy()
    cats = ev["kind"].astype(object).to_numpy()
    out = [
        {
            "ph": "X",
            "name": n,
            "cat": c,
            "pid": int(r),
            "tid": int(t),
            "ts": round(float(s), 3),
            "dur": round(float(d), 3),
        }
        for n, c, r, t, s, d in zip(names, cats, rank, tid, ts, dur)
    ]
    seen = set()
    for t, r in zip(*np.unique(np.stack([tid, rank]), axis=1)) if len(tid) else ():
        if (t, r) not in seen:
            seen.add((t, r))
            out.append(
                {"ph": "M", "name": "thread_name", "pid": int(r), "tid": int(t), "args": {"name": str(tracks[t])}}
            )
    doc = {"traceEvents": out, "displayTimeUnit": "ns", "baseTimeNanoseconds": origin, "metadata": trace.metadata}
    return orjson.dumps(doc)
