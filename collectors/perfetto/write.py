"""A `Trace` (and its analysis) -> a native Perfetto protobuf trace for ui.perfetto.dev.

Every event is a TrackEvent slice: a SLICE_BEGIN packet at `ts` and a SLICE_END at `ts + dur`
(absolute ns timestamps, so durations stay exact). Names, categories, annotation names and
repeated string values are interned once (sequence 1, incremental state cleared on the first
packet). Flows: the flow's source slice lists its id in `flow_ids`, the destination in
`terminating_flow_ids`. Counters are TYPE_COUNTER packets on counter tracks.

Packet order: by time; at one instant, slices ending go first (innermost first), then slices
beginning in (start, longer first, id) order, a zero-length slice ending right after it begins.
That is the order a stack reader needs, and it matches how `collectors.kineto.link.nest` nests.

The first packet also carries ChromeMetadata entries: the redacted metadata, what each track uuid
stands for, and the devices table, so that `collectors.perfetto.load_perfetto` reads the export
back exactly (see docs/perfetto.md).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from collectors.kineto.kinds import kind_of
from collectors.perfetto import fields as F
from collectors.perfetto.annotate import PerfColumns, perf_columns
from collectors.perfetto.lanes import assign_lanes
from collectors.perfetto.tracks import TrackPlan, counter_track, rows_of, slice_tracks
from profiler.model.files import check_writable, write_atomic
from profiler.model.trace import Trace

SEQ = 1
BEGIN, END, COUNTER = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END, pb.TrackEvent.TYPE_COUNTER
NEEDS_STATE = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE


class _Interner:
    def __init__(self) -> None:
        self.ids: dict = {}

    def __call__(self, value) -> int:
        iid = self.ids.get(value)
        if iid is None:
            iid = self.ids[value] = len(self.ids) + 1  # iid 0 means "not interned"
        return iid


def write_perfetto(
    trace: Trace,
    path: str | Path,
    units: pd.DataFrame | None = None,
    *,
    force: bool = False,
    inputs: Iterable[str | Path] = (),
) -> Path:
    """Write `trace` as a Perfetto protobuf file (gzip when the name ends in .gz); `units` is the
    classified units table (Analysis.units) whose figures the slices carry. Written whole or not
    at all, never over one of `inputs`, over an existing file only with `force` (files.write_atomic)."""
    path = check_writable(path, force=force, inputs=inputs)
    data = perfetto_bytes(trace, units)
    if path.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)
    return write_atomic(path, data, force=force, inputs=inputs)


def perfetto_bytes(trace: Trace, units: pd.DataFrame | None = None) -> bytes:
    """The serialized Perfetto `Trace` message."""
    ev = trace.events
    offset = max(0, -int(ev["ts"].min())) if len(ev) else 0
    if len(trace.counters):
        offset = max(offset, -int(trace.counters["ts"].min()))
    plan = TrackPlan()
    row, places = rows_of(ev)
    ids, ts, dur = ev["id"].to_numpy(), ev["ts"].to_numpy() + offset, ev["dur"].to_numpy()
    lane, depth = assign_lanes(row, ts, dur, ids)
    n_lanes = np.zeros(len(places), dtype=np.int64)
    np.maximum.at(n_lanes, row, lane + 1) if len(row) else None
    first = np.array(
        [slice_tracks(plan, p, int(k)) for p, k in zip(places.itertuples(index=False), n_lanes)], dtype=np.int64
    )
    track_uuid = first[row] + lane if len(row) else np.zeros(0, dtype=np.int64)
    counter_uuid = _counter_tracks(plan, trace.counters)

    out = pb.Trace()
    names, cats, anames, strings = _Interner(), _Interner(), _Interner(), _Interner()
    head = out.packet.add()  # filled last: it carries the interned data of the whole sequence
    _descriptors(out, plan)
    _slices(out, trace, ts, dur, track_uuid, depth, perf_columns(ev, units), names, cats, anames, strings)
    _counters(out, trace.counters, counter_uuid, offset)

    head.trusted_packet_sequence_id = SEQ
    head.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    head.timestamp = int(ts.min()) if len(ts) else 0
    interned = head.interned_data
    for text, iid in names.ids.items():
        interned.event_names.add(iid=iid, name=text)
    for text, iid in cats.ids.items():
        interned.event_categories.add(iid=iid, name=text)
    for text, iid in anames.ids.items():
        interned.debug_annotation_names.add(iid=iid, name=text)
    for text, iid in strings.ids.items():
        interned.debug_annotation_string_values.add(iid=iid, str=text.encode())
    meta = head.chrome_events.metadata
    meta.add(name=F.META_FORMAT, string_value=F.FORMAT_VERSION)
    meta.add(name=F.META_METADATA, json_value=_json({**trace.metadata, "ts_offset_ns": offset}))
    meta.add(name=F.META_TRACKS, json_value=_json({"slices": plan.slice_rows, "counters": plan.counter_rows}))
    meta.add(name=F.META_DEVICES, json_value=_json(trace.devices.astype(object).to_dict("records")))
    return out.SerializeToString()


def _json(value) -> str:
    return orjson.dumps(value, default=str, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def _descriptors(out: pb.Trace, plan: TrackPlan) -> None:
    for d in plan.descriptors:
        td = out.packet.add().track_descriptor
        td.uuid = d["uuid"]
        if "parent" in d:
            td.parent_uuid = d["parent"]
        if "name" in d:
            td.name = d["name"]
        if "process" in d:
            td.process.pid, td.process.process_name = d["pid"], d["process"]
        if "tid" in d:
            td.thread.pid, td.thread.tid, td.thread.thread_name = d["pid"], d["tid"], d["thread"]
        if d.get("counter"):
            td.counter.SetInParent()


def _counter_tracks(plan: TrackPlan, counters: pd.DataFrame) -> np.ndarray:
    if not len(counters):
        return np.zeros(0, dtype=np.int64)
    key = counters[["track", "rank", "device", "name"]].astype({"track": object, "device": object, "name": object})
    codes, uniq = pd.factorize(pd.MultiIndex.from_frame(key))
    uuids = np.array([counter_track(plan, str(t), int(r), str(d), str(nm)) for t, r, d, nm in uniq], dtype=np.int64)
    return uuids[codes]


def _slices(
    out: pb.Trace,
    trace: Trace,
    ts: np.ndarray,
    dur: np.ndarray,
    track_uuid: np.ndarray,
    depth: np.ndarray,
    perf: PerfColumns,
    names: _Interner,
    cats: _Interner,
    anames: _Interner,
    strings: _Interner,
) -> None:
    """BEGIN/END packets for every event, in the order described in the module docstring."""
    ev = trace.events
    n = len(ev)
    if n == 0:
        return
    pos = np.empty(n, dtype=np.int64)
    pos[np.lexsort((ev["id"].to_numpy(), -dur, ts))] = np.arange(n)
    end = ts + dur
    zero = dur == 0
    # records: begins (kind 1, 2*pos), ends (zero-length: kind 1, 2*pos+1; else kind 0, -depth)
    rec_t = np.concatenate([ts, end])
    rec_k = np.concatenate([np.ones(n, np.int64), np.where(zero, 1, 0)])
    rec_o = np.concatenate([2 * pos, np.where(zero, 2 * pos + 1, -depth.astype(np.int64))])
    order = np.lexsort((rec_o, rec_k, rec_t)).tolist()

    name_iid = _codes_to_iids(ev["name"], names)
    cat_iid = _codes_to_iids(ev["cat"], cats)
    annots = _annotations(ev, perf, anames, strings)
    flow_out, flow_in = _flow_ids(trace)
    t_list, e_list, u_list = ts.tolist(), end.tolist(), track_uuid.tolist()
    packets = out.packet
    for r in order:
        p = packets.add()
        p.trusted_packet_sequence_id = SEQ
        p.sequence_flags = NEEDS_STATE
        te = p.track_event
        if r < n:
            p.timestamp = t_list[r]
            te.type = BEGIN
            te.track_uuid = u_list[r]
            te.name_iid = name_iid[r]
            te.category_iids.append(cat_iid[r])
            a = annots.get(r)
            if a:
                _add_annotations(te, a)
            if r in flow_out:
                te.flow_ids.extend(flow_out[r])
            if r in flow_in:
                te.terminating_flow_ids.extend(flow_in[r])
        else:
            p.timestamp = e_list[r - n]
            te.type = END
            te.track_uuid = u_list[r - n]


def _codes_to_iids(col: pd.Series, interner: _Interner) -> list[int]:
    cats = col.cat.categories
    table = np.array([interner(str(c)) for c in cats] + [interner("")], dtype=np.int64)
    return table[col.cat.codes.to_numpy()].tolist()  # code -1 (missing) -> the '' entry


def _annotations(ev: pd.DataFrame, perf: PerfColumns, anames: _Interner, strings: _Interner) -> dict[int, list]:
    """row -> [(kind, name_iid, value)], kind 'i' int, 's' interned string, 'perf' a dict."""
    out: dict[int, list] = {}

    def put(rows: np.ndarray, item) -> None:
        for r, v in zip(rows.tolist(), item):
            out.setdefault(r, []).append(v)

    for col, name in F.INT_ANNOTATIONS.items():
        v = ev[col].to_numpy()
        rows = np.flatnonzero(v != -1)
        iid = anames(name)
        put(rows, (("i", iid, x) for x in v[rows].tolist()))
    for col, name in F.TEXT_ANNOTATIONS.items():
        c = ev[col]
        table = np.array([strings(str(s)) if s != "" else 0 for s in c.cat.categories] + [0], dtype=np.int64)
        v = table[c.cat.codes.to_numpy()]
        rows = np.flatnonzero(v > 0)
        iid = anames(name)
        put(rows, (("s", iid, x) for x in v[rows].tolist()))
    implied = np.array([kind_of(str(c)).value for c in ev["cat"].cat.categories] + [""], dtype=object)
    kind = ev["kind"].astype(object).to_numpy()
    rows = np.flatnonzero(kind != implied[ev["cat"].cat.codes.to_numpy()])
    iid = anames(F.KIND_ANNOTATION)
    put(rows, (("s", iid, strings(str(k))) for k in kind[rows].tolist()))
    source = ev["source"].astype(object).to_numpy()
    rows = np.flatnonzero(source != F.DEFAULT_SOURCE)
    iid = anames(F.SOURCE_ANNOTATION)
    put(rows, (("s", iid, strings(str(s))) for s in source[rows].tolist()))
    rows = np.flatnonzero(perf.has())
    if len(rows):
        iid = anames(F.PERF_ANNOTATION)
        put(rows, (("perf", iid, _perf_entries(perf, r)) for r in rows.tolist()))
    return out


def _perf_entries(perf: PerfColumns, r: int) -> list[tuple[str, object]]:
    items: list[tuple[str, object]] = [("bound", str(perf.bound[r]))]
    family = perf.family[r]
    if isinstance(family, str) and family:
        items.append(("family", family))
    for key in ("efficiency", "flops", "bytes", "floor_ns"):
        v = float(getattr(perf, key)[r])
        if np.isfinite(v):
            items.append((key, v))
    if perf.estimate[r]:
        items.append(("estimate", True))  # a duration share of the launching op's figures
    return items


def _add_annotations(te, items: list) -> None:
    anns = te.debug_annotations
    for kind, iid, value in items:
        a = anns.add()
        a.name_iid = iid
        if kind == "i":
            a.int_value = value
        elif kind == "s":
            a.string_value_iid = value
        else:
            for key, v in value:
                e = a.dict_entries.add()
                e.name = key
                if isinstance(v, bool):
                    e.bool_value = v
                elif isinstance(v, float):
                    e.double_value = v
                else:
                    e.string_value = v


def _flow_ids(trace: Trace) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Event row -> flow ids it starts, and -> flow ids it terminates (flow id = flow row + 1)."""
    fl = trace.flows
    out: dict[int, list[int]] = {}
    into: dict[int, list[int]] = {}
    if not len(fl):
        return out, into
    pos = pd.Index(trace.events["id"].to_numpy())
    src, dst = pos.get_indexer(fl["src"].to_numpy()), pos.get_indexer(fl["dst"].to_numpy())
    for k, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        out.setdefault(s, []).append(k + 1)
        into.setdefault(d, []).append(k + 1)
    return out, into


def _counters(out: pb.Trace, counters: pd.DataFrame, uuids: np.ndarray, offset: int) -> None:
    if not len(counters):
        return
    packets = out.packet
    for t, u, v in zip(
        (counters["ts"].to_numpy() + offset).tolist(), uuids.tolist(), counters["value"].to_numpy().tolist()
    ):
        p = packets.add()
        p.timestamp = t
        p.trusted_packet_sequence_id = SEQ
        p.sequence_flags = NEEDS_STATE
        te = p.track_event
        te.type = COUNTER
        te.track_uuid = u
        te.double_counter_value = v
