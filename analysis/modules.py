"""Time and bound per `nn.Module`, for eager traces recorded with_stack (and with_modules).

PyTorch's profiler writes one python_function event per module call, named
`nn.Module: <Class>_<k>` (k numbers the instances of that class in the order they were first
called), around the frames of its forward. On the host thread those events nest by time (the
reader's parent_id), so:

- a module call's parent module is the nearest enclosing `nn.Module:` frame, and its path is
  the chain of names from the outermost one: `MLP_0/Block_0/Sequential_0/Linear_0`;
- each unit of work (analysis.units: a CPU op with its self time, or an op with the device work it
  launched; a device unit without an op is reached through its launch call) belongs to the
  innermost module frame enclosing its op (or call). Units outside every module frame (the
  backward pass, the optimizer) are not in the tree.

Per path (all calls of that path together):

    self_ns  = sum of time_ns of the units whose innermost module has this path
    total_ns = self_ns + sum of total_ns of the child paths
             = sum of time_ns of every unit inside the module's calls
    <bound>_ns: the same sums split by the units' bound (compute, memory, communication,
    runtime, unknown); flops and bytes: sums over the units inside (units whose cost is unknown
    add nothing).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.model.schema import Bound, Kind
from profiler.model.trace import Trace

MODULE_PREFIX = "nn.Module: "
BOUND_NS = [f"{b.value}_ns" for b in Bound]
TREE_COLUMNS = [
    "rank",
    "path",
    "name",
    "depth",
    "parent",
    "calls",
    "self_ns",
    "total_ns",
    "host_ns",
    *BOUND_NS,
    "flops",
    "bytes",
    "units",
]


def module_tree(trace: Trace, units: pd.DataFrame) -> pd.DataFrame:
    """One row per module path and rank, as a tree read top-down: by rank, each parent before its
    children, and siblings by total time, most first (`Layer_10` after `Layer_2` only if faster).

    Columns: rank, path ('A_0/B_1/C_0'), name (last part, 'C_0'), depth (0 for a root),
    parent (the parent's path; '' for a root), calls (module frames with that path),
    self_ns, total_ns (unit time, ns; module docstring), host_ns (sum of the module frames'
    durations on the host, ns), compute_ns, memory_ns, communication_ns, runtime_ns, unknown_ns
    (total_ns split by the units' bound), flops (FLOP), bytes (byte), units (count inside).
    `units` is analysis.units.units or its classified form (bound, flops, bytes are used when
    present). Empty when the trace has no module frames.
    """
    ev = trace.events
    names = ev["name"].cat
    mod_codes = np.flatnonzero(names.categories.astype(str).str.startswith(MODULE_PREFIX))
    is_frame = np.isin(names.codes.to_numpy(), mod_codes) & (ev["kind"] == Kind.PYTHON.value).to_numpy()
    if not is_frame.any():
        return pd.DataFrame(columns=TREE_COLUMNS)
    ids, parent = ev["id"].to_numpy(), ev["parent_id"].to_numpy()
    where = pd.Index(ids)
    frames = np.flatnonzero(is_frame)
    frame_parent = _enclosing(parent[frames], parent, is_frame, where)
    path = _paths(ids[frames], frame_parent, names.categories.to_numpy(dtype=object)[names.codes.to_numpy()[frames]])
    frame_path = pd.Series(path, index=ids[frames])

    anchor = _anchors(trace, units["unit_id"].to_numpy())
    pos = where.get_indexer(anchor)
    unit_frame = np.full(len(units), -1, dtype=np.int64)
    ok = pos >= 0
    unit_frame[ok] = _enclosing(np.where(is_frame[pos[ok]], anchor[ok], parent[pos[ok]]), parent, is_frame, where)
    inside = unit_frame >= 0
    u = units.loc[inside]
    rank = ev["rank"].to_numpy()[where.get_indexer(unit_frame[inside])]
    own = pd.DataFrame(
        {
            "rank": rank,
            "path": frame_path.reindex(unit_frame[inside]).to_numpy(),
            "time_ns": u["time_ns"].to_numpy(dtype=np.int64),
            "bound": u["bound"].to_numpy(dtype=object) if "bound" in u else Bound.UNKNOWN.value,
            "flops": u["flops"].to_numpy(dtype=np.float64) if "flops" in u else np.nan,
            "bytes": u["bytes"].to_numpy(dtype=np.float64) if "bytes" in u else np.nan,
        }
    )
    calls = pd.DataFrame({"rank": ev["rank"].to_numpy()[frames], "path": path, "dur": ev["dur"].to_numpy()[frames]})
    return _aggregate(calls, own)


def _enclosing(start: np.ndarray, parent: np.ndarray, is_frame: np.ndarray, where: pd.Index) -> np.ndarray:
    """From each event id in `start` (itself included), up the parent links, the first module
    frame's id; -1 when there is none. One vectorised step per nesting level."""
    out = start.copy()
    todo = np.flatnonzero(out >= 0)
    while len(todo):
        p = where.get_indexer(out[todo])
        found = is_frame[p]
        todo, p = todo[~found], p[~found]
        out[todo] = parent[p]
        todo = todo[out[todo] >= 0]
    return out


def _paths(frame_ids: np.ndarray, frame_parent: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """'Outer_0/Inner_1' per frame, built parents first (a parent starts before its child)."""
    short = np.array([str(s)[len(MODULE_PREFIX) :] for s in labels], dtype=object)
    path: dict[int, str] = {}
    for i in np.argsort(_depths(frame_ids, frame_parent), kind="stable"):
        p = int(frame_parent[i])
        path[int(frame_ids[i])] = f"{path[p]}/{short[i]}" if p >= 0 and p in path else short[i]
    return np.array([path[int(f)] for f in frame_ids], dtype=object)


def _depths(frame_ids: np.ndarray, frame_parent: np.ndarray) -> np.ndarray:
    """Module depth of each frame (0 at a root), level by level."""
    at = pd.Index(frame_ids).get_indexer(frame_parent)
    depth = np.zeros(len(frame_ids), dtype=np.int64)
    cur = at.copy()
    while (cur >= 0).any():
        live = cur >= 0
        depth[live] += 1
        cur[live] = at[cur[live]]
    return depth


def _anchors(trace: Trace, unit_ids: np.ndarray) -> np.ndarray:
    """The host event each unit hangs from: the unit's op itself, or for a device unit without
    an op (a graph replay, a collective kernel), the runtime call that launched it."""
    fl = trace.flows[(trace.flows["kind"] == "launch").to_numpy()]
    call = pd.Series(fl["src"].to_numpy(), index=fl["dst"].to_numpy())
    call = call[~call.index.duplicated()]
    ev = trace.events
    pos = pd.Index(ev["id"].to_numpy()).get_indexer(unit_ids)
    on_host = np.zeros(len(unit_ids), dtype=bool)
    on_host[pos >= 0] = ev["thread"].to_numpy()[pos[pos >= 0]] >= 0
    launched = call.reindex(unit_ids).fillna(-1).to_numpy(dtype=np.int64)
    return np.where(on_host, unit_ids, launched)


def _aggregate(calls: pd.DataFrame, own: pd.DataFrame) -> pd.DataFrame:
    """Self sums per path; totals by counting each unit in its path and every ancestor path
    (the prefixes of its path), which is the docstring's recursion unrolled."""
    keys = ["rank", "path"]
    sums = ["time_ns", *BOUND_NS, "flops", "bytes", "units"]
    rows = calls.groupby(keys, sort=True).agg(calls=("dur", "size"), host_ns=("dur", "sum")).reset_index()
    bound = own["bound"].to_numpy()
    own = own.assign(
        units=1, **{c: np.where(bound == c[: -len("_ns")], own["time_ns"].to_numpy(), 0) for c in BOUND_NS}
    )
    self_ns = own.groupby(keys)["time_ns"].sum().rename("self_ns")
    parts = own["path"].str.split("/")
    prefixes = parts.map(lambda p: ["/".join(p[: k + 1]) for k in range(len(p))])
    total = own.assign(path=prefixes).explode("path").groupby(keys)[sums].sum(min_count=1)
    total = total.rename(columns={"time_ns": "total_ns"})
    out = rows.join(self_ns, on=keys).join(total, on=keys)
    ints = ["self_ns", "total_ns", *BOUND_NS, "units"]
    out[ints] = out[ints].fillna(0).astype(np.int64)
    out[["flops", "bytes"]] = out[["flops", "bytes"]].fillna(0.0).astype(np.float64)
    split = out["path"].str.split("/")
    out["name"] = split.str[-1]
    out["depth"] = (split.str.len() - 1).astype(np.int64)
    out["parent"] = split.str[:-1].str.join("/")
    return _tree_order(out)[TREE_COLUMNS].reset_index(drop=True)


def _tree_order(out: pd.DataFrame) -> pd.DataFrame:
    """Depth-first, siblings by total_ns descending: each row's key is the (-total_ns, name)
    of every module on its path, so a parent's key is a prefix of its children's."""
    total = dict(zip(zip(out["rank"], out["path"]), out["total_ns"]))

    def key(rank: int, path: str) -> tuple:
        parts = path.split("/")
        prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
        return (rank, [(-total.get((rank, p), 0), p) for p in prefixes])

    order = sorted(range(len(out)), key=lambda i: key(out["rank"].iat[i], out["path"].iat[i]))
    return out.iloc[order]
