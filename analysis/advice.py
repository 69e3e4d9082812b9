"""What to change first: advice ranked by the wall time it can remove, each with its evidence,
formula and assumption.

- fusion / attention: ops that feed each other, fused (analysis.advice_fusion has the edges and
  formulas): saving = min(intermediates / bandwidth, chain time - fused floor); unfused
  attention: chain time - fused-attention floor.
- runtime: runtime-bound units spend their time on dispatch: saving = sum(time - max(t_compute,
  t_memory, t_comm)), what would remain if the dispatch were free (fuse small ops, CUDA graphs,
  a larger batch).
- communication: exposed collectives (running with no other work), hidden behind other work:
  saving = min(exposed, busy - communication), where busy - communication is the device work
  not already overlapping a collective, the only work that can hide it.
- tiling: compute-bound units below half their floor's speed: saving = sum(time - floor)
  (tile sizes, layout, a better kernel).
- precision: fp32 GEMM/conv/attention: saving = sum(t_compute(fp32) - t_compute(bf16)), capped
  by each unit's time (run it in bf16 where accuracy allows).

**Never counted twice.** Advice is taken most saving first; each unit's measured time can be
removed once, so later advice on the same units keeps only what the earlier left
(fusion and tiling of one matmul, precision and tiling of one GEMM). On each device the savings
together are at most its busy time (advice here removes device work, never idle time: that is
analysis.idle_gaps). The same advice on several devices (ranks of one job run concurrently) is
one line whose saving is the largest device's, not their sum. All advice together is at most
the wall time (the longest device window).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from analysis.advice_fusion import Draft, fusion_drafts, unit_scopes
from analysis.grouping import key_codes
from analysis.intervals import union_length
from analysis.roofline import MATRIX_FAMILIES
from profiler.model.devices import device_kind
from profiler.model.hardware import HardwareSpec
from profiler.model.trace import Trace
from profiler.model.numfmt import fmt_ns

_SHOWN_UNITS = 20  # unit ids listed for the runtime and precision advice (they can touch thousands)


@dataclass(frozen=True)
class Advice:
    """One change and the wall time (ns) it can remove, with the numbers behind it.

    kind: fusion | attention | runtime | communication | tiling | precision; formula: how
    saving_ns is computed; assumption: what must hold for the saving to be real; count: identical
    occurrences merged into this line (layers x iterations); devices: 'rank<R>/<device>' it applies to.
    """

    kind: str
    title: str
    saving_ns: float
    evidence: str
    formula: str
    units: tuple[int, ...] = ()
    assumption: str = ""
    count: int = 1
    devices: tuple[str, ...] = ()


def advise(
    classified: pd.DataFrame,
    communication: pd.DataFrame,
    spec_for: Callable[[int, str], HardwareSpec | None],
    limit: int = 10,
    *,
    trace: Trace | None = None,
    equation: pd.DataFrame | None = None,
) -> list[Advice]:
    """Advice for `classified` units (analysis.roofline.classify), most saving first.

    `trace` gives each unit's host thread and enclosing regions (fusion stays inside one;
    optimizer steps are never fused); without it chains stay inside one ProfilerStep.
    `equation` (analysis.attribution.attribute) gives each device's busy and window time (the
    caps); without it they come from the units' extents."""
    if "carried_by" in classified:  # wrappers (analysis.nesting): their work is advised on the op doing it
        classified = classified[classified["carried_by"].to_numpy() < 0]
    scope = np.full(len(classified), -1, dtype=np.int64)
    optimizer = np.zeros(len(classified), dtype=bool)
    if trace is not None and len(classified):
        scope, optimizer = unit_scopes(trace.events, classified["unit_id"].to_numpy())
    busy, wall = _busy_and_wall(classified, equation)
    comm = {f"rank{r['rank']}/{r['device']}": r for r in communication.to_dict(orient="records")}
    per_device: dict[str, list[Draft]] = {}
    for (rank, device), idx in classified.groupby(["rank", "device"], sort=True).indices.items():
        where = f"rank{rank}/{device}"
        order = idx[np.argsort(classified["start_ns"].to_numpy()[idx], kind="stable")]
        u = classified.iloc[order]
        spec = spec_for(int(rank), str(device))
        drafts: list[Draft] = []
        if spec is not None:
            drafts += fusion_drafts(u, spec, scope[order], optimizer[order]) + _precision(u, spec)
        lever = "cpu-dispatch" if device_kind(str(device)) == "cpu" else (spec.kind if spec is not None else "")
        drafts += _runtime(u, lever) + _tiling(u)
        if where in comm:
            drafts += _communication(comm[where], busy.get(where, 0.0))
        per_device[where] = _deduplicate(drafts, u, busy.get(where, np.inf))
    merged = sorted(_merge_devices(per_device), key=lambda a: -a.saving_ns)
    return _cap_total(merged, wall)[:limit]


def _busy_and_wall(classified: pd.DataFrame, equation: pd.DataFrame | None) -> tuple[dict[str, float], float]:
    """Busy time per device and the wall time (the longest device window), ns."""
    if equation is not None and len(equation) and {"busy_ns", "window_ns"} <= set(equation.columns):
        busy = {f"rank{r}/{d}": float(b) for r, d, b in equation[["rank", "device", "busy_ns"]].itertuples(index=False)}
        return busy, float(equation["window_ns"].max())
    busy = {
        f"rank{r}/{d}": float(union_length(g["start_ns"].to_numpy(), g["end_ns"].to_numpy()))
        for (r, d), g in classified.groupby(["rank", "device"], sort=True)
    }
    wall = float(classified["end_ns"].max() - classified["start_ns"].min()) if len(classified) else 0.0
    return busy, wall


def _deduplicate(drafts: list[Draft], u: pd.DataFrame, device_busy: float) -> list[Draft]:
    """Most saving first, each unit's time removed once and the device's total at most its busy time."""
    left = dict(zip(u["unit_id"].tolist(), u["time_ns"].astype(float).tolist()))
    budget = device_busy
    out = []
    for d in sorted(drafts, key=lambda d: -d.saving_ns):
        saving = d.saving_ns
        if d.units:
            saving = 0.0
            for unit, share in zip(d.units, d.shares):
                take = min(share, left.get(unit, 0.0))
                left[unit] = left.get(unit, 0.0) - take
                saving += take
        saving = min(saving, budget)
        budget -= saving
        if saving <= 0:
            continue
        evidence = d.evidence
        if saving < d.saving_ns * 0.999:
            evidence += f" (alone {fmt_ns(d.saving_ns)}; less what advice above already removes from the same ops)"
        out.append(replace(d, saving_ns=saving, evidence=evidence))
    return out


def _merge_devices(per_device: dict[str, list[Draft]]) -> list[Advice]:
    """The same advice on several devices: one Advice, the largest device's saving (they run concurrently)."""
    by_key: dict[tuple[str, str], list[tuple[str, Draft]]] = {}
    for where, drafts in per_device.items():
        for d in drafts:
            by_key.setdefault((d.kind, d.title), []).append((where, d))
    out = []
    for (kind, title), same in by_key.items():
        where, top = max(same, key=lambda x: x[1].saving_ns)
        devices = tuple(w for w, _ in same)
        count = max(d.count for _, d in same)
        label = (
            f"{title}{f' (× {count})' if count > 1 else ''} on {where if len(same) == 1 else f'{len(same)} devices'}"
        )
        evidence = top.evidence if len(same) == 1 else f"on {len(same)} devices, the most on {where}: {top.evidence}"
        assumption = top.assumption + (
            ""
            if len(same) == 1
            else "; devices run concurrently, so the wall time saved is the largest device's, not their sum"
        )
        units = tuple(u for _, d in same for u in d.units)
        if kind in ("runtime", "precision"):
            units = units[:_SHOWN_UNITS]
        out.append(Advice(kind, label, top.saving_ns, evidence, top.formula, units, assumption, count, devices))
    return out


def _cap_total(advice: list[Advice], wall: float) -> list[Advice]:
    """All advice together at most the wall time: the last ones keep what remains."""
    out, left = [], wall
    for a in advice:
        saving = min(a.saving_ns, left)
        left -= saving
        if saving > 0:
            out.append(
                a
                if saving == a.saving_ns
                else replace(
                    a, saving_ns=saving, evidence=a.evidence + " (capped: all advice together is at most the wall time)"
                )
            )
    return out


def _communication(r: dict, busy: float) -> list[Draft]:
    exposed, comm = float(r["exposed_ns"]), float(r["comm_ns"])
    other = max(busy - comm, 0.0)  # device work not already overlapping a collective
    saving = min(exposed, other)
    if saving <= 0:
        return []
    return [
        Draft(
            "communication",
            "overlap communication with computation",
            saving,
            f"{fmt_ns(comm)} of collectives, {fmt_ns(exposed)} exposed; "
            f"{fmt_ns(other)} of other device work could hide them",
            "saving = min(exposed communication, busy - communication)",
            "the collectives can run while other work does (bucketed all-reduce during backward, "
            "prefetch, async collectives); only device work not already overlapping one can hide it",
            (),
            (),
        )
    ]


#: The lever against dispatch overhead, by the kind of device (HardwareSpec.kind; 'cpu-dispatch' for
#: a CPU's device track).
_DISPATCH_LEVER = {
    "npu": "cut dispatch overhead: fuse more ops per kernel (perf compile --plan) or a larger batch",
    "cpu": "cut dispatch overhead: fuse small ops (torch.compile) or a larger batch",
    # a CPU running a compiler runtime's dispatches ('cpu<N>', profiler.model.devices: IREE)
    "cpu-dispatch": "cut dispatch overhead: fewer, larger dispatches (more ops per dispatch region) or a larger batch",
}


def _runtime(u: pd.DataFrame, kind: str = "") -> list[Draft]:
    rt = u[u["bound"] == "runtime"]
    if rt.empty:
        return []
    work = rt[["t_compute_ns", "t_memory_ns", "t_comm_ns"]].fillna(0).max(axis=1)
    shares = (rt["time_ns"] - work).clip(lower=0).to_numpy(np.float64)
    return [
        Draft(
            "runtime",
            _DISPATCH_LEVER.get(kind, "cut dispatch overhead: fuse small ops, use CUDA graphs or a larger batch"),
            float(shares.sum()),
            f"{len(rt)} runtime-bound ops, {fmt_ns(rt['time_ns'].sum())}",
            "saving = sum(time - max(t_compute, t_memory, t_comm))",
            "the dispatch (launch, framework) part of each op's time goes away; the work itself stays",
            tuple(int(i) for i in rt["unit_id"]),
            tuple(shares.tolist()),
        )
    ]


def _tiling(u: pd.DataFrame) -> list[Draft]:
    slow = u[(u["bound"] == "compute") & (u["efficiency"] < 0.5)]
    if slow.empty:
        return []
    codes, first = key_codes(slow, ("name", "shapes"))
    gain = (slow["time_ns"] - slow["floor_ns"]).clip(lower=0).to_numpy(dtype=np.float64)
    calls = np.bincount(codes)
    efficiency = np.bincount(codes, weights=slow["efficiency"].to_numpy(dtype=np.float64)) / calls
    names, shapes = slow["name"].to_numpy(dtype=object)[first], slow["shapes"].to_numpy(dtype=object)[first]
    uid = slow["unit_id"].to_numpy()
    out = []
    for g in range(len(first)):
        mine = codes == g
        out.append(
            Draft(
                "tiling",
                f"speed up {names[g]} {shapes[g]} (tiles, layout, kernel choice)",
                float(gain[mine].sum()),
                f"{int(calls[g])} calls at {efficiency[g]:.0%} of the compute floor",
                "saving = sum(time - floor)",
                "an upper bound: the kernel reaching its compute floor (the matrix peak); tuned kernels "
                "reach 60-90% of it",
                tuple(int(i) for i in uid[mine]),
                tuple(gain[mine].tolist()),
                int(calls[g]),
            )
        )
    return out


def _precision(u: pd.DataFrame, spec: HardwareSpec) -> list[Draft]:
    fp32 = u[u["family"].isin(MATRIX_FAMILIES) & (u["dtype"] == "fp32") & u["flops_effective"].notna()]
    if fp32.empty:
        return []
    lower = fp32["flops_effective"] / spec.peak("bf16", "matrix") * 1e9
    shares = np.minimum(fp32["t_compute_ns"] - lower, fp32["time_ns"]).clip(lower=0).to_numpy(np.float64)
    return [
        Draft(
            "precision",
            "run fp32 GEMMs/convolutions/attention in bf16",
            float(shares.sum()),
            f"{len(fp32)} fp32 units, {fmt_ns(fp32['time_ns'].sum())}",
            "saving = sum(t_compute(fp32) - t_compute(bf16)), at most each unit's time",
            "accuracy allows bf16 (autocast); the matrix time scales with the bf16/fp32 peak ratio",
            tuple(int(i) for i in fp32["unit_id"]),
            tuple(shares.tolist()),
        )
    ]
