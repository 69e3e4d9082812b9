"""Read a Perfetto trace through trace_processor_shell (PERFETTO_TP_BIN), for very large traces.

The perfetto package's `TraceProcessor` runs the binary and answers SQL; its slice, thread_track,
process_track, counter and flow tables and the `debug.*` args become the same `Raw` lists that
`collectors.perfetto.read` fills, and `build_trace` finishes the job, so both paths share every
mapping rule. Tracks are mapped by their descriptors' names (collectors.perfetto.places): the
exact side table of our own exports ('perf.tracks') is not visible through SQL, so a thread id
past int32 or a counter's row name comes back as the generic mapping gives it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.perfetto.build import build_trace
from collectors.perfetto.read import Raw, Track
from profiler.model.errors import InputError
from profiler.model.trace import Trace

SLICES = "SELECT id, ts, dur, name, category, track_id, arg_set_id FROM slice ORDER BY ts, depth"
TRACKS = "SELECT id, name, parent_id FROM track"
THREADS = (
    "SELECT tt.id AS id, t.tid AS tid, p.pid AS pid, p.name AS pname FROM thread_track tt "
    "JOIN thread t USING (utid) LEFT JOIN process p USING (upid)"
)
PROCESSES = "SELECT pt.id AS id, p.pid AS pid, p.name AS pname FROM process_track pt JOIN process p USING (upid)"
COUNTERS = "SELECT c.ts AS ts, c.track_id AS track_id, c.value AS value FROM counter c ORDER BY c.ts"
COUNTER_TRACKS = "SELECT id FROM counter_track"
FLOWS = "SELECT slice_out, slice_in FROM flow"
ARGS = (
    "SELECT arg_set_id, key, int_value, string_value, real_value FROM args "
    "WHERE key GLOB 'debug.*' AND arg_set_id IN (SELECT arg_set_id FROM slice)"
)


def load_with_trace_processor(path: Path, bin_path: str) -> Trace:
    """The Trace of `path` as trace_processor_shell at `bin_path` reads it."""
    try:
        from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    except ImportError as e:  # the perfetto package is a dependency; say so if it is missing
        raise InputError(path, f"PERFETTO_TP_BIN is set but the perfetto package is not importable ({e})") from None
    try:
        tp = TraceProcessor(trace=str(path), config=TraceProcessorConfig(bin_path=bin_path))
    except Exception as e:  # noqa: BLE001 - the binary failed to start or rejected the file: any error
        raise InputError(
            path,
            f"trace_processor_shell ({bin_path}) could not load it: "
            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
        ) from None
    try:
        tables = {
            name: tp.query(sql).as_pandas_dataframe()
            for name, sql in (
                ("slices", SLICES),
                ("tracks", TRACKS),
                ("threads", THREADS),
                ("processes", PROCESSES),
                ("counters", COUNTERS),
                ("counter_tracks", COUNTER_TRACKS),
                ("flows", FLOWS),
                ("args", ARGS),
            )
        }
    except Exception as e:  # noqa: BLE001 - the shell reports SQL errors as its own exception types
        raise InputError(
            path, f"trace_processor_shell query failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from None
    finally:
        tp.close()
    return build_trace(path, raw_from_tables(tables))


def raw_from_tables(t: dict[str, Any]) -> Raw:
    """trace_processor's tables (pandas) -> the Raw lists of collectors.perfetto.read."""
    raw = Raw()
    counter_ids = set(t["counter_tracks"]["id"].tolist())
    for r in t["tracks"].itertuples(index=False):
        parent = 0 if pd.isna(r.parent_id) else r.parent_id
        raw.tracks[int(r.id)] = Track(
            int(r.id), name=r.name or "", parent=int(parent), counter=int(r.id) in counter_ids
        )
    for r in t["processes"].itertuples(index=False):
        tr = raw.tracks.setdefault(int(r.id), Track(int(r.id)))
        tr.pid, tr.process_name = int(r.pid), r.pname or ""
        raw.processes[int(r.pid)] = r.pname or ""
    for r in t["threads"].itertuples(index=False):
        tr = raw.tracks.setdefault(int(r.id), Track(int(r.id)))
        tr.tid = int(r.tid)
        if not pd.isna(r.pid):
            tr.pid = int(r.pid)
            raw.processes.setdefault(int(r.pid), r.pname or "")
    args = _args(t["args"])
    s = t["slices"]
    row_of = {int(i): k for k, i in enumerate(s["id"].tolist())}
    raw.ts = s["ts"].astype(np.int64).tolist()
    raw.dur = s["dur"].astype(np.int64).tolist()  # -1: never ended (dropped and counted later)
    raw.track = s["track_id"].astype(np.int64).tolist()
    raw.name = s["name"].fillna("").astype(str).tolist()
    raw.cat = s["category"].fillna("").astype(str).tolist()
    for k, a in enumerate(s["arg_set_id"].tolist()):
        if not pd.isna(a) and int(a) in args:
            raw.args[k] = args[int(a)]
    for k, (out, into) in enumerate(zip(t["flows"]["slice_out"].tolist(), t["flows"]["slice_in"].tolist())):
        if int(out) in row_of and int(into) in row_of:
            raw.flow_ends += [(k, row_of[int(out)], False), (k, row_of[int(into)], True)]
    c = t["counters"]
    raw.c_ts, raw.c_track, raw.c_value = (
        c["ts"].astype(np.int64).tolist(),
        c["track_id"].astype(np.int64).tolist(),
        c["value"].astype(float).tolist(),
    )
    open_slices = int((s["dur"] < 0).sum())
    raw.problems.add("slices never ended (dropped)", open_slices)
    return raw


def _args(df) -> dict[int, dict[str, Any]]:
    """arg_set_id -> annotations, 'debug.perf.flops' nested as {'perf': {'flops': ...}}."""
    out: dict[int, dict[str, Any]] = {}
    for a, key, i, s, r in df.itertuples(index=False):
        value = int(i) if not pd.isna(i) else (s if not pd.isna(s) else r)
        parts = key[len("debug.") :].split(".")
        d = out.setdefault(int(a), {})
        for p in parts[:-1]:
            d = d.setdefault(p, {}) if isinstance(d.get(p, {}), dict) else {}
        d[parts[-1]] = value
    return out
