"""Interval arithmetic over int64 nanosecond columns, vectorised."""

from __future__ import annotations

import numpy as np
import pandas as pd


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


def grouped_union_length(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> pd.Series:
    """`union_length` of each group's intervals at once: a Series indexed by group value.

    The same sweep as union_length, with the running maximum restarted per group (pandas'
    grouped cummax), so the whole table is one sort and a few grouped passes.
    """
    if len(group) == 0:
        return pd.Series(dtype=np.int64)
    df = pd.DataFrame({"g": group, "s": start, "e": end}).sort_values(["g", "s"], kind="stable")
    reach = df.groupby("g", sort=False)["e"].cummax()
    before = reach.groupby(df["g"], sort=False).shift()  # reach of the previous interval in the group
    new_run = before.isna().to_numpy() | (df["s"].to_numpy() > before.fillna(0).to_numpy())
    run = np.cumsum(new_run)
    runs = pd.DataFrame({"g": df["g"].to_numpy(), "run": run, "s": df["s"].to_numpy(), "e": reach.to_numpy()})
    per_run = runs.groupby("run", sort=False).agg(g=("g", "first"), s=("s", "min"), e=("e", "max"))
    return (per_run["e"] - per_run["s"]).groupby(per_run["g"]).sum().astype(np.int64)
