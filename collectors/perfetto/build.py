"""Raw Perfetto slices, counters and flow ends -> a validated `Trace`.

Columns the file records are read from debug annotations (collectors.perfetto.fields); the
links are re-derived as the Kineto reader derives them, so a round trip gives the same tables:
nesting (parent_id, depth) by `collectors.kineto.link.nest`; flows from flow ids; op_id of device
work from its launch flow (the innermost op at or above the flow's source, else the op with its
External id); step from the ProfilerStep containing its launch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.kineto import link
from collectors.kineto.kinds import kind_of
from collectors.perfetto import fields as F
from collectors.perfetto.places import Places
from collectors.perfetto.read import Raw
from profiler.model.errors import InputError
from profiler.model.redact_trace import redact_trace
from profiler.model.schema import DEVICE_WORK_KINDS, EVENT_COLUMNS, Kind
from profiler.model.trace import Problems, Trace, empty_table

_TEXT_BY_NAME = {v: k for k, v in F.TEXT_ANNOTATIONS.items()}
_INT_BY_NAME = {v: k for k, v in F.INT_ANNOTATIONS.items()}
_DTYPES = {c.name: c.dtype for c in EVENT_COLUMNS}


def build_trace(path: Path, raw: Raw) -> Trace:
    """The Trace of one Perfetto file (every rank it holds)."""
    problems = raw.problems
    side = _json(raw.metadata.get(F.META_TRACKS))
    meta = _json(raw.metadata.get(F.META_METADATA)) or {}
    offset = int(meta.pop("ts_offset_ns", 0) or 0) if isinstance(meta, dict) else 0
    places = Places(raw, side if isinstance(side, dict) else None)
    ended = np.flatnonzero(np.asarray(raw.dur, dtype=np.int64) >= 0)
    if len(ended) == 0 and not raw.c_ts:
        why = "; ".join(problems.lines()) or "no TrackEvent slices or counters"
        raise InputError(path, f"no readable events ({why})")
    ev, row_of = _events(raw, ended, places, offset, problems)
    parent, depth = link.nest(ev, problems)
    ev["parent_id"], ev["depth"] = parent, depth
    flows = _flows(raw, row_of, ev)
    op_id, launch_ts = _op_ids(ev, flows, problems)
    ev["op_id"] = op_id
    ev["step"] = _steps(ev, launch_ts)
    ev = ev[[c.name for c in EVENT_COLUMNS if c.name in ev.columns]]
    counters = _counters(raw, places, offset)
    problems.add("events on tracks with no descriptor", places.unknown)
    devices = _devices(raw, ev, counters)
    metadata = meta if isinstance(meta, dict) else {}
    if metadata.get("files"):
        metadata["exported_from"] = metadata["files"]
    metadata["files"] = [str(path)]
    metadata["format"] = "perfetto"
    trace = Trace(events=ev, counters=counters, flows=flows, devices=devices, metadata=metadata, problems=problems)
    return redact_trace(trace).validate()  # every string scrubbed once, here, for every output


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def _events(
    raw: Raw, rows: np.ndarray, places: Places, offset: int, problems: Problems
) -> tuple[pd.DataFrame, np.ndarray]:
    """The events table (without the link columns) and raw slice row -> events row (-1: dropped)."""
    n = len(rows)
    ts = np.asarray(raw.ts, dtype=np.int64)[rows] - offset
    dur = np.asarray(raw.dur, dtype=np.int64)[rows]
    uuids = np.asarray(raw.track, dtype=np.int64)[rows]
    uniq, codes = np.unique(uuids, return_inverse=True)
    pl = [places.slice(int(u)) for u in uniq]
    names = np.asarray(raw.name, dtype=object)[rows]
    cats = np.asarray(raw.cat, dtype=object)[rows]
    cols: dict[str, Any] = {c: np.full(n, -1, dtype=np.int64) for c in F.INT_ANNOTATIONS}
    cols.update({c: np.full(n, "", dtype=object) for c in F.TEXT_ANNOTATIONS})
    cat_kind = {c: kind_of(c).value for c in pd.unique(cats)}
    kind = np.array([cat_kind[c] for c in cats], dtype=object) if n else np.zeros(0, dtype=object)
    source = np.full(n, F.DEFAULT_SOURCE, dtype=object)
    flops, nbytes = np.full(n, np.nan), np.full(n, np.nan)
    row_of = np.full(len(raw.ts), -1, dtype=np.int64)
    row_of[rows] = np.arange(n)
    bad = 0
    for r, args in raw.args.items():
        i = row_of[r]
        if i < 0:
            continue
        for key, v in args.items():
            if key in _INT_BY_NAME:
                try:
                    cols[_INT_BY_NAME[key]][i] = int(v)
                except (TypeError, ValueError, OverflowError):
                    bad += 1
            elif key in _TEXT_BY_NAME:
                cols[_TEXT_BY_NAME[key]][i] = v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
            elif key == F.KIND_ANNOTATION and v in Kind._value2member_map_:
                kind[i] = v
            elif key == F.SOURCE_ANNOTATION and isinstance(v, str):
                source[i] = v
            elif key == F.PERF_ANNOTATION and isinstance(v, dict) and not v.get("estimate"):
                flops[i] = _float(v.get(F.PERF_FLOPS))
                nbytes[i] = _float(v.get(F.PERF_BYTES))
    problems.add("annotations with a value that is not an integer (ignored)", bad)
    other = int((kind == Kind.OTHER.value).sum())
    problems.add("events of unknown category kept as kind 'other'", other)
    col = {
        c: np.array([getattr(p, c) for p in pl], dtype=object)[codes] if n else np.zeros(0, dtype=object)
        for c in ("track", "device")
    }
    num = {
        c: np.array([getattr(p, c) for p in pl], dtype=np.int64)[codes] if n else np.zeros(0, dtype=np.int64)
        for c in ("rank", "stream", "thread")
    }
    df = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "name": _cat(names),
            "cat": _cat(cats),
            "kind": _cat(kind),
            "ts": ts,
            "dur": dur,
            "rank": num["rank"].astype(np.int32),
            "device": _cat(col["device"]),
            "track": _cat(col["track"]),
            "stream": num["stream"],
            "thread": num["thread"],
            "correlation": cols["correlation"],
            "external_id": cols["external_id"],
            "source": _cat(source),
            **{c: _cat(cols[c]) for c in F.TEXT_ANNOTATIONS},
            **{
                c: cols[c].astype(_DTYPES[c])
                for c in ("msg_in_nelems", "msg_out_nelems", "group_size", "bytes_recorded")
            },
        }
    )
    if not np.isnan(flops).all() or not np.isnan(nbytes).all():
        df["flops"], df["bytes"] = flops, nbytes
    return df, row_of


def _float(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan


def _cat(values: np.ndarray) -> pd.Categorical:
    return pd.Categorical(values, categories=pd.Index(sorted(set(values.tolist())), dtype=object))


def _flows(raw: Raw, row_of: np.ndarray, ev: pd.DataFrame) -> pd.DataFrame:
    """Edges from flow ids: each occurrence of an id links the slice before it to the next;
    a terminating occurrence closes the chain. An id seen exactly twice, once terminating, links
    the other slice to it whatever the file order (a kernel can start before its launch returns
    the clock to the host, in skewed traces)."""
    by_id: dict[int, list[tuple[int, bool]]] = {}
    for fid, row, term in raw.flow_ends:
        by_id.setdefault(fid, []).append((int(row_of[row]), term))
    src, dst = [], []
    for ends in by_id.values():
        if len(ends) == 2 and ends[0][1] != ends[1][1]:
            a, b = (ends[1], ends[0]) if ends[0][1] else ends
            pairs = [(a[0], b[0])]
        else:
            pairs, last = [], None
            for row, term in ends:
                if last is not None:
                    pairs.append((last, row))
                last = None if term else row
        for s, d in pairs:
            if s >= 0 and d >= 0 and s != d:
                src.append(s)
                dst.append(d)
    if not src:
        return empty_table("flows").astype({"kind": "category"})
    s, d = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    kind = ev["kind"].astype(object).to_numpy()
    work = np.isin(kind, [k.value for k in DEVICE_WORK_KINDS])
    label = np.where(
        work[d], "launch", np.where((kind[s] == Kind.OP.value) & (kind[d] == Kind.OP.value), "fwdbwd", "flow")
    )
    ids = ev["id"].to_numpy()
    return pd.DataFrame({"src": ids[s], "dst": ids[d], "kind": pd.Categorical(label)})


def _op_ids(ev: pd.DataFrame, flows: pd.DataFrame, problems: Problems) -> tuple[np.ndarray, np.ndarray]:
    """op_id per row and each row's launch time (its launch flow's source start, else its own)."""
    n = len(ev)
    kind = ev["kind"].astype(object).to_numpy()
    ids, ts, parent = ev["id"].to_numpy(), ev["ts"].to_numpy(), ev["parent_id"].to_numpy()
    is_work = np.isin(kind, [k.value for k in DEVICE_WORK_KINDS])
    is_op = kind == Kind.OP.value
    op_id = np.full(n, -1, dtype=np.int64)
    launch_ts = ts.copy()
    launch = flows[flows["kind"] == "launch"]
    dst = ids.searchsorted(launch["dst"].to_numpy())  # ids are 0..n-1 here: positions
    src = ids.searchsorted(launch["src"].to_numpy())
    launch_ts[dst] = ts[src]
    # a simulator's events (source 'simulator', kept by the Perfetto export) have no runtime to launch them
    unlinked = is_work & (ev["source"].astype(object).to_numpy() != "simulator")
    unlinked[dst] = False
    problems.add("device events whose runtime launch was not recorded", int(unlinked.sum()))
    cur = np.where(is_op[src], ids[src], parent[src])  # walk up from the launching call to an op
    todo = np.arange(len(dst))
    while len(todo):
        p = cur[todo]
        alive = p >= 0
        todo, p = todo[alive], p[alive]
        hit = is_op[p]
        op_id[dst[todo[hit]]] = p[hit]
        todo = todo[~hit]
        cur[todo] = parent[cur[todo]]
    # fallback, as the Kineto reader: the op of the same rank with the External id
    ext, rank = ev["external_id"].to_numpy(), ev["rank"].to_numpy()
    ops = np.flatnonzero(is_op & (ext >= 0))
    by_ext = pd.Series(ids[ops], index=pd.MultiIndex.from_arrays([rank[ops], ext[ops]]))
    by_ext = by_ext[~by_ext.index.duplicated(keep="first")]
    missing = np.flatnonzero(is_work & (op_id < 0) & (ext >= 0))
    found = by_ext.reindex(pd.MultiIndex.from_arrays([rank[missing], ext[missing]])).to_numpy()
    ok = ~np.isnan(found)
    op_id[missing[ok]] = found[ok].astype(np.int64)
    return op_id, launch_ts


def _steps(ev: pd.DataFrame, launch_ts: np.ndarray) -> np.ndarray:
    """ProfilerStep numbers, rank by rank (each rank's steps contain only its own events)."""
    rank = ev["rank"].to_numpy()
    ranks = np.unique(rank)
    if len(ranks) <= 1:
        return link.steps(ev, launch_ts)
    out = np.full(len(ev), -1, dtype=np.int32)
    for r in ranks:
        rows = np.flatnonzero(rank == r)
        out[rows] = link.steps(ev.iloc[rows], launch_ts[rows])
    return out


def _counters(raw: Raw, places: Places, offset: int) -> pd.DataFrame:
    """Columns as profiler.model.schema.COUNTER_COLUMNS."""
    if not raw.c_ts:
        return empty_table("counters").astype({"track": "category", "device": "category", "name": "category"})
    uuids = np.asarray(raw.c_track, dtype=np.int64)
    uniq, codes = np.unique(uuids, return_inverse=True)
    got = [places.counter(int(u)) for u in uniq]
    return pd.DataFrame(
        {
            "track": _cat(np.array([p.track for p, _ in got], dtype=object)[codes]),
            "rank": np.array([p.rank for p, _ in got], dtype=np.int32)[codes],
            "device": _cat(np.array([p.device for p, _ in got], dtype=object)[codes]),
            "ts": np.asarray(raw.c_ts, dtype=np.int64) - offset,
            "name": _cat(np.array([nm for _, nm in got], dtype=object)[codes]),
            "value": np.asarray(raw.c_value, dtype=np.float64),
        }
    )


def _devices(raw: Raw, ev: pd.DataFrame, counters: pd.DataFrame) -> pd.DataFrame:
    """The exported devices table when the file carries one, else one row per (rank, device) seen."""
    pairs = pd.concat(
        [ev[["rank", "device"]].astype({"device": object}), counters[["rank", "device"]].astype({"device": object})]
    )
    pairs = pairs.drop_duplicates().sort_values(["rank", "device"])
    stored = _json(raw.metadata.get(F.META_DEVICES))
    rows = (
        {(int(r["rank"]), str(r["device"])): r for r in stored if isinstance(r, dict) and "rank" in r and "device" in r}
        if isinstance(stored, list)
        else {}
    )
    out = []
    for rank, device in pairs.itertuples(index=False):
        r = rows.get((int(rank), str(device)), {})
        out.append(
            {
                "rank": int(rank),
                "device": str(device),
                "name": str(r.get("name", "cpu" if device == "cpu" else "")),
                "sm_count": _int(r.get("sm_count")),
                "compute_capability": str(r.get("compute_capability", "") or ""),
                "memory_bytes": _int(r.get("memory_bytes")),
                "warp_size": _int(r.get("warp_size")),
            }
        )
    df = pd.DataFrame(
        out, columns=["rank", "device", "name", "sm_count", "compute_capability", "memory_bytes", "warp_size"]
    )
    return df.astype(
        {
            "rank": "int32",
            "device": "category",
            "name": "object",
            "sm_count": "int32",
            "compute_capability": "object",
            "memory_bytes": "int64",
            "warp_size": "int32",
        }
    )


def _int(v: Any) -> int:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and -(2**62) < v < 2**62 else -1
