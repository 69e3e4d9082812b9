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

from collections import deque
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from profiler.schema import DEVICE_WORK_KINDS, Bound, Kind
from profiler.trace import Trace

HOST_KINDS = (Kind.OP.value, Kind.RUNTIME.value, Kind.ANNOTATION.value, Kind.PYTHON.value, Kind.COLLECTIVE.value)
SYNC_CALL = r"(?i)synchronize"
COPY_CALL = r"(?i)memcpy|memset"
C10D_OP = r"^c10d::|^record_param_comms$"
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
    last = int(np.lexsort((R, L))[-1])  # largest L; ties: the later frontier
    chain = []
    v = last
    while v >= 0:
        chain.append(v)
        v = P[v]
    seg = _segments(g, chain[::-1], R, P, bound)
    return _result(rank, g.wall_ns, int(L[last]), seg, dropped, g.has_device)


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


class _Graph:
    """Nodes (host pieces first, then device work) and edges of one rank, as numpy arrays."""

    def __init__(self, trace: Trace, rank: int):
        ev = trace.events
        rows = np.flatnonzero((ev["rank"] == rank).to_numpy())
        kind = ev["kind"].astype(object).to_numpy()[rows]
        self.ids, self.ts = ev["id"].to_numpy()[rows], ev["ts"].to_numpy()[rows]
        self.te = self.ts + ev["dur"].to_numpy()[rows]
        self.names = ev["name"].cat.categories.to_numpy(dtype=object)[ev["name"].cat.codes.to_numpy()[rows]]
        self.tracks = ev["track"].cat.categories.to_numpy(dtype=object)[ev["track"].cat.codes.to_numpy()[rows]]
        self.kind, self.op_id = kind, ev["op_id"].to_numpy()[rows]
        thread = ev["thread"].to_numpy()[rows]
        is_host = np.isin(kind, HOST_KINDS) & (thread >= 0)
        is_dev = np.isin(kind, [k.value for k in DEVICE_WORK_KINDS]) & (ev["stream"].to_numpy()[rows] >= 0)
        self.has_device = bool(is_dev.any())
        node_rows = is_host | is_dev
        self.wall_ns = int(self.te[node_rows].max() - self.ts[node_rows].min()) if node_rows.any() else 0
        parent = pd.Index(self.ids).get_indexer(ev["parent_id"].to_numpy()[rows])
        self._host(np.flatnonzero(is_host), parent, self.tracks)
        self._device(np.flatnonzero(is_dev))
        self.n = self.np_ + len(self.dev_pos)
        self.start = np.concatenate([self.ps, self.ts[self.dev_pos]])
        self.end = np.concatenate([self.pe, self.te[self.dev_pos]])
        self.pos = np.concatenate([self.owner, self.dev_pos])  # node -> event row (rank frame)
        self.on_host = np.arange(self.n) < self.np_
        self._edges(trace, is_host)

    def _host(self, h: np.ndarray, parent: np.ndarray, tracks: np.ndarray) -> None:
        """Pieces of the host events `h` (rank-frame rows), in thread order; clipped disjoint."""
        ts, te = self.ts, self.te
        par = parent[h]
        in_h = np.isin(par, h)
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
        tcode = pd.factorize(tracks[owner])[0]
        o = np.lexsort((e, s, tcode))
        owner, s, e, tcode = owner[o], s[o], e[o], tcode[o]
        # clip each piece to start after everything before it on the thread (skewed nesting)
        reach = _group_cummax_prev(tcode, e)
        s = np.minimum(np.maximum(s, reach), e)
        keep = e > s
        has_piece = np.zeros(len(ts), dtype=bool)
        has_piece[owner[keep]] = True
        _, first = np.unique(owner, return_index=True)
        lone = first[~has_piece[owner[first]]]  # an event with no positive piece keeps its first (length 0)
        keep[lone] = True
        self.owner, self.ps, self.pe, self.ptrack = owner[keep], s[keep], e[keep], tcode[keep]
        self.np_ = len(self.owner)
        self.first_piece = np.full(len(ts), -1, dtype=np.int64)
        self.last_piece = np.full(len(ts), -1, dtype=np.int64)
        uniq, first = np.unique(self.owner, return_index=True)
        self.first_piece[uniq] = first
        uniq, last = np.unique(self.owner[::-1], return_index=True)
        self.last_piece[uniq] = self.np_ - 1 - last

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
        self.label = np.isin(self.kind[self.pos], LABEL_KINDS) & self.on_host
        self._resume_edges(add)
        self.src, self.dst = np.concatenate(src), np.concatenate(dst)
        is_wait = np.concatenate(waits)
        # cs: a host piece blocked inside its own interval by what it waits for
        b = np.full(self.n, np.iinfo(np.int64).min)
        np.maximum.at(b, self.dst[is_wait], self.end[self.src[is_wait]])
        self.cs = np.where(self.on_host, np.minimum(np.maximum(self.start, b), self.end), self.start)
        # labels (python frames, annotations) are not work: they never lengthen the path
        self.cs[self.label] = self.end[self.label]

    def _flow_rows(self, trace: Trace, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) event rows of this rank's flows of `kind`."""
        f = trace.flows[(trace.flows["kind"] == kind).to_numpy()]
        where = pd.Index(self.ids)
        a, b = where.get_indexer(f["src"].to_numpy()), where.get_indexer(f["dst"].to_numpy())
        ok = (a >= 0) & (b >= 0)
        return a[ok], b[ok]

    def _launch_edges(self, a: np.ndarray, b: np.ndarray, add) -> None:
        """Launch, synchronize and synchronous-copy edges (a: call rows, b: work rows)."""
        add(self.first_piece[a], self.dev_node[b], False)
        copy = pd.Series(self.names[a]).str.contains(COPY_CALL, regex=True).to_numpy() & (self.te[b] <= self.te[a])
        add(self.dev_node[b[copy]], self.last_piece[a[copy]], True)
        launch_ts = self.ts.copy()
        launch_ts[b] = self.ts[a]  # work issued at its call's start; unlinked work at its own start
        sync = np.flatnonzero((self.kind == Kind.RUNTIME.value) & pd.Series(self.names).str.contains(SYNC_CALL, regex=True).to_numpy())
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
        names = pd.Series(self.names)
        gloo = np.flatnonzero(is_host & (self.kind == Kind.COLLECTIVE.value) & names.str.startswith("gloo:").to_numpy())
        ops = np.flatnonzero(is_host & names.str.contains(C10D_OP, regex=True).to_numpy())
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


def _longest(g: _Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """L, R and the chosen predecessor P per node (Kahn's topological order, FIFO); nodes on a
    cycle are released in start order, ignoring their unfinished predecessors (counted)."""
    n = g.n
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, 0
    order = np.argsort(g.dst, kind="stable")
    pred = g.src[order].tolist()
    pptr = np.concatenate([[0], np.cumsum(np.bincount(g.dst, minlength=n))]).tolist()
    so = np.argsort(g.src, kind="stable")
    succ = g.dst[so].tolist()
    sptr = np.concatenate([[0], np.cumsum(np.bincount(g.src, minlength=n))]).tolist()
    indeg = np.bincount(g.dst, minlength=n).tolist()
    end, cs = g.end.tolist(), g.cs.tolist()
    L, R, P = [0] * n, [0] * n, [-1] * n
    done = [False] * n
    queue = deque(v for v in range(n) if indeg[v] == 0)
    by_start = np.argsort(g.start, kind="stable").tolist()
    cursor, processed, dropped = 0, 0, 0
    while processed < n:
        if not queue:  # a cycle: release the earliest unfinished node
            while done[by_start[cursor]] or indeg[by_start[cursor]] == -1:
                cursor += 1
            queue.append(by_start[cursor])
        v = queue.popleft()
        if done[v]:
            continue
        ev_, cv = end[v], cs[v]
        best, best_r, best_p = ev_ - cv, -(2**63), -1
        for k in range(pptr[v], pptr[v + 1]):
            u = pred[k]
            if not done[u]:
                dropped += 1
                continue
            ru = R[u]
            cand = L[u] + max(0, ev_ - max(cv, ru))
            if cand > best or (cand == best and (best_p < 0 or ru > best_r)):
                best, best_r, best_p = cand, ru, u
        L[v], P[v] = best, best_p
        R[v] = max(best_r, ev_) if best_p >= 0 else ev_
        done[v] = True
        indeg[v] = -1
        processed += 1
        for k in range(sptr[v], sptr[v + 1]):
            s = succ[k]
            if indeg[s] > 0:
                indeg[s] -= 1
                if indeg[s] == 0:
                    queue.append(s)
    return np.array(L, dtype=np.int64), np.array(R, dtype=np.int64), np.array(P, dtype=np.int64), dropped


def _bounds(units: pd.DataFrame | None) -> pd.Series:
    if units is None or len(units) == 0 or "bound" not in units:
        return pd.Series(dtype=object)
    return pd.Series(units["bound"].to_numpy(dtype=object), index=units["unit_id"].to_numpy()).groupby(level=0).first()


def _segments(g: _Graph, chain: list[int], R: np.ndarray, P: np.ndarray, bound: pd.Series) -> pd.DataFrame:
    """The path's segments in time order: work pieces, untraced host gaps and waits."""
    rows = []
    prev_r = None
    for v in chain:
        pos, on_host = int(g.pos[v]), bool(g.on_host[v])
        start, end, cs = int(g.start[v]), int(g.end[v]), int(g.cs[v])
        seg_s = cs if prev_r is None else max(cs, prev_r)
        track, on = str(g.tracks[pos]), "host" if on_host else "device"
        u = int(P[v])
        if prev_r is not None and seg_s > prev_r:
            # [prev_r, seg_s) is not work. Following the previous piece of the same thread, the
            # part before this piece is untraced host time and a label's own part is host time
            # under that label; everything else (another track, a blocked call) is waiting.
            same_thread = on_host and u == v - 1 and g.on_host[u] and g.ptrack[u] == g.ptrack[v]
            cut = max(prev_r, min(seg_s, start)) if same_thread else prev_r
            if cut > prev_r:
                rows.append((-1, -1, "(untraced host)", "untraced", track, "host", "host", prev_r, cut))
            if seg_s > cut and same_thread and g.label[v]:
                rows.append((int(g.ids[pos]), -1, str(g.names[pos]), str(g.kind[pos]), track, "host", "host", cut, seg_s))
            elif seg_s > cut:
                rows.append((-1, -1, "(waiting)", "wait", track, on, "waiting", cut, seg_s))
        if end > seg_s:
            unit, cls = _class_of(g, pos, on_host, bound)
            rows.append((int(g.ids[pos]), unit, str(g.names[pos]), str(g.kind[pos]), track, on, cls, seg_s, end))
        prev_r = end if prev_r is None else max(prev_r, end)
    seg = pd.DataFrame(rows, columns=SEGMENT_COLUMNS[:-1])
    seg["dur_ns"] = seg["end_ns"] - seg["start_ns"]
    return seg


def _class_of(g: _Graph, pos: int, on_host: bool, bound: pd.Series) -> tuple[int, str]:
    """(unit_id, class) of an event's piece (module docstring, 'Classes')."""
    kind = g.kind[pos]
    if not on_host:
        unit = int(g.op_id[pos]) if g.op_id[pos] >= 0 else int(g.ids[pos])
    elif kind == Kind.RUNTIME.value:
        return -1, Bound.RUNTIME.value
    elif not g.has_device and kind in (Kind.OP.value, Kind.COLLECTIVE.value):
        unit = int(g.ids[pos])
    else:
        return -1, "host"
    return unit, str(bound.get(unit, Bound.UNKNOWN.value))


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
