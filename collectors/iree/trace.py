"""Write one IREE run (collectors.iree) as a trace file in Kineto's dialect, so `perf analyze`,
`perf export` (Perfetto) and the dashboard read it as any other trace:

- the pass tree as complete ('X') events, category `compile_pass` (track 'rank0/compiler'),
  args {depth}. MLIR's timer records each pass's wall time but not when it started, so the
  passes are laid out in order: each root after the previous one from the compile's start, each
  child after its previous sibling from its parent's start; a parent's time its children do not
  cover shows after them. Durations are measured, positions are this layout.
- each dispatch run as a `kernel` event on device 0, the HAL device 'local-task', marked
  `deviceType: cpu` in deviceProperties (the dispatches run on the host CPU's worker threads, so
  the trace model labels the device 'cpu0' and floors it on the CPU's spec), args {flops, bytes,
  fused_ops, locations}; its start is the runtime's host clock shifted by one constant so that
  the first run starts when the compile ends.
- a top-level `perfCompile` field holding the fusion map (`tables.fusion`, one row per dispatch,
  kind 'iree': runtime_name, flops, bytes_read, bytes_written, dtype, family), the form
  analysis.cost.kernels costs compiled kernels from, so `perf analyze` places each dispatch on
  the roofline as `perf profile --backend iree` does.
- a top-level `perfIree` field: compile_ns, the pass tree, the dispatch table (with the roofline)
  and the eager comparison, as `perf profile --backend iree --json` prints them.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from collectors.iree.passes import PassNode, PassTree
from profiler.model.files import write_atomic

DOC_KEY = "perfIree"
FUSION_KEY = "perfCompile"  # the key analysis.cost.kernels reads compiled kernels' costs from
DEVICE_NAME = "IREE local-task (llvm-cpu on the host CPU)"


def pass_events(tree: PassTree, start_ns: int, base_ns: int, pid: int) -> list[dict]:
    """The pass tree as 'X' events laid out from `start_ns` (module docstring)."""
    out: list[dict] = []

    def lay(node: PassNode, at: int, depth: int) -> None:
        out.append(
            {
                "ph": "X",
                "cat": "compile_pass",
                "name": node.name,
                "pid": pid,
                "tid": 0,
                "ts": round((at - base_ns) / 1000, 3),
                "dur": round(node.wall_ns / 1000, 3),
                "args": {"depth": depth, "phase": "iree"},
            }
        )
        t = at
        for c in node.children:
            lay(c, t, depth + 1)
            t += c.wall_ns

    t = start_ns
    for r in tree.roots:
        lay(r, t, 0)
        t += r.wall_ns
    out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "iree-compile"}})
    return out


def dispatch_events(events: pd.DataFrame, table: pd.DataFrame, at_ns: int, base_ns: int) -> list[dict]:
    """Each dispatch run as a `kernel` event on device 0 from `at_ns` on (module docstring)."""
    if events.empty:
        return []
    info = table.set_index("name")
    shift = at_ns - int(events["start_ns"].min())
    out: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": DEVICE_NAME}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "dispatches"}},
    ]
    for e in events.itertuples(index=False):
        row = info.loc[e.dispatch] if e.dispatch in info.index else None
        args: dict[str, object] = {
            "device": 0,
            "stream": 0,
            "submission": int(e.submission),
            "workgroups": int(e.workgroups),
        }
        if row is not None:
            args.update(
                dispatch_flops=float(row["flops"]),
                dispatch_bytes=float(row["bytes"]),
                fused_ops=list(row["fused_ops"]),
                locations=list(row["locations"]),
            )
        out.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": e.dispatch,
                "pid": 0,
                "tid": 0,
                "ts": round((e.start_ns + shift - base_ns) / 1000, 3),
                "dur": round(e.dur_ns / 1000, 3),
                "args": args,
            }
        )
    return out


def fusion_rows(table: pd.DataFrame) -> list[dict]:
    """One fusion-map row per dispatch (analysis.cost.kernels.FUSION_COLUMNS, kind 'iree'): the
    cost of one run, from analysis.iree_dispatches.dispatch_table."""
    return [
        {
            "runtime_name": r["name"],
            "kernel": r["name"],
            "kind": "iree",
            "flops": float(r["flops"]),
            "bytes_read": float(r["bytes_read"]),
            "bytes_written": float(r["bytes_written"]),
            "dtype": str(r["dtype"]),
            "family": str(r["family"]),
            "aten_ops": [op.split(" ", 1)[0] for op in r["fused_ops"]],
        }
        for r in table.to_dict("records")
    ]


def write_trace(
    path: Path, tree: PassTree, start_ns: int, compile_ns: int, events: pd.DataFrame, table: pd.DataFrame, doc: dict
) -> Path:
    """Write the trace (gzip when `path` ends in .gz), whole or not at all."""
    pid = os.getpid()
    trace_events = pass_events(tree, start_ns, start_ns, pid)
    trace_events += dispatch_events(events, table, start_ns + compile_ns, start_ns)
    document = {
        "schemaVersion": 1,
        "baseTimeNanoseconds": start_ns,
        "deviceProperties": [{"id": 0, "name": DEVICE_NAME, "deviceType": "cpu", "totalGlobalMem": 0}],
        "traceEvents": trace_events,
        FUSION_KEY: {"tables": {"fusion": fusion_rows(table)}},
        DOC_KEY: doc,
    }
    data = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY, default=_plain)
    write_atomic(path, gzip.compress(data, compresslevel=6) if str(path).endswith(".gz") else data, force=True)
    return path


def _plain(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return None if np.isnan(x) else float(x)
    raise TypeError
