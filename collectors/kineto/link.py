"""Links within one rank: host nesting, launch -> device work, ProfilerStep iterations, flows.

All vectorised; the loops run over threads or nesting levels, never over events.

Nesting: profiler.model.nesting.nest_sorted per host thread. An event that pokes out of its
parent (clock skew in the source) keeps that parent and is counted.

Launches. Device work joins its runtime call by (rank, correlation); graph launches give many
kernels one correlation, so one call may launch many. The launching op is the innermost `op`
above that call. Kernels whose call was not recorded fall back to the op with their External id.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.model.nesting import nest_sorted
from profiler.model.schema import DEVICE_WORK_KINDS, Kind
from profiler.model.trace import Problems

_HOST_WORK = (Kind.OP, Kind.RUNTIME, Kind.ANNOTATION, Kind.PYTHON)
STEP_PREFIX = "ProfilerStep#"


def nest(ev: pd.DataFrame, problems: Problems) -> tuple[np.ndarray, np.ndarray]:
    """parent_id (-1 at top) and depth for every row; device rows get (-1, 0)."""
    n = len(ev)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int16)
    host = np.flatnonzero(ev["kind"].isin([k.value for k in _HOST_WORK]).to_numpy() & (ev["thread"].to_numpy() >= 0))
    ts, dur, ids = ev["ts"].to_numpy(), ev["dur"].to_numpy(), ev["id"].to_numpy()
    if len(host) == 0:
        return parent, depth
    threads = ev["track"].cat.codes.to_numpy()[host]
    order = host[np.lexsort((host, -dur[host], ts[host], threads))]  # by thread, start, longer first
    bounds = np.flatnonzero(np.diff(ev["track"].cat.codes.to_numpy()[order])) + 1
    poking = 0
    for seg in np.split(order, bounds):
        p, d, poke = nest_sorted(ts[seg], dur[seg])
        depth[seg] = d
        parent[seg] = np.where(p >= 0, ids[seg][np.maximum(p, 0)], -1)
        poking += poke
    problems.add("host events extend past their parent's end (kept under that parent)", poking)
    return parent, depth


def launches(ev: pd.DataFrame, parent: np.ndarray, problems: Problems) -> tuple[np.ndarray, pd.DataFrame, np.ndarray]:
    """op_id per row, the launch flows (runtime call -> device work), and each row's launch time.

    Launch time is the runtime call's start for linked device work and the row's own start
    otherwise; steps are assigned by it so device work counts in the iteration that issued it.
    """
    n = len(ev)
    kind = ev["kind"]
    is_op_row = (kind == Kind.OP.value).to_numpy()
    ids, corr = ev["id"].to_numpy(), ev["correlation"].to_numpy()
    pos_of = pd.Series(np.arange(n), index=ids)
    is_dev = kind.isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    dev = np.flatnonzero(is_dev & (corr >= 0))
    rt = np.flatnonzero((kind == Kind.RUNTIME.value).to_numpy() & (corr >= 0))
    rt_by_corr = pd.Series(rt, index=corr[rt])
    rt_by_corr = rt_by_corr[~rt_by_corr.index.duplicated(keep="first")]
    call = rt_by_corr.reindex(corr[dev]).to_numpy()
    linked = ~np.isnan(call)
    dev_linked, call = dev[linked], call[linked].astype(np.int64)
    flows = pd.DataFrame({"src": ids[call], "dst": ids[dev_linked], "kind": "launch"})
    # a simulator's trace has no host runtime by construction: its device work launches nothing to miss
    simulated = (ev["source"] == "simulator").to_numpy()
    unlinked = is_dev & ~simulated
    unlinked[dev_linked] = False
    problems.add("device events whose runtime launch was not recorded", int(unlinked.sum()))

    # innermost op above each launching call: walk parent links level by level
    op_id = np.full(n, -1, dtype=np.int64)
    cur = parent[call]
    todo = np.arange(len(call))
    while len(todo):
        p = cur[todo]
        alive = p >= 0
        todo, p = todo[alive], p[alive]
        at = pos_of.reindex(p).to_numpy()
        is_op = is_op_row[at]
        op_id[dev_linked[todo[is_op]]] = p[is_op]
        todo = todo[~is_op]
        cur[todo] = parent[at[~is_op]]

    # fallback: External id of an op (same rank: ids are unique per file)
    ext = ev["external_id"].to_numpy()
    ops = np.flatnonzero(is_op_row & (ext >= 0))
    op_by_ext = pd.Series(ids[ops], index=ext[ops])
    op_by_ext = op_by_ext[~op_by_ext.index.duplicated(keep="first")]
    missing = np.flatnonzero(is_dev & (op_id < 0) & (ext >= 0))
    found = op_by_ext.reindex(ext[missing]).to_numpy()
    ok = ~np.isnan(found)
    op_id[missing[ok]] = found[ok].astype(np.int64)

    launch_ts = ev["ts"].to_numpy().copy()
    launch_ts[dev_linked] = ev["ts"].to_numpy()[call]
    return op_id, flows, launch_ts


def steps(ev: pd.DataFrame, launch_ts: np.ndarray) -> np.ndarray:
    """The ProfilerStep number containing each row's launch time; -1 outside every step."""
    names = ev["name"].cat
    step_names = [c for c in names.categories if isinstance(c, str) and c.startswith(STEP_PREFIX)]
    out = np.full(len(ev), -1, dtype=np.int32)
    if not step_names:
        return out
    host = (ev["device"] == "cpu").to_numpy()
    is_step = host & np.isin(names.codes.to_numpy(), names.categories.get_indexer(step_names))
    if not is_step.any():  # step names only off the host (e.g. a device or profiler row)
        return out
    labels = names.categories[names.codes.to_numpy()[is_step]]
    numbers = pd.to_numeric(pd.Index([n[len(STEP_PREFIX) :] for n in labels], dtype=object), errors="coerce")
    start = ev["ts"].to_numpy()[is_step]
    end = start + ev["dur"].to_numpy()[is_step]
    order = np.argsort(start, kind="stable")
    start, end, numbers = start[order], end[order], np.asarray(numbers, dtype=np.float64)[order]
    k = np.searchsorted(start, launch_ts, side="right") - 1
    inside = (k >= 0) & (launch_ts < end[np.maximum(k, 0)])
    num = np.nan_to_num(numbers[np.maximum(k, 0)], nan=-1).astype(np.int32)
    out[inside] = num[inside]
    return out


def fwdbwd_flows(
    flow_ts: np.ndarray, flow_start: np.ndarray, flow_id: np.ndarray, flow_thread: np.ndarray, ev: pd.DataFrame
) -> pd.DataFrame:
    """Forward -> backward op edges from Kineto's 'fwdbwd' flow events.

    Kineto writes each end at the start of the op it binds to, on the op's thread, so an end is
    joined to the op with the same (thread, ts); pairs are matched by flow id.
    """
    ops = ev[ev["kind"] == Kind.OP.value]
    at = pd.DataFrame(
        {
            "thread": ops["thread"].to_numpy(),
            "ts": ops["ts"].to_numpy(),
            "op": ops["id"].to_numpy(),
            "node": _is_node(ops),
        }
    )
    # a backward end goes to the autograd node starting there, if any (the ATen ops it calls may
    # start in the same microsecond); otherwise, and for forward ends, the innermost op
    at_dst = at.sort_values("node", kind="stable").drop_duplicates(["thread", "ts"], keep="last")
    at = at.drop_duplicates(["thread", "ts"], keep="last")  # innermost op at that start
    ends = pd.DataFrame({"thread": flow_thread, "ts": flow_ts, "start": flow_start, "fid": flow_id})
    src = ends[ends["start"]].merge(at, on=["thread", "ts"])[["fid", "op"]].rename(columns={"op": "src"})
    dst = ends[~ends["start"]].merge(at_dst, on=["thread", "ts"])[["fid", "op"]].rename(columns={"op": "dst"})
    pairs = src.merge(dst, on="fid")
    return pd.DataFrame({"src": pairs["src"].to_numpy(), "dst": pairs["dst"].to_numpy(), "kind": "fwdbwd"})


def dependency_flows(
    flow_ts: np.ndarray,
    flow_start: np.ndarray,
    flow_id: np.ndarray,
    flow_pid: np.ndarray,
    flow_tid: np.ndarray,
    ev: pd.DataFrame,
) -> pd.DataFrame:
    """Producer -> consumer device-work edges (kind 'dependency') from 'dependency' flow events.

    As with 'fwdbwd', each end sits at the start of the work it binds to, here on a device
    stream: pid the device's number, tid the stream; an end is joined to the device work row
    with the same (device number, stream, ts), pairs are matched by flow id.
    """
    work = ev[(ev["stream"] >= 0) & ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS])]
    number = work["device"].astype(str).str.extract(r"(\d+)$", expand=False).fillna(-1).astype(np.int64)
    at = pd.DataFrame(
        {"pid": number.to_numpy(), "tid": work["stream"].to_numpy(), "ts": work["ts"].to_numpy(), "e": work["id"]}
    ).drop_duplicates(["pid", "tid", "ts"], keep="last")
    ends = pd.DataFrame({"pid": flow_pid, "tid": flow_tid, "ts": flow_ts, "start": flow_start, "fid": flow_id})
    src = ends[ends["start"]].merge(at, on=["pid", "tid", "ts"])[["fid", "e"]].rename(columns={"e": "src"})
    dst = ends[~ends["start"]].merge(at, on=["pid", "tid", "ts"])[["fid", "e"]].rename(columns={"e": "dst"})
    pairs = src.merge(dst, on="fid")
    return pd.DataFrame({"src": pairs["src"].to_numpy(), "dst": pairs["dst"].to_numpy(), "kind": "dependency"})


def seq_fwdbwd_flows(ev: pd.DataFrame, seq: np.ndarray, fwd_thread: np.ndarray, problems: Problems) -> pd.DataFrame:
    """Forward -> backward op edges from autograd sequence numbers, for traces without 'fwdbwd'
    flow events (Kineto before ~2022 wrote only the numbers).

    `seq` and `fwd_thread` are each row's 'Sequence number' and 'Fwd thread id' (-1: not
    recorded). The pairing is PyTorch's own (torch/csrc/autograd/profiler_kineto.cpp,
    generateForwardBackwardLink): a backward node (Fwd thread id > 0) links to the forward op
    (Fwd thread id <= 0) on that forward thread with the same sequence number and, among those,
    the latest start: the number is thread-local and only the op that creates an autograd node
    increments it, so every op recorded after it carries the next number. Where the engine's
    wrapper around a node, or ops inside it, carry the number too, the node is the end, as in
    Kineto's own 'fwdbwd' flows (checked: on a trace that has them, this finds exactly them).
    'Fwd thread id' is the profiler's thread number, not the OS thread in `thread`: each one is
    mapped to the OS thread whose numbers match most of its nodes. Returns columns src, dst
    (event ids, forward -> backward) and kind 'fwdbwd'.
    """
    empty = pd.DataFrame({"src": np.zeros(0, np.int64), "dst": np.zeros(0, np.int64), "kind": "fwdbwd"})
    thread = ev["thread"].to_numpy()
    ok = (seq >= 0) & (thread >= 0) & (ev["kind"] == Kind.OP.value).to_numpy()
    bwd, fwd = ok & (fwd_thread > 0), ok & (fwd_thread <= 0)
    if not bwd.any() or not fwd.any():
        return empty
    ids, ts, dur = ev["id"].to_numpy(), ev["ts"].to_numpy(), ev["dur"].to_numpy()
    depth = ev["depth"].to_numpy() if "depth" in ev.columns else np.zeros(len(ev), dtype=np.int16)
    f = pd.DataFrame(
        {"thread": thread[fwd], "seq": seq[fwd], "ts": ts[fwd], "dur": -dur[fwd], "depth": depth[fwd], "src": ids[fwd]}
    )
    # latest start per (thread, number); on a tie the innermost (shortest, then deepest) op
    f = f.sort_values(["thread", "seq", "ts", "dur", "depth"], kind="stable").drop_duplicates(
        ["thread", "seq"], keep="last"
    )
    # The node itself ('CudnnConvolutionBackward'), not the engine's 'autograd::engine::
    # evaluate_function: <node>' wrapper nor the ATen ops the node calls, which newer PyTorch
    # records with the node's number too (Kineto's own flows end at the node); among nodes the
    # innermost, as above.
    b = pd.DataFrame(
        {
            "fwd": fwd_thread[bwd],
            "seq": seq[bwd],
            "node": _is_node(ev)[bwd],
            "ts": ts[bwd],
            "dur": -dur[bwd],
            "depth": depth[bwd],
            "dst": ids[bwd],
        }
    )
    b = b.sort_values(["fwd", "seq", "node", "ts", "dur", "depth"], kind="stable").drop_duplicates(
        ["fwd", "seq"], keep="last"
    )
    votes = b.merge(f[["thread", "seq"]], on="seq").groupby(["fwd", "thread"]).size().rename("n").reset_index()
    best = votes.sort_values(["n", "thread"], kind="stable").drop_duplicates("fwd", keep="last")[["fwd", "thread"]]
    pairs = b.merge(best, on="fwd").merge(f[["thread", "seq", "src"]], on=["thread", "seq"])
    problems.add(
        "autograd backward nodes whose forward op was not recorded (no op with their sequence number)",
        len(b) - len(pairs),
    )
    return pd.DataFrame(
        {"src": pairs["src"].to_numpy(np.int64), "dst": pairs["dst"].to_numpy(np.int64), "kind": "fwdbwd"}
    )


def _is_node(ev: pd.DataFrame) -> np.ndarray:
    """Rows named like an autograd node ('CudnnConvolutionBackward', 'MulBackward0'): 'Backward'
    and no namespace (not 'aten::...', not 'autograd::engine::evaluate_function: ...')."""
    cats = ev["name"].cat.categories.astype(str)
    if not len(cats):
        return np.zeros(len(ev), dtype=bool)
    node = np.asarray(cats.str.contains("Backward", regex=False) & ~cats.str.contains("::", regex=False))
    codes = ev["name"].cat.codes.to_numpy()
    return np.where(codes >= 0, node[np.maximum(codes, 0)], False)
