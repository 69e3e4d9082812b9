"""Counter launches joined to a trace's kernels: by correlation id where both record one, else by
kernel name and launch order (the n-th launch of a name in the counter file is the n-th kernel of
that name in the trace), else, for a trace without kernel events (CUPTI's profiler mode
serialises kernels and records ranges instead), the n-th counter launch to the n-th launch call.
Unmatched launches on each side are counted, never dropped.

Names are compared after normalising how profilers spell the same symbol: rocprof's ' [clone
.kd]' / '.kd' suffix, Nsight's '(int)4' casts and '<unnamed>' ('(anonymous namespace)' in
Kineto), 'true'/'false' template arguments ('(bool)1'), and spaces. A second pass compares the
bare function name (before the first '<' or '(') for what is left.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from profiler.model.kernel_counters import KernelCounters, occurrences
from profiler.model.schema import Kind
from profiler.model.trace import Trace

JOIN_COLUMNS = ["launch", "event_id", "op_id", "rank", "trace_device", "trace_start_ns", "trace_dur_ns", "matched_by"]


def normalise_name(name: str) -> str:
    """The kernel name with profiler-specific spellings removed (module docstring)."""
    n = re.sub(r"\s*\[clone \.kd\]$|\.kd$", "", name.strip())
    n = re.sub(r"\((?:unsigned )?(?:int|long|short|char|bool|long long)\)", "", n)
    n = n.replace("<unnamed>", "(anonymous namespace)")
    n = re.sub(r"\btrue\b", "1", re.sub(r"\bfalse\b", "0", n))
    n = re.sub(r"\b(\d+)(?:u|ul|ull|l|ll)\b", r"\1", n)
    return re.sub(r"\s+", "", n)


def bare_name(name: str) -> str:
    """The function's name alone: 'void ns::k<...>(...)' -> 'k'."""
    n = normalise_name(name)
    n = re.sub(r"^void", "", n)
    head = re.split(r"[<(]", n, maxsplit=1)[0]
    return head.split("::")[-1]


def join(trace: Trace, kc: KernelCounters) -> tuple[pd.DataFrame, dict[str, object]]:
    """(one row per counter launch: JOIN_COLUMNS, event_id -1 when unmatched; a summary:
    matched, counters_unmatched, trace_unmatched, by (method -> count), unmatched_names)."""
    ev = trace.events
    kernels = ev[ev["kind"] == Kind.KERNEL.value].sort_values(["ts", "id"])
    out = pd.DataFrame({"launch": kc.launches["launch"].to_numpy()})
    for c in JOIN_COLUMNS[1:]:
        out[c] = (
            -1 if c not in ("trace_device", "matched_by", "trace_dur_ns") else ("" if c != "trace_dur_ns" else np.nan)
        )
    taken: set[int] = set()
    lc = kc.launches.reset_index(drop=True)

    def take(i: int, row: pd.Series, how: str) -> None:
        out.loc[i, JOIN_COLUMNS[1:]] = [
            int(row["id"]),
            int(row["op_id"]),
            int(row["rank"]),
            str(row["device"]),
            int(row["ts"]),
            float(row["dur"]),
            how,
        ]
        taken.add(int(row["id"]))

    if len(kernels):
        by_corr = {int(c): r for c, r in zip(kernels["correlation"], kernels.itertuples()) if c >= 0}
        for i, c in enumerate(lc["correlation"]):
            r = by_corr.get(int(c)) if c >= 0 else None
            if r is not None:
                take(i, pd.Series(r._asdict()), "correlation")
        for key in (normalise_name, bare_name):
            _by_order(lc, kernels, key, out, taken, take)
    else:
        _by_launch_calls(trace, lc, out, take)
    matched = out["event_id"] >= 0
    unmatched = lc.loc[~matched.to_numpy(), "kernel"]
    summary: dict[str, object] = {
        "counter_launches": len(lc),
        "trace_kernels": len(kernels),
        "matched": int(matched.sum()),
        "counters_unmatched": int((~matched).sum()),
        "trace_unmatched": int(len(kernels) - len(taken & set(kernels["id"].astype(int)))),
        "by": {k: int(v) for k, v in out.loc[matched, "matched_by"].value_counts().items()},
        "unmatched_names": unmatched.str.slice(0, 80).value_counts().head(5).to_dict(),
    }
    return out, summary


def _by_order(lc: pd.DataFrame, kernels: pd.DataFrame, key, out: pd.DataFrame, taken: set[int], take) -> None:
    """Counter launches still unmatched, to trace kernels still untaken, by key(name) and order."""
    free = kernels[~kernels["id"].isin(taken)]
    if not len(free):
        return
    keys = [key(n) for n in free["name"]]
    slot = dict(zip(zip(keys, occurrences(keys)), free.itertuples()))
    todo = [i for i in range(len(lc)) if out.at[i, "event_id"] < 0]
    ckeys = [key(lc.at[i, "kernel"]) for i in todo]
    for i, k, n in zip(todo, ckeys, occurrences(ckeys)):
        r = slot.get((k, n))
        if r is not None:
            take(i, pd.Series(r._asdict()), "name and order")


def _by_launch_calls(trace: Trace, lc: pd.DataFrame, out: pd.DataFrame, take) -> None:
    """No kernel events: the n-th counter launch is the n-th kernel-launch call, when the counts agree."""
    ev = trace.events
    calls = ev[
        (ev["kind"] == Kind.RUNTIME.value)
        & ev["name"].str.contains(r"Launch(?:Kernel|CooperativeKernel)|ModuleLaunch", regex=True)
    ]
    calls = calls.sort_values(["ts", "id"])
    if len(calls) != len(lc):
        return
    kind = dict(zip(ev["id"].to_numpy(), ev["kind"].to_numpy()))
    parent = dict(zip(ev["id"].to_numpy(), ev["parent_id"].to_numpy()))
    for i, r in enumerate(calls.itertuples()):
        s = pd.Series(r._asdict())
        op = int(s["parent_id"])  # a launch call's op is the innermost op around it
        while op >= 0 and kind.get(op) != Kind.OP.value:
            op = int(parent.get(op, -1))
        s["op_id"], s["dur"] = op, np.nan  # the call's time is not the kernel's
        take(i, s, "launch order (no kernel events)")
