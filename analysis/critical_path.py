"""The critical path of one rank: the longest chain of dependent work across its host threads
and device streams (the critical path method's longest path through a DAG, Kelley and Walker 1959;
for traces, the same idea as HTA's critical path analysis, computed here without networkx).

Nodes and edges: analysis/critical_path_graph.py.

Weights and the longest path. A node's credited work starts at cs = its start, except a piece
blocked inside its own interval (a synchronize call, a synchronous copy) by what it waits for,
ending at b > start: cs = min(b, end), and [start, cs) is waiting, not work. Labels (python
frames, record_function and ProfilerStep annotations) are not work (docs/architecture.md): cs = end, so
their self time never lengthens the path (a blocked backward() call sits under such labels).
With R(u) the path's time frontier at u (the latest end along its chosen chain), the DP over a
topological order (Kahn's; O(nodes + edges), edges O(n) but per-stream sync and per-thread
resume edges) is

    L(v) = max( end_v - cs_v,  max over preds u of  L(u) + max(0, end_v - max(cs_v, R(u))) )
    R(v) = max(R(u*), end_v)                              (u* the maximising predecessor)

so the path's work segments [max(cs_v, R(u*)), end_v) are disjoint and increasing, and
L <= R - (first start) <= the rank's wall time. Ties go to the predecessor that arrived last
(larger R). The path ends at the node of largest L: the rank's end depends on every event, so
this is the longest path into the rank's end (every single event is a path of its own, hence
L >= the longest op, runtime call or device event that holds no label and no synchronize wait).

Reported. Between two consecutive work segments lies a stretch that is not work: following
the previous piece of the same thread (program order), the gap before the piece is untraced
host time and a label's self time is host time under that label (Python between ops: class
'host'); anything else is waiting (a launch queued, a stream idle, a call blocked: 'waiting'). So

    length_ns = end of the path - start of the path = sum of segments (all classes) <= wall_ns
    work_ns   = L = length_ns - waiting - untraced host time - label time

Classes: device work takes its unit's bound (unit = op_id, else the event; compute, memory,
communication, runtime, unknown); on a CPU-only rank an op or collective piece takes its unit's
bound; runtime calls are 'runtime'; other host pieces (op self time on a GPU rank, python frames,
annotations) and untraced host gaps are 'host'. Without a units table, unit work is 'unknown'.
verdict: the largest of the path's host work (host pieces, preprocessing before the first kernel
included), device work and waiting (blocked in a synchronisation or a blocking copy, or queued):
'host-bound', 'device-bound' or 'waiting-bound' (as the idle split's idle_sync: a path that waits
98% of the time is not device-bound); 'cpu-only' on a rank without device work.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, count, islice

import numpy as np
import pandas as pd

from analysis.critical_path_graph import Graph
from profiler.model.schema import Bound, Kind
from profiler.model.trace import Trace

CLASSES = [*(b.value for b in Bound), "host", "waiting"]
SEGMENT_COLUMNS = ["event_id", "unit_id", "name", "kind", "track", "on", "class", "start_ns", "end_ns", "dur_ns"]


@dataclass(frozen=True)
class CriticalPath:
    """One rank's critical path. Times in ns.

    segments: event_id (-1 for gaps), unit_id (-1 unless unit work), name, kind (event kind, or
      'untraced' / 'wait' for gaps), track, on ('host' / 'device'), class (of CLASSES),
      start_ns, end_ns, dur_ns; in time order, contiguous from the path's start to its end.
    by_class: class, time_ns, share (of length_ns); one row per CLASSES entry, summing to length_ns.
    """

    rank: int
    length_ns: int
    work_ns: int
    wall_ns: int
    on_host_ns: int
    on_device_ns: int
    waiting_ns: int
    verdict: str
    segments: pd.DataFrame
    by_class: pd.DataFrame
    dropped_edges: int = 0  # edges on a cycle (clock skew), ignored to keep the graph acyclic


def critical_path(trace: Trace, rank: int, units: pd.DataFrame | None = None) -> CriticalPath:
    """The critical path of `rank` (see the module docstring); `units` is a classified units
    table (analysis.roofline.classify: unit_id, bound) giving the segments' classes."""
    g = Graph(trace, rank)
    L, R, P, dropped = _longest(g)
    bound = _bounds(units)
    if g.n == 0:
        seg = pd.DataFrame(columns=SEGMENT_COLUMNS)
        return _result(rank, 0, 0, seg, dropped, g.has_device)
    last = _last(np.array(L, dtype=np.int64), np.array(R, dtype=np.int64))  # a dtype: 3x faster
    seg = _segments(g, _chain(P, last), bound)
    return _result(rank, g.wall_ns, L[last], seg, dropped, g.has_device)


def _last(L: np.ndarray, R: np.ndarray) -> int:
    """The node where the path ends: the largest L; ties: the later frontier R, then the
    higher node."""
    top = np.flatnonzero(L == L.max())
    return int(top[R[top] == R[top].max()][-1])


def _chain(P: list[int], last: int) -> np.ndarray:
    """The nodes of the path ending at `last`, first to last, following the chosen predecessors."""
    chain, v = [], last
    while v >= 0:
        chain.append(v)
        v = P[v]
    return np.array(chain[::-1], dtype=np.int64)


def critical_paths(trace: Trace, units: pd.DataFrame | None = None) -> pd.DataFrame:
    """critical_path for every rank. Columns: rank, length_ns, work_ns, wall_ns, on_host_ns,
    on_device_ns, <class>_ns for each of CLASSES (compute_ns ... waiting_ns; they sum to
    length_ns), verdict, segments (count); all ns."""
    rows = []
    for r in trace.ranks:
        cp = critical_path(trace, r, units)
        row = {
            "rank": r,
            "length_ns": cp.length_ns,
            "work_ns": cp.work_ns,
            "wall_ns": cp.wall_ns,
            "on_host_ns": cp.on_host_ns,
            "on_device_ns": cp.on_device_ns,
        }
        row.update({f"{c}_ns": int(t) for c, t in zip(cp.by_class["class"], cp.by_class["time_ns"])})
        rows.append(row | {"verdict": cp.verdict, "segments": len(cp.segments)})
    cols = [
        "rank",
        "length_ns",
        "work_ns",
        "wall_ns",
        "on_host_ns",
        "on_device_ns",
        *(f"{c}_ns" for c in CLASSES),
        "verdict",
        "segments",
    ]
    return pd.DataFrame(rows, columns=cols)


def _adjacency(key: np.ndarray, other: np.ndarray, n: int) -> tuple[list[int], list[int]]:
    """CSR lists: the `other` ends of the edges whose `key` end is v are items[ptr[v]:ptr[v + 1]],
    in edge order (a stable sort, so ties in the DP go to the same predecessor every time)."""
    items = other[np.argsort(key, kind="stable")].tolist()
    ptr = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=n))]).tolist()
    return items, ptr


def _runs(g: Graph) -> np.ndarray:
    """run_end per node: for a linked node v, the last node of its run of linked nodes; -1 for
    the others. v is linked when its only in-edge comes from v - 1 and v - 1 ends by cs_v
    (consecutive pieces of a thread: most nodes)."""
    n = g.n
    single = np.bincount(g.dst, minlength=n) == 1
    only_pred = np.full(n, -1)
    only_pred[g.dst] = g.src  # the predecessor where single
    linked = single & (only_pred == np.arange(n) - 1)
    linked[1:] &= g.end[:-1] <= g.cs[1:]
    ends = np.flatnonzero(linked & ~np.append(linked[1:], False))  # every run ends at one of these
    at = np.minimum(np.searchsorted(ends, np.arange(n)), max(len(ends) - 1, 0))
    return np.where(linked, ends[at] if len(ends) else -1, -1)


def _first_unfinished(indeg: list[int], by_start: list[int], cursor: int) -> int:
    """The first position from `cursor` in by_start whose node is unfinished (indeg > 0).
    The scan may pass most nodes (a cycle late in the trace), so it runs in C: map/compress."""
    unfinished = map((0).__lt__, map(indeg.__getitem__, islice(by_start, cursor, None)))
    return next(compress(count(cursor), unfinished))


def _cut_run(run_end: list[int], v: int) -> None:
    """v is done before its predecessor (released): its run now ends at v - 1, so a jump along
    the run stops before v instead of computing it again."""
    y = v - 1
    while v > 0 and run_end[v] >= 0 and run_end[y] == run_end[v]:
        run_end[y] = v - 1
        y -= 1


def _longest(g: Graph) -> tuple[list[int], list[int], list[int], int]:
    """L, R and the chosen predecessor P (-1: none) per node, as lists, in a topological order
    (Kahn's); when every unfinished node still waits on one (a cycle, from clock skew), the
    earliest-starting one is released, ignoring its unfinished predecessors (counted, returned
    as the last value).

    Any topological order gives the same L, R, P: a node's values depend only on its
    predecessors' values, ties are broken by edge order, and the nodes finished when the order
    gets stuck are all those not downstream of a cycle. So this loop takes the order that is
    cheapest in Python. A linked node (_runs) is done right after its predecessor, and once the
    frontier R(v) <= cs_w of the next node w, the rest of the run is plain: each node extends
    the path by its own work (L(x) = L(x-1) + end_x - cs_x, R(x) = end_x, P(x) = x - 1, the
    DP's formula when R(x-1) <= cs_x), filled in one step from a running sum. The loop visits
    only the other nodes: it is the function's hot spot."""
    n = g.n
    if n == 0:
        return [], [], [], 0
    run_end_arr = _runs(g)
    # the edges v-1 -> v into linked nodes are followed by the runs, not by these lists
    src, dst = g.src[run_end_arr[g.dst] < 0], g.dst[run_end_arr[g.dst] < 0]
    pred, pptr = _adjacency(dst, src, n)
    succ, sptr = _adjacency(src, dst, n)
    run_end = run_end_arr.tolist()
    end, cs = g.end.tolist(), g.cs.tolist()
    work_sum = np.cumsum(g.end - g.cs).tolist()  # sum of end - cs over nodes 0..v
    # unfinished predecessors per node; 0 once done (a released node goes to 0 and its late
    # predecessors push it below, so it never becomes ready again). A linked node keeps 1 until
    # its run reaches it: its in-edge is not in succ.
    indeg_arr = np.bincount(g.dst, minlength=n)
    indeg, ready = indeg_arr.tolist(), np.flatnonzero(indeg_arr == 0).tolist()
    by_start: list[int] = []  # nodes in start order, for releases (only on a cycle)
    L, R, P = [0] * n, end[:], [-1] * n
    cursor = dropped = 0
    unfinished = n
    nxt = -1  # the next node of the current run, stepped one by one while R(v) > cs_w
    while unfinished:
        if nxt < 0 and ready:
            nxt = ready.pop()
        if nxt >= 0:
            v, nxt = nxt, -1
            preds = [v - 1] if run_end[v] >= 0 else pred[pptr[v] : pptr[v + 1]]
        else:  # stuck on a cycle: release the earliest unfinished node
            by_start = by_start or np.argsort(g.start, kind="stable").tolist()
            cursor = _first_unfinished(indeg, by_start, cursor)
            v = by_start[cursor]
            every = [v - 1] if run_end[v] >= 0 else pred[pptr[v] : pptr[v + 1]]
            preds = [u for u in every if indeg[u] <= 0]
            dropped += len(every) - len(preds)
            _cut_run(run_end, v)
        indeg[v] = 0
        # L(v) = max(end - cs, max over preds of L(u) + max(0, end - max(cs, R(u)))), ties to
        # the predecessor with the later frontier R(u) (module docstring). Conditional
        # expressions, not max(): a builtin call per edge costs 6x more.
        ev, cv = end[v], cs[v]
        best, best_r, best_p = ev - cv, 0, -1
        for u in preds:
            ru = R[u]
            frontier = ru if ru > cv else cv  # noqa: FURB136
            cand = L[u] + (ev - frontier if ev > frontier else 0)
            if cand > best or (cand == best and (best_p < 0 or ru > best_r)):
                best, best_r, best_p = cand, ru, u
        L[v], P[v] = best, best_p
        R[v] = best_r if best_p >= 0 and best_r > ev else ev
        done_to = v + 1  # nodes v .. done_to - 1 are done: release their successors
        w = v + 1
        if w < n and run_end[w] >= 0 and indeg[w] > 0:
            if R[v] <= cs[w]:  # the plain rest of the run w .. run_end[w]
                done_to = run_end[w] + 1
                base = L[v] - work_sum[v]
                L[w:done_to] = [base + s for s in work_sum[w:done_to]]
                P[w:done_to] = range(v, done_to - 1)
                indeg[w:done_to] = [0] * (done_to - w)
            else:
                nxt = w
        unfinished -= done_to - v
        for x in succ[sptr[v] : sptr[done_to]]:
            left = indeg[x] - 1
            indeg[x] = left
            if left == 0:
                ready.append(x)
    return L, R, P, dropped


def _bounds(units: pd.DataFrame | None) -> pd.Series:
    if units is None or len(units) == 0 or "bound" not in units:
        return pd.Series(dtype=object)
    return pd.Series(units["bound"].to_numpy(dtype=object), index=units["unit_id"].to_numpy()).groupby(level=0).first()


def _segments(g: Graph, chain: np.ndarray, bound: pd.Series) -> pd.DataFrame:
    """The path's segments in time order: work pieces, untraced host gaps and waits. Each chain
    node v (after its chosen predecessor) gives up to three rows ('slots'), in this order:

        0: [prev_r, cut)    untraced host time: v follows the previous piece of its thread
        1: [cut, seg_s)     a label's self time (v a label on that thread), else waiting
        2: [seg_s, end_v)   v's work, seg_s = max(cs_v, prev_r)

    with prev_r the latest end along the chain before v (the path's frontier) and
    cut = max(prev_r, min(seg_s, start_v)) on the same thread, prev_r otherwise; empty rows
    are dropped."""
    start, end, cs, pos = g.start[chain], g.end[chain], g.cs[chain], g.pos[chain]
    # the first node has no frontier before it: prev_r = its cs leaves both its gaps empty
    prev_r = np.concatenate([cs[:1], np.maximum.accumulate(end)[:-1]])
    seg_s = np.maximum(cs, prev_r)
    thread = np.concatenate([g.ptrack, np.full(g.n - g.np_, -1)])[chain]  # -1: a device node
    # v follows the previous piece of its own thread (program order)
    same_thread = (np.diff(chain, prepend=-2) == 1) & (thread >= 0) & (np.diff(thread, prepend=-1) == 0)
    cut = np.where(same_thread, np.maximum(prev_r, np.minimum(seg_s, start)), prev_r)
    label = same_thread & g.label[chain]
    row = np.flatnonzero(np.stack([cut > prev_r, seg_s > cut, end > seg_s], axis=1).ravel())
    if len(row) == 0:  # same empty frame (object columns) as building it from no rows
        seg = pd.DataFrame([], columns=SEGMENT_COLUMNS[:-1])
        seg["dur_ns"] = seg["end_ns"] - seg["start_ns"]
        return seg
    node, slot = row // 3, row % 3
    gaps = [np.flatnonzero(slot == k) for k in (0, 1)]  # few: most rows are work

    def pick(untraced, gap, work: np.ndarray) -> np.ndarray:
        """A column's value per row: its chain node's value for the row's slot (per-node
        arrays, or one value for every node)."""
        out = work[node]
        for at, values in zip(gaps, (untraced, gap)):
            out[at] = values[node[at]] if isinstance(values, np.ndarray) else values
        return out

    ids = g.ids[pos]
    unit, cls, cls_labels = _classes(g, chain, bound)
    names, kinds = g.name_code[pos], g.kind_code[pos]
    untraced_name, waiting_name = len(g.name_labels), len(g.name_labels) + 1
    untraced_kind, wait_kind = len(g.kind_labels), len(g.kind_labels) + 1
    on = (~g.on_host[chain]).astype(np.int64)  # 0 host, 1 device
    host, waiting = cls_labels.index("host"), cls_labels.index("waiting")
    seg = pd.DataFrame(
        {
            "event_id": pick(-1, np.where(label, ids, -1), ids),
            "unit_id": pick(-1, -1, unit),
            "name": _strings(
                [*g.name_labels, "(untraced host)", "(waiting)"],
                pick(untraced_name, np.where(label, names, waiting_name), names),
            ),
            "kind": _strings(
                [*g.kind_labels, "untraced", "wait"], pick(untraced_kind, np.where(label, kinds, wait_kind), kinds)
            ),
            "track": _strings(g.track_labels, g.track_code[pos][node]),
            "on": _strings(["host", "device"], pick(0, np.where(label, 0, on), on)),
            "class": _strings(cls_labels, pick(host, np.where(label, host, waiting), cls)),
            "start_ns": pick(prev_r, cut, seg_s),
            "end_ns": pick(cut, seg_s, end),
        }
    )
    seg["dur_ns"] = seg["end_ns"] - seg["start_ns"]
    return seg


def _strings(labels: list[str], codes: np.ndarray) -> pd.Series:
    """labels[codes] as an object column of str: one take from the few labels, and no Arrow
    string column built row by row (pandas 3 infers one from an object array)."""
    return pd.Series(np.array(labels + [""], dtype=object)[codes], dtype=object)


def _classes(g: Graph, nodes: np.ndarray, bound: pd.Series) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(unit_id, class code, class labels) of each node's work (module docstring, 'Classes'):
    device work takes its unit's bound (unit = op_id, else the event); runtime calls 'runtime';
    on a CPU-only rank an op or collective piece its own bound; other host pieces 'host'. The
    labels are the bounds in the units table, then 'unknown', 'runtime', 'host', 'waiting'."""
    pos, on_host = g.pos[nodes], g.on_host[nodes]
    ids, op_id = g.ids[pos], g.op_id[pos]
    runtime = on_host & g.kind_in([Kind.RUNTIME.value])[pos]
    cpu_unit = on_host & (not g.has_device) & g.kind_in([Kind.OP.value, Kind.COLLECTIVE.value])[pos]
    has_unit = ~on_host | cpu_unit
    unit = np.where(~on_host, np.where(op_id >= 0, op_id, ids), np.where(cpu_unit, ids, -1))
    code, uniq = pd.factorize(bound.to_numpy(dtype=object), use_na_sentinel=False)  # few distinct bounds
    labels = [*(str(b) for b in uniq), Bound.UNKNOWN.value, Bound.RUNTIME.value, "host", "waiting"]
    at = np.full(len(unit), -1)
    at[has_unit] = pd.Index(bound.index).get_indexer(unit[has_unit])
    unknown, runtime_, host = len(uniq), len(uniq) + 1, len(uniq) + 2
    of_unit = np.where(at >= 0, code[at], unknown) if len(code) else np.full(len(unit), unknown)
    cls = np.where(has_unit, of_unit, np.where(runtime, runtime_, host))
    return unit, cls, labels


def _result(rank: int, wall: int, work: int, seg: pd.DataFrame, dropped: int, has_device: bool) -> CriticalPath:
    length = int(seg["dur_ns"].sum()) if len(seg) else 0
    per = seg.groupby("class")["dur_ns"].sum() if len(seg) else pd.Series(dtype=np.int64)
    times = np.array([int(per.get(c, 0)) for c in CLASSES], dtype=np.int64)
    by_class = pd.DataFrame({"class": CLASSES, "time_ns": times, "share": times / length if length else 0.0})
    work_rows = seg["class"] != "waiting" if len(seg) else pd.Series(dtype=bool)
    host = int(seg.loc[work_rows & (seg["on"] == "host"), "dur_ns"].sum()) if len(seg) else 0
    device = int(seg.loc[work_rows & (seg["on"] == "device"), "dur_ns"].sum()) if len(seg) else 0
    waiting = int(per.get("waiting", 0))
    verdict = (
        "cpu-only"
        if not has_device
        else ("waiting-bound" if waiting > max(host, device) else "host-bound" if host > device else "device-bound")
    )
    return CriticalPath(
        rank=rank,
        length_ns=length,
        work_ns=work,
        wall_ns=wall,
        on_host_ns=host,
        on_device_ns=device,
        waiting_ns=waiting,
        verdict=verdict,
        segments=seg,
        by_class=by_class,
        dropped_edges=dropped,
    )
