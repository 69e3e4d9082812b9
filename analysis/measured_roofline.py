"""The measured hierarchical roofline: each kernel launch placed by its measured FLOPs and bytes at
each memory level against a HardwareSpec's ceilings (Yang, Kurth, Williams, "Hierarchical Roofline
analysis for GPUs", 2020: one intensity per level, one roof per level).

Per launch with a duration (ns) and a spec:

    achieved      = FLOPs / duration                            (FLOP/s)
    peak          = spec.peak(precision, unit) of the launch's dominant FLOPs (most FLOPs by
                    matrix/vector unit and precision)
    compute_pct   = 100 * achieved / peak
    intensity_L   = FLOPs / bytes_L                             (FLOP/byte, per measured level L)
    roof_L        = min(peak, intensity_L * bandwidth_L)        (FLOP/s)
    <L>_pct       = 100 * bytes_L / duration / bandwidth_L      (bandwidth utilisation)
    bound         = the unit closest to its peak: 'compute' or the level with the highest %
                    (all from counters: said so in the output as 'measured'); 'latency' when no
                    unit reaches LATENCY_PCT of its peak (too little work in flight to load any
                    unit: launch overhead, tail effects, dependent instruction chains)

Measured levels map onto the spec's: dram -> its outermost level (HBM), l2 -> 'l2' (or a simulated
accelerator's 'shared', the on-chip level in its place), l1 -> 'l1' or
'smem' (NVIDIA's L1 and shared memory are one SRAM, whose bandwidth the presets give as smem's),
lds -> 'lds'. A level the spec lacks (AMD's vector L1) gets no roof (NaN).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.columns import columns
from analysis.counters import LEVELS
from profiler.model.hardware import HardwareSpec

ROOFLINE_COLUMNS = columns("measured_roofline")  # declared in analysis/columns.py
#: Below this % of every peak a launch is called latency-bound rather than bound by its busiest unit.
LATENCY_PCT = 20.0
_SPEC_LEVEL = {"dram": (0,), "l2": ("l2", "shared"), "l1": ("l1", "smem"), "lds": ("lds",)}


def spec_level(spec: HardwareSpec, level: str):  # -> MemoryLevel | None
    """The spec's memory level a measured level maps onto (module docstring); None when absent."""
    for want in _SPEC_LEVEL[level]:
        if want == 0:
            return spec.memory[0] if spec.memory else None
        for m in spec.memory:
            if m.name == want:
                return m
    return None


def measured_roofline(measured: pd.DataFrame, spec: HardwareSpec) -> pd.DataFrame:
    """One row per launch of analysis.counters.measured: ROOFLINE_COLUMNS (FLOP/s, FLOP/byte, %)."""
    rows = []
    units = [c for c in measured.columns if c.startswith(("flops_matrix_", "flops_vector_"))]
    for r in measured.itertuples(index=False):
        rd = r._asdict()
        dur = float(rd["duration_ns"])
        flops = float(rd["flops"]) if rd["flops"] == rd["flops"] else np.nan
        parts = {c: rd[c] for c in units if rd[c] == rd[c] and rd[c] > 0}
        top = max(parts, key=lambda c: parts[c]) if parts else ""
        unit, precision = (top.split("_")[1], top.split("_")[2]) if top else ("", "")
        peak = _peak(spec, precision, unit)
        seconds = dur * 1e-9 if dur == dur and dur > 0 else np.nan
        achieved = flops / seconds if seconds == seconds else np.nan
        row = {
            "launch": rd["launch"],
            "kernel": rd["kernel"],
            "duration_ns": dur,
            "precision": precision,
            "unit": unit,
            "flops": flops,
            "achieved_flops_per_s": achieved,
            "peak_flops_per_s": peak,
            "compute_pct": 100 * achieved / peak if peak == peak and peak > 0 else np.nan,
        }
        roofs = [peak] if peak == peak else []
        for lv in LEVELS:
            b = float(rd[f"bytes_{lv}"])
            level = spec_level(spec, lv)
            row[f"intensity_{lv}"] = flops / b if b == b and b > 0 and flops == flops else np.nan
            bw = level.bandwidth if level is not None else np.nan
            row[f"{lv}_pct"] = 100 * b / seconds / bw if b == b and seconds == seconds and bw == bw else np.nan
            if row[f"intensity_{lv}"] == row[f"intensity_{lv}"] and bw == bw:
                roofs.append(row[f"intensity_{lv}"] * bw)
        row["roof_flops_per_s"] = min(roofs) if roofs else np.nan
        pcts = {"compute": row["compute_pct"], **{lv: row[f"{lv}_pct"] for lv in LEVELS}}
        pcts = {k: v for k, v in pcts.items() if v == v}
        best = max(pcts, key=lambda u: pcts[u]) if pcts else ""
        if not best:
            row["bound"] = ""
        elif pcts[best] < LATENCY_PCT:
            row["bound"] = "latency"
        else:
            row["bound"] = "compute" if best == "compute" else f"memory ({best})"
        row["occupancy_pct"] = rd.get("occupancy_pct", np.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=ROOFLINE_COLUMNS)


def _peak(spec: HardwareSpec, precision: str, unit: str) -> float:
    """The spec's peak FLOP/s for `precision` on `unit`; NaN when it has none."""
    if not precision:
        return np.nan
    try:
        p = spec.peak(precision, unit)
    except (KeyError, ValueError):
        return np.nan
    return float(p) if p else np.nan
