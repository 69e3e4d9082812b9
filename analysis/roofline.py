"""Floors, bound and efficiency of each unit of work (docs/architecture.md, "How time is classified").

For a unit with `flops` (effective: causal masks applied) and `bytes` from the cost model, on a
device whose ceilings are a HardwareSpec:

    t_compute = flops / peak(dtype, unit)        unit: matrix for gemm, conv, attention;
                                                 vector for everything else
    t_memory  = max over memory levels of bytes_level / bandwidth_level   (analysis.memory_levels:
                 compulsory bytes at every level; GEMMs add the I/O lower bound of the inner levels)
                and, for a unit that copies between host and device memory (HtoD, DtoH),
                host_copy_bytes / host_link.bandwidth: such a copy crosses PCIe or NVLink-C2C,
                never only HBM (memory_level names the host link when it binds; device-to-device
                copies stay on HBM; a spec without a host link keeps the HBM floor)
    t_comm    = latency + steps * hop latency + algorithm bytes / bandwidth (analysis.cost.comm; first link)
    t_runtime = spec.min_op_time                 one op's minimum time on that device

bound = the largest floor (ties: compute, memory, communication, runtime, in that order);
unknown when the cost cannot be derived. efficiency = floor / measured time (the roofline's
"fraction of the limit reached": Williams et al. 2009; XProf's "bound by").

Nested ops (aten::linear over aten::addmm) count each FLOP and byte once: the cost goes to the
innermost costed op and the wrapper is shown with that op's bound (analysis.nesting).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.ceiling import flag
from analysis.grouping import key_codes
from analysis.memory_levels import memory_floor
from analysis.mfu import device_mfu, step_mfu
from analysis.nesting import carry_costs, inherit_bounds
from profiler.model.hardware import HardwareSpec
from profiler.model.schema import Bound

MATRIX_FAMILIES = frozenset({"gemm", "conv", "attention"})
FLOOR_COLUMNS = ["t_compute_ns", "t_memory_ns", "t_comm_ns", "t_runtime_ns"]
_FLOOR_BOUND = [Bound.COMPUTE.value, Bound.MEMORY.value, Bound.COMMUNICATION.value, Bound.RUNTIME.value]


def classify(
    units: pd.DataFrame, costs: pd.DataFrame, spec_for: Callable[[int, str], HardwareSpec | None]
) -> pd.DataFrame:
    """`units` (analysis.units.units) joined with `costs` (analysis.cost.cost_table, same rows).

    Adds: family, dtype, flops, flops_effective, bytes_read, bytes_written, bytes (float, NaN
    when unknown),
    intensity (flops_effective / bytes, FLOP/byte), t_compute_ns, t_memory_ns, t_comm_ns,
    t_runtime_ns, floor_ns (float ns), memory_level (the level whose bytes / bandwidth is
    t_memory; analysis.memory_levels.level_bytes gives every level's), bound (a profiler.model.schema.Bound value),
    efficiency (floor_ns / time_ns; NaN when unknown or time 0), hardware (spec name or ''),
    carried_by, parent_unit, carried_by_name, nest_floor_ns (analysis.nesting), above_ceiling and
    ceiling_note (analysis.ceiling: efficiency > 1.1 and its likely cause).
    """
    out = units.reset_index(drop=True).copy()
    c = costs.reset_index(drop=True)
    out["family"] = pd.Series(c["family"].to_numpy(dtype=object), dtype=object, index=out.index)
    out["dtype"] = pd.Series(c["dtype"].to_numpy(dtype=object), dtype=object, index=out.index)
    out["flops"] = c["flops"].to_numpy(dtype=np.float64)
    out["flops_effective"] = c["flops_effective"].to_numpy(dtype=np.float64)
    out["bytes_read"] = c["bytes_read"].to_numpy(dtype=np.float64)
    out["bytes_written"] = c["bytes_written"].to_numpy(dtype=np.float64)
    out["bytes"] = out["bytes_read"] + out["bytes_written"]
    out["algo_bytes"] = c["algo_bytes"].to_numpy(dtype=np.float64) if "algo_bytes" in c else np.nan
    out["algo_steps"] = c["algo_steps"].to_numpy(dtype=np.float64) if "algo_steps" in c else np.nan
    for col in ("carried_by", "parent_unit"):  # analysis.nesting: wrappers and the unit doing their work
        out[col] = c[col].to_numpy(dtype=np.int64) if col in c else np.full(len(out), -1, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["intensity"] = out["flops_effective"] / out["bytes"]
    floors = np.full((len(out), 4), np.nan)
    names = np.full(len(out), "", dtype=object)
    level = np.full(len(out), "", dtype=object)
    for (rank, device), idx in out.groupby(["rank", "device"], sort=False).indices.items():
        spec = spec_for(int(rank), str(device))
        if spec is None:
            continue
        names[idx] = spec.name
        floors[idx], level[idx] = _floors(out.iloc[idx], spec)
    for i, col in enumerate(FLOOR_COLUMNS):
        out[col] = floors[:, i]
    out["hardware"] = pd.Series(names, dtype=object, index=out.index)
    out["memory_level"] = pd.Series(level, dtype=object, index=out.index)
    known = ~np.isnan(out["flops_effective"].to_numpy()) & ~np.isnan(floors).any(axis=1)
    filled = np.where(np.isnan(floors), -1.0, floors)
    out["floor_ns"] = np.where(known, filled.max(axis=1), np.nan)
    # a collective whose message the record lacks (a DeepEP or custom all-reduce kernel) still
    # waits on its link: communication-bound, with no floor and no efficiency
    unsized_comm = ~known & (out["family"] == "collective").to_numpy()
    out["bound"] = pd.Series(
        np.where(
            known,
            np.array(_FLOOR_BOUND, dtype=object)[filled.argmax(axis=1)],
            np.where(unsized_comm, Bound.COMMUNICATION.value, Bound.UNKNOWN.value),
        ),
        dtype=object,
        index=out.index,
    )
    time_ns = out["time_ns"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["efficiency"] = np.where(known & (time_ns > 0), out["floor_ns"] / time_ns, np.nan)
    return flag(inherit_bounds(out))


def _floors(u: pd.DataFrame, spec: HardwareSpec) -> tuple[np.ndarray, np.ndarray]:
    """([t_compute, t_memory, t_comm, t_runtime] in ns, binding memory level) for the units of
    one device (bytes per level: analysis.memory_levels.level_bytes)."""
    unit = np.where(u["family"].isin(MATRIX_FAMILIES).to_numpy(), "matrix", "vector")
    dtypes = u["dtype"].fillna("fp32").to_numpy(dtype=object)
    codes, distinct = pd.factorize(pd.Series(dtypes, dtype=object).fillna("fp32").to_numpy(dtype=object))
    matrix = unit == "matrix"
    peak_m = np.array([spec.peak(str(d) or "fp32", "matrix") for d in distinct])
    peak_v = np.array([spec.peak(str(d) or "fp32", "vector") for d in distinct])
    peaks = np.where(matrix, peak_m[codes], peak_v[codes]) if len(u) else np.zeros(0)
    t_compute = u["flops_effective"].to_numpy() / peaks * 1e9
    t_memory, level, _ = memory_floor(u, spec)
    t_memory, level = _host_link_floor(u, spec, t_memory, level)
    algo = u["algo_bytes"].to_numpy(dtype=np.float64) if "algo_bytes" in u else np.full(len(u), np.nan)
    link = spec.links[0] if spec.links else None
    has = ~np.isnan(algo)
    t_comm = np.zeros(len(u))
    if link is not None:
        steps = np.nan_to_num(u["algo_steps"].to_numpy(dtype=np.float64)) if "algo_steps" in u else np.zeros(len(u))
        t_comm[has] = (link.latency + steps[has] * link.hop_latency + algo[has] / link.bandwidth) * 1e9
    elif has.any():  # a collective on hardware with no link figure: its comm floor is unknown
        t_comm[has] = np.nan
    t_runtime = np.full(len(u), spec.min_op_time * 1e9)
    return np.stack([t_compute, t_memory, t_comm, t_runtime], axis=1), level


def _host_link_floor(
    u: pd.DataFrame, spec: HardwareSpec, t_memory: np.ndarray, level: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """t_memory raised to the host-link time of the units' host-device copies (module docstring).
    The bytes are the copies' recorded sizes (NaN: a copy recorded none), else the bytes the
    unit writes (the destination)."""
    if spec.host_link is None or "host_copy_bytes" not in u:
        return t_memory, level
    recorded = u["host_copy_bytes"].to_numpy(dtype=np.float64)
    copied = np.where(np.isnan(recorded), u["bytes_written"].to_numpy(dtype=np.float64), recorded)
    t_host = copied / spec.host_link.bandwidth * 1e9
    take = (np.isnan(recorded) | (recorded > 0)) & ~np.isnan(t_host) & ~(t_memory > t_host)
    return np.where(take, t_host, t_memory), np.where(take, spec.host_link.name, level)


def by(classified: pd.DataFrame, key: str) -> pd.DataFrame:
    """Measured time per value of `key` ('bound', 'family', 'dtype'), most first.

    Columns: <key>, units (count), time_ns (sum of the units' time), share (of the total).
    Unit times overlap when units run concurrently; the wall equation (analysis.attribution)
    is the exact split.
    """
    codes, values = pd.factorize(classified[key].fillna("unknown").to_numpy(dtype=object))
    time_ns = np.bincount(codes, weights=classified["time_ns"].to_numpy(dtype=np.float64), minlength=len(values))
    total = time_ns.sum()
    g = pd.DataFrame(
        {
            key: values,
            "units": np.bincount(codes, minlength=len(values)),
            "time_ns": time_ns.astype(np.int64),
            "share": time_ns / total if total else 0.0,
        }
    )
    return g.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)


def drop_carried_costs(events: pd.DataFrame, units: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """Each FLOP and byte counted once across nested ops: a wrapper's cost goes to the innermost
    costed op doing its work (analysis.nesting.carry_costs; adds columns carried_by and
    parent_unit). `costs` rows align with `units`; returns a copy."""
    return carry_costs(events, units, costs)


def groups(classified: pd.DataFrame, keys: tuple[str, ...] = ("name", "shapes")) -> pd.DataFrame:
    """Classified units grouped (by name and shapes by default), for the op table.

    Columns: the keys, family, dtype, memory_level (of the first unit), flops, flops_effective, bytes (sums;
    NaN when any unit's cost is unknown), intensity (FLOP/byte), t_compute_ns .. t_runtime_ns,
    floor_ns, time_ns (sums, ns), bound (the largest summed floor; unknown if any unit's is),
    efficiency (floor_ns / time_ns). Wrapper groups (analysis.nesting) take their implementation's
    bound (carried_by_name names it) and, on a CPU, nest floor over inclusive duration.
    """
    c = classified
    nums = ["flops", "flops_effective", "bytes", *FLOOR_COLUMNS, "floor_ns"]
    codes, first_rows = key_codes(c, keys)
    n = len(first_rows)
    g = pd.DataFrame({k: c[k].to_numpy(dtype=object)[first_rows] for k in keys})
    g["time_ns"] = np.bincount(codes, weights=c["time_ns"].to_numpy(dtype=np.float64), minlength=n).astype(np.int64)
    for col in nums:  # a sum over units with any unknown cost is unknown (NaN), not a partial figure
        v = c[col].to_numpy(dtype=np.float64)
        nan = np.isnan(v)
        total = np.bincount(codes, weights=np.where(nan, 0.0, v), minlength=n)
        g[col] = np.where(np.bincount(codes, weights=nan.astype(np.float64), minlength=n) > 0, np.nan, total)
    first = np.full(n, -1)
    first[codes[::-1]] = np.arange(len(codes))[::-1]  # first row of each group
    g["family"] = c["family"].to_numpy(dtype=object)[first]
    g["dtype"] = c["dtype"].to_numpy(dtype=object)[first]
    if "memory_level" in c:
        g["memory_level"] = c["memory_level"].to_numpy(dtype=object)[first]
    g["unknown"] = (
        np.bincount(
            codes, weights=(c["bound"].to_numpy(dtype=object) == Bound.UNKNOWN.value).astype(np.float64), minlength=n
        )
        > 0
    )
    floors = g[FLOOR_COLUMNS].to_numpy()
    bound = np.array(_FLOOR_BOUND, dtype=object)[np.nan_to_num(floors, nan=-1).argmax(axis=1)]
    no_floor = np.isnan(floors).all(axis=1)
    bound = np.where(
        no_floor & (g["family"] == "collective").to_numpy(), Bound.COMMUNICATION.value, bound
    )  # unsized collectives
    g["bound"] = np.where(g.pop("unknown").to_numpy(dtype=bool), Bound.UNKNOWN.value, bound)
    unknown = g["bound"] == Bound.UNKNOWN.value
    with np.errstate(divide="ignore", invalid="ignore"):
        g["intensity"] = g["flops_effective"] / g["bytes"]
        g["efficiency"] = np.where(~unknown & (g["time_ns"] > 0), g["floor_ns"] / g["time_ns"], np.nan)
    g.loc[unknown, "floor_ns"] = np.nan
    if "carried_by" in c:  # wrappers (analysis.nesting): their implementation's bound and efficiency
        wrapper = c["carried_by"].to_numpy()[first] >= 0
        if wrapper.any():
            g.loc[wrapper, "bound"] = c["bound"].to_numpy(dtype=object)[first][wrapper]
            g["carried_by_name"] = np.where(wrapper, c["carried_by_name"].to_numpy(dtype=object)[first], "")
            cpu = wrapper & (c["device"].to_numpy(dtype=object)[first] == "cpu")
            nest = np.bincount(codes, weights=np.nan_to_num(c["nest_floor_ns"].to_numpy(dtype=np.float64)), minlength=n)
            span = np.bincount(codes, weights=(c["end_ns"] - c["start_ns"]).to_numpy(dtype=np.float64), minlength=n)
            with np.errstate(divide="ignore", invalid="ignore"):
                g.loc[cpu, "efficiency"] = np.where(span > 0, nest / span, np.nan)[cpu]
    return flag(g)


def utilization(
    classified: pd.DataFrame,
    equation: pd.DataFrame,
    spec_for: Callable[[int, str], HardwareSpec | None],
    walls: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Achieved over peak per resource and device (the XProf / Nsight Compute view), and the
    time the device's units would take at their floors (the what-if lower bound).

    MFU and MBU are analysis.mfu.device_mfu's, the one definition every output shows: over the
    profiled steps' wall time where `walls` (analysis.mfu.rank_step_walls) has ProfilerSteps, else
    over the device's window. Columns: rank, device, flops and bytes (effective FLOPs and memory
    bytes of the known units counted), time_ns, steps and time_base (the time base, the profiled
    steps in it, 0 for the trace window, and its label),
    comm_bytes (algorithm bytes of collectives), flops_per_s and bytes_per_s (over the time base),
    compute_util (MFU: flops_per_s / matrix peak of compute_dtype, the dtype with the most FLOPs),
    memory_util (MBU: bytes_per_s / outermost bandwidth), floor_ns (sum of the known units' floors
    over the whole trace: their time if each ran at its floor, one after another), unknown_ns
    (measured time of units without a floor, which the lower bound cannot shorten).
    """
    mfu = device_mfu(classified, equation, walls, spec_for)
    rows = []
    for r in mfu.itertuples(index=False):
        u = classified[(classified["rank"] == r.rank) & (classified["device"] == r.device)]
        known = u[u["bound"] != Bound.UNKNOWN.value]
        seconds = r.time_ns / 1e9 if r.time_ns > 0 else float("nan")
        rows.append(
            {
                "rank": int(r.rank),
                "device": str(r.device),
                "flops": r.flops,
                "bytes": r.bytes,
                "time_ns": r.time_ns,
                "steps": int(r.steps),
                "time_base": r.time_base,
                "comm_bytes": float(np.nansum(known["algo_bytes"])) if "algo_bytes" in known else 0.0,
                "flops_per_s": r.flops / seconds,
                "bytes_per_s": r.bytes / seconds,
                "compute_util": r.mfu,
                "compute_dtype": r.compute_dtype,
                "memory_util": r.mbu,
                "floor_ns": float(np.nansum(known["floor_ns"])),
                "unknown_ns": float(u.loc[u["bound"] == Bound.UNKNOWN.value, "time_ns"].sum()),
            }
        )
    return pd.DataFrame(rows)


def iterations(
    classified: pd.DataFrame,
    by_step: pd.DataFrame,
    spec_for: Callable[[int, str], HardwareSpec | None],
    walls: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per ProfilerStep iteration and device: the wall equation of its work (analysis.attribution
    with by_step; window_ns: the step's device work, first start to last end) plus the step's
    wall time and its MFU and MBU (analysis.mfu.step_mfu: the step's effective FLOPs and memory
    bytes over the ProfilerStep annotation's duration, `walls` from analysis.mfu.rank_step_walls).
    Columns: those of `by_step`, wall_ns, flops, bytes, mfu, mbu.
    """
    if by_step.empty:
        return by_step.assign(wall_ns=[], flops=[], bytes=[], mfu=[], mbu=[])
    return step_mfu(classified, by_step, walls, spec_for)
