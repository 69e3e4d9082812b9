"""Perfetto protobuf bytes -> raw slices, counters, flow ends and tracks (no mapping yet).

What is read: TrackEvent slices (SLICE_BEGIN/SLICE_END on a per-track stack, INSTANT as a
zero-length slice, legacy phase 'X' complete events with duration_us, 'B'/'E'/'I'), counters
(TYPE_COUNTER, and a slice's extra counter values), flows (flow_ids, terminating_flow_ids and the
older *_old fields), debug annotations (nested dicts and arrays too), track descriptors
(process, thread, counter, parent tracks) and the older process/thread descriptor packets.

Interned data (event names, categories, annotation names, string values) is scoped to its packet
sequence and cleared by SEQ_INCREMENTAL_STATE_CLEARED; packets that need that state before any
packet of their sequence cleared it are skipped and counted, as trace_processor drops them.
Timestamps are ns on the trace clock; sequence-scoped incremental clocks (ids 64-127, Chrome's
delta-encoded timestamps) are resolved through the sequence's ClockSnapshot. Packet types that
carry no TrackEvent data are counted in `problems`, never fatal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from profiler.model.errors import InputError
from profiler.model.trace import Problems

BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4
CLEARED, NEEDS = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED, pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
#: packets that hold no events: bookkeeping of the tracing service (read silently)
QUIET = frozenset(
    {
        "trace_config",
        "trace_stats",
        "clock_snapshot",
        "synchronization_marker",
        "service_event",
        "system_info",
        "trace_uuid",
        "extension_descriptor",
        "first_packet_on_sequence",
        "compressed_packets",
    }
)


@dataclass
class Track:
    """One track descriptor (or a legacy thread/process descriptor)."""

    uuid: int
    name: str = ""
    parent: int = 0
    pid: int | None = None
    tid: int | None = None
    process_name: str = ""
    counter: bool = False
    incremental: bool = False
    multiplier: int = 1
    last_value: float = 0.0  # an incremental counter's running total


@dataclass
class Raw:
    """Everything read, as parallel lists (one entry per slice / counter sample / flow end)."""

    ts: list[int] = field(default_factory=list)
    dur: list[int] = field(default_factory=list)  # -1 while open
    track: list[int] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    cat: list[str] = field(default_factory=list)
    args: dict[int, dict[str, Any]] = field(default_factory=dict)  # slice row -> annotations
    flow_ends: list[tuple[int, int, bool]] = field(default_factory=list)  # (flow id, slice row, terminating)
    c_ts: list[int] = field(default_factory=list)
    c_track: list[int] = field(default_factory=list)
    c_value: list[float] = field(default_factory=list)
    tracks: dict[int, Track] = field(default_factory=dict)
    processes: dict[int, str] = field(default_factory=dict)  # pid -> name
    metadata: dict[str, Any] = field(default_factory=dict)  # ChromeMetadata name -> value
    problems: Problems = field(default_factory=Problems)


@dataclass
class _Sequence:
    valid: bool = False
    names: dict[int, str] = field(default_factory=dict)
    cats: dict[int, str] = field(default_factory=dict)
    anames: dict[int, str] = field(default_factory=dict)
    strings: dict[int, str] = field(default_factory=dict)
    default_track: int = 0
    extra_counters: list[int] = field(default_factory=list)
    extra_double_counters: list[int] = field(default_factory=list)
    clock_id: int = 0
    clocks: dict[int, list] = field(
        default_factory=dict
    )  # id -> [last value, multiplier, incremental, ref value, ref ns]


def parse(path, data: bytes) -> pb.Trace:
    """The Trace message of `data`; a corrupt or truncated file is an InputError."""
    try:
        trace = pb.Trace.FromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise InputError(
            path,
            f"not a readable Perfetto trace (protobuf decode failed: {e or type(e).__name__}; truncated or corrupt?)",
        ) from None
    if not len(trace.packet):
        raise InputError(path, "empty Perfetto trace: no packets")
    return trace


def read_packets(trace: pb.Trace) -> Raw:
    """Walk the packets in file order (see the module docstring)."""
    raw = Raw()
    seqs: dict[int, _Sequence] = {}
    stacks: dict[int, list[int]] = {}
    skipped_state = 0
    for p in trace.packet:
        which = p.WhichOneof("data")
        sid = p.trusted_packet_sequence_id
        flags = p.sequence_flags
        st = seqs.get(sid)
        if flags & CLEARED or p.incremental_state_cleared:
            st = seqs[sid] = _Sequence(valid=True, clocks=st.clocks if st else {})
        elif st is None:
            st = seqs[sid] = _Sequence()
        if p.HasField("trace_packet_defaults"):
            _defaults(st, p.trace_packet_defaults)
        if p.HasField("interned_data"):
            _intern(st, p.interned_data)
        if which == "track_event":
            if flags & NEEDS and not st.valid:
                skipped_state += 1
                continue
            _track_event(raw, st, stacks, p, _timestamp(st, p))
        elif which == "track_descriptor":
            _descriptor(raw, p.track_descriptor)
        elif which == "thread_descriptor":  # legacy: the sequence's default thread
            d = p.thread_descriptor
            uuid = _thread_uuid(d.pid, d.tid)
            raw.tracks.setdefault(uuid, Track(uuid, name=_text(d.thread_name), pid=d.pid, tid=d.tid))
            st.default_track = st.default_track or uuid
        elif which == "process_descriptor":
            raw.processes[p.process_descriptor.pid] = _text(p.process_descriptor.process_name)
        elif which == "clock_snapshot":
            _clocks(st, p.clock_snapshot)
        elif which == "chrome_events":
            for m in p.chrome_events.metadata:
                kind = m.WhichOneof("value")
                raw.metadata[_text(m.name)] = _text(getattr(m, kind)) if kind else None
        elif which is not None and which not in QUIET:
            raw.problems.add(f"packets of type '{which}' skipped (not TrackEvent data)")
    raw.problems.add("packets skipped: their sequence's interned state was never cleared", skipped_state)
    open_rows = [r for s in stacks.values() for r in s]
    raw.problems.add("slices never ended (dropped)", len(open_rows))
    return raw


def _thread_uuid(pid: int, tid: int) -> int:
    """A synthetic uuid for a legacy thread descriptor (negative: never a real descriptor's)."""
    return -((pid & 0xFFFFFFFF) << 32 | (tid & 0xFFFFFFFF)) - 1


def _defaults(st: _Sequence, d) -> None:
    if d.HasField("timestamp_clock_id"):
        st.clock_id = d.timestamp_clock_id
    ted = d.track_event_defaults
    if ted.HasField("track_uuid"):
        st.default_track = ted.track_uuid
    st.extra_counters = list(ted.extra_counter_track_uuids)
    st.extra_double_counters = list(ted.extra_double_counter_track_uuids)


def _intern(st: _Sequence, d) -> None:
    for e in d.event_names:
        st.names[e.iid] = _text(e.name)
    for e in d.event_categories:
        st.cats[e.iid] = _text(e.name)
    for e in d.debug_annotation_names:
        st.anames[e.iid] = _text(e.name)
    for e in d.debug_annotation_string_values:
        st.strings[e.iid] = e.str.decode("utf-8", "replace")


def _clocks(st: _Sequence, snap) -> None:
    """Sequence-scoped clocks (64-127) against the snapshot's other clock (the trace clock)."""
    ref = [c for c in snap.clocks if c.clock_id < 64]
    if not ref:
        return
    ref_ns = ref[0].timestamp * (ref[0].unit_multiplier_ns or 1)
    for c in snap.clocks:
        if c.clock_id >= 64:
            st.clocks[c.clock_id] = [c.timestamp, c.unit_multiplier_ns or 1, c.is_incremental, c.timestamp, ref_ns]


def _timestamp(st: _Sequence, p) -> int:
    clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else st.clock_id
    if clock < 64 or clock not in st.clocks:
        return p.timestamp
    c = st.clocks[clock]  # [last, multiplier, incremental, ref value, ref ns]
    value = c[0] + p.timestamp if c[2] else p.timestamp
    c[0] = value
    return c[4] + (value - c[3]) * c[1]


def _descriptor(raw: Raw, d) -> None:
    t = raw.tracks.get(d.uuid) or Track(d.uuid)
    t.name = _text(d.name or d.static_name or d.atrace_name) or t.name
    t.parent = d.parent_uuid or t.parent
    if d.HasField("process"):
        t.pid, t.process_name = d.process.pid, _text(d.process.process_name)
        if t.process_name:
            raw.processes[d.process.pid] = t.process_name
    if d.HasField("thread"):
        t.pid, t.tid = d.thread.pid, d.thread.tid
        t.name = t.name or _text(d.thread.thread_name)
    if d.HasField("counter"):
        t.counter = True
        t.incremental = d.counter.is_incremental
        t.multiplier = d.counter.unit_multiplier or 1
    raw.tracks[d.uuid] = t


def _track_event(raw: Raw, st: _Sequence, stacks: dict[int, list[int]], p, ts: int) -> None:
    te = p.track_event
    typ = te.type
    has_track = te.HasField("track_uuid")
    track = te.track_uuid if has_track else st.default_track
    if typ == END and te.ByteSize() == 2 + has_track * (1 + _varint_len(track)):
        # the common end: type and track only (with upb each probe of a repeated field costs
        # about a microsecond, so the size tells there is nothing else to read)
        stack = stacks.get(track)
        if stack:
            row = stack.pop()
            raw.dur[row] = ts - raw.ts[row]
        else:
            raw.problems.add("slice ends without a matching begin (ignored)")
        return
    if typ == COUNTER:
        _counter(raw, track, ts, te.double_counter_value if te.HasField("double_counter_value") else te.counter_value)
        return
    legacy = typ == 0 and te.HasField("legacy_event")
    if legacy:
        typ, dur = _legacy(raw, te.legacy_event)
        if typ is None:
            return
    else:
        dur = 0 if typ == INSTANT else -1
    if typ == END:
        stack = stacks.get(track)
        if not stack:
            raw.problems.add("slice ends without a matching begin (ignored)")
            return
        row = stack.pop()
        raw.dur[row] = ts - raw.ts[row]
    elif typ in (BEGIN, INSTANT):
        row = len(raw.ts)
        raw.ts.append(ts)
        raw.dur.append(dur)
        raw.track.append(track)
        name = _text(te.name) if te.HasField("name") else st.names.get(te.name_iid, "")
        if legacy and not name:
            name = st.names.get(te.legacy_event.name_iid, "")
        raw.name.append(name)
        cats = te.category_iids
        raw.cat.append(",".join(st.cats.get(i, "") for i in cats) if cats else ",".join(map(_text, te.categories)))
        if dur < 0:
            stacks.setdefault(track, []).append(row)
    else:
        raw.problems.add(f"track events of type {typ} skipped")
        return
    anns = te.debug_annotations
    if anns:
        args = raw.args.setdefault(row, {})
        for a in anns:
            args[st.anames.get(a.name_iid, "") if a.HasField("name_iid") else _text(a.name)] = _value(a, st)
    for ids, term in (
        (te.flow_ids, False),
        (te.flow_ids_old, False),
        (te.terminating_flow_ids, True),
        (te.terminating_flow_ids_old, True),
    ):
        for fid in ids:
            raw.flow_ends.append((fid, row, term))
    for uuids, values in (
        (te.extra_counter_track_uuids or st.extra_counters, te.extra_counter_values),
        (te.extra_double_counter_track_uuids or st.extra_double_counters, te.extra_double_counter_values),
    ):
        for u, v in zip(uuids, values):
            _counter(raw, u, ts, v)


def _varint_len(v: int) -> int:
    """Bytes of a protobuf varint (uint64)."""
    return max(1, (v.bit_length() + 6) // 7)


def _legacy(raw: Raw, le) -> tuple[int | None, int]:
    """A legacy (JSON-style) event: phase -> slice type, and its duration when complete."""
    phase = chr(le.phase) if le.phase else ""
    if phase == "X":
        return BEGIN, le.duration_us * 1000
    if phase == "B":
        return BEGIN, -1
    if phase == "E":
        return END, -1
    if phase in ("I", "i", "n", "R"):
        return INSTANT, 0
    raw.problems.add(f"legacy events of phase {phase!r} skipped")
    return None, 0


def _counter(raw: Raw, track: int, ts: int, value: float) -> None:
    t = raw.tracks.get(track)
    if t is not None:
        value = value * t.multiplier  # CounterDescriptor.unit_multiplier (1 unless set)
        if t.incremental:  # each sample is the change since the last one
            value = t.last_value = t.last_value + value
    raw.c_ts.append(ts)
    raw.c_track.append(track)
    raw.c_value.append(float(value))


def _value(a, st: _Sequence) -> Any:
    """A debug annotation's value: scalars as Python values, dicts and arrays nested."""
    if a.dict_entries:
        return {
            (st.anames.get(e.name_iid, "") if e.HasField("name_iid") else _text(e.name)): _value(e, st)
            for e in a.dict_entries
        }
    if a.array_values:
        return [_value(e, st) for e in a.array_values]
    kind = a.WhichOneof("value")
    if kind == "string_value_iid":
        return st.strings.get(a.string_value_iid, "")
    if kind == "legacy_json_value":
        try:
            return json.loads(a.legacy_json_value)
        except ValueError:
            return _text(a.legacy_json_value)
    return _text(getattr(a, kind)) if kind else None


def _text(value: Any) -> Any:
    """A string field as str. Perfetto's protos are proto2, whose strings are not checked for
    UTF-8: protobuf hands back bytes for invalid UTF-8; its bad bytes become U+FFFD here, as the
    Kineto reader shows them. Values of other types pass through."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
