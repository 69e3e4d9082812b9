"""The dependency graph the critical path runs over (analysis.critical_path): one rank's host
pieces and device work as nodes, ordered by the edges below.

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
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pandas as pd

from profiler.model.schema import DEVICE_WORK_KINDS, Kind
from profiler.model.trace import Trace

HOST_KINDS = (Kind.OP.value, Kind.RUNTIME.value, Kind.ANNOTATION.value, Kind.PYTHON.value, Kind.COLLECTIVE.value)
SYNC_CALL = r"(?i)synchronize"
COPY_CALL = r"(?i)memcpy|memset"
C10D_OP = r"^c10d::|^record_param_comms$"
GLOO_REGION = r"^gloo:"
LABEL_KINDS = (Kind.ANNOTATION.value, Kind.PYTHON.value)


def _coded(col: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """A categorical column at `rows` as (codes, labels): labels[codes] are the values as str;
    a missing value (code -1) reads 'nan', as str() writes it."""
    labels = [*(str(c) for c in col.cat.categories), "nan"]
    codes = col.cat.codes.to_numpy().astype(np.int64)[rows]
    return np.where(codes < 0, len(labels) - 1, codes), labels


class Graph:
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
        parent = self._rows_of(ev["parent_id"].to_numpy()[rows])
        self._host(np.flatnonzero(is_host), parent)
        self._device(np.flatnonzero(is_dev))
        self.n = self.np_ + len(self.dev_pos)
        self.start = np.concatenate([self.ps, self.ts[self.dev_pos]])
        self.end = np.concatenate([self.pe, self.te[self.dev_pos]])
        self.pos = np.concatenate([self.owner, self.dev_pos])  # node -> event row (rank frame)
        self.on_host = np.arange(self.n) < self.np_
        self._edges(trace, is_host)
        # what only the construction reads: the critical path keeps the nodes, not these
        del self.ts, self.te, self.tracks, self.dev_node, self.first_piece, self.last_piece
        del self.ps, self.pe, self.owner, self.dev_pos

    def _rows_of(self, ids: np.ndarray) -> np.ndarray:
        """Rows (rank frame) of the events `ids`, -1 where absent. Event ids are unique, and
        ascending in a loaded trace: a binary search then, with no hash table (~8 MiB for 200k
        ids) built and held beside the graph; a pandas index otherwise."""
        own = self.ids
        if len(own) == 0:
            return np.full(len(ids), -1, dtype=np.intp)
        if (own[1:] > own[:-1]).all():
            at = np.minimum(np.searchsorted(own, ids), len(own) - 1)
            return np.where(own[at] == ids, at, -1)
        return pd.Index(own).get_indexer(ids)

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
        del par, is_h, in_h, kids, kp, first, prev_end, gap_s, at, tail_s  # the peak is the pieces
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
        a, b = self._rows_of(f["src"].to_numpy()), self._rows_of(f["dst"].to_numpy())
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
        out[a + 1 : b] = np.maximum.accumulate(values[a : b - 1])
    return out
