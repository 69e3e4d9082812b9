"""MFU and MBU: the one definition the text report, the JSON and every dashboard table and chart use.

    MFU = effective FLOPs / time base / matrix peak of the dominant dtype
    MBU = compulsory memory bytes / time base / outermost memory bandwidth (HBM, DRAM)

over the device's known units (bound not unknown; effective FLOPs: causal masks applied), where

- time base, with ProfilerStep annotations on the rank: the wall-clock time of the profiled steps,
  the sum of the ProfilerStep#N annotations' durations, and the units counted are the work those
  steps launched (step >= 0). A step whose launched work runs past its annotation's end (async
  launches, no synchronisation) counts its work's window instead (`step_times`), so no MFU
  exceeds what the units achieved. MFU is a throughput figure (Chowdhery et al., "PaLM", 2022, App. B:
  observed throughput over peak): the host time and idle gaps inside a step are part of what a
  step costs, so they stay in the denominator; the device's own window per step would leave them
  out and overstate it (resnet50_legacy_v100: 42% over the steps' device windows, 28.6% over their
  wall time).
- time base without ProfilerStep annotations: the trace window of the device (first work start to
  last work end, analysis.attribution), and every known unit counts.

Dominant dtype: the dtype with the most effective FLOPs among the counted units (fp32 if none).
Per step, the same with that step's FLOPs over that step's wall time, against the device's one
peak, so the device figure is the steps' figures weighted by their wall times.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from profiler.model.hardware import HardwareSpec
from profiler.model.schema import Bound
from profiler.model.strings import matches

_STEP = r"^ProfilerStep#\d+$"
_NO_WALLS = pd.DataFrame({"rank": pd.Series([], dtype=np.int64), "step": [], "wall_ns": []})  # read only


def rank_step_walls(events: pd.DataFrame) -> pd.DataFrame:
    """Wall-clock time of each ProfilerStep per rank: the duration of its `ProfilerStep#N`
    annotation (the longest where threads repeat it; the legacy format records it as an op).
    Columns: rank, step, wall_ns (int64, ns). Empty when the trace has no ProfilerStep annotations."""
    # a record_function: an annotation, or a CPU op in legacy traces (resnet50_legacy_v100)
    marks = events[matches(events["name"], _STEP) & events["kind"].isin(["annotation", "op"]).to_numpy()]
    if marks.empty:
        return _NO_WALLS.copy()
    out = pd.DataFrame(
        {
            "rank": marks["rank"].to_numpy(dtype=np.int64),
            "step": np.array([int(str(n).removeprefix("ProfilerStep#")) for n in marks["name"].astype(object)], int),
            "wall_ns": marks["dur"].to_numpy(dtype=np.int64),
        }
    )
    return out.groupby(["rank", "step"], as_index=False)["wall_ns"].max()


def time_base_label(steps: int) -> str:
    """How a device's MFU was taken, for tables and charts: "6 steps' wall time", "1 step's wall
    time" or 'trace window'."""
    return ("1 step's wall time" if steps == 1 else f"{steps} steps' wall time") if steps else "trace window"


def device_mfu(
    classified: pd.DataFrame,
    equation: pd.DataFrame,
    walls: pd.DataFrame | None,
    spec_for: Callable[[int, str], HardwareSpec | None],
) -> pd.DataFrame:
    """MFU and MBU per device (module docstring). `classified`: analysis.roofline.classify;
    `equation`: analysis.attribution.attribute (window_ns per device); `walls`: rank_step_walls (None: no steps).

    Columns: rank, device, flops (effective FLOPs counted), bytes (memory bytes counted), time_ns
    (the time base, ns), steps (profiled steps in it; 0: the trace window), time_base (its label),
    compute_dtype (the dominant dtype), mfu, mbu (fractions; NaN without a spec or a time base)."""
    rows = []
    for r in equation.itertuples(index=False):
        counted, steps, time_ns = _counted(classified, walls, int(r.rank), str(r.device), int(r.window_ns))
        flops = float(np.nansum(counted["flops_effective"]))
        nbytes = float(np.nansum(counted["bytes"]))
        dtype = dominant_dtype(counted)
        spec = spec_for(int(r.rank), str(r.device))
        seconds = time_ns / 1e9 if time_ns > 0 else float("nan")
        rows.append(
            {
                "rank": int(r.rank),
                "device": str(r.device),
                "flops": flops,
                "bytes": nbytes,
                "time_ns": float(time_ns),
                "steps": steps,
                "time_base": time_base_label(steps),
                "compute_dtype": dtype,
                "mfu": flops / seconds / spec.peak(dtype, "matrix") if spec else float("nan"),
                "mbu": nbytes / seconds / spec.bandwidth() if spec else float("nan"),
            }
        )
    cols = ["rank", "device", "flops", "bytes", "time_ns", "steps", "time_base", "compute_dtype", "mfu", "mbu"]
    return pd.DataFrame(rows, columns=cols)


def step_mfu(
    classified: pd.DataFrame,
    by_step: pd.DataFrame,
    walls: pd.DataFrame | None,
    spec_for: Callable[[int, str], HardwareSpec | None],
) -> pd.DataFrame:
    """MFU and MBU per ProfilerStep and device: `by_step` (analysis.attribution.attribute with
    by_step: rank, device, step, window_ns, ...) plus wall_ns (the step's time base, `step_times`;
    NaN for step -1, work outside every step), flops, bytes (of the step's known units), mfu, mbu
    (over wall_ns, against the peak and dtype `device_mfu` uses for the device)."""
    out = by_step.copy()
    known = classified[classified["bound"] != Bound.UNKNOWN.value]
    sums = known.groupby(["rank", "device", "step"], observed=True)[["flops_effective", "bytes"]].sum(min_count=0)
    flops, nbytes, wall_ns, mfu, mbu = [], [], [], [], []
    per_device: dict[tuple[int, str], tuple[dict[int, int], float, float]] = {}
    for rank, device, step in zip(out["rank"].tolist(), out["device"].astype(str).tolist(), out["step"].tolist()):
        key = (int(rank), device)
        if key not in per_device:
            spec = spec_for(*key)
            counted, _, _ = _counted(classified, walls, *key, 0)
            dtype = dominant_dtype(counted)
            peak, bw = (spec.peak(dtype, "matrix"), spec.bandwidth()) if spec else (float("nan"), float("nan"))
            per_device[key] = (step_times(classified, walls, *key), peak, bw)
        times, peak, bw = per_device[key]
        f, b = sums.loc[(rank, device, step)].tolist() if (rank, device, step) in sums.index else (0.0, 0.0)
        w = times.get(int(step), 0)
        seconds = w / 1e9 if w > 0 else float("nan")
        flops.append(float(f))
        nbytes.append(float(b))
        wall_ns.append(float(w) if w > 0 else float("nan"))
        mfu.append(f / seconds / peak)
        mbu.append(b / seconds / bw)
    out["wall_ns"], out["flops"], out["bytes"], out["mfu"], out["mbu"] = wall_ns, flops, nbytes, mfu, mbu
    return out


def step_times(classified: pd.DataFrame, walls: pd.DataFrame | None, rank: int, device: str) -> dict[int, int]:
    """step -> its time base on (rank, device), ns: the ProfilerStep annotation's duration, or the
    window of the device work the step launched (its units' first start to last end) where that is
    longer: work launched asynchronously can run past the annotation's end, and the step is not
    done before its work is. So a step's MFU never exceeds what its units achieved."""
    mine = walls[walls["rank"] == rank] if walls is not None else _NO_WALLS
    u = classified[(classified["rank"] == rank) & (classified["device"] == device) & (classified["step"] >= 0)]
    g = u.groupby("step")
    window = (g["end_ns"].max() - g["start_ns"].min()).to_dict() if len(u) else {}
    return {int(s): max(int(w), int(window.get(s, 0))) for s, w in zip(mine["step"], mine["wall_ns"])}


def dominant_dtype(units: pd.DataFrame) -> str:
    """The dtype with the most effective FLOPs among `units` (MFU's peak is that dtype's); fp32 if none."""
    by_dtype = units.groupby(units["dtype"].fillna("fp32"))["flops_effective"].sum()
    return str(by_dtype.idxmax()) if len(by_dtype) and by_dtype.max() > 0 else "fp32"


def _counted(
    classified: pd.DataFrame, walls: pd.DataFrame | None, rank: int, device: str, window_ns: int
) -> tuple[pd.DataFrame, int, int]:
    """(the device's known units that count, number of profiled steps, time base in ns): the work
    the rank's ProfilerSteps launched over the sum of their `step_times`, else every known unit
    over `window_ns`."""
    u = classified[(classified["rank"] == rank) & (classified["device"] == device)]
    known = u[u["bound"] != Bound.UNKNOWN.value]
    times = step_times(classified, walls, rank, device)
    if times and (known["step"] >= 0).any():
        return known[known["step"].isin(set(times))], len(times), sum(times.values())
    return known, 0, window_ns
