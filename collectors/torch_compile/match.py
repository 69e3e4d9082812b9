"""Join the compile log to profiles: eager ops to Dynamo graph nodes, kernels to their events.

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
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd

from collectors.torch_compile.graph_text import dynamo_nodes
from collectors.torch_compile.tlparse import Log
from profiler.model.schema import DEVICE_WORK_KINDS, Kind
from profiler.model.trace import Trace

WINDOW = 64
_REGION = ("## Call CompiledFxGraph", "CompiledFunction", "Torch-Compiled Region")


def _ancestors(ev: pd.DataFrame) -> tuple[dict[int, int], dict[int, str], dict[int, str]]:
    ids = ev["id"].to_numpy().tolist()
    return (dict(zip(ids, ev["parent_id"].to_numpy().tolist())), dict(zip(ids, ev["kind"].astype(str).tolist())),
            dict(zip(ids, ev["name"].astype(str).tolist())))


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
    wanted, out = set(ops), defaultdict(float)
    for op_id, d in zip(work["op_id"].to_numpy().tolist(), work["dur"].to_numpy().tolist()):
        cur = op_id
        while cur >= 0 and cur not in wanted:
            cur = parent.get(cur, -1)
        if cur >= 0:
            out[cur] += d
    return {i: float(out.get(i, 0.0)) for i in ops}


def dynamo_graphs(log: Log) -> list[tuple[str, list[tuple[str, str]]]]:
    """(compile_id, [(node, base)]) of the latest compile of each frame, by frame id."""
    latest: dict[int, tuple[int, str, str]] = {}
    for r in log.of("dynamo_output_graph"):
        f, c = r.meta.get("frame_id"), r.meta.get("frame_compile_id")
        if isinstance(f, int) and isinstance(c, int) and (f not in latest or c >= latest[f][0]):
            latest[f] = (c, r.compile_id, r.payload or "")
    return [(cid, dynamo_nodes(text)) for _, (_, cid, text) in sorted(latest.items())]


def eager_matches(log: Log, eager: Trace) -> tuple[dict[tuple[str, str], tuple[str, float, list[int]]], tuple[str, ...]]:
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
    nodes = [(cid, n, base) for cid, ns in dynamo_graphs(log) for n, base in ns]
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
    for i, nm, k, d in zip(hits["id"].tolist(), hits["name"].astype(str).tolist(), hits["kind"].astype(str).tolist(), hits["dur"].tolist()):
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


FUSION_TIME_COLUMNS = ["device", "calls", "runs", "time_ns", "per_run_ns", "t_compute_ns", "t_memory_ns", "t_runtime_ns",
                       "bound", "efficiency"]


def fusion_times(fusion: pd.DataFrame, trace: Trace, spec_for) -> pd.DataFrame:
    """`fusion` (collectors.torch_compile.fusion_map) plus, per kernel row, its runtime in `trace`
    and its bound (collectors.torch_compile.compare.kernel_floors on the device's spec).

    A row's FLOPs and bytes are one run of its graph: a generated kernel is called once per call
    site (`sites`, more than one when Inductor reuses its code); an extern row ('extern_kernels.addmm') gathers every call of that op in the graph, one per
    post-grad node. So:

      calls       the row's events in the trace (a C++ kernel's range, a Triton kernel's device
                  events, an extern op's calls inside a compiled region)
      runs        = calls / calls per run (the row's `sites`; in a file written before that
                  column: len(nodes) for an extern row, else 1)
      time_ns     their total (ns): range duration, device time, or an extern op's device work
                  (its duration on a CPU-only trace)
      per_run_ns  = time_ns / runs
      t_compute_ns, t_memory_ns, t_runtime_ns   floors of one run (runtime: min_op_time per call)
      bound       the largest floor ('unknown' without a cost or a spec)
      efficiency  = largest floor / per_run_ns

    device: 'cpu' for C++ kernels, else the trace's first accelerator when it has device work.
    `spec_for(rank, device)` gives the HardwareSpec (rank 0's devices are used).
    """
    from collectors.torch_compile.compare import kernel_floors

    out = fusion.copy()
    if fusion.empty:
        return out.reindex(columns=[*fusion.columns, *FUSION_TIME_COLUMNS])
    times = kernel_times(trace, fusion)
    ev = trace.events
    gpus = sorted({str(d) for d in ev.loc[ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]), "device"].unique()} - {"cpu"})
    rows = []
    for k in fusion.itertuples(index=False):
        device = "cpu" if k.kind == "cpp" or not gpus else gpus[0]
        per_run_calls = _sites(k)
        total, calls = times.get(k.runtime_name, (np.nan, 0))
        runs = calls / per_run_calls
        per_run = total / runs if calls else np.nan
        floors, bound, eff = kernel_floors(k.flops, k.bytes_read + k.bytes_written, k.dtype, k.family, per_run, spec_for(0, device),
                                           calls=per_run_calls)
        rows.append([device, calls, runs, total if calls else np.nan, per_run, *floors, bound, eff])
    extra = pd.DataFrame(rows, columns=FUSION_TIME_COLUMNS, index=out.index)
    return pd.concat([out, extra], axis=1)


def _sites(k) -> int:
    """Calls per run of a fusion-map row (namedtuple): its `sites` when it has a number there."""
    n = getattr(k, "sites", None)
    if isinstance(n, (int, float, np.integer, np.floating)) and not isinstance(n, bool) and np.isfinite(n) and n >= 1:
        return int(n)
    return max(len(k.nodes), 1) if k.kind == "extern" else 1
