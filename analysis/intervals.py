"""Interval arithmetic over int64 nanosecond columns, vectorised."""

from __future__ import annotations

import numpy as np
import pandas as pd


def runs(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of half-open intervals [start, end) as sorted, disjoint runs (starts, ends).

    Sort by start; an interval opens a new run when it starts past the largest end seen so far.
    Each run covers [its first start, the largest end within it).
    """
    if len(start) == 0:
        return start[:0], end[:0]
    order = np.argsort(start, kind="stable")
    s, reach = start[order], np.maximum.accumulate(end[order])
    new_run = np.empty(len(s), dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    run_last = np.append(np.flatnonzero(new_run[1:]), len(s) - 1)  # each run's last interval
    return s[new_run], reach[run_last]


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length of the union of half-open intervals [start, end), in the inputs' unit."""
    s, e = runs(start, end)
    return int((e - s).sum())


def grouped_union_length(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> pd.Series:
    """`union_length` of each group's intervals at once: a Series indexed by group value.

    The same sweep as union_length, made to restart per group by lifting group k's times by
    k * (span + 1), so no interval reaches into another group's range; one sort, one running max.
    """
    if len(group) == 0:
        return pd.Series(dtype=np.int64)
    codes, uniq = pd.factorize(group, sort=True)
    t0 = int(start.min())
    span = int(end.max()) - t0 + 1
    if span * (len(uniq) + 1) >= 2**62:  # would overflow int64: sweep group by group instead
        return pd.Series(
            {g: union_length(start[codes == i], end[codes == i]) for i, g in enumerate(uniq)}, dtype=np.int64
        )
    lift = codes.astype(np.int64) * span - t0
    s, e = start + lift, end + lift
    order = np.argsort(s, kind="stable")
    s, e, c = s[order], e[order], codes[order]
    reach = np.maximum.accumulate(e)
    new_run = np.empty(len(s), dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    run_last = np.append(np.flatnonzero(new_run[1:]), len(s) - 1)
    lengths = reach[run_last] - s[new_run]
    total = np.bincount(c[new_run], weights=lengths, minlength=len(uniq)).astype(np.int64)
    return pd.Series(total, index=uniq)
