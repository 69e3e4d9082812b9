"""What-if on other hardware or precision: each unit's time projected from its measured time.

A what-if has no measured time on the target, so it has no efficiency there. Each unit's time
scales by the ratio of its floors on the two machines for the bound it had where it was measured:

    compute bound:        projected = time * t_compute(target) / t_compute(source)   (peak ratio)
    memory bound:         projected = time * t_memory(target)  / t_memory(source)    (bandwidth ratio)
    communication bound:  projected = time * t_comm(target)    / t_comm(source)      (link ratio)
    runtime, unknown:     projected = time                                           (dispatch and host time stay)

Projected device time = measured window - sum over the device's units of (time - projected):
idle and host time stay, and units are taken to run one after another (overlapping units make
this an estimate, said in `method`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

_RATIO = {"compute": "t_compute_ns", "memory": "t_memory_ns", "communication": "t_comm_ns"}
_METHOD = {"compute": "x peak ratio", "memory": "x bandwidth ratio", "communication": "x link ratio"}


def project(source: pd.DataFrame, target: pd.DataFrame) -> pd.DataFrame:
    """`target` (classified on the target spec; rows aligned with `source`, classified where the
    trace was measured) with columns projected_ns (float ns) and projection (the method), and
    efficiency NaN (no time was measured on the target)."""
    out = target.copy()
    time_ns = source["time_ns"].to_numpy(dtype=np.float64)
    bound = source["bound"].to_numpy(dtype=object)
    projected = time_ns.copy()
    method = np.full(len(out), "as measured (runtime/unknown: stays)", dtype=object)
    for b, col in _RATIO.items():
        rows = bound == b
        src, dst = source[col].to_numpy(dtype=np.float64)[rows], out[col].to_numpy(dtype=np.float64)[rows]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where((src > 0) & np.isfinite(dst), dst / src, 1.0)
        projected[rows] = time_ns[rows] * ratio
        method[rows] = _METHOD[b]
    out["projected_ns"] = projected
    out["projection"] = pd.Series(method, dtype=object, index=out.index)
    out["efficiency"] = np.nan
    out["above_ceiling"] = False
    out["ceiling_note"] = ""
    return out


def step_projection(
    projected: pd.DataFrame, equation: pd.DataFrame, source_names: dict, target_names: dict
) -> pd.DataFrame:
    """Per device: measured window and projected window (ns) with the method.

    Columns: rank, device, source (spec name), target (spec name), window_ns, projected_ns,
    saved_ns (sum of time - projected over the device's units), method."""
    rows = []
    for r in equation.itertuples(index=False):
        u = projected[(projected["rank"] == r.rank) & (projected["device"] == r.device)]
        saved = float((u["time_ns"] - u["projected_ns"]).sum())
        label = f"rank{r.rank}/{r.device}"
        rows.append(
            {
                "rank": int(r.rank),
                "device": str(r.device),
                "source": source_names.get(label, ""),
                "target": target_names.get(label, ""),
                "window_ns": float(r.window_ns),
                "projected_ns": float(r.window_ns) - saved,
                "saved_ns": saved,
                "method": "window - sum(unit time - projected); each unit scaled by its bound's floor ratio "
                "(compute: peak, memory: bandwidth, comm: link), runtime, unknown and idle time kept",
            }
        )
    return pd.DataFrame(rows)


def scale_bytes(costs: pd.DataFrame, rows: np.ndarray, to_dtype: str, element_bytes: dict[str, int]) -> pd.DataFrame:
    """Precision what-if: the bytes of the units in `rows` whose dtype changes to `to_dtype`,
    scaled by the element size ratio (every tensor of a GEMM/conv/attention is taken to change:
    bytes * size(to) / size(from)); FLOPs stay. Returns a copy."""
    out = costs.copy()
    old = out["dtype"].to_numpy(dtype=object)
    ratio = np.array(
        [element_bytes.get(to_dtype, np.nan) / element_bytes.get(str(d), np.nan) for d in old], dtype=np.float64
    )
    take = rows & np.isfinite(ratio)
    for col in ("bytes_read", "bytes_written"):
        v = out[col].to_numpy(dtype=np.float64).copy()
        v[take] = v[take] * ratio[take]
        out[col] = v
    return out
