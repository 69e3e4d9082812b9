"""Predicted against measured fusion: compiled kernels joined to their profiles, and floored.

Inputs are plain data the compiler collector wrote (collectors/torch_compile: the fusion map,
one row per kernel, and the Dynamo graphs' call nodes) and Traces; costs and floors are the
cost model's and the roofline's (analysis.cost, analysis.roofline.classify), so a compiled
convolution or attention kernel is floored at the matrix peak by its real FLOPs and bytes, like
the same op run eager.

Eager: every torch-level call in the model's forward is one top-level ATen op on the host
thread (an op with no op above it; `aten::linear` holds its `aten::addmm`), in program order,
and one call node of the Dynamo graph, in the same order. Walking both in order, a node takes
the next eager op whose name is 'aten::<base>' (or the in-place 'aten::<base>_'), looking at
most `WINDOW` ops ahead; nodes that run no ATen op (a tuple's getitem) match nothing. An op's
time is its inclusive duration on a CPU-only trace, else the summed duration of the device work
it (or an op under it) launched.

Compiled: a C++ kernel runs as the range 'graph_<g>_<kernel>' (enable_kernel_profile), a Triton
kernel as a device kernel of its name, an extern kernel as its ATen op inside a compiled region
('## Call CompiledFxGraph ...' / 'CompiledFunction'); times as above, summed over all calls.

Per kernel: before = the eager time of the ops it replaced (a Dynamo node split over k kernels
gives each its share: nodes in the kernel / nodes in all kernels; marked estimate), after = the
kernel's own time in the compiled run; floors, bound and efficiency per call (`kernel_floors`).
"""

from __future__ import annotations

from collections import defaultdict
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.cost.kernels import kernel_family, with_flops
from analysis.roofline import classify
from profiler.model.hardware import HardwareSpec
from profiler.model.schema import DEVICE_WORK_KINDS, Kind
from profiler.model.trace import Trace

WINDOW = 64
_REGION = ("## Call CompiledFxGraph", "CompiledFunction", "Torch-Compiled Region")


def _ancestors(ev: pd.DataFrame) -> tuple[dict[int, int], dict[int, str], dict[int, str]]:
    ids = ev["id"].to_numpy().tolist()
    return (
        dict(zip(ids, ev["parent_id"].to_numpy().tolist())),
        dict(zip(ids, ev["kind"].astype(str).tolist())),
        dict(zip(ids, ev["name"].astype(str).tolist())),
    )


def _top_op(i: int, parent: dict[int, int], kind: dict[int, str]) -> int:
    """The outermost op above (or at) event i; -1 when i is under no op."""
    top, cur = (i if kind.get(i) == Kind.OP.value else -1), parent.get(i, -1)
    while cur >= 0:
        if kind.get(cur) == Kind.OP.value:
            top = cur
        cur = parent.get(cur, -1)
    return top


def _op_times(trace: Trace, ops: list[int]) -> dict[int, float]:
    """ns of work of each op in `ops`: inclusive duration (CPU-only), else its device work's."""
    ev = trace.events
    work = ev[ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS])]
    dur = dict(zip(ev["id"].to_numpy().tolist(), ev["dur"].to_numpy().tolist()))
    if work.empty:
        return {i: float(dur[i]) for i in ops}
    parent, _, _ = _ancestors(ev)
    wanted, out = set(ops), defaultdict[int, float](float)
    for op_id, d in zip(work["op_id"].to_numpy().tolist(), work["dur"].to_numpy().tolist()):
        cur = op_id
        while cur >= 0 and cur not in wanted:
            cur = parent.get(cur, -1)
        if cur >= 0:
            out[cur] += d
    return {i: float(out.get(i, 0.0)) for i in ops}


#: (compile_id, [(Dynamo node, op base name)]) per compiled frame, in order
#: (collectors.torch_compile.graph_text.dynamo_graphs).
DynamoGraphs = Sequence[tuple[str, Sequence[tuple[str, str]]]]


def eager_matches(
    graphs: DynamoGraphs, eager: Trace
) -> tuple[dict[tuple[str, str], tuple[str, float, list[int]]], tuple[str, ...]]:
    """(compile_id, Dynamo node) -> (eager op name, total ns over all steps, event ids), and the
    Dynamo nodes that matched no eager op in any step ('compile_id:node (base)')."""
    ev = eager.events
    parent, kind, name = _ancestors(ev)
    host_ops = ev[(ev["kind"] == Kind.OP.value) & (ev["device"] == "cpu") & (ev["step"] >= 0)]
    tops = [i for i in host_ops.sort_values("ts", kind="stable")["id"].tolist() if _top_op(i, parent, kind) == i]
    step_of = dict(zip(host_ops["id"].tolist(), host_ops["step"].tolist()))
    times = _op_times(eager, tops)
    by_step: dict[int, list[int]] = defaultdict(list)
    for i in tops:
        by_step[step_of[i]].append(i)
    nodes = [(cid, n, base) for cid, ns in graphs for n, base in ns]
    out: dict[tuple[str, str], tuple[str, float, list[int]]] = {}
    seen: set[tuple[str, str]] = set()
    for seq in by_step.values():
        pos = 0
        for cid, n, base in nodes:
            want = {f"aten::{base}", f"aten::{base}_", f"aten::{base.removeprefix('i')}_"}
            for j in range(pos, min(pos + WINDOW, len(seq))):
                if name[seq[j]] in want:
                    old = out.get((cid, n), (name[seq[j]], 0.0, []))
                    out[(cid, n)] = (old[0], old[1] + times[seq[j]], old[2] + [seq[j]])
                    seen.add((cid, n))
                    pos = j + 1
                    break
    unmatched = tuple(f"{cid}:{n} ({base})" for cid, n, base in nodes if (cid, n) not in seen and base != "getitem")
    return out, unmatched


def kernel_times(compiled: Trace, fusion: pd.DataFrame) -> dict[str, tuple[float, int]]:
    """runtime_name -> (total ns over the profile, calls) for the kernels of `fusion`."""
    ev = compiled.events
    parent, _, name = _ancestors(ev)
    names = set(fusion["runtime_name"])
    extern = set(fusion.loc[fusion["kind"] == "extern", "runtime_name"])
    hits = ev[ev["name"].astype(str).isin(names)]
    work_kinds = {k.value for k in DEVICE_WORK_KINDS}
    has_device = bool(ev["kind"].isin(list(work_kinds)).any())
    host: list[int] = []
    device_total: dict[str, list[float]] = defaultdict(list)
    for i, nm, k, d in zip(
        hits["id"].tolist(), hits["name"].astype(str).tolist(), hits["kind"].astype(str).tolist(), hits["dur"].tolist()
    ):
        if k in work_kinds:  # a Triton kernel: the device event itself
            device_total[nm].append(float(d))
        elif nm not in extern or _in_region(i, parent, name):
            host.append(i)
    dur = dict(zip(hits["id"].tolist(), hits["dur"].tolist()))
    t = _op_times(compiled, host) if has_device else {i: float(dur[i]) for i in host}
    out: dict[str, tuple[float, int]] = {nm: (float(np.sum(v)), len(v)) for nm, v in device_total.items()}
    for i in host:
        nm = name[i]
        tot, calls = out.get(nm, (0.0, 0))
        out[nm] = (tot + t[i], calls + 1)
    return out


def _in_region(i: int, parent: dict[int, int], name: dict[int, str]) -> bool:
    cur = parent.get(i, -1)
    while cur >= 0:
        if name.get(cur, "").startswith(_REGION):
            return True
        cur = parent.get(cur, -1)
    return False


FUSION_TIME_COLUMNS = [
    "device",
    "calls",
    "runs",
    "time_ns",
    "per_run_ns",
    "t_compute_ns",
    "t_memory_ns",
    "t_runtime_ns",
    "bound",
    "efficiency",
]
KERNEL_FLOOR_COLUMNS = ["t_compute_ns", "t_memory_ns", "t_runtime_ns", "floor_ns", "bound", "efficiency"]
SpecFor = Callable[[int, str], HardwareSpec | None]


def kernel_floors(kernels: pd.DataFrame, spec_for: SpecFor) -> pd.DataFrame:
    """Floors of one call of each compiled kernel: analysis.roofline.classify on its cost.

    `kernels` columns: device, flops, bytes_read, bytes_written (one call's, FLOP and byte),
    dtype, family (the cost model's: `analysis.cost.kernels.kernel_family`, so a convolution or
    attention kernel takes the matrix peak), time_ns (one call's measured time; NaN if it did
    not run). Returns, with the index of `kernels`: t_compute_ns, t_memory_ns, t_runtime_ns,
    floor_ns (ns, one call), bound ('compute', 'memory', 'runtime'; 'unknown' without a cost or
    a spec), efficiency (floor_ns / time_ns). `spec_for(rank, device)` is asked with rank 0.
    """
    units = pd.DataFrame(
        {
            "rank": 0,
            "device": kernels["device"].astype(str).to_numpy(),
            "time_ns": pd.to_numeric(kernels["time_ns"], errors="coerce").to_numpy(dtype=np.float64),
        }
    )
    flops = pd.to_numeric(kernels["flops"], errors="coerce").to_numpy(dtype=np.float64)
    costs = pd.DataFrame(
        {
            "flops": flops,
            "flops_effective": flops,
            "bytes_read": pd.to_numeric(kernels["bytes_read"], errors="coerce").to_numpy(dtype=np.float64),
            "bytes_written": pd.to_numeric(kernels["bytes_written"], errors="coerce").to_numpy(dtype=np.float64),
            "family": kernels["family"].astype(object).to_numpy(),
            "dtype": kernels["dtype"].astype(object).to_numpy(),
        }
    )
    c = classify(units, costs, spec_for)
    out = c[KERNEL_FLOOR_COLUMNS].copy()
    out.index = kernels.index
    return out


def _kernel_family(rows: pd.DataFrame) -> pd.Series:
    return pd.Series(
        [
            kernel_family(str(f), str(k), ops)
            for f, k, ops in zip(
                rows["family"],
                rows["kernel"] if "kernel" in rows else rows["runtime_name"],
                rows["aten_ops"] if "aten_ops" in rows else [()] * len(rows),
            )
        ],
        index=rows.index,
        dtype=object,
    )


def fusion_times(fusion: pd.DataFrame, trace: Trace, spec_for: SpecFor) -> pd.DataFrame:
    """`fusion` (collectors.torch_compile.fusion_map, its FLOPs counted from `work`:
    analysis.cost.kernels.with_flops) plus, per kernel row, its runtime in `trace` and its bound
    (`kernel_floors` on the device's spec).

    A row's FLOPs and bytes are one run of its graph: a generated kernel is called once per call
    site (`sites`, more than one when Inductor reuses its code); an extern row
    ('extern_kernels.addmm') gathers every call of that op in the graph, one per post-grad node. So:

      calls       the row's events in the trace (a C++ kernel's range, a Triton kernel's device
                  events, an extern op's calls inside a compiled region)
      runs        = calls / calls per run (the row's `sites`; in a file written before that
                  column: len(nodes) for an extern row, else 1)
      time_ns     their total (ns): range duration, device time, or an extern op's device work
                  (its duration on a CPU-only trace)
      per_run_ns  = time_ns / runs
      t_compute_ns, t_memory_ns, t_runtime_ns   floors of one run = calls per run * one call's
                  floors (each call does 1/sites of the run's work)
      bound       the largest floor ('unknown' without a cost or a spec)
      efficiency  = largest floor / per_run_ns

    device: 'cpu' for C++ kernels, else the trace's first accelerator when it has device work.
    `spec_for(rank, device)` gives the HardwareSpec (rank 0's devices are used).
    """
    fusion = with_flops(fusion)
    out = fusion.copy()
    if fusion.empty:
        return out.reindex(columns=[*fusion.columns, *FUSION_TIME_COLUMNS])
    times = kernel_times(trace, fusion)
    ev = trace.events
    gpus = sorted(
        {str(d) for d in ev.loc[ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]), "device"].unique()} - {"cpu"}
    )
    rows = []
    for k in fusion.itertuples(index=False):
        device = "cpu" if k.kind == "cpp" or not gpus else gpus[0]
        per_run_calls = _sites(k)
        total, calls = times.get(k.runtime_name, (np.nan, 0))
        runs = calls / per_run_calls
        per_run = total / runs if calls else np.nan
        rows.append([device, calls, runs, total if calls else np.nan, per_run, per_run_calls])
    extra = pd.DataFrame(rows, columns=[*FUSION_TIME_COLUMNS[:5], "per_run_calls"], index=out.index)
    per_call = pd.DataFrame(
        {
            "device": extra["device"],
            "time_ns": extra["per_run_ns"] / extra["per_run_calls"],
            "family": _kernel_family(fusion),
            "dtype": fusion["dtype"],
        },
        index=out.index,
    )
    for c in ("flops", "bytes_read", "bytes_written"):
        per_call[c] = pd.to_numeric(fusion[c], errors="coerce") / extra["per_run_calls"]
    floors = kernel_floors(per_call, spec_for)
    for c in ("t_compute_ns", "t_memory_ns", "t_runtime_ns"):
        extra[c] = floors[c] * extra["per_run_calls"]
    extra["bound"], extra["efficiency"] = floors["bound"], floors["efficiency"]
    return pd.concat([out, extra[FUSION_TIME_COLUMNS]], axis=1)


def _sites(k) -> int:
    """Calls per run of a fusion-map row (namedtuple): its `sites` when it has a number there."""
    n = getattr(k, "sites", None)
    if isinstance(n, (int, float, np.integer, np.floating)) and not isinstance(n, bool) and np.isfinite(n) and n >= 1:
        return int(n)
    return max(len(k.nodes), 1) if k.kind == "extern" else 1


GROUP_COLUMNS = [
    "kernel",
    "runtime_name",
    "kind",
    "aten_ops",
    "sources",
    "code",
    "eager_ops",
    "eager_ns",
    "compiled_ns",
    "saving_ns",
    "speedup",
    "calls",
    "flops",
    "bytes",
    "t_compute_ns",
    "t_memory_ns",
    "t_runtime_ns",
    "bound",
    "efficiency",
    "estimate",
    "eager_event_ids",
]


def fusion_groups(
    fusion: pd.DataFrame, graphs: DynamoGraphs, eager: Trace, compiled: Trace, steps: int, spec_for: SpecFor
) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Eager against compiled, one row per kernel of `fusion` (the fusion map), and the Dynamo
    nodes that matched no eager op. Times per step (totals over `steps`), ns:

    kernel, runtime_name, kind ('cpp'/'triton'/'extern'), aten_ops ('aten::add + aten::mul'),
    sources ('model.py:42, ...'), code (first source line), eager_ops (the eager ops it replaced,
    'aten::mul, aten::add'), eager_ns (before), compiled_ns (after), saving_ns (before - after),
    speedup (before / after), calls (kernel calls per step), flops (FLOP per call), bytes (byte
    per call), t_compute_ns / t_memory_ns / t_runtime_ns (floors per call, `kernel_floors`),
    bound (after: compute / memory / runtime / unknown), efficiency (floor / time per call),
    estimate (True when the before time is a share of a split op), eager_event_ids (the eager
    trace's event ids of the matched ops, all steps).
    """
    if fusion.empty:
        return pd.DataFrame(columns=GROUP_COLUMNS), ()
    fusion = with_flops(fusion)
    per_node, unmatched = eager_matches(graphs, eager)  # (compile_id, dynamo node) -> (name, ns, event ids)
    times = kernel_times(compiled, fusion)  # runtime_name -> (total ns, calls)
    gpus = sorted(
        {
            str(d)
            for d in compiled.events.loc[
                compiled.events["kind"].isin([k.value for k in DEVICE_WORK_KINDS]), "device"
            ].unique()
        }
        - {"cpu"}
    )
    rows: list[list[Any]] = []
    for cid, kernels in fusion.groupby("compile_id", sort=False):
        # how many post-grad nodes of each Dynamo node landed in any kernel: the share's denominator
        total = pd.Series([p for pre in kernels["pre_nodes"] for p in pre], dtype=object).value_counts()
        for k in kernels.itertuples(index=False):
            eager_ns, names, ids, estimate = 0.0, [], [], False
            for pre, n in pd.Series(list(k.pre_nodes), dtype=object).value_counts().items():
                hit = per_node.get((cid, pre))
                if hit is None:
                    continue
                share = n / total[pre]
                estimate |= share < 1
                eager_ns += share * hit[1]
                names.append(hit[0])
                ids += hit[2]
            t, calls = times.get(k.runtime_name, (math.nan, 0))
            before, after, per_step_calls = eager_ns / steps if names else math.nan, t / steps, calls / steps
            sites = _sites(k)
            rows.append(
                [
                    k.kernel,
                    k.runtime_name,
                    k.kind,
                    " + ".join(k.aten_ops),
                    ", ".join(k.sources),
                    k.code,
                    ", ".join(dict.fromkeys(names)),
                    before,
                    after,
                    before - after,
                    before / after if after else math.nan,
                    per_step_calls,
                    k.flops / sites,
                    (k.bytes_read + k.bytes_written) / sites,
                    math.nan,
                    math.nan,
                    math.nan,
                    "unknown",
                    math.nan,
                    estimate,
                    tuple(ids),
                    "cpu" if k.kind == "cpp" or not gpus else gpus[0],
                    k.bytes_read / sites,
                    k.bytes_written / sites,
                    k.dtype,
                    kernel_family(str(k.family), str(k.kernel), k.aten_ops),
                ]
            )
    extra = ["device", "bytes_read", "bytes_written", "dtype", "family"]
    g = pd.DataFrame(rows, columns=[*GROUP_COLUMNS, *extra])
    per_call = g[["device", "flops", "bytes_read", "bytes_written", "dtype", "family"]].assign(
        time_ns=g["compiled_ns"] / g["calls"].where(g["calls"] > 0)
    )
    floors = kernel_floors(per_call, spec_for)
    for c in ("t_compute_ns", "t_memory_ns", "t_runtime_ns", "bound", "efficiency"):
        g[c] = floors[c]
    return g[GROUP_COLUMNS], unmatched
