"""The ops and kernels that take the most time, grouped by name and recorded input shapes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.schema import DEVICE_WORK_KINDS, Kind
from profiler.trace import Trace

TOP_COLUMNS = ["kind", "name", "shapes", "count", "total_ns", "mean_ns", "device_ns", "share"]


def top_ops(trace: Trace, busy_ns: int, n: int | None = 20) -> pd.DataFrame:
    """Host ops grouped by (name, shapes), most device time first (host time if none ran).

    Columns:
      kind ('op'), name, shapes (recorded 'Input Dims' text, '' if not recorded),
      count: calls, total_ns: summed host duration (inclusive of children), mean_ns,
      device_ns: summed duration of the device work each call launched (its kernels, copies),
      share: device_ns / busy_ns, the fraction of the devices' busy time (0 if no device work).
    """
    ev = trace.events
    ops = ev.loc[ev["kind"] == Kind.OP.value, ["id", "name", "shapes", "dur"]]
    dev = ev.loc[ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]) & (ev["op_id"] >= 0), ["op_id", "dur"]]
    launched = dev.groupby("op_id")["dur"].sum()
    ops = ops.assign(device=launched.reindex(ops["id"].to_numpy(), fill_value=0).to_numpy())
    g = ops.groupby(["name", "shapes"], observed=True, sort=False).agg(
        count=("dur", "size"), total_ns=("dur", "sum"), device_ns=("device", "sum")
    )
    key = "device_ns" if g["device_ns"].sum() > 0 else "total_ns"
    return _finish(g.reset_index(), Kind.OP.value, busy_ns, key, n)


def top_kernels(trace: Trace, busy_ns: int, n: int | None = 20) -> pd.DataFrame:
    """Device work (kernels, memcpy, memset) grouped by name, most total time first.

    Columns as `top_ops`, with kind the work's kind, shapes '' and device_ns = total_ns.
    """
    ev = trace.events
    work = ev.loc[ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]), ["kind", "name", "dur"]]
    g = work.groupby(["kind", "name"], observed=True, sort=False).agg(count=("dur", "size"), total_ns=("dur", "sum"))
    g = g.reset_index().assign(shapes="", device_ns=lambda d: d["total_ns"])
    return _finish(g, None, busy_ns, "total_ns", n)


def _finish(g: pd.DataFrame, kind: str | None, busy_ns: int, key: str, n: int | None) -> pd.DataFrame:
    if kind is not None:
        g["kind"] = kind
    for col in ("name", "kind", "shapes"):  # plain Python strings (not categories) out
        g[col] = g[col].astype(object)
    g["mean_ns"] = (g["total_ns"] / g["count"]).round().astype(np.int64) if len(g) else []
    g["share"] = g["device_ns"] / busy_ns if busy_ns else 0.0
    g = g.sort_values([key, "name"], ascending=[False, True], kind="stable")
    g = g.head(n) if n is not None else g
    return g[TOP_COLUMNS].reset_index(drop=True).astype({"count": "int64", "total_ns": "int64", "device_ns": "int64"})
