"""Raw columns of one Kineto file -> the events and counters tables of one rank.

Every step is a numpy operation over whole columns; the only per-event Python work left is the
text of recorded shapes (one short string per op that has them).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from collectors.kineto.decode import Columns
from collectors.kineto.kinds import DEVICE_CATEGORIES, kind_of
from collectors.kineto.timestamps import us_to_ns
from profiler.schema import Kind
from profiler.trace import Problems, empty_table

_DIGITS = re.compile(r"-?\d+")


def ints(values: np.ndarray) -> np.ndarray:
    """int64 from ints, or strings holding one (legacy 'stream 7', '25738'); -1 for anything else."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        pass
    num = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")  # C loop; strings too
    out = num.fillna(-1).to_numpy(dtype=np.float64).astype(np.int64)
    for i in np.flatnonzero(num.isna().to_numpy()):  # 'stream 7' and the like: rare
        out[i] = _int_of(values[i])
    return out


def _int_of(v: object) -> int:
    m = _DIGITS.search(v) if isinstance(v, str) else None
    return int(m.group()) if m else -1


def _categorical(values: np.ndarray) -> pd.Categorical:
    return pd.Categorical(values)


def build_events(cols: Columns, rank: int, base_ns: int, problems: Problems) -> pd.DataFrame:
    """The complete ('X') events of one file as an events table (without link columns).

    Columns as profiler.schema.EVENT_COLUMNS except parent_id, depth, op_id and step, which
    `link.link_events` adds. `id` is the row number here; the loader offsets it per file.
    """
    rows = np.flatnonzero(cols.ph == "X")
    if len(rows) == 0:
        return empty_table("events").drop(columns=["parent_id", "depth", "op_id", "step"])

    def pick(name: str) -> np.ndarray:
        return cols.obj(name)[rows]

    ts, ts_missing, ts_bad = us_to_ns(pick("ts"))
    dur, dur_missing, dur_bad = us_to_ns(pick("dur"))
    problems.add("events skipped: missing ts", int(ts_missing.sum()))
    problems.add("events skipped: missing dur", int((dur_missing & ~ts_missing).sum()))
    bad = (ts_bad | dur_bad) & ~ts_missing & ~dur_missing
    problems.add("events skipped: ts or dur is not a finite number", int(bad.sum()))
    negative = ~(ts_missing | dur_missing | bad) & (dur < 0)
    problems.add("events skipped: negative dur", int(negative.sum()))
    keep = ~(ts_missing | dur_missing | bad | negative)
    rows, ts, dur = rows[keep], ts[keep] + base_ns, dur[keep]

    def arg(name: str) -> np.ndarray:
        return cols.int64(f"arg_{name}")[rows]

    cat_codes, cat_values = pd.factorize(pick("cat"))
    kinds = np.array([kind_of(c).value for c in cat_values], dtype=object)
    per_cat = np.bincount(cat_codes, minlength=len(cat_values))
    for c, k, count in zip(cat_values, kinds, per_cat):
        if k == Kind.OTHER:
            problems.add(f"events of unknown category {c!r} kept as kind 'other'", int(count))
    on_device = np.isin(cat_codes, [i for i, c in enumerate(cat_values) if c.lower() in DEVICE_CATEGORIES])
    kind = kinds[cat_codes]

    pid = ints(pick("pid"))
    tid = ints(pick("tid"))
    dev_arg, stream_arg = arg("device"), arg("stream")
    dev_index = np.where(dev_arg >= 0, dev_arg, pid)
    stream = np.where(on_device, np.where(stream_arg >= 0, stream_arg, tid), -1)
    profiler_rows = np.isin(kind, [Kind.PROFILER.value, Kind.OVERHEAD.value])
    thread = np.where(on_device | profiler_rows, -1, tid)
    device, track = _places(rank, on_device, dev_index, stream, thread, profiler_rows)

    ext = arg("external_id")
    ext = np.where(ext >= 0, ext, arg("external_id_legacy"))
    n = len(rows)
    return pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "name": _categorical(pick("name")),
            "cat": pd.Categorical.from_codes(cat_codes, categories=pd.Index(cat_values, dtype=object)),
            "kind": _categorical(kind),
            "ts": ts,
            "dur": dur,
            "rank": np.full(n, rank, dtype=np.int32),
            "device": device,
            "track": track,
            "stream": stream,
            "thread": thread,
            "correlation": arg("correlation"),
            "external_id": ext,
            "source": pd.Categorical(np.full(n, "runtime", dtype=object)),
            "shapes": _raw_text(pick("arg_input_dims"), compact=True),
            "dtypes": _raw_text(pick("arg_input_type"), compact=False),
            "bytes_recorded": ints(pick("arg_nbytes")),
        }
    )


def _places(
    rank: int, on_device: np.ndarray, dev_index: np.ndarray, stream: np.ndarray, thread: np.ndarray, profiler_rows: np.ndarray
) -> tuple[pd.Categorical, pd.Categorical]:
    """Device label ('cpu', 'gpu<N>') and track label per row, built once per distinct place."""
    # One int64 key per place: device rows pack (device+1, stream+1) into the upper and lower
    # 32 bits; host rows are -(thread+2); profiler rows -1. Stream and thread ids fit in 32 bits.
    key = np.where(on_device, ((dev_index + 1) << 32) | (stream + 1), -(thread + 2))
    key = np.where(profiler_rows, -1, key)
    codes, uniq = pd.factorize(key)
    devices, tracks = [], []
    for k in uniq.tolist():
        if k == -1:
            devices.append("cpu")
            tracks.append(f"rank{rank}/profiler")
        elif k < 0:
            devices.append("cpu")
            tracks.append(f"rank{rank}/cpu/thread{-k - 2}")
        else:
            devices.append(f"gpu{(k >> 32) - 1}")
            tracks.append(f"rank{rank}/{devices[-1]}/stream{(k & 0xFFFFFFFF) - 1}")
    return _from_codes(codes, devices), _from_codes(codes, tracks)


def _from_codes(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
    """Categorical from factorize codes and one label per code (labels may repeat)."""
    cats, label_codes = np.unique(np.array(labels, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(label_codes[codes], categories=pd.Index(cats, dtype=object))


def _raw_text(picked: np.ndarray, *, compact: bool) -> pd.Categorical:
    """Recorded JSON values (msgspec.Raw) as text: '[[512],[]]' for shapes; '' when absent.

    Shapes repeat (a model calls few distinct shapes), so text is made once per distinct value.
    """
    codes, uniq = pd.factorize(np.array(list(map(bytes, picked)), dtype=object))
    text = [b.translate(None, b" \n\r\t").decode() if compact else b.decode() for b in uniq]
    return _from_codes(codes, text)


def build_memory_counters(cols: Columns, rank: int, base_ns: int, problems: Problems) -> pd.DataFrame:
    """`[memory]` instant events (profile_memory) as counters: allocated, reserved, alloc_delta.

    Columns as profiler.schema.COUNTER_COLUMNS; values in bytes.
    """
    rows = np.flatnonzero((cols.ph == "i") & (cols.obj("name") == "[memory]"))
    if len(rows) == 0:
        return empty_table("counters")
    ts, missing, bad = us_to_ns(cols.obj("ts")[rows])
    problems.add("memory samples skipped: bad ts", int((missing | bad).sum()))
    ok = ~(missing | bad)
    rows, ts = rows[ok], ts[ok] + base_ns
    dev_type = cols.int64("arg_mem_device_type")[rows]
    dev_id = cols.int64("arg_mem_device_id")[rows]
    device = np.where(dev_type == 0, "cpu", np.char.add("gpu", dev_id.astype(str))).astype(object)
    frames = []
    for name, field in (("allocated", "total_allocated"), ("reserved", "total_reserved"), ("alloc_delta", "mem_bytes")):
        values = cols.obj(f"arg_{field}")[rows]
        has = values != None  # noqa: E711
        frames.append(
            pd.DataFrame(
                {
                    "track": np.char.add(f"rank{rank}/", device[has].astype(str)).astype(object) + "/memory",
                    "rank": np.full(int(has.sum()), rank, dtype=np.int32),
                    "device": device[has],
                    "ts": ts[has],
                    "name": name,
                    "value": values[has].astype(np.float64),
                }
            )
        )
    out = pd.concat(frames, ignore_index=True)
    for c in ("track", "device", "name"):
        out[c] = out[c].astype("category")
    return out
