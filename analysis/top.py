"""The ops and kernels that take the most time, grouped by name and recorded input shapes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.model.schema import DEVICE_WORK_KINDS, Kind
from profiler.model.trace import Trace

TOP_COLUMNS = ["kind", "name", "shapes", "count", "total_ns", "mean_ns", "device_ns", "share"]


def top_ops(trace: Trace, busy_ns: int, n: int | None = 20) -> pd.DataFrame:
    """Host ops grouped by (name, shapes), most device time first (host time if none ran).

    Columns:
      kind ('op'; a backend's collective region, e.g. gloo:all_reduce, is an op row too), name,
      shapes (recorded 'Input Dims' text, '' if not recorded),
      count: calls, total_ns: summed host duration (inclusive of children), mean_ns,
      device_ns: summed duration of the device work each call launched (its kernels, copies),
      share: device_ns / busy_ns, the fraction of the devices' busy time (0 if no device work).
    """
    ev = trace.events
    kind = ev["kind"]
    # ops, and the collectives a backend runs on its own threads (gloo:all_reduce regions): the
    # work the run waits for, beside the c10d:: op that enqueued it
    is_op = kind.isin([Kind.OP.value, Kind.COLLECTIVE.value]).to_numpy()
    dev = kind.isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy() & (ev["op_id"].to_numpy() >= 0)
    dur = ev["dur"].to_numpy()
    # device time launched per op row (ids are row positions' labels: map through an index)
    launched = np.zeros(len(ev), dtype=np.int64)
    np.add.at(launched, pd.Index(ev["id"].to_numpy()).get_indexer(ev["op_id"].to_numpy()[dev]), dur[dev])
    g = _grouped(
        ev["name"].cat.codes.to_numpy()[is_op], ev["shapes"].cat.codes.to_numpy()[is_op], dur[is_op], launched[is_op]
    )
    g["name"] = ev["name"].cat.categories.to_numpy(dtype=object)[g.pop("a")]
    g["shapes"] = ev["shapes"].cat.categories.to_numpy(dtype=object)[g.pop("b")]
    key = "device_ns" if g["device_ns"].sum() > 0 else "total_ns"
    return _finish(g, Kind.OP.value, busy_ns, key, n)


def _grouped(a: np.ndarray, b: np.ndarray, dur: np.ndarray, device: np.ndarray) -> pd.DataFrame:
    """Group rows by the code pair (a, b): count, summed dur and device time (bincount, no pandas groupby)."""
    pair = a.astype(np.int64) << 32 | b.astype(np.int64)
    codes, uniq = pd.factorize(pair)
    return pd.DataFrame(
        {
            "a": (uniq >> 32).astype(np.int64),
            "b": (uniq & 0xFFFFFFFF).astype(np.int64),
            "count": np.bincount(codes, minlength=len(uniq)),
            "total_ns": np.bincount(codes, weights=dur, minlength=len(uniq)).astype(np.int64),
            "device_ns": np.bincount(codes, weights=device, minlength=len(uniq)).astype(np.int64),
        }
    )


def top_kernels(trace: Trace, busy_ns: int, n: int | None = 20) -> pd.DataFrame:
    """Device work (kernels, memcpy, memset) grouped by name, most total time first.

    Columns as `top_ops`, with kind the work's kind, shapes '' and device_ns = total_ns.
    """
    ev = trace.events
    work = ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    dur = ev["dur"].to_numpy()[work]
    g = _grouped(ev["kind"].cat.codes.to_numpy()[work], ev["name"].cat.codes.to_numpy()[work], dur, dur)
    g["kind"] = ev["kind"].cat.categories.to_numpy(dtype=object)[g.pop("a")]
    g["name"] = ev["name"].cat.categories.to_numpy(dtype=object)[g.pop("b")]
    g["shapes"] = ""
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
