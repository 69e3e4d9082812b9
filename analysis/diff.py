"""`perf diff A B`: what changed in the setup (hardware, ranks, dtypes, versions, shapes), then ops and
kernels matched by name and input shapes; count, time and bound changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

KEYS = ["kind", "name", "shapes"]
DIFF_COLUMNS = [
    *KEYS,
    "count_a",
    "count_b",
    "time_a_ns",
    "time_b_ns",
    "delta_ns",
    "delta_pct",
    "bound_a",
    "bound_b",
    "change",
]


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
        [
            side == "right_only",
            side == "left_only",
            m["count_a"] != m["count_b"],
            m["bound_a"] != m["bound_b"],
            np.abs(m["delta_ns"]) > threshold * m["time_a_ns"],
        ],
        ["added", "removed", "count", "bound", "time"],
        default="",
    )
    m["change"] = change
    m = m[m["change"] != ""]
    m = m.reindex(m["delta_ns"].abs().sort_values(ascending=False, kind="stable").index)
    return m[DIFF_COLUMNS].reset_index(drop=True)


# ---------------------------------------------------------------------------- setup

SETUP_FIELDS = ("hardware", "ranks", "world_size", "dtypes", "software", "shapes")
#: Fields whose difference makes the comparison not like-for-like: the same code on other
#: hardware or another number of ranks runs other kernels, other collectives.
NOT_LIKE_FOR_LIKE = ("hardware", "ranks", "world_size")


@dataclass(frozen=True)
class SetupDiff:
    """What differs between the setups of two traces. rows: field, a, b, same (one per
    SETUP_FIELDS); like_for_like: False when hardware or rank count differ; reasons: one
    sentence per such difference."""

    rows: pd.DataFrame
    like_for_like: bool
    reasons: tuple[str, ...]


def setup(overview, metadata: dict, by_dtype: pd.DataFrame, top_ops: pd.DataFrame) -> dict[str, str]:
    """The setup of one trace as text per SETUP_FIELDS. `overview`: analysis.overview.Overview;
    `metadata`: Trace.metadata (its per-rank top-level fields); `by_dtype`: analysis.roofline.by
    on 'dtype' (may be empty); `top_ops`: analysis.top.top_ops.

    hardware: distinct accelerator names ('cpu' when none); ranks: ranks in the trace;
    world_size: as recorded ('' when not); dtypes: compute dtypes holding >= 5% of unit time;
    software: runtime, driver and NCCL versions as recorded; shapes: the input shapes of the op
    with the most time (batch and sequence show there)."""
    names = sorted({n or "unnamed" for _, d, n in overview.devices if d != "cpu"}) or ["cpu"]
    dtypes = ""
    if len(by_dtype):
        d = by_dtype[(by_dtype["share"] >= 0.05) & (by_dtype["dtype"] != "unknown")]
        dtypes = ", ".join(sorted(str(x) for x in d["dtype"]))
    first: dict[str, Any] = next(iter(metadata.get("ranks", {}).values()), {})
    shapes = ""
    if len(top_ops):
        key = "device_ns" if top_ops["device_ns"].sum() > 0 else "total_ns"
        top = top_ops.loc[top_ops[key].idxmax()]
        shapes = f"{top['name']} {top['shapes']}" if top["shapes"] else str(top["name"])
    return {
        "hardware": ", ".join(names),
        "ranks": str(len(overview.ranks)),
        "world_size": str(overview.world_size or ""),
        "dtypes": dtypes,
        "software": _software(first),
        "shapes": shapes,
    }


def _software(meta: dict) -> str:
    """Versions Kineto records: CUDA/HIP runtime and driver, CUPTI, NCCL ('' when none)."""
    out = []
    for key, label in (
        ("cuda_runtime_version", "CUDA runtime"),
        ("cuda_driver_version", "CUDA driver"),
        ("hip_runtime_version", "HIP runtime"),
        ("roctracer_version", "roctracer"),
        ("cupti_version", "CUPTI"),
    ):
        v = meta.get(key)
        if isinstance(v, int) and key.startswith("cuda"):
            out.append(f"{label} {v // 1000}.{v % 1000 // 10}")  # 12090 -> 12.9 (CUDA's encoding)
        elif v is not None:
            out.append(f"{label} {v}")
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and info.get("nccl_version"):
        out.append(f"NCCL {info['nccl_version']}")
    return ", ".join(out)


def compare_setup(a: dict[str, str], b: dict[str, str]) -> SetupDiff:
    """The two setups (`setup`) side by side, and whether the comparison is like-for-like."""
    rows = pd.DataFrame(
        [{"field": f, "a": a.get(f, ""), "b": b.get(f, ""), "same": a.get(f, "") == b.get(f, "")} for f in SETUP_FIELDS]
    )
    reasons = tuple(
        f"{f.replace('_', ' ')} differs: {a.get(f) or '-'} vs {b.get(f) or '-'}"
        for f in NOT_LIKE_FOR_LIKE
        if a.get(f) and b.get(f) and a[f] != b[f]
    )  # unrecorded: not a difference
    return SetupDiff(rows, not reasons, reasons)
