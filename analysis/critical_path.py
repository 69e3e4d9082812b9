"""The critical path of one rank: the longest chain of dependent work across its host threads
and device streams (the critical path method's longest path through a DAG, Kelley and Walker 1959;
for traces, the same idea as HTA's critical path analysis, computed here without networkx).

Nodes. A host thread's timeline is cut into pieces, each owned by the innermost event covering it
(op, runtime call, python frame, annotation, gloo collective region): an event with children
c1..ck (by start) owns [e.start, c1.start), [c1.end, c2.start), ..., [ck.end, e.end). Every
kernel, memcpy and memset on a device stream is a node.

Edges (u -> v: v cannot proceed before u has):
- program order: consecutive pieces on one host thread;
- stream order: consecutive device work on one stream (kernel i -> kernel i+1);
- launch: the runtime call -> the device work it launched (flows of kind 'launch', which join by
  correlation id, so one graph launch reaches all its kernels);
- synchronisation: a call whose name contains 'synchronize' (cuda/hip Device-, Stream-,
  EventSynchronize, cuCtxSynchronize...) cannot return before the device work it waited on has
  ended: per stream, the last work in stream order whose launch was issued before the call
  started and that ended by the call's end (prefixes by running maximum, so the choice is a
  binary search). A synchronous copy (a runtime call named *memcpy*/*memset* whose own copy ended
  inside the call) waits for that copy. The host piece after the call follows by program order.
- gloo: a 'gloo:*' region on a worker thread follows the latest c10d op (c10d::*,
  record_param_comms) that started before it on another thread; the first piece of that op's
  thread that starts after the region ends depends on the region (the caller's wait);
- fwdbwd flows: a forward op -> its backward op;
- resume (inferred): a thread's work piece that follows untraced time (a gap, or only labels)
  depends on the last work piece each other thread of the rank finished by then. Kineto records
  no wake-ups; the latest earlier finish is the latest possible cause (backward() returning to
  the main thread, the autograd thread starting, a worker handing back a result).
cudaStreamWaitEvent (device-side waits) is not modelled: Kineto does not record its streams.

Weights and the longest path. A node's credited work starts at cs = its start, except a piece
blocked inside its own interval (a synchronize call, a synchronous copy) by what it waits for,
ending at b > start: cs = min(b, end), and [start, cs) is waiting, not work. Labels (python
frames, record_function and ProfilerStep annotations) are not work (DESIGN.md): cs = end, so
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
verdict: 'host-bound' when host segments outweigh device segments on the path, 'device-bound'
otherwise; 'cpu-only' on a rank without device work.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, count, islice, pairwise

import numpy as np
import pandas as pd

from profiler.schema import DEVICE_WORK_KINDS, Bound, Kind
from profiler.trace import Trace

HOST_KINDS = (Kind.OP.value, Kind.RUNTIME.value, Kind.ANNOTATION.value, Kind.PYTHON.value, Kind.COLLECTIVE.value)
SYNC_CALL = r"(?i)synchronize"
COPY_CALL = r"(?i)memcpy|memset"
C10D_OP = r"^c10d::|^record_param_comms$"
GLOO_REGION = r"^gloo:"
LABEL_KINDS = (Kind.ANNOTATION.value, Kind.PYTHON.value)
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
    g = _Graph(trace, rank)
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
        row = {"rank": r, "length_ns": cp.length_ns, "work_ns": cp.work_ns, "wall_ns": cp.wall_ns,
               "on_host_ns": cp.on_host_ns, "on_device_ns": cp.on_device_ns}
        row.update({f"{c}_ns": int(t) for c, t in zip(cp.by_class["class"], cp.by_class["time_ns"])})
        rows.append(row | {"verdict": cp.verdict, "segments": len(cp.segments)})
    cols = ["rank", "length_ns", "work_ns", "wall_ns", "on_host_ns", "on_device_ns", *(f"{c}_ns" for c in CLASSES), "verdict", "segments"]
    return pd.DataFrame(rows, columns=cols)


def _coded(col: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """A categorical column at `rows` as (codes, labels): labels[codes] are the values as str;
    a missing value (code -1) reads 'nan', as str() writes it."""
    labels = [*(str(c) for c in col.cat.categories), "nan"]
    codes = col.cat.codes.to_numpy().astype(np.int64)[rows]
    return np.where(codes < 0, len(labels) - 1, codes), labels


class _Graph:
    """Nodes (host pieces first, then device work) and edges of one rank, as numpy arrays."""

    def __init__(self, trace: Trace, rank: int):
        ev = trace.events
        rows = np.flatnonzero((ev["rank"] == rank).to_numpy())
        self.ids, self.ts = ev["id"].to_numpy()[rows], ev["ts"].to_numpy()[rows]
        self.te = self.ts + ev["dur"].to_numpy()[rows]
        # strings as category codes + labels: the segments table is built from codes (fast)
        self.name_code, self.name_labels = _coded(ev["name"], rows)
        self.kind_code, self.kind_labels = _coded(ev["kind"], rows)
        self.track_code, self.track_labels = _coded(ev["track"], rows)
        self.tracks = np.array(self.track_labels, dtype=object)[self.track_code]
        self.op_id = ev["op_id"].to_numpy()[rows]
        thread = ev["thread"].to_numpy()[rows]
        is_host = self.kind_in(HOST_KINDS) & (thread >= 0)
        is_dev = self.kind_in([k.value for k in DEVICE_WORK_KINDS]) & (ev["stream"].to_numpy()[rows] >= 0)
        self.has_device = bool(is_dev.any())
        node_rows = is_host | is_dev
        self.wall_ns = int(self.te[node_rows].max() - self.ts[node_rows].min()) if node_rows.any() else 0
        self.row_of = pd.Index(self.ids)  # event id -> row (rank frame); its hash table is built once
        parent = self.row_of.get_indexer(ev["parent_id"].to_numpy()[rows])
        self._host(np.flatnonzero(is_host), parent)
        self._device(np.flatnonzero(is_dev))
        self.n = self.np_ + len(self.dev_pos)
        self.start = np.concatenate([self.ps, self.ts[self.dev_pos]])
        self.end = np.concatenate([self.pe, self.te[self.dev_pos]])
        self.pos = np.concatenate([self.owner, self.dev_pos])  # node -> event row (rank frame)
        self.on_host = np.arange(self.n) < self.np_
        self._edges(trace, is_host)

    def kind_in(self, kinds) -> np.ndarray:
        """Per event row: is its kind one of `kinds`? (compared as category codes)"""
        return np.isin(self.kind_code, [i for i, k in enumerate(self.kind_labels) if k in kinds])

    def _host(self, h: np.ndarray, parent: np.ndarray) -> None:
        """Pieces of the host events `h` (rank-frame rows), in thread order; clipped disjoint."""
        ts, te = self.ts, self.te
        par = parent[h]
        is_h = np.zeros(len(ts) + 1, dtype=bool)
        is_h[h] = True  # the extra last entry stays False: a missing parent (-1) reads it
        in_h = is_h[par]
        kids = h[in_h]
        kp = par[in_h]
        o = np.lexsort((self.ids[kids], -(te[kids] - ts[kids]), ts[kids], kp))
        kids, kp = kids[o], kp[o]
        first = np.ones(len(kids), dtype=bool)
        first[1:] = kp[1:] != kp[:-1]
        prev_end = np.concatenate([[0], te[kids][:-1]])
        gap_s = np.where(first, ts[kp], prev_end)
        at = np.full(len(ts), -1, dtype=np.int64)
        at[h] = np.arange(len(h))
        tail_s = ts[h].copy()  # after the last child (integer max: float64 would round the ns)
        np.maximum.at(tail_s, at[kp], te[kids])
        owner = np.concatenate([kp, h])
        s = np.concatenate([gap_s, tail_s])
        e = np.concatenate([ts[kids], te[h]])
        tcode = pd.factorize(self.track_code[owner])[0]  # threads numbered by first appearance
        o = np.lexsort((e, s, tcode))
        owner, s, e, tcode = owner[o], s[o], e[o], tcode[o]
        # clip each piece to start after everything before it on the thread (skewed nesting)
        reach = _group_cummax_prev(tcode, e)
        s = np.minimum(np.maximum(s, reach), e)
        keep = e > s
        has_piece = np.zeros(len(ts), dtype=bool)
        has_piece[owner[keep]] = True
        first, _ = _first_last(owner, len(ts))
        first = first[first >= 0]
        lone = first[~has_piece[owner[first]]]  # an event with no positive piece keeps its first (length 0)
        keep[lone] = True
        self.owner, self.ps, self.pe, self.ptrack = owner[keep], s[keep], e[keep], tcode[keep]
        self.np_ = len(self.owner)
        self.first_piece, self.last_piece = _first_last(self.owner, len(ts))

    def _device(self, d: np.ndarray) -> None:
        o = np.lexsort((self.ids[d], self.ts[d], self.tracks[d].astype(str)))
        self.dev_pos = d[o]
        self.dev_node = np.full(len(self.ts), -1, dtype=np.int64)  # event row -> node, set in _edges

    def _edges(self, trace: Trace, is_host: np.ndarray) -> None:
        src, dst, waits = [], [], []

        def add(a: np.ndarray, b: np.ndarray, wait: bool) -> None:
            """Edges a -> b; `wait`: b blocks until a ends (a synchronisation)."""
            ok = (a >= 0) & (b >= 0) & (a != b)
            src.append(a[ok])
            dst.append(b[ok])
            waits.append(np.full(int(ok.sum()), wait))

        npc = self.np_
        self.dev_node[self.dev_pos] = npc + np.arange(len(self.dev_pos))
        same_t = self.ptrack[1:] == self.ptrack[:-1]
        add(np.flatnonzero(same_t), np.flatnonzero(same_t) + 1, False)  # program order
        dt = self.tracks[self.dev_pos]
        same_s = dt[1:] == dt[:-1]
        add(npc + np.flatnonzero(same_s), npc + np.flatnonzero(same_s) + 1, False)  # stream order
        self._launch_edges(*self._flow_rows(trace, "launch"), add)
        fwd, bwd = self._flow_rows(trace, "fwdbwd")
        add(self.last_piece[fwd], self.first_piece[bwd], False)
        self._gloo_edges(is_host, add)
        self.label = self.kind_in(LABEL_KINDS)[self.pos] & self.on_host
        self._resume_edges(add)
        self.src, self.dst = np.concatenate(src), np.concatenate(dst)
        is_wait = np.concatenate(waits)
        # cs: a host piece blocked inside its own interval by what it waits for
        b = np.full(self.n, np.iinfo(np.int64).min)
        np.maximum.at(b, self.dst[is_wait], self.end[self.src[is_wait]])
        self.cs = np.where(self.on_host, np.minimum(np.maximum(self.start, b), self.end), self.start)
        # labels (python frames, annotations) are not work: they never lengthen the path
        self.cs[self.label] = self.end[self.label]

    def _named(self, pattern: str) -> np.ndarray:
        """Per event row: does its name match the regex `pattern`? Matched once per distinct name
        (a trace has thousands of events per name), then spread by the category codes."""
        return pd.Series(self.name_labels).str.contains(pattern, regex=True).to_numpy(dtype=bool)[self.name_code]

    def _flow_rows(self, trace: Trace, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) event rows of this rank's flows of `kind`."""
        f = trace.flows[(trace.flows["kind"] == kind).to_numpy()]
        a, b = self.row_of.get_indexer(f["src"].to_numpy()), self.row_of.get_indexer(f["dst"].to_numpy())
        ok = (a >= 0) & (b >= 0)
        return a[ok], b[ok]

    def _launch_edges(self, a: np.ndarray, b: np.ndarray, add) -> None:
        """Launch, synchronize and synchronous-copy edges (a: call rows, b: work rows)."""
        add(self.first_piece[a], self.dev_node[b], False)
        copy = self._named(COPY_CALL)[a] & (self.te[b] <= self.te[a])
        add(self.dev_node[b[copy]], self.last_piece[a[copy]], True)
        launch_ts = self.ts.copy()
        launch_ts[b] = self.ts[a]  # work issued at its call's start; unlinked work at its own start
        sync = np.flatnonzero(self.kind_in([Kind.RUNTIME.value]) & self._named(SYNC_CALL))
        sync = sync[self.last_piece[sync] >= 0]
        if len(sync) == 0 or len(self.dev_pos) == 0:
            return
        dt = self.tracks[self.dev_pos]
        cuts = np.flatnonzero(np.concatenate([[True], dt[1:] != dt[:-1], [True]]))
        for lo, hi in pairwise(cuts):
            rows = self.dev_pos[lo:hi]
            cl = np.maximum.accumulate(launch_ts[rows])
            ce = np.maximum.accumulate(self.te[rows])
            i = np.minimum(np.searchsorted(cl, self.ts[sync], "left"), np.searchsorted(ce, self.te[sync], "right")) - 1
            ok = i >= 0
            add(self.dev_node[rows[i[ok]]], self.last_piece[sync[ok]], True)

    def _gloo_edges(self, is_host: np.ndarray, add) -> None:
        gloo = np.flatnonzero(is_host & self.kind_in([Kind.COLLECTIVE.value]) & self._named(GLOO_REGION))
        ops = np.flatnonzero(is_host & self._named(C10D_OP))
        if len(gloo) == 0 or len(ops) == 0:
            return
        ops = ops[np.argsort(self.ts[ops], kind="stable")]
        k = np.searchsorted(self.ts[ops], self.ts[gloo], "right") - 1
        ok = k >= 0
        gloo, op = gloo[ok], ops[k[ok]]
        ok = self.tracks[op] != self.tracks[gloo]
        gloo, op = gloo[ok], op[ok]
        add(self.first_piece[op], self.first_piece[gloo], False)
        # the caller's wait: its thread's first piece starting at or after the region's end
        after = np.full(len(gloo), -1, dtype=np.int64)
        for t in np.unique(self.tracks[op]):
            on_t = np.flatnonzero(self.tracks[self.owner] == t)
            mine = np.flatnonzero(self.tracks[op] == t)
            j = np.searchsorted(self.ps[on_t], self.te[gloo[mine]], "left")
            after[mine] = np.where(j < len(on_t), on_t[np.minimum(j, len(on_t) - 1)], -1)
        add(self.last_piece[gloo], after, True)


    def _resume_edges(self, add) -> None:
        """A thread's work resuming after untraced time (a gap, or only labels) follows the last
        work another thread of the rank finished by then: Kineto records no wake-ups, and the
        latest earlier finish is the latest possible cause (a join: backward() returning, a
        worker handing back a result; a fork: the autograd thread starting)."""
        work = np.flatnonzero(~self.label[: self.np_])
        if len(work) == 0:
            return
        t = self.ptrack[work]
        first = np.concatenate([[True], t[1:] != t[:-1]])
        prev_end = np.concatenate([[0], self.pe[work][:-1]])
        resume = work[first | (self.ps[work] > prev_end)]
        threads = np.unique(t)
        if len(threads) < 2:
            return
        for other in threads:
            mine = work[t == other]
            reach = np.maximum.accumulate(self.pe[mine])
            v = resume[self.ptrack[resume] != other]
            j = np.searchsorted(reach, self.ps[v], "right") - 1
            ok = j >= 0
            add(mine[j[ok]], v[ok], False)


def _first_last(values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per value 0..size-1: the index of its first and of its last occurrence in `values` (-1:
    none). One stable sort groups equal values in their original order."""
    first, last = np.full(size, -1, dtype=np.int64), np.full(size, -1, dtype=np.int64)
    if len(values) == 0:
        return first, last
    o = np.argsort(values, kind="stable")
    v = values[o]
    starts = np.flatnonzero(np.concatenate([[True], v[1:] != v[:-1]]))
    ends = np.concatenate([starts[1:], [len(v)]]) - 1
    first[v[starts]], last[v[starts]] = o[starts], o[ends]
    return first, last


def _group_cummax_prev(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each row, the max of `values` over the earlier rows of its (contiguous) group;
    int64 min for a group's first row."""
    lo = np.iinfo(np.int64).min
    if len(values) == 0:
        return values.copy()
    first = np.concatenate([[True], group[1:] != group[:-1]])
    # lift each group above the previous ones so one running max restarts per group
    gid = np.cumsum(first) - 1
    span = int(values.max()) - int(values.min()) + 1
    if span * (gid[-1] + 1) < 2**62:
        lifted = values - values.min() + gid * span
        prev = np.concatenate([[lo], np.maximum.accumulate(lifted)[:-1]]) - gid * span + values.min()
        return np.where(first, lo, prev)
    out = np.empty_like(values)
    for a, b in zip(np.flatnonzero(first), [*np.flatnonzero(first)[1:], len(values)]):
        out[a] = lo
        out[a + 1:b] = np.maximum.accumulate(values[a:b - 1])
    return out


def _adjacency(key: np.ndarray, other: np.ndarray, n: int) -> tuple[list[int], list[int]]:
    """CSR lists: the `other` ends of the edges whose `key` end is v are items[ptr[v]:ptr[v + 1]],
    in edge order (a stable sort, so ties in the DP go to the same predecessor every time)."""
    items = other[np.argsort(key, kind="stable")].tolist()
    ptr = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=n))]).tolist()
    return items, ptr


def _runs(g: _Graph) -> np.ndarray:
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


def _longest(g: _Graph) -> tuple[list[int], list[int], list[int], int]:
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
            preds = [v - 1] if run_end[v] >= 0 else pred[pptr[v]:pptr[v + 1]]
        else:  # stuck on a cycle: release the earliest unfinished node
            by_start = by_start or np.argsort(g.start, kind="stable").tolist()
            cursor = _first_unfinished(indeg, by_start, cursor)
            v = by_start[cursor]
            every = [v - 1] if run_end[v] >= 0 else pred[pptr[v]:pptr[v + 1]]
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
        for x in succ[sptr[v]:sptr[done_to]]:
            left = indeg[x] - 1
            indeg[x] = left
            if left == 0:
                ready.append(x)
    return L, R, P, dropped


def _bounds(units: pd.DataFrame | None) -> pd.Series:
    if units is None or len(units) == 0 or "bound" not in units:
        return pd.Series(dtype=object)
    return pd.Series(units["bound"].to_numpy(dtype=object), index=units["unit_id"].to_numpy()).groupby(level=0).first()


def _segments(g: _Graph, chain: np.ndarray, bound: pd.Series) -> pd.DataFrame:
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
    seg = pd.DataFrame({
        "event_id": pick(-1, np.where(label, ids, -1), ids),
        "unit_id": pick(-1, -1, unit),
        "name": _strings([*g.name_labels, "(untraced host)", "(waiting)"],
                         pick(untraced_name, np.where(label, names, waiting_name), names)),
        "kind": _strings([*g.kind_labels, "untraced", "wait"], pick(untraced_kind, np.where(label, kinds, wait_kind), kinds)),
        "track": _strings(g.track_labels, g.track_code[pos][node]),
        "on": _strings(["host", "device"], pick(0, np.where(label, 0, on), on)),
        "class": _strings(cls_labels, pick(host, np.where(label, host, waiting), cls)),
        "start_ns": pick(prev_r, cut, seg_s),
        "end_ns": pick(cut, seg_s, end),
    })
    seg["dur_ns"] = seg["end_ns"] - seg["start_ns"]
    return seg


def _strings(labels: list[str], codes: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """labels[codes] as a str column (one take from the few labels, not a str per row)."""
    return pd.array(labels, dtype="str").take(codes)


def _classes(g: _Graph, nodes: np.ndarray, bound: pd.Series) -> tuple[np.ndarray, np.ndarray, list[str]]:
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
    verdict = "cpu-only" if not has_device else ("host-bound" if host > device else "device-bound")
    return CriticalPath(rank=rank, length_ns=length, work_ns=work, wall_ns=wall, on_host_ns=host, on_device_ns=device,
                        waiting_ns=int(per.get("waiting", 0)), verdict=verdict, segments=seg, by_class=by_class,
                        dropped_edges=dropped)
