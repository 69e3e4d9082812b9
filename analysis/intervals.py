"""Interval arithmetic over int64 nanosecond columns, vectorised."""

from __future__ import annotations

import numpy as np


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length of the union of half-open intervals [start, end), in the inputs' unit.

    Sort by start; an interval opens a new run when it starts past the largest end seen so far.
    Each run covers [its first start, the largest end within it).
    """
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new_run = np.empty(len(s), dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    run_last = np.append(np.flatnonzero(new_run[1:]), len(s) - 1)  # each run's last interval
    return int((reach[run_last] - s[new_run]).sum())
