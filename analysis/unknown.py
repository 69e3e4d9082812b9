"""What the cost model could not floor, and why: the `unknown` summary of an analysis.

A unit is unknown-bound when its FLOPs and bytes cannot be derived from the record. The reasons,
in the order they are tested:

- 'replayed from a CUDA/HIP graph': device work a graph launch ran; the ops that recorded its
  shapes ran at capture time: 'capture not in trace', or, when the capture is there, why its
  kernel could not be costed from it (analysis.cost.graphs);
- an MoE layer the cost model could not size from what it nests: the quantity not found
  (top-k, expert intermediate size, weight format; analysis.cost.moe);
- a custom op whose record does not determine its work (analysis.cost.custom.UNDERIVABLE: paged /
  varlen attention's lengths are data), and other MoE ops by name;
- 'no shapes recorded': an op recorded without 'Input Dims' (record_shapes off), or a kernel
  launched outside any op;
- 'op the cost model lacks': shapes recorded, but no formula for this op name;
- 'shapes recorded, cost not derivable': a known op whose record lacks what its formula needs
  (a TensorList dtype, a stride, a size only the data holds).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from analysis.cost import cost_table
from analysis.cost.graphs import GRAPH_LAUNCH, captured_costs
from analysis.cost.moe import moe_forward_costs
from profiler.model.schema import Bound
from profiler.model.strings import contains
from profiler.model.trace import Trace

#: Above this share of unit time unknown, the report says so first (issue 10, section 3).
WARN_SHARE = 0.2
MOE = re.compile(r"(?i)moe_forward|fused_moe|fused_experts|moe_align|grouped_mm|\bfmoe\b|ck_moe")
UNKNOWN_COLUMNS = ["name", "units", "time_ns", "share", "reason"]


def unknown_summary(trace: Trace, classified: pd.DataFrame, top: int = 10) -> tuple[float, pd.DataFrame]:
    """(share, table): the unknown-bound share of unit time (accelerator units when the trace has
    any, else all), and the `top` unknown names by time. Columns: name, units (count), time_ns
    (summed unit time, ns), share (of all units' time), reason (the module docstring's)."""
    if classified.empty:
        return 0.0, pd.DataFrame(columns=UNKNOWN_COLUMNS)
    gpu = classified["device"].astype(str) != "cpu"
    u = classified[gpu] if gpu.any() else classified
    total = float(u["time_ns"].sum())
    unk = u[u["bound"] == Bound.UNKNOWN.value]
    if unk.empty or total <= 0:
        return 0.0, pd.DataFrame(columns=UNKNOWN_COLUMNS)
    graph = _graph_replayed(trace, unk)
    _, moe = moe_forward_costs(unk, trace.events)
    _, replay = captured_costs(unk, trace.events, trace.flows, cost_table)
    said = {**moe, **replay}  # why, where the MoE or capture join said
    g = (
        unk.assign(graph=graph, said=pd.Series(said, index=list(said), dtype=object).reindex(unk.index))
        .groupby("name", sort=False)
        .agg(
            units=("time_ns", "size"),
            time_ns=("time_ns", "sum"),
            graph=("graph", "all"),
            shapes=("shapes", "first"),
            kind=("kind", "first"),
            said=("said", "first"),
        )
        .reset_index()
    )
    g["share"] = g["time_ns"] / total
    g["reason"] = [_reason(r) for r in g.itertuples(index=False)]
    g = g.sort_values("time_ns", ascending=False, kind="stable").head(top)
    return float(unk["time_ns"].sum()) / total, g[UNKNOWN_COLUMNS].reset_index(drop=True)


def _reason(r) -> str:
    from analysis.cost.ops import handler
    from analysis.cost.custom import UNDERIVABLE

    name = str(r.name)
    if isinstance(r.said, str):
        return r.said
    if r.graph:
        return "replayed from a CUDA/HIP graph; capture not in trace"
    if name in UNDERIVABLE:
        return UNDERIVABLE[name]
    if MOE.search(name):
        return (
            "MoE: expert weights are layer attributes, not op arguments, and routing is data: "
            "FLOPs and bytes not recorded"
        )
    if r.kind != "op":
        return "kernel launched outside any op: no shapes recorded"
    if not isinstance(r.shapes, str) or r.shapes in ("", "[]"):
        return "no shapes recorded (record_shapes off)"
    if handler(name)[0] is None:
        return "an op the cost model lacks"
    return "shapes recorded, but not what its formula needs"


def _graph_replayed(trace: Trace, units: pd.DataFrame) -> np.ndarray:
    """Per unit: True when it is device work launched by a graph launch call (no op of its own)."""
    ev = trace.events
    fl = trace.flows[trace.flows["kind"] == "launch"]
    if fl.empty:
        return np.zeros(len(units), dtype=bool)
    is_launch = contains(ev["name"], GRAPH_LAUNCH)  # per event row, matched once per distinct name
    src = pd.Index(ev["id"].to_numpy()).get_indexer(fl["src"].to_numpy())
    graph_dst = fl["dst"].to_numpy()[(src >= 0) & np.append(is_launch, False)[src]]  # src -1 reads False
    return (units["kind"].to_numpy(dtype=object) != "op") & np.isin(units["unit_id"].to_numpy(), graph_dst)
