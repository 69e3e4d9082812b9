"""A `Trace` (and its analysis) -> Chrome trace JSON in Kineto's dialect, one file per rank.

Written so that `collectors.kineto.load_kineto` reads it back to the same tables: complete ('X')
events with Kineto's category and `args` names ('External id', 'correlation', 'device', 'stream',
'Input Dims'...), times in µs relative to `baseTimeNanoseconds`:

    ts_us = (ts_ns - base_ns) / 1000      base_ns = the rank's first time, floored to a whole µs

(float64 holds these to the ns: under 10**12 µs with three decimals is at most 15 digits, and
JSON writers print the shortest text that reads back as the same double). Device work: pid =
device index, tid = stream; host work: pid = 1000000 + rank (synthetic), tid = thread. Launch
flows as 'ac2g' flow events (for viewers; the reader re-derives them from correlation ids),
forward->backward flows as 'fwdbwd' ones, memory counters as '[memory]' instant events (one per
sample and counter), other counters as 'C' events (viewers only). The analysis rides in
args.perf. Several ranks -> '<name>.rank<N>.json' beside the requested path, each with
distributedInfo.rank, so the directory reads back as a multi-rank trace.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from collectors.perfetto import fields as F
from collectors.perfetto.annotate import PerfColumns, perf_columns
from profiler.model.files import check_writable, write_atomic
from profiler.model.schema import Kind
from profiler.model.trace import Trace

HOST_PID = 1_000_000
_OWN_KEYS = {"traceEvents", "baseTimeNanoseconds", "process_names", "rank_source"}
_MEMORY = {"allocated": "Total Allocated", "reserved": "Total Reserved", "alloc_delta": "Bytes"}


def write_chrome_json(
    trace: Trace,
    path: str | Path,
    units: pd.DataFrame | None = None,
    *,
    force: bool = False,
    inputs: Iterable[str | Path] = (),
) -> list[Path]:
    """Write one Kineto-style JSON file per rank (gzip when the name ends in .gz); the paths.
    Each is written whole or not at all, never over one of `inputs`, over an existing file only
    with `force` (files.write_atomic); every target is checked before the first is written."""
    path = Path(path)
    perf = perf_columns(trace.events, units)
    ranks = sorted(set(trace.events["rank"].unique().tolist()) | set(trace.counters["rank"].unique().tolist())) or [0]
    targets = [path if len(ranks) == 1 else _rank_path(path, r) for r in ranks]
    for target in targets:
        check_writable(target, force=force, inputs=inputs)
    for r, target in zip(ranks, targets):
        doc = chrome_document(trace, r, perf, multi=len(ranks) > 1)
        data = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
        if target.name.endswith(".gz"):
            data = gzip.compress(data, compresslevel=6)
        write_atomic(target, data, force=force, inputs=inputs)
    return targets


def _rank_path(path: Path, rank: int) -> Path:
    name = path.name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return path.with_name(f"{name[: -len(suffix)]}.rank{rank}{suffix}")
    return path.with_name(f"{name}.rank{rank}.json")


def chrome_document(trace: Trace, rank: int, perf: PerfColumns, multi: bool = False) -> dict:
    """The JSON document of one rank (see the module docstring)."""
    ev_all = trace.events
    rows = np.flatnonzero(ev_all["rank"].to_numpy() == rank)
    ev = ev_all.iloc[rows]
    co = trace.counters[trace.counters["rank"].to_numpy() == rank]
    first = min([int(x.min()) for x in (ev["ts"], co["ts"]) if len(x)], default=0)
    base = (first // 1000) * 1000
    meta = trace.metadata.get("ranks", {}).get(str(rank), {})
    top = {k: v for k, v in meta.items() if k not in _OWN_KEYS} if isinstance(meta, dict) else {}
    top.setdefault("schemaVersion", 1)
    if multi or rank != 0:
        info = dict(top.get("distributedInfo") or {})
        info["rank"] = int(rank)
        top["distributedInfo"] = info
    top["baseTimeNanoseconds"] = base
    events = _slices(ev, perf, rows, base, rank)
    events += _flows(trace, ev, base, rank)
    events += _counters(co, base, rank)
    top["traceEvents"] = events
    return top


def _place(device: str, stream: int, thread: int, rank: int) -> tuple[int, int]:
    if device != "cpu":
        return int(device[3:]) if device[3:].isdigit() else 0, max(int(stream), 0)
    return HOST_PID + rank, int(thread)  # as recorded, negative ids too (the reader keeps them)


def _slices(ev: pd.DataFrame, perf: PerfColumns, rows: np.ndarray, base: int, rank: int) -> list[dict]:
    cols = {
        c: ev[c].astype(object).to_numpy() if isinstance(ev[c].dtype, pd.CategoricalDtype) else ev[c].to_numpy()
        for c in (
            "name",
            "cat",
            "kind",
            "track",
            "device",
            "stream",
            "thread",
            "ts",
            "dur",
            *F.INT_ANNOTATIONS,
            *F.TEXT_ANNOTATIONS,
        )
    }
    rel = (cols["ts"] - base) / 1000.0
    dur = cols["dur"] / 1000.0
    json_cols = {"shapes", "dtypes", "concrete"}  # recorded as JSON values, not strings
    out = []
    for i in range(len(ev)):
        device = cols["device"][i]
        pid, tid = _place(device, cols["stream"][i], cols["thread"][i], rank)
        args: dict = {}
        if device != "cpu":
            args["device"], args["stream"] = pid, int(cols["stream"][i])
        for c, name in F.INT_ANNOTATIONS.items():
            v = int(cols[c][i])
            if v != -1:
                args[name] = v
        for c, name in F.TEXT_ANNOTATIONS.items():
            v = cols[c][i]
            if v:
                args[name] = _json_value(v) if c in json_cols else v
        p = perf_entry(perf, int(rows[i]))
        if p:
            args[F.PERF_ANNOTATION] = p
        cat = cols["cat"][i]
        if cols["kind"][i] == Kind.COMPILE_PASS.value:  # as perf profile writes them: the Kineto reader
            cat, tid = Kind.COMPILE_PASS.value, _compiler_lane(str(cols["track"][i]))  # puts them back on their track
        e = {"ph": "X", "cat": str(cat), "name": cols["name"][i], "pid": pid, "tid": tid, "ts": rel[i], "dur": dur[i]}
        if args:
            e["args"] = args
        out.append(e)
    return out


def _compiler_lane(track: str) -> int:
    """'rank0/compiler' -> 0, 'rank0/compiler/worker2' -> 2 (collectors/torch_compile/embed.py's lanes)."""
    _, _, worker = track.partition("/compiler/worker")
    return int(worker) if worker.isdigit() else 0


def _json_value(text: str):
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def perf_entry(perf: PerfColumns, r: int) -> dict:
    """The analysis of one event as a dict ({} when it carries none)."""
    if not perf.bound[r]:
        return {}
    out: dict = {"bound": str(perf.bound[r])}
    if isinstance(perf.family[r], str) and perf.family[r]:
        out["family"] = perf.family[r]
    for key in ("efficiency", "flops", "bytes", "floor_ns"):
        v = float(getattr(perf, key)[r])
        if np.isfinite(v):
            out[key] = v
    if perf.estimate[r]:
        out["estimate"] = True
    return out


def _flows(trace: Trace, ev: pd.DataFrame, base: int, rank: int) -> list[dict]:
    fl = trace.flows
    if not len(fl) or not len(ev):
        return []
    pos = pd.Index(ev["id"].to_numpy())
    s, d = pos.get_indexer(fl["src"].to_numpy()), pos.get_indexer(fl["dst"].to_numpy())
    keep = np.flatnonzero((s >= 0) & (d >= 0))
    ts, device = ev["ts"].to_numpy(), ev["device"].astype(object).to_numpy()
    stream, thread = ev["stream"].to_numpy(), ev["thread"].to_numpy()
    kind = fl["kind"].astype(object).to_numpy()
    out = []
    for k in keep.tolist():
        cat = kind[k] if kind[k] in ("fwdbwd", "dependency") else "ac2g"
        for ph, row in (("s", s[k]), ("f", d[k])):
            pid, tid = _place(device[row], stream[row], thread[row], rank)
            e = {
                "ph": ph,
                "cat": cat,
                "name": cat,
                "id": k + 1,
                "pid": pid,
                "tid": tid,
                "ts": (ts[row] - base) / 1000.0,
            }
            if ph == "f":
                e["bp"] = "e"
            out.append(e)
    return out


def _counters(co: pd.DataFrame, base: int, rank: int) -> list[dict]:
    if not len(co):
        return []
    out = []
    rel = (co["ts"].to_numpy() - base) / 1000.0
    for (track, device, name, value), t in zip(
        co[["track", "device", "name", "value"]]
        .astype({"track": object, "device": object, "name": object})
        .itertuples(index=False),
        rel,
    ):
        if name in _MEMORY and str(track).endswith("/memory"):
            gpu = device != "cpu"
            args = {
                _MEMORY[name]: int(value) if float(value).is_integer() else value,
                "Device Type": 1 if gpu else 0,
                "Device Id": int(device[3:]) if gpu and device[3:].isdigit() else -1,
            }
            out.append(
                {"ph": "i", "s": "t", "name": "[memory]", "pid": HOST_PID + rank, "tid": 0, "ts": t, "args": args}
            )
        else:
            out.append(
                {
                    "ph": "C",
                    "name": str(track).split("/", 1)[-1],
                    "pid": HOST_PID + rank,
                    "ts": t,
                    "args": {str(name): value},
                }
            )
    return out
