"""Nesting of one thread's intervals, read from the intervals themselves (vectorised).

Sort by (start, longer first). With `opened` the intervals before i in that order and `closed`
those of them that ended by i's start, depth_i = opened - closed: the number of intervals still
open when i starts. i's parent is the last interval before it one level up. The loop runs over
nesting levels, never over intervals.
"""

from __future__ import annotations

import numpy as np


def nest_sorted(start: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """For one thread's intervals sorted by (start, -dur): parent position (-1 at top), depth,
    and the count of intervals that end after their parent (poking)."""
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16), 0
    end = start + dur
    ends_by_start = np.searchsorted(np.sort(end), start, side="right")  # events ended by i's start
    # ...but only those ordered before i count: zero-length events at i's start sort after it.
    zero = (dur == 0).astype(np.int64)
    group = np.concatenate(([0], np.cumsum(start[1:] != start[:-1])))  # same-start runs
    zeros_before = np.cumsum(zero) - zero
    zeros_before_in_group = zeros_before - _group_first(group, zeros_before)
    zeros_from_i = np.bincount(group, weights=zero).astype(np.int64)[group] - zeros_before_in_group
    closed = ends_by_start - zeros_from_i
    d = np.arange(n) - closed
    d = np.maximum(d, 0)
    parent = np.full(n, -1, dtype=np.int64)
    by_level = np.argsort(d, kind="stable")  # positions grouped by depth, ascending within each
    cuts = np.searchsorted(d[by_level], np.arange(int(d.max(initial=0)) + 2))
    for level in range(1, len(cuts) - 1):
        above = by_level[cuts[level - 1] : cuts[level]]
        here = by_level[cuts[level] : cuts[level + 1]]
        k = np.searchsorted(above, here) - 1
        parent[here] = np.where(k >= 0, above[np.maximum(k, 0)], -1)
    has = parent >= 0
    poke = int((end[has] > end[parent[has]]).sum())
    return parent, d.astype(np.int16), poke


def _group_first(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """values at the first row of each row's (contiguous) group."""
    first = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    return values[first][group]
