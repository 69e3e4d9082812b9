"""Load a Kineto trace file, or a directory of per-rank files, as one `Trace`.

Ranks come from each file's `distributedInfo.rank`; their clocks are put on one by adding the
file's `baseTimeNanoseconds` (Kineto writes ts = (t_ns - base) / 1000, so t_ns = ts*1000 + base).
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from msgspec import Raw

from collectors.kineto import decode, link, parallel
from collectors.kineto.build import build_events, build_memory_counters, build_sample_counters
from collectors.kineto.chunks import SplitFailed
from collectors.kineto.devices import cpu_devices, device_table
from collectors.kineto.extract import Accumulator
from profiler.model.errors import InputError
from profiler.model.redact_trace import redact_trace
from profiler.model.trace import Problems, Trace, empty_table

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")


@dataclass
class RankFile:
    """One file's tables before ranks are merged (event ids still local to the file)."""

    path: Path
    rank: int | None
    events: pd.DataFrame
    counters: pd.DataFrame
    flows: pd.DataFrame
    metadata: dict[str, Any]
    problems: Problems


def load_kineto(path: str | Path, max_bytes: int | None = None) -> Trace:
    """A Kineto trace from a file (plain or gzip JSON) or a directory of per-rank files; each
    file's (decompressed) bytes at most `max_bytes` (default: half the memory available)."""
    path = Path(path)
    if path.is_dir():
        try:
            files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
        except OSError as e:
            raise InputError(path, f"cannot read the directory: {e.strerror or e}") from None
        if not files:
            raise InputError(path, "no trace files (*.json, *.json.gz) in this directory")
    else:  # missing, special (a FIFO, a device) or unreadable: read_bounded says which
        files = [path]
    parts = [read_rank_file(f, max_bytes) for f in files]
    _assign_ranks(parts)
    return redact_trace(_merge(parts)).validate()  # every string scrubbed once, here, for every output


def read_rank_file(path: Path, max_bytes: int | None = None) -> RankFile:
    """Decode and build one file's tables, a chunk of events at a time."""
    try:
        return _read_rank_file(path, max_bytes)
    except RecursionError:  # msgspec decodes nested values recursively, up to Python's limit
        raise InputError(path, f"not a trace: JSON nested deeper than {sys.getrecursionlimit()} levels") from None


def _read_rank_file(path: Path, max_bytes: int | None) -> RankFile:
    problems = Problems()
    data = decode.read_bytes(path, max_bytes)
    top = decode.split_top(path, data, problems)
    meta = {k: decode.decode_value(v) for k, v in top.items() if k != "traceEvents"}
    raw = top.pop("traceEvents")
    acc = _accumulate(path, raw, problems)
    nothing = acc.x_given == 0 and not acc.parts
    empty = nothing and not problems and bytes(raw).translate(None, b" \t\r\n") == b"[]"
    del data, top, raw
    if nothing:
        if empty:
            raise InputError(path, "empty trace: 'traceEvents' holds no events")
        # it held items, none of them readable: say why rather than "no events"
        why = "; ".join(problems.lines()) or "no complete ('X') events"
        raise InputError(path, f"no readable events ({why})")
    dist = meta.get("distributedInfo")
    rank = dist.get("rank") if isinstance(dist, dict) else None
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 2**31 else None
    base = meta.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) and not isinstance(base, bool) and abs(base) < 2**62 else 0  # int64 ns
    r = rank or 0
    ev = build_events(acc, r, base, simulated=meta.get("traceSource") == "simulator", cpu_devices=cpu_devices(meta))
    if ev.empty:
        why = "; ".join(problems.lines()) or "no complete ('X') events"
        raise InputError(path, f"no readable events ({why})")
    counters = build_memory_counters(acc, r, base)
    samples = build_sample_counters(acc, r, base)
    if len(samples):
        parts = [c.astype({k: object for k in ("track", "device", "name")}) for c in (counters, samples) if len(c)]
        counters = pd.concat(parts, ignore_index=True).astype(
            {"track": "category", "device": "category", "name": "category"}
        )
    parent, depth = link.nest(ev, problems)
    op_id, flows, launch_ts = link.launches(ev, parent, problems)
    ev["parent_id"], ev["depth"], ev["op_id"] = parent, depth, op_id
    ev["step"] = link.steps(ev, launch_ts)
    if len(acc.column("f_ts")):
        fwdbwd = link.fwdbwd_flows(
            acc.column("f_ts") + base, acc.column("f_start", "bool"), acc.column("f_id"), acc.column("f_tid"), ev
        )
    else:  # older Kineto wrote no 'fwdbwd' flow events, only autograd's sequence numbers
        fwdbwd = link.seq_fwdbwd_flows(ev, acc.column("x_seq_nr"), acc.column("x_fwd_tid"), problems)
    flows = pd.concat([flows, fwdbwd], ignore_index=True)
    if len(acc.column("d_ts")):
        deps = link.dependency_flows(
            acc.column("d_ts") + base, acc.column("d_start", "bool"), acc.column("d_id"), acc.column("d_pid"),
            acc.column("d_tid"), ev,
        )  # fmt: skip
        flows = pd.concat([flows, deps], ignore_index=True)
    meta["process_names"] = acc.process_names
    return RankFile(path, rank, ev, counters, flows, meta, problems)


def _accumulate(path: Path, raw: Raw, problems: Problems) -> Accumulator:
    """Decode traceEvents chunk by chunk into columns; whole, if the chunking does not fit."""
    before = Counter(problems.counts)
    try:
        return parallel.accumulate(path, raw, problems)
    except SplitFailed:
        problems.counts = before
        acc = Accumulator(problems)
        acc.add(decode.decode_events(path, raw, problems))
        return acc


def _assign_ranks(parts: list[RankFile]) -> None:
    """Every file gets a distinct rank; two files claiming one rank is an error."""
    known = [p for p in parts if p.rank is not None]
    if len(parts) > 1 and len(known) not in (0, len(parts)):
        missing = next(p for p in parts if p.rank is None)
        raise InputError(missing.path, "has no distributedInfo.rank while other files in the directory do")
    if not known:
        for i, p in enumerate(parts):  # single file, or ranks by file order (stated in metadata)
            p.rank = i
            p.metadata["rank_source"] = "file order" if len(parts) > 1 else "single file"
    seen: dict[int, Path] = {}
    for p in parts:
        assert p.rank is not None  # every file has one by now
        if p.rank in seen:
            raise InputError(p.path, f"claims rank {p.rank}, as does {seen[p.rank].name}")
        seen[p.rank] = p.path
        if p.rank != 0:  # tables were built as rank 0 ('rank or 0') when the file named none
            for table in (p.events, p.counters):
                if len(table) and table["rank"].iat[0] != p.rank:
                    table["rank"] = np.int32(p.rank)
                    table["track"] = table["track"].cat.rename_categories(
                        lambda t: f"rank{p.rank}/" + t.split("/", 1)[1]
                    )


def _rank(p: RankFile) -> int:
    """The rank `_assign_ranks` gave the file."""
    assert p.rank is not None
    return p.rank


def _merge(parts: list[RankFile]) -> Trace:
    parts = sorted(parts, key=_rank)
    offset = 0
    events, flows, counters, problems = [], [], [], Problems()
    for p in parts:
        ev = p.events
        if offset:
            ev["id"] += offset
            for ref in ("parent_id", "op_id"):
                col = ev[ref].to_numpy()
                ev[ref] = np.where(col >= 0, col + offset, -1)
            p.flows[["src", "dst"]] += offset
        offset += len(ev)
        events.append(ev)
        flows.append(p.flows)
        counters.append(p.counters)
        problems.merge(p.problems)
    ev = _concat_categorical(events) if len(events) > 1 else events[0]
    fl = pd.concat(flows, ignore_index=True) if flows else empty_table("flows")
    fl = fl.astype({"src": "int64", "dst": "int64"})
    fl["kind"] = fl["kind"].astype("category")
    co = _concat_categorical(counters) if len(counters) > 1 else counters[0]
    metadata = {
        "files": [str(p.path) for p in parts],
        "ranks": {str(p.rank): p.metadata for p in parts},
    }
    devices = device_table(ev, {_rank(p): p.metadata for p in parts})
    return Trace(events=ev, counters=co, flows=fl, devices=devices, metadata=metadata, problems=problems)


def _concat_categorical(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate keeping categoricals categorical (pandas would fall back to object): each
    frame's codes are mapped onto the union of the categories, as plain Python strings."""
    cats = [c for c in frames[0].columns if isinstance(frames[0][c].dtype, pd.CategoricalDtype)]
    fixed = [f.copy(deep=False) for f in frames]
    for c in cats:
        union = pd.Index(sorted(set().union(*(f[c].cat.categories.astype(object) for f in frames))), dtype=object)
        for f in fixed:
            remap = union.get_indexer(f[c].cat.categories.astype(object))
            codes = f[c].cat.codes.to_numpy()
            f[c] = pd.Categorical.from_codes(np.where(codes >= 0, remap[codes], -1), categories=union)
    return pd.concat(fixed, ignore_index=True)


def merge_rank_files(parts: list[RankFile], *, checked: bool = True) -> Trace:
    """One Trace from files read apart (`read_rank_file`, e.g. on other processes), as
    `load_kineto` builds a directory's: ranks assigned, merged, redacted, validated (`checked`;
    False: neither, for a caller that takes no string of it out and only reads it)."""
    _assign_ranks(parts)
    merged = _merge(parts)
    return redact_trace(merged).validate() if checked else merged
