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
from typing import NamedTuple
from array import array

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
        return _result(rank, 0, 0, seg, _NO_TOTALS, dropped, g.has_device)
    last = _last(L, R)
    work, chain = int(L[last]), _chain(P, last)
    del L, R, P  # three int64 per node, not needed by the segments
    seg, totals = _segments(g, chain, bound)
    return _result(rank, g.wall_ns, work, seg, totals, dropped, g.has_device)


def _last(L: np.ndarray, R: np.ndarray) -> int:
    """The node where the path ends: the largest L; ties: the later frontier R, then the
    higher node."""
    top = np.flatnonzero(L == L.max())
    return int(top[R[top] == R[top].max()][-1])


def _chain(P: np.ndarray, last: int) -> np.ndarray:
    """The nodes of the path ending at `last`, first to last, following the chosen predecessors.
    Where P(x) = x - 1 (most nodes: a thread's consecutive pieces) the chain is a stretch of
    consecutive nodes: the walk jumps from x to its stretch's first node in one step."""
    idx = np.arange(len(P))
    first_of = np.maximum.accumulate(np.where(P == idx - 1, 0, idx))  # the stretch's first node
    firsts, lasts, v = [], [], last
    while v >= 0:
        b = int(first_of[v])
        firsts.append(b)
        lasts.append(v)
        v = int(P[b])
    return _spans(np.array(firsts[::-1], dtype=np.int64), np.array(lasts[::-1], dtype=np.int64))[0]


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


def _ints(values: np.ndarray) -> array:
    """An int64 numpy array as a compact array.array: 8 bytes an entry, read as Python ints."""
    return array("q", np.ascontiguousarray(values, dtype=np.int64).tobytes())


def _longest(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """L, R and the chosen predecessor P (-1: none) per node, in a topological order (Kahn's);
    when every unfinished node still waits on one (a cycle, from clock skew), the
    earliest-starting one is released, ignoring its unfinished predecessors (counted, returned
    as the last value).

    Any topological order gives the same L, R, P: a node's values depend only on its
    predecessors' values, ties are broken by edge order, and the nodes finished when the order
    gets stuck are all those not downstream of a cycle. So this loop takes the order that is
    cheapest in Python. A linked node (_runs) is done right after its predecessor, and once the
    frontier R(v) <= cs_w of the next node w, the rest of the run is plain: each node extends
    the path by its own work (L(x) = L(v) + sum of end - cs over v+1..x, R(x) = end_x,
    P(x) = x - 1: the DP's formula when R(x-1) <= cs_x), a 'tail' anchored at v, filled in
    by numpy after the loop. The loop visits only the other nodes (in a trace, about one in
    six); the values it reads of a tail node, at the sources of the other edges, are kept per
    edge. Per node it holds only 8-byte arrays (array.array, a bytearray of done flags)."""
    n = g.n
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, 0
    linked_np = _runs(g) >= 0
    # the edges v-1 -> v into linked nodes are followed by the runs, not by these
    keep = ~linked_np[g.dst]
    src, dst = g.src[keep], g.dst[keep]
    work_np = np.cumsum(g.end - g.cs)  # sum of end - cs over nodes 0..v
    in_e = np.argsort(dst, kind="stable")  # per node its in-edges, in edge order (ties: the same pred)
    out_e = np.argsort(src, kind="stable")
    pptr = _ints(np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))]))
    sptr = _ints(np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]))
    e_src = _ints(src)
    # per out-edge (in out_e order): where it goes, and its source's work sum and end, to value
    # a tail node's L and R when its tail is filled
    o_dst, o_work, o_end = _ints(dst[out_e]), _ints(work_np[src[out_e]]), _ints(g.end[src[out_e]])
    o_edge = _ints(out_e)
    in_edge = _ints(in_e)
    e_l, e_r = array("q", bytes(8 * len(src))), array("q", bytes(8 * len(src)))  # the source's L, R
    end, cs, work = _ints(g.end), _ints(g.cs), _ints(work_np)
    linked = bytearray(linked_np.tobytes())
    indeg_np = np.bincount(dst, minlength=n)  # unfinished predecessors of a node that is not linked
    indeg = _ints(indeg_np)
    ready = np.flatnonzero((indeg_np == 0) & ~linked_np).tolist()
    del keep, src, dst, in_e, out_e, indeg_np
    done = bytearray(n)  # 1 once a node's L, R, P are final
    L, R, P = array("q", bytes(8 * n)), array("q", bytes(8 * n)), _ints(np.full(n, -1))
    tail_at: list[int] = []  # tails: anchor v, last node (nodes v+1 .. last are plain)
    tail_to: list[int] = []
    by_start = None  # node order by start, for releases (only on a cycle)
    cursor = dropped = 0
    unfinished = n
    nxt = -1  # the next node of the current run, stepped one by one while R(v) > cs_w
    while unfinished:
        if nxt < 0 and ready:
            nxt = ready.pop()
        if nxt >= 0:
            v, nxt = nxt, -1
            if linked[v]:  # stepped: its one predecessor v - 1 is done
                preds = [(v - 1, L[v - 1], R[v - 1])]
            else:
                preds = [(e_src[e], e_l[e], e_r[e]) for e in in_edge[pptr[v] : pptr[v + 1]]]
        else:  # stuck on a cycle: release the earliest unfinished node
            if by_start is None:
                by_start = np.argsort(g.start, kind="stable")
            cursor += int(np.flatnonzero(np.frombuffer(done, dtype=np.uint8)[by_start[cursor:]] == 0)[0])
            v = int(by_start[cursor])
            if linked[v]:
                every = [(v - 1, L[v - 1], R[v - 1])]
            else:
                every = [(e_src[e], e_l[e], e_r[e]) for e in in_edge[pptr[v] : pptr[v + 1]]]
            preds = [p for p in every if done[p[0]]]
            dropped += len(every) - len(preds)
            indeg[v] = 0  # its late predecessors push it below 0: never ready again
        # L(v) = max(end - cs, max over preds of L(u) + max(0, end - max(cs, R(u)))), ties to
        # the predecessor with the later frontier R(u) (module docstring). Conditional
        # expressions, not max(): a builtin call per edge costs 6x more.
        ev, cv = end[v], cs[v]
        best, best_r, best_p = ev - cv, 0, -1
        for u, lu, ru in preds:
            frontier = ru if ru > cv else cv  # noqa: FURB136
            cand = lu + (ev - frontier if ev > frontier else 0)
            if cand > best or (cand == best and (best_p < 0 or ru > best_r)):
                best, best_r, best_p = cand, ru, u
        rv = best_r if best_p >= 0 and best_r > ev else ev
        L[v], R[v], P[v] = best, rv, best_p
        done[v] = 1
        done_to = v + 1  # nodes v .. done_to - 1 are done: release their successors
        w = v + 1
        if w < n and linked[w] and not done[w]:
            if rv <= cs[w]:  # the plain rest of the run, up to its end or a node released before
                stop = linked.find(0, w)
                stop = n if stop < 0 else stop
                at = done.find(1, w, stop)
                done_to = stop if at < 0 else at
                done[w:done_to] = b"\x01" * (done_to - w)
                tail_at.append(v)
                tail_to.append(done_to - 1)
            else:
                nxt = w
        unfinished -= done_to - v
        base = best - work[v]
        for k in range(sptr[v], sptr[done_to]):
            e = o_edge[k]
            if e_src[e] == v:
                e_l[e], e_r[e] = best, rv
            else:  # a tail node
                e_l[e], e_r[e] = base + o_work[k], o_end[k]
            x = o_dst[k]
            left = indeg[x] - 1
            indeg[x] = left
            if left == 0:
                ready.append(x)
    del end, cs, work, indeg, pptr, sptr, e_src, e_l, e_r, o_dst, o_work, o_end, o_edge, in_edge, done, linked
    # the results as numpy views of the loop's own arrays (array.array buffers are writable)
    Ln, Rn, Pn = (np.frombuffer(a, dtype=np.int64) for a in (L, R, P))
    if tail_at:  # tail nodes: L = L(v) + work sum since v, R = own end, P = the node before
        x, anchor = _spans(np.array(tail_at, dtype=np.int64) + 1, np.array(tail_to, dtype=np.int64))
        Ln[x] = Ln[anchor] + work_np[x] - work_np[anchor]
        Rn[x] = g.end[x]
        Pn[x] = x - 1
    return Ln, Rn, Pn, dropped


def _spans(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nodes first[i] .. last[i] of every span i, concatenated, and each one's span's
    first - 1 (its tail's anchor)."""
    size = last - first + 1
    x = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size - first, size)
    return x, np.repeat(first - 1, size)


def _bounds(units: pd.DataFrame | None) -> pd.Series:
    if units is None or len(units) == 0 or "bound" not in units:
        return pd.Series(dtype=object)
    return pd.Series(units["bound"].to_numpy(dtype=object), index=units["unit_id"].to_numpy()).groupby(level=0).first()


def _segments(g: Graph, chain: np.ndarray, bound: pd.Series) -> tuple[pd.DataFrame, _Totals]:
    """The path's segments in time order: work pieces, untraced host gaps and waits. Each chain
    node v (after its chosen predecessor) gives up to three rows ('slots'), in this order:

        0: [prev_r, cut)    untraced host time: v follows the previous piece of its thread
        1: [cut, seg_s)     a label's self time (v a label on that thread), else waiting
        2: [seg_s, end_v)   v's work, seg_s = max(cs_v, prev_r)

    with prev_r the latest end along the chain before v (the path's frontier) and
    cut = max(prev_r, min(seg_s, start_v)) on the same thread, prev_r otherwise; empty rows
    are dropped. With the table, its _Totals (summed from the class and place codes)."""
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
        return seg, _NO_TOTALS
    del start, cs, thread, same_thread
    node, slot = row // 3, row % 3
    gaps = [np.flatnonzero(slot == k) for k in (0, 1)]  # few: most rows are work
    del row, slot

    def pick(untraced, gap, work: np.ndarray) -> np.ndarray:
        """A column's value per row: its chain node's value for the row's slot (per-node
        arrays, or one value for every node)."""
        out = work[node]
        for at, values in zip(gaps, (untraced, gap)):
            out[at] = values[node[at]] if isinstance(values, np.ndarray) else values
        return out

    # Each column is built, then what only it needed is let go: the table is ~15 MiB for 200k
    # rows, and its inputs, all alive at once, were three times that (the analysis' peak memory).
    unit, cls, cls_labels = _classes(g, chain, bound)
    host, waiting = cls_labels.index("host"), cls_labels.index("waiting")
    on = (~g.on_host[chain]).astype(np.int64)  # 0 host, 1 device
    cls_row, on_row = pick(host, np.where(label, host, waiting), cls), pick(0, np.where(label, 0, on), on)
    del cls, on
    ids = g.ids[pos]
    col = {"event_id": pick(-1, np.where(label, ids, -1), ids), "unit_id": pick(-1, -1, unit)}
    del ids, unit
    names = g.name_code[pos]
    untraced_name, waiting_name = len(g.name_labels), len(g.name_labels) + 1
    col["name"] = _strings(
        [*g.name_labels, "(untraced host)", "(waiting)"],
        pick(untraced_name, np.where(label, names, waiting_name), names),
    )
    del names
    kinds = g.kind_code[pos]
    untraced_kind, wait_kind = len(g.kind_labels), len(g.kind_labels) + 1
    col["kind"] = _strings(
        [*g.kind_labels, "untraced", "wait"], pick(untraced_kind, np.where(label, kinds, wait_kind), kinds)
    )
    del kinds
    col["track"] = _strings(g.track_labels, g.track_code[pos][node])
    col["on"] = _strings(["host", "device"], on_row)
    col["class"] = _strings(cls_labels, cls_row)
    col["start_ns"] = pick(prev_r, cut, seg_s)
    col["end_ns"] = pick(cut, seg_s, end)
    col["dur_ns"] = col["end_ns"] - col["start_ns"]
    totals = _totals(cls_labels, cls_row, on_row, col["dur_ns"])
    # copy=False: the columns are this function's own arrays, taken as they are (a copy into
    # pandas' 2-D blocks would hold the table twice for a moment)
    return pd.DataFrame(col, copy=False), totals


class _Totals(NamedTuple):
    """What the result reads of the segments: time per class (ns), work on the host and on the
    device (ns, waiting excluded), the path's length (ns)."""

    per_class: dict[str, int]
    host_ns: int
    device_ns: int
    length_ns: int


_NO_TOTALS = _Totals({}, 0, 0, 0)


def _totals(labels: list[str], cls: np.ndarray, on: np.ndarray, dur: np.ndarray) -> _Totals:
    """_Totals from the rows' class codes (into `labels`; a label may repeat: its codes add up)
    and place codes (0 host, 1 device): integer sums, no string compare per row."""
    per_code = np.zeros(len(labels) + 1, dtype=np.int64)  # the extra last code: '' (as _strings)
    np.add.at(per_code, cls, dur)
    per: dict[str, int] = {}
    for label, t in zip([*labels, ""], per_code.tolist()):
        per[label] = per.get(label, 0) + t
    work = np.array([label != "waiting" for label in [*labels, ""]])[cls]
    host, device = (int(dur[work & (on == place)].sum()) for place in (0, 1))
    return _Totals(per, host, device, int(dur.sum()))


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


def _result(
    rank: int, wall: int, work: int, seg: pd.DataFrame, totals: _Totals, dropped: int, has_device: bool
) -> CriticalPath:
    length, per, host, device = totals.length_ns, totals.per_class, totals.host_ns, totals.device_ns
    times = np.array([int(per.get(c, 0)) for c in CLASSES], dtype=np.int64)
    by_class = pd.DataFrame({"class": CLASSES, "time_ns": times, "share": times / length if length else 0.0})
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
