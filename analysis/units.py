"""Units of work, as docs/architecture.md ("How time is classified") defines them.

On a device, a unit is a host op together with the device work it launched (events whose
`op_id` is that op); its device time is the union of that work's intervals. Device work with no
launching op (a graph replay, a collective kernel) is a unit by itself. On a rank with no device
work (a CPU-only trace), each op is a unit and its time is its self time: its duration less that
of its child ops. Annotations (record_function, ProfilerStep) are labels, never units.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.intervals import grouped_union_length
from profiler.model.schema import DEVICE_WORK_KINDS, Kind
from profiler.model.trace import Trace

_LABELS = ["name", "shapes", "dtypes", "concrete", "collective", "msg_dtype"]
_NUMBERS = ["msg_in_nelems", "msg_out_nelems", "group_size"]  # collective message, as recorded
UNIT_COLUMNS = [
    "unit_id",
    "rank",
    "device",
    "kind",
    *_LABELS,
    *_NUMBERS,
    "step",
    "start_ns",
    "end_ns",
    "time_ns",
    "work_events",
    "host_copy_bytes",
]
#: Copies between host and device memory, as Kineto and roctracer name them ('Memcpy HtoD
#: (Pinned -> Device)', 'Memcpy DtoH (Device -> Host)'): they cross the host link, not HBM.
HOST_COPY = r"(?i)\b(?:HtoD|DtoH)\b|(?:host|pinned|pageable)\s*->\s*device|device\s*->\s*(?:host|pinned|pageable)"
#: Host events that are units on a CPU-only rank: ops, and collectives run by a backend's
#: worker threads (gloo's 'gloo:all_reduce' regions).
_CPU_WORK = (Kind.OP.value, Kind.COLLECTIVE.value)


def units(trace: Trace) -> pd.DataFrame:
    """One row per unit.

    Columns:
      unit_id: the op's event id (or the device event's own id when no op launched it),
      rank, device ('gpu<N>' or 'cpu'), kind ('op', or the work's kind for an op-less unit),
      name, shapes, dtypes, concrete: of the op (or of the work) as recorded,
      collective, msg_dtype, msg_in_nelems, msg_out_nelems, group_size: collective metadata as
        recorded on the op or its work ('' / -1 when none),
      step: ProfilerStep number (of the op, or of the step that launched the work; -1 outside),
      start_ns, end_ns: first start and last end of the unit's work (ns),
      time_ns: device units: union of the work's intervals; CPU units: self time (ns),
      work_events: device events in the unit (0 for CPU units),
      host_copy_bytes: bytes the unit's work copies between host and device memory (HtoD, DtoH
        copies; their recorded sizes, NaN where a host copy recorded none; 0 without one).
    """
    ev = trace.events
    is_work = ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    frames = [_device_units(ev, is_work)]
    ranks_with_work = set(ev.loc[is_work, "rank"].unique().tolist())
    cpu_only = ~ev["rank"].isin(ranks_with_work).to_numpy()
    if cpu_only.any():
        frames.append(_cpu_units(ev, cpu_only))
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(
            {
                c: pd.Series(
                    dtype="int64"
                    if c.endswith(("_ns", "_id", "events"))
                    else "float64"
                    if c.endswith("bytes")
                    else object
                )
                for c in UNIT_COLUMNS
            }
        )
    return pd.concat(frames, ignore_index=True)[UNIT_COLUMNS]


def _device_units(ev: pd.DataFrame, is_work: np.ndarray) -> pd.DataFrame:
    work_rows = np.flatnonzero(is_work)
    if len(work_rows) == 0:
        return pd.DataFrame(columns=UNIT_COLUMNS)
    ids, op_ids = ev["id"].to_numpy(), ev["op_id"].to_numpy()
    op_id = op_ids[work_rows]
    unit = np.where(op_id >= 0, op_id, ids[work_rows])
    start = ev["ts"].to_numpy()[work_rows]
    end = start + ev["dur"].to_numpy()[work_rows]
    unit_ids, first, codes = np.unique(unit, return_index=True, return_inverse=True)
    lo = np.full(len(unit_ids), np.iinfo(np.int64).max)
    hi = np.full(len(unit_ids), np.iinfo(np.int64).min)
    np.minimum.at(lo, codes, start)
    np.maximum.at(hi, codes, end)
    # labels: of the op for op units (its row), of the unit's first work event otherwise
    has_op = np.isin(unit_ids, op_id[op_id >= 0])
    pos = pd.Index(ids)
    label_row = np.where(has_op, pos.get_indexer(np.where(has_op, unit_ids, ids[work_rows[first]])), work_rows[first])
    out = pd.DataFrame(
        {
            "unit_id": unit_ids,
            "rank": ev["rank"].to_numpy()[work_rows[first]],
            "device": _text(_labels(ev, "device", work_rows[first])),
            "kind": _text(np.where(has_op, Kind.OP.value, _labels(ev, "kind", work_rows[first]))),
            "step": ev["step"].to_numpy()[work_rows[first]],
            "start_ns": lo,
            "end_ns": hi,
            "time_ns": grouped_union_length(codes, start, end).reindex(np.arange(len(unit_ids))).to_numpy(),
            "work_events": np.bincount(codes, minlength=len(unit_ids)),
            "host_copy_bytes": _host_copy_bytes(ev, work_rows, codes, len(unit_ids)),
        }
    )
    for c in _LABELS:
        values = _labels(ev, c, label_row)
        if c in ("collective", "msg_dtype"):  # the op may not record them while its kernel does
            values = np.where(values == "", _labels(ev, c, work_rows[first]), values)
        out[c] = _text(values)
    for c in _NUMBERS:
        col = ev[c].to_numpy()
        out[c] = np.where(col[label_row] >= 0, col[label_row], col[work_rows[first]])
    return out


def _host_copy_bytes(ev: pd.DataFrame, work_rows: np.ndarray, codes: np.ndarray, n: int) -> np.ndarray:
    """Per unit (codes index the units), the recorded bytes of its host-device copies; NaN
    where one of them recorded no size."""
    names = ev["name"].cat.categories
    host = np.isin(
        ev["name"].cat.codes.to_numpy()[work_rows], np.flatnonzero(names.str.contains(HOST_COPY, regex=True))
    )
    host &= ev["kind"].to_numpy()[work_rows] == Kind.MEMCPY.value
    size = ev["bytes_recorded"].to_numpy()[work_rows].astype(np.float64)
    size = np.where(size >= 0, size, np.nan)
    return np.bincount(codes[host], weights=size[host], minlength=n) if host.any() else np.zeros(n)


def _text(values: np.ndarray) -> pd.Series:
    """Strings kept as Python objects: pandas 3 would convert them to Arrow strings, slower to
    build and to index for tables this small."""
    return pd.Series(values, dtype=object, copy=False)


def _labels(ev: pd.DataFrame, column: str, rows: np.ndarray) -> np.ndarray:
    """Values of a categorical column at `rows`, as Python strings (no copy of the whole column)."""
    cat = ev[column].cat
    return cat.categories.to_numpy(dtype=object)[cat.codes.to_numpy()[rows]]


def _cpu_units(ev: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """Ops of CPU-only ranks, timed by self time (duration less that of their child ops)."""
    seg = self_segments(ev, rows)
    self_ns = (seg["end"] - seg["start"]).groupby(seg["op"]).sum()
    is_op = ev["kind"].isin(_CPU_WORK).to_numpy() & rows
    ops = ev.loc[is_op, ["id", "rank", "device", "kind", "step", "ts", "dur", *_LABELS, *_NUMBERS]]
    out = pd.DataFrame(
        {
            "unit_id": ops["id"].to_numpy(),
            "rank": ops["rank"].to_numpy(),
            "device": _text(ops["device"].astype(object).to_numpy()),
            "kind": _text(ops["kind"].astype(object).to_numpy()),
            "step": ops["step"].to_numpy(),
            "start_ns": ops["ts"].to_numpy(),
            "end_ns": (ops["ts"] + ops["dur"]).to_numpy(),
            "time_ns": self_ns.reindex(ops["id"].to_numpy(), fill_value=0).to_numpy().astype(np.int64),
            "work_events": 0,
            "host_copy_bytes": 0.0,
        }
    )
    for c in _LABELS:
        out[c] = _text(ops[c].astype(object).to_numpy())
    for c in _NUMBERS:
        out[c] = ops[c].to_numpy()
    return out


def op_parent(ev: pd.DataFrame) -> np.ndarray:
    """For every row, the nearest enclosing event of kind op (-1 if none), skipping the labels
    (annotations, python frames) that may sit between two ops."""
    is_op = pd.Series((ev["kind"] == Kind.OP.value).to_numpy(), index=ev["id"].to_numpy())
    parent = pd.Series(ev["parent_id"].to_numpy(), index=ev["id"].to_numpy())
    out = ev["parent_id"].to_numpy().copy()
    todo = np.flatnonzero(out >= 0)
    while len(todo):
        p = out[todo]
        ok = is_op.reindex(p).fillna(False).to_numpy(dtype=bool)
        todo = todo[~ok]
        out[todo] = parent.reindex(out[todo]).fillna(-1).to_numpy(dtype=np.int64)
        todo = todo[out[todo] >= 0]
    return out


def self_segments(ev: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The pieces of each op's interval not covered by its child ops (its self time), for the
    ops among `rows`. Columns: op (event id), rank, device, step, start, end (ns).

    For an op with children c1..ck (sorted by start), the pieces are [op.start, c1.start),
    [c1.end, c2.start), ..., [ck.end, op.end); an op without children is one piece.
    """
    is_op = ev["kind"].isin(_CPU_WORK).to_numpy() & rows
    ops = pd.DataFrame(
        {
            "op": ev["id"].to_numpy()[is_op],
            "start": ev["ts"].to_numpy()[is_op],
            "end": (ev["ts"] + ev["dur"]).to_numpy()[is_op],
            "rank": ev["rank"].to_numpy()[is_op],
            "device": ev["device"].astype(object).to_numpy()[is_op],
            "step": ev["step"].to_numpy()[is_op],
        }
    )
    kids = pd.DataFrame({"op": op_parent(ev)[is_op], "start": ops["start"].to_numpy(), "end": ops["end"].to_numpy()})
    kids = kids[kids["op"] >= 0].sort_values(["op", "start"], kind="stable")
    # a piece ends at each child's start and begins at the previous child's end (or the op's start)
    op_start = ops.set_index("op")["start"]
    prev_end = kids.groupby("op")["end"].shift(fill_value=0)  # int64 kept (a NaN would make it float)
    first = (kids.groupby("op").cumcount() == 0).to_numpy()
    gap_start = op_start.reindex(kids["op"].to_numpy()).to_numpy(dtype=np.int64, copy=True)
    gap_start[~first] = prev_end.to_numpy()[~first].astype(np.int64)
    gaps = pd.DataFrame({"op": kids["op"].to_numpy(), "start": gap_start, "end": kids["start"].to_numpy()})
    # int64 throughout: ns timestamps (~1.8e18) do not fit a float64's 53-bit mantissa
    last_end = kids.groupby("op")["end"].max()
    has_kids = np.isin(ops["op"].to_numpy(), last_end.index.to_numpy())
    tail_start = ops["start"].to_numpy().copy()
    tail_start[has_kids] = last_end.reindex(ops["op"].to_numpy()[has_kids]).to_numpy(dtype=np.int64)
    tails = pd.DataFrame({"op": ops["op"].to_numpy(), "start": tail_start, "end": ops["end"].to_numpy()})
    seg = pd.concat([gaps, tails], ignore_index=True)
    seg = seg[seg["end"] > seg["start"]]
    info = ops.set_index("op")[["rank", "device", "step"]]
    seg = seg.join(info, on="op")
    return seg.reset_index(drop=True)
