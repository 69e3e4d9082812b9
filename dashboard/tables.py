"""Pure DataFrame shaping for the pages: Analysis in, the small tables the figures draw.

No Dash, no I/O: each function takes analysis output and returns a DataFrame (columns and
units listed), so the pages and the figure tests share one path from numbers to pixels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profiler.api import op_groups as groups
from profiler.model.demangle import demangle_many
from profiler.model.hardware import HardwareSpec, normalize_dtype

if TYPE_CHECKING:
    from profiler.api import Analysis

#: The wall-time equation's parts, in the order they stack (docs/architecture.md, "Time attribution").
EQUATION_PARTS = [
    "compute_ns",
    "memory_ns",
    "communication_ns",
    "runtime_ns",
    "unknown_ns",
    "idle_host_ns",
    "idle_sync_ns",
    "idle_other_ns",
]


def focus_units(units: pd.DataFrame) -> pd.DataFrame:
    """The units the roofline and op table show: accelerator units when the trace has any,
    else the CPU's (a CPU-only trace)."""
    if units.empty:
        return units
    dev = units[units["device"] != "cpu"]
    return dev if len(dev) else units


def op_table(units: pd.DataFrame) -> pd.DataFrame:
    """Classified units (analysis.roofline.classify) grouped by (name, shapes): one row per op.

    Columns: op (row id, 0 = most time), name, label (the name as shown: C++ symbols, as ROCm/HIP
    traces record kernels, demangled like CUDA's), shapes, family, dtype, count (units),
    time_ns (summed unit time, ns: a device op's device time, a CPU op's self time), total_ns
    (ns: a CPU op's whole duration, its child ops included; a device op's time again),
    share (of all the rows' time), flops_effective (FLOP),
    bytes (byte), intensity (FLOP/byte), achieved_flops (flops_effective / time, FLOP/s),
    t_compute_ns, t_memory_ns, t_comm_ns, t_runtime_ns, floor_ns (ns), bound,
    efficiency (floor_ns / time_ns), above_ceiling, ceiling_note (analysis.ceiling). Sorted by time_ns, most first.
    """
    cols = [
        "op",
        "name",
        "label",
        "shapes",
        "family",
        "dtype",
        "count",
        "time_ns",
        "total_ns",
        "share",
        "flops_effective",
        "bytes",
        "intensity",
        "achieved_flops",
        "t_compute_ns",
        "t_memory_ns",
        "t_comm_ns",
        "t_runtime_ns",
        "floor_ns",
        "bound",
        "efficiency",
        "above_ceiling",
        "ceiling_note",
    ]
    if units.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    g = groups(units)
    whole = np.where(
        units["device"].to_numpy(dtype=object) == "cpu",
        units["end_ns"].to_numpy(dtype=np.int64) - units["start_ns"].to_numpy(dtype=np.int64),
        units["time_ns"].to_numpy(dtype=np.int64),
    )  # a CPU unit's time is its self time
    counts = (
        units.assign(total_ns=whole)
        .groupby(["name", "shapes"], sort=False)
        .agg(count=("time_ns", "size"), total_ns=("total_ns", "sum"))
        .reset_index()
    )
    g = g.merge(counts, on=["name", "shapes"], how="left")
    total = float(g["time_ns"].sum())
    g["share"] = g["time_ns"] / total if total else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        g["achieved_flops"] = np.where(g["time_ns"] > 0, g["flops_effective"] / (g["time_ns"] / 1e9), np.nan)
    g = g.sort_values(["time_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    g["op"] = np.arange(len(g))
    for c in ("name", "shapes", "family", "dtype", "bound"):
        g[c] = g[c].astype(object).fillna("").astype(str)
    g["label"] = demangle_many(g["name"])
    return g[cols]


def roofline_points(ops: pd.DataFrame, limit: int = 3000) -> pd.DataFrame:
    """The ops a log-log roofline can place: intensity > 0 and achieved FLOP/s > 0 (finite).

    Columns as `op_table`; at most `limit` rows, the ones with the most time (the rest are
    counted in the page's caption, never shipped).
    """
    x = ops["intensity"].to_numpy(dtype=np.float64)
    y = ops["achieved_flops"].to_numpy(dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    return ops[ok].head(limit).reset_index(drop=True)


def ceilings(spec: HardwareSpec, dtypes: list[str]) -> pd.DataFrame:
    """The roofs of `spec`: one compute row per (unit, dtype) worth drawing, one memory row per level.

    Columns: kind ('compute' | 'memory'), name (e.g. 'matrix bf16', 'hbm'), value (FLOP/s for
    compute, bytes/s for memory). Compute rows: the matrix peak of each dtype the ops use
    (normalised, fp32 when none) and the fp32 vector peak; duplicates of the same figure dropped.
    """
    rows: list[tuple[str, str, float]] = []
    seen: set[float] = set()
    wanted = sorted({d for d in (normalize_dtype(x) for x in dtypes) if d} or {"fp32"})
    for unit, dts in (("matrix", wanted), ("vector", ["fp32"])):
        for d in dts:
            try:
                peak = spec.peak(d, unit)
            except KeyError:
                continue
            if peak not in seen:
                seen.add(peak)
                rows.append(("compute", f"{unit} {d}", float(peak)))
    rows += [("memory", m.name, float(m.bandwidth)) for m in spec.memory]
    return pd.DataFrame(rows, columns=["kind", "name", "value"])


def equation_long(equation: pd.DataFrame) -> pd.DataFrame:
    """The wall equation (analysis.attribution.attribute) in long form for a stacked bar.

    Columns: device ('rank<R>/<device>'), part (compute, memory, ..., idle_other), ns, share (of window).
    """
    rows = []
    for r in equation.itertuples(index=False):
        window = float(r.window_ns) or 1.0
        for part in EQUATION_PARTS:
            ns = int(getattr(r, part))
            rows.append((f"rank{r.rank}/{r.device}", part.removesuffix("_ns"), ns, ns / window))
    return pd.DataFrame(rows, columns=["device", "part", "ns", "share"])


def device_summary(a: Analysis) -> pd.DataFrame:
    """Per device: device, hardware (spec used), wall_ns (window), busy_ns, idle_ns (wall - busy),
    mfu, mbu and mfu_over: Analysis.utilization's compute_util, memory_util and time_base, the one
    MFU definition (analysis.mfu: over the profiled steps' wall time where the trace has
    ProfilerSteps, else over the trace window), so this table, the per-step chart and the text
    and JSON reports show one number."""
    cols = ["device", "hardware", "wall_ns", "busy_ns", "idle_ns", "mfu", "mbu", "mfu_over"]
    if a.equation.empty:
        return pd.DataFrame(columns=cols)
    util = (
        a.utilization
        if len(a.utilization)
        else pd.DataFrame(columns=["rank", "device", "compute_util", "memory_util", "time_base"])
    )
    eq = a.equation.merge(
        util[["rank", "device", "compute_util", "memory_util", "time_base"]], on=["rank", "device"], how="left"
    )
    out = pd.DataFrame(
        {
            "device": [f"rank{r}/{d}" for r, d in zip(eq["rank"], eq["device"])],
            "wall_ns": eq["window_ns"].astype(np.int64),
            "busy_ns": eq["busy_ns"].astype(np.int64),
            "mfu": eq["compute_util"].astype(float),
            "mbu": eq["memory_util"].astype(float),
            "mfu_over": eq["time_base"].fillna("").astype(str),
        }
    )
    out["idle_ns"] = out["wall_ns"] - out["busy_ns"]  # wall = busy + idle
    out["hardware"] = [a.hardware.get(d, "") for d in out["device"]]
    return out[cols]


def select_op(ops: pd.DataFrame, selected: dict | None) -> pd.Series | None:
    """The op_table row named by a selection ({'name', 'shapes'}), or None."""
    if not selected or ops.empty:
        return None
    hit = ops[(ops["name"] == selected.get("name")) & (ops["shapes"] == selected.get("shapes", ""))]
    return hit.iloc[0] if len(hit) else None
