"""Where every nanosecond of a device's time goes (docs/architecture.md, "Time attribution").

Busy time is split among the work running at each instant in equal shares, and each share goes
to the bound of the share's unit. With k(t) the number of work intervals running at t, an
interval [s, e) receives

    share = integral over [s, e) of dt / k(t) = F(e) - F(s),   F(t) = integral_0^t [k > 0] / k

so the shares of a device sum to its busy time (the union of its work). Idle time (the gaps in
that union, inside the device's window) is split by what the next work was waiting for:

- idle_host: the next work's launch call had not been issued yet (the host was late);
- idle_sync: the rest of the gap that a host call blocked on the device overlaps: a
  synchronisation (waiting on an event, a stream, the device), a blocking host-device copy
  (cudaMemcpy / hipMemcpy / hipMemcpyWithStream, not the *Async calls) or a read of a device
  scalar (aten::item, aten::_local_scalar_dense);
- idle_other: what remains.

So per device: window = compute + memory + communication + runtime + unknown
                        + idle_host + idle_sync + idle_other.

The window runs from the device's first work to its last (span='device', what the device-time
tables show), or over the whole rank (span='rank': its first to last host or device event, the
critical path's wall time): then the host work before the first device work (preprocessing,
model set-up) and after the last is idle time too, split the same way (host until the first
work's launch is issued; after the last work, host). The verdict reads the rank span: a run
whose device waits 50 ms on preprocessing before its first kernel is host-bound.
Shares are floats summed per device and rounded once; everything else is exact integer ns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.intervals import runs, union_length
from analysis.units import self_segments
from profiler.model.schema import DEVICE_WORK_KINDS, Bound, Kind
from profiler.model.trace import Trace

BOUND_COLUMNS = [f"{b.value}_ns" for b in Bound]
IDLE_COLUMNS = ["idle_host_ns", "idle_sync_ns", "idle_other_ns"]
#: Host runtime calls that wait for the device (CUDA and HIP spellings): synchronisations and
#: blocking copies (cudaMemcpy, cudaMemcpy2D, hipMemcpy, hipMemcpyWithStream, hipMemcpyDtoH...;
#: the *Async calls return at once).
SYNC_CALL = r"(?i)synchronize|streamwaitevent|eventquery|^(?:cuda|hip|cu)memcpy(?!.*async)"
#: Framework ops that block the host until the device has produced a value (`.item()`).
SYNC_OP = r"^aten::(?:item|_local_scalar_dense)$"


#: Events that make up a rank's span (span='rank'): host work and labels, and device work.
_SPAN_KINDS = (
    Kind.OP.value,
    Kind.RUNTIME.value,
    Kind.ANNOTATION.value,
    Kind.PYTHON.value,
    Kind.COLLECTIVE.value,
    *(k.value for k in DEVICE_WORK_KINDS),
)


def attribute(trace: Trace, unit_bound: pd.Series, *, by_step: bool = False, span: str = "device") -> pd.DataFrame:
    """The wall-time equation per device (and per ProfilerStep iteration with `by_step`).

    `unit_bound` maps unit_id (as analysis.units.units gives it) to a Bound value; units it does
    not name count as unknown. Accelerators: work = kernels, copies, memsets. A rank with no
    device work (CPU-only): work = the self-time pieces of its ops on any thread, and its idle
    time (no op running: Python and framework code between ops) is host time. With `by_step`,
    each iteration's window runs from its first work start to its last work end (device work
    belongs to the step that launched it); work outside every step is step -1. `span` 'rank'
    widens each accelerator's window to its rank's span (module docstring; not with by_step).
    Columns: rank, device, [step,] window_ns, busy_ns, compute_ns, memory_ns, communication_ns,
    runtime_ns, unknown_ns, idle_host_ns, idle_sync_ns, idle_other_ns (all ns, int64).
    """
    ev = trace.events
    is_work = ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    work = ev.loc[is_work, ["id", "op_id", "rank", "device", "step", "ts", "dur"]]  # only what is used
    launch = _launch_times(trace, work)
    sync = _sync_calls(ev)
    unit_bound = _BoundCodes(unit_bound)
    if span not in ("device", "rank") or (by_step and span == "rank"):
        raise ValueError(f"span must be 'device' or 'rank' (not with by_step), not {span!r}")
    spans = rank_spans(ev) if span == "rank" else {}
    keys = ["rank", "device", "step"] if by_step else ["rank", "device"]
    rows = []
    for key, w in work.groupby(keys, observed=True, sort=True):
        rank, device = int(key[0]), str(key[1])
        unit = np.where(w["op_id"].to_numpy() >= 0, w["op_id"].to_numpy(), w["id"].to_numpy())
        start = w["ts"].to_numpy()
        lt = launch.reindex(w["id"].to_numpy()).to_numpy()
        row = _equation(
            rank, device, start, start + w["dur"].to_numpy(), unit, unit_bound, lt, sync.get(rank), spans.get(rank)
        )
        rows.append(row | ({"step": int(key[2])} if by_step else {}))
    cpu_only = ~ev["rank"].isin(set(work["rank"].unique().tolist())).to_numpy()
    if cpu_only.any():
        seg = self_segments(ev, cpu_only)
        for key, g in seg.groupby(keys, sort=True):
            start = g["start"].to_numpy()
            row = _equation(
                int(key[0]), str(key[1]), start, g["end"].to_numpy(), g["op"].to_numpy(), unit_bound, None, None
            )
            rows.append(row | ({"step": int(key[2])} if by_step else {}))
    cols = ["rank", "device", *(["step"] if by_step else []), "window_ns", "busy_ns", *BOUND_COLUMNS, *IDLE_COLUMNS]
    return pd.DataFrame(rows, columns=cols)


class _BoundCodes:
    """unit id -> index of its Bound in `list(Bound)`, looked up by integer position; units not
    named are unknown. Built once per analysis (string compares per interval are slow)."""

    def __init__(self, unit_bound: pd.Series):
        order = [b.value for b in Bound]
        values, distinct = pd.factorize(unit_bound.to_numpy(dtype=object))
        to_order = np.array(
            [order.index(d) if d in order else order.index(Bound.UNKNOWN.value) for d in distinct] or [0],
            dtype=np.int64,
        )
        self.index = pd.Index(unit_bound.index)
        self.codes = np.append(
            to_order[values] if len(values) else np.zeros(0, dtype=np.int64), order.index(Bound.UNKNOWN.value)
        )

    def codes_of(self, unit: np.ndarray) -> np.ndarray:
        return self.codes[self.index.get_indexer(unit)]  # -1 (not named) picks the appended 'unknown'


def _equation(
    rank: int,
    device: str,
    start: np.ndarray,
    end: np.ndarray,
    unit: np.ndarray,
    unit_bound: _BoundCodes,
    launch: np.ndarray | None,
    sync: tuple | None,
    span: tuple[int, int] | None = None,
) -> dict:
    """One device's row: shares by bound, busy, window, and the idle split. Without launch
    times (a CPU), every gap is host time. `span` (first, last ns of the rank) widens the window."""
    order = list(Bound)
    bound = unit_bound.codes_of(unit)
    per = np.bincount(bound, weights=equal_shares(start, end), minlength=len(order))
    row: dict = {"rank": rank, "device": device}
    for i, b in enumerate(order):
        row[f"{b.value}_ns"] = float(per[i])
    _round_to_busy(row, busy := union_length(start, end))
    row["window_ns"] = int(end.max() - start.min()) if span is None else int(span[1] - span[0])
    row["busy_ns"] = busy
    row.update(_idle(start, end, start if launch is None else launch, sync, all_host=launch is None, span=span))
    return row


def equal_shares(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each interval's share of busy time when concurrent intervals split it equally (float ns)."""
    if len(start) == 0:
        return np.zeros(0)
    times = np.unique(np.concatenate([start, end]))
    i_start, i_end = np.searchsorted(times, start), np.searchsorted(times, end)
    delta = np.bincount(i_start, minlength=len(times)) - np.bincount(i_end, minlength=len(times))
    running = np.cumsum(delta)[:-1]  # k on each elementary segment [times[j], times[j+1])
    seg = np.diff(times).astype(np.float64)
    weight = np.divide(seg, running, out=np.zeros_like(seg), where=running > 0)
    F = np.concatenate([[0.0], np.cumsum(weight)])
    return F[i_end] - F[i_start]


def _round_to_busy(row: dict, busy: int) -> None:
    """Round the float shares to ns so that they sum to busy exactly (largest remainders)."""
    keys = BOUND_COLUMNS
    raw = np.array([row[k] for k in keys])
    floor = np.floor(raw).astype(np.int64)
    short = busy - int(floor.sum())
    order = np.argsort(-(raw - floor), kind="stable")
    floor[order[: max(short, 0)]] += 1
    row.update({k: int(v) for k, v in zip(keys, floor)})


def _launch_times(trace: Trace, work: pd.DataFrame) -> pd.Series:
    """Launch call start per device event id (its own start when the call was not recorded)."""
    fl = trace.flows[trace.flows["kind"] == "launch"]
    ev = trace.events
    pos = pd.Index(ev["id"].to_numpy())
    out = pd.Series(work["ts"].to_numpy(), index=work["id"].to_numpy())
    at = out.index.get_indexer(fl["dst"].to_numpy())
    ok = at >= 0
    values = out.to_numpy().copy()
    values[at[ok]] = ev["ts"].to_numpy()[pos.get_indexer(fl["src"].to_numpy()[ok])]
    return pd.Series(values, index=out.index)


def rank_spans(ev: pd.DataFrame) -> dict[int, tuple[int, int]]:
    """Per rank, (first start, last end) of its host and device events (_SPAN_KINDS), ns."""
    keep = ev["kind"].isin(_SPAN_KINDS).to_numpy()
    ts = ev["ts"].to_numpy()[keep]
    ranks, at = np.unique(ev["rank"].to_numpy()[keep], return_inverse=True)
    lo, hi = np.full(len(ranks), np.iinfo(np.int64).max), np.full(len(ranks), np.iinfo(np.int64).min)
    np.minimum.at(lo, at, ts)
    np.maximum.at(hi, at, ts + ev["dur"].to_numpy()[keep])
    return {int(r): (int(a), int(b)) for r, a, b in zip(ranks, lo, hi)}


def _sync_calls(ev: pd.DataFrame) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per rank, the union of host calls that wait for the device (SYNC_CALL runtime calls,
    SYNC_OP ops), as sorted disjoint runs."""
    names = ev["name"].cat.categories
    codes = ev["name"].cat.codes.to_numpy()
    waiting = np.flatnonzero(names.str.contains(SYNC_CALL, regex=True))
    reading = np.flatnonzero(names.str.contains(SYNC_OP, regex=True))
    kinds, kind = ev["kind"].cat.categories, ev["kind"].cat.codes.to_numpy()  # codes: no object array per row
    runtime, op = (int(kinds.get_indexer([k])[0]) for k in (Kind.RUNTIME.value, Kind.OP.value))
    is_sync = ((kind == runtime) & (runtime >= 0) & np.isin(codes, waiting)) | (
        (kind == op) & (op >= 0) & np.isin(codes, reading)
    )
    calls = ev.loc[is_sync, ["rank", "ts", "dur"]]
    out = {}
    for rank, c in calls.groupby("rank", observed=True):
        out[int(rank)] = runs(c["ts"].to_numpy(), (c["ts"] + c["dur"]).to_numpy())
    return out


def _covered(runs: tuple[np.ndarray, np.ndarray] | None, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Length of [a, b) covered by the disjoint sorted runs, per pair."""
    if runs is None or len(runs[0]) == 0 or len(a) == 0:
        return np.zeros(len(a), dtype=np.int64)
    rs, re_ = runs
    cum = np.concatenate([[0], np.cumsum(re_ - rs)])

    def upto(t: np.ndarray) -> np.ndarray:  # covered length in (-inf, t)
        j = np.searchsorted(rs, t, side="right")  # runs starting at or before t
        inside = np.where(j > 0, np.minimum(t, re_[np.maximum(j - 1, 0)]) - rs[np.maximum(j - 1, 0)], 0)
        return cum[np.maximum(j - 1, 0)] * (j > 0) + np.maximum(inside, 0)

    return upto(b) - upto(a)


def gap_split(
    start: np.ndarray,
    end: np.ndarray,
    launch: np.ndarray,
    sync: tuple | None,
    all_host: bool = False,
    span: tuple[int, int] | None = None,
) -> dict[str, np.ndarray]:
    """Each gap of the device's work union, split into host, sync and other (ns arrays); with
    `span` (lo, hi), also the gaps [lo, first work) and [last work end, hi) (module docstring).

    Keys: start, end (the gap), next (index into the inputs of the work that ends the gap; -1
    for the gap after the last work), host_ns, sync_ns, other_ns (host + sync + other = end - start)."""
    n = len(start)
    if span is not None:  # empty work at both ends, 'launched' when it starts: the host's time
        lo, hi = min(span[0], int(start.min())), max(span[1], int(end.max()))
        start, end, launch = (np.append(a, [lo, hi]) for a in (start, end, launch))
    order = np.lexsort((launch, start))
    s, e, lt = start[order], end[order], launch[order]
    reach = np.maximum.accumulate(e)
    gap = np.flatnonzero(s[1:] > reach[:-1]) + 1  # work i starts a run after a gap
    g0, g1 = reach[gap - 1], s[gap]
    issued = g1 if all_host else np.clip(lt[gap], g0, g1)  # when the next work's launch was issued
    sync_ns = _covered(sync, issued, g1)
    nxt = order[gap]
    return {
        "start": g0,
        "end": g1,
        "next": np.where(nxt < n, nxt, -1),
        "host_ns": issued - g0,
        "sync_ns": sync_ns,
        "other_ns": g1 - issued - sync_ns,
    }


def _idle(
    start: np.ndarray,
    end: np.ndarray,
    launch: np.ndarray,
    sync: tuple | None,
    all_host: bool = False,
    span: tuple[int, int] | None = None,
) -> dict[str, int]:
    """Split the gaps of the device's work union into host, sync and other (ns)."""
    g = gap_split(start, end, launch, sync, all_host, span)
    return {
        "idle_host_ns": int(g["host_ns"].sum()),
        "idle_sync_ns": int(g["sync_ns"].sum()),
        "idle_other_ns": int(g["other_ns"].sum()),
    }


def device_gaps(trace: Trace, span: str = "rank") -> pd.DataFrame:
    """Every idle gap of every accelerator (the same split as `attribute`'s idle columns, over
    the rank's span by default: the gaps before the first work and after the last included).

    Columns: rank, device, start_ns, end_ns, dur_ns, host_ns (the next work's launch not yet
    issued), sync_ns (a host call blocked on the device), other_ns (queued work waiting on
    something the trace does not show), next_id (event id of the work that ends the gap; -1
    after the last work), launch_id (event id of its launch call, -1 if not recorded). All ns, int64.
    """
    ev = trace.events
    is_work = ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    work = ev.loc[is_work, ["id", "rank", "device", "ts", "dur"]]
    launch = _launch_times(trace, work)
    fl = trace.flows[trace.flows["kind"] == "launch"]
    launch_id = pd.Series(fl["src"].to_numpy(), index=fl["dst"].to_numpy())
    launch_id = launch_id[~launch_id.index.duplicated()]
    sync = _sync_calls(ev)
    spans = rank_spans(ev) if span == "rank" else {}
    frames = []
    for (rank, device), w in work.groupby(["rank", "device"], observed=True, sort=True):
        start = w["ts"].to_numpy()
        g = gap_split(
            start,
            start + w["dur"].to_numpy(),
            launch.reindex(w["id"].to_numpy()).to_numpy(),
            sync.get(int(rank)),
            span=spans.get(int(rank)),
        )
        nxt = np.where(g["next"] >= 0, w["id"].to_numpy()[g["next"]], -1)
        frames.append(
            pd.DataFrame(
                {
                    "rank": int(rank),
                    "device": str(device),
                    "start_ns": g["start"],
                    "end_ns": g["end"],
                    "dur_ns": g["end"] - g["start"],
                    "host_ns": g["host_ns"],
                    "sync_ns": g["sync_ns"],
                    "other_ns": g["other_ns"],
                    "next_id": nxt,
                    "launch_id": launch_id.reindex(nxt).fillna(-1).to_numpy(dtype=np.int64),
                }
            )
        )
    cols = ["rank", "device", "start_ns", "end_ns", "dur_ns", "host_ns", "sync_ns", "other_ns", "next_id", "launch_id"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
