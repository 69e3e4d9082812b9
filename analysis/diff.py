"""`perf diff A B`: ops and kernels matched by name and input shapes; count, time and bound changes."""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["kind", "name", "shapes"]
DIFF_COLUMNS = [*KEYS, "count_a", "count_b", "time_a_ns", "time_b_ns", "delta_ns", "delta_pct", "bound_a", "bound_b", "change"]


def op_times(top_ops: pd.DataFrame, top_kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per (kind, name, shapes): count, time_ns and bound, from the untruncated top tables
    (analysis.top with n=None; bound from analysis.roofline.groups when it ran). An op's time is
    the device time it launched when the trace has device work, else its host time."""
    ops = top_ops.copy()
    ops["time_ns"] = ops["device_ns"] if ops["device_ns"].sum() > 0 else ops["total_ns"]
    kernels = top_kernels.assign(time_ns=top_kernels["total_ns"])
    frames = [f for f in (ops, kernels) if len(f)]
    if not frames:
        return pd.DataFrame(columns=[*KEYS, "count", "time_ns", "bound"])
    out = pd.concat(frames, ignore_index=True)
    if "bound" not in out:
        out["bound"] = ""
    out["bound"] = out["bound"].fillna("")
    return out[[*KEYS, "count", "time_ns", "bound"]]


def diff(a: pd.DataFrame, b: pd.DataFrame, threshold: float = 0.0) -> pd.DataFrame:
    """Rows of `op_times` A and B matched on (kind, name, shapes), changes only, largest first.

    Columns: kind, name, shapes, count_a, count_b, time_a_ns, time_b_ns, delta_ns (B - A),
    delta_pct (of A; inf for an added op), bound_a, bound_b ('' when absent),
    change: 'added', 'removed', 'count', 'time' or 'bound'. A row is kept when the count or the
    bound changed, or the time changed by more than `threshold` (a fraction of A's time).
    """
    m = a.merge(b, on=KEYS, how="outer", suffixes=("_a", "_b"), indicator=True)
    m = m.rename(columns={"time_ns_a": "time_a_ns", "time_ns_b": "time_b_ns"})
    for col in ("count_a", "count_b", "time_a_ns", "time_b_ns"):
        m[col] = m[col].fillna(0).astype(np.int64)
    for col in ("bound_a", "bound_b"):
        m[col] = m[col].fillna("").astype(object)
    m["delta_ns"] = m["time_b_ns"] - m["time_a_ns"]
    with np.errstate(divide="ignore", invalid="ignore"):
        m["delta_pct"] = np.where(m["time_a_ns"] > 0, 100.0 * m["delta_ns"] / m["time_a_ns"], np.inf)
    side = m.pop("_merge").astype(str).to_numpy()
    change = np.select(
        [side == "right_only", side == "left_only", m["count_a"] != m["count_b"], m["bound_a"] != m["bound_b"],
         np.abs(m["delta_ns"]) > threshold * m["time_a_ns"]],
        ["added", "removed", "count", "bound", "time"], default="",
    )
    m["change"] = change
    m = m[m["change"] != ""]
    m = m.reindex(m["delta_ns"].abs().sort_values(ascending=False, kind="stable").index)
    return m[DIFF_COLUMNS].reset_index(drop=True)
