"""Costs of kernels replayed from a CUDA/HIP graph, from the ops recorded while it was captured.

A graph launch (``cudaGraphLaunch`` / ``hipGraphLaunch``) runs kernels that no op launched: the
ops that chose their shapes ran once, while the graph was captured (between
``cudaStreamBeginCapture`` and ``cudaStreamEndCapture`` on a host thread, ``hip...`` on ROCm). If
the trace holds that capture, each op recorded there with its shapes issued its kernel launches
(``cudaLaunchKernel`` ...) into the graph, which ran no kernel then; a replay runs those kernels in
capture order. So the j-th kernel of a replay (ordered by start time; one stream per graph, as
``torch.cuda.graph`` captures) is the j-th launch of its capture, and costs what the op around that
launch costs (`analysis.cost.op_cost` on its record).

Exact or nothing:

- a replay matches a capture made earlier on its rank with as many kernel launches as the replay
  has kernels; several such captures must give the same costs, else it stays unknown;
- an op that issued more than one launch in the capture has one cost for several kernels, which
  are not split: those kernels stay unknown (`captured_costs` says so).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from analysis.cost.base import Cost

GRAPH_LAUNCH = re.compile(r"(?i)graphlaunch")
_BEGIN = re.compile(r"(?i)streambegincapture")
_END = re.compile(r"(?i)streamendcapture")
# the runtime / driver calls that put a kernel into a stream (or, capturing, into its graph)
# (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, hipLaunchKernel, hipModuleLaunchKernel ...)
_LAUNCH = re.compile(r"(?i)launch\w*kernel")


def captured_costs(rows: pd.DataFrame, tree: pd.DataFrame, flows: pd.DataFrame, op_costs) -> tuple[dict, dict]:
    """({row index: Cost}, {row index: reason}) for the rows of `rows` (a units table: `unit_id`,
    `kind`) that are kernels of a graph launch whose capture the trace holds (module docstring).
    `tree`: the trace's events (`id`, `name`, `kind`, `ts`, `rank`, `thread`, `parent_id`);
    `flows`: its flows (`src`, `dst`, `kind`); `op_costs(ops)`: the cost table of a set of event
    rows (analysis.cost.cost_table), index-aligned. Rows of replays with no capture in the trace
    are in neither dict."""
    costs: dict = {}
    reasons: dict = {}
    if "unit_id" not in rows.columns or not len(flows):
        return costs, reasons
    begin = _matches(tree["name"], _BEGIN)
    if not begin.any():
        return costs, reasons
    launch = _matches(tree["name"], _LAUNCH) & (tree["kind"] == "runtime").to_numpy()
    captures = _captures(tree, tree[begin | _matches(tree["name"], _END) | launch])
    if not captures:
        return costs, reasons
    op_rows = sorted({i for c in captures for i in c["ops"] if i is not None})
    per_op = op_costs(tree.loc[op_rows]) if op_rows else pd.DataFrame()
    launches = flows[(flows["kind"] == "launch").to_numpy()]
    ev = tree.set_index("id")
    row_of_unit = {int(u): i for i, u in zip(rows.index, rows["unit_id"].to_numpy())}
    for src, dst in launches.groupby("src")["dst"]:
        if src not in ev.index or not GRAPH_LAUNCH.search(str(ev.at[src, "name"])):
            continue
        kernels = ev.loc[list(dst)].sort_values("ts", kind="stable")
        fits = [
            c
            for c in captures
            if c["rank"] == ev.at[src, "rank"] and c["end"] <= ev.at[src, "ts"] and len(c["ops"]) == len(kernels)
        ]
        found = [_costs(c, per_op) for c in fits]
        for j, kid in enumerate(kernels.index):
            i = row_of_unit.get(int(kid))
            if i is None:
                continue
            if not found:
                reasons[i] = "replayed from a CUDA/HIP graph; no capture in the trace has its kernel count"
                continue
            options = {f[j] for f in found}
            if len(options) > 1:
                reasons[i] = "replayed from a CUDA/HIP graph; the captures that fit it disagree"
            elif isinstance(c := options.pop(), Cost):
                costs[i] = c
            else:
                reasons[i] = c
    return costs, reasons


def _matches(names: pd.Series, pattern: re.Pattern) -> np.ndarray:
    """Per row: whether its name matches `pattern` (tested once per distinct name)."""
    cat = names.astype("category")
    hit = np.array([bool(pattern.search(str(c))) for c in cat.cat.categories] + [False])
    return hit[cat.cat.codes.to_numpy()]  # code -1 (NaN) reads the trailing False


def _captures(tree: pd.DataFrame, host: pd.DataFrame) -> list[dict]:
    """Each capture: rank, end (ns), and per kernel launch inside it, in order, the row index of the
    innermost op around the launch (None when no op encloses it). `host`: the capture begin/end
    and launch calls among `tree`'s rows."""
    ids = tree["id"].to_numpy().tolist()
    parent = dict(zip(ids, tree["parent_id"].to_numpy().tolist()))
    index_of = dict(zip(ids, tree.index))
    kind_of = dict(zip(ids, tree["kind"].astype(str).tolist()))
    out = []
    for (_, _), g in host.groupby(["rank", "thread"]):
        g = g.sort_values("ts", kind="stable")
        current = None
        for eid, name, ts, rank in zip(g["id"], g["name"].astype(str), g["ts"], g["rank"]):
            if _BEGIN.search(name):
                current = {"rank": rank, "ops": []}
            elif _END.search(name) and current is not None:
                current["end"] = ts
                out.append(current)
                current = None
            elif current is not None:
                current["ops"].append(_enclosing_op(int(eid), parent, kind_of, index_of))
    return out


def _enclosing_op(eid: int, parent: dict, kind_of: dict, index_of: dict):
    p = parent.get(eid, -1)
    while p != -1 and kind_of.get(p) != "op":
        p = parent.get(p, -1)
    return index_of.get(p) if p != -1 else None


def _costs(capture: dict, per_op: pd.DataFrame) -> tuple:
    """Per launch of a capture: the Cost of its op, or why it has none."""
    ops = capture["ops"]
    out: list[Cost | str] = []
    for i in ops:
        if i is None:
            out.append("replayed from a CUDA/HIP graph; its launch was captured outside any op")
        elif ops.count(i) > 1:
            out.append(f"replayed from a CUDA/HIP graph; its captured op launched {ops.count(i)} kernels")
        elif i not in per_op.index or not np.isfinite(per_op.at[i, "flops"]):
            out.append("replayed from a CUDA/HIP graph; its captured op has no derivable cost")
        else:
            r = per_op.loc[i]
            out.append(
                Cost(
                    float(r["flops"]),
                    float(r["flops_effective"]),
                    float(r["bytes_read"]),
                    float(r["bytes_written"]),
                    str(r["family"]),
                    str(r["dtype"]),
                )
            )
    return tuple(out)
