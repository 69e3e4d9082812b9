"""Split each timeline row into lanes whose slices nest properly, as Perfetto requires.

A Perfetto track is a stack: a slice ends before the one that encloses it. Real traces break
that here and there: a host event that pokes past its parent's end (clock skew; Kineto's reader
counts these), a `gpu_user_annotation` that straddles kernels on its stream. Such a slice moves to
the first extra lane (an extra Perfetto track beside the row, named '<row> (overlap N)') where it
nests; the reader maps every lane back to its row, so nothing is lost.

Order within a row: by start, longer first, then id (how `collectors.kineto.link.nest` orders
them). A slice nests on a lane's stack when, after popping every slice that ended at or before
its start, the top (if any) ends at or after its end.
"""

from __future__ import annotations

import numpy as np


def assign_lanes(row: np.ndarray, ts: np.ndarray, dur: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lane, depth) per event: lane 0 is the row itself; depth counts the open slices of that
    lane that enclose the event (0 at top level). `row` is an integer code per timeline row."""
    n = len(ts)
    lane = np.zeros(n, dtype=np.int32)
    depth = np.zeros(n, dtype=np.int32)
    if n == 0:
        return lane, depth
    order = np.lexsort((ids, -dur, ts, row))
    end = ts + dur
    rows, starts, ends = row[order].tolist(), ts[order].tolist(), end[order].tolist()
    lanes_out, depths_out = [0] * n, [0] * n
    current = None
    stacks: list[list[int]] = []
    for k in range(n):
        if rows[k] != current:
            current, stacks = rows[k], [[]]
        t, e = starts[k], ends[k]
        for li, st in enumerate(stacks):
            while st and st[-1] <= t:
                st.pop()
            if not st or st[-1] >= e:
                break
        else:
            li, st = len(stacks), []
            stacks.append(st)
        lanes_out[k], depths_out[k] = li, len(st)
        st.append(e)
    lane[order] = lanes_out
    depth[order] = depths_out
    return lane, depth
