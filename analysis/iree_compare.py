"""IREE's dispatches beside the same model run eagerly in PyTorch, line by line of the model's
source where they map, in total otherwise.

A dispatch maps to the line of the op that does its work (analysis.iree_dispatches
`main_location`: its matmul or attention, not the accumulator fill it shares); the eager side
times the torch calls each line makes (collectors.iree.eager). Rows are source lines: a line's
IREE time is one run per call of each dispatch located there (its mean run), its eager time the
calls made there. IREE emits one executable for identical regions (the q, k and v projections
share one) and keeps the locations of the first, so a dispatch run n times per call is located
at one line: its other n-1 runs are the row `SHARED` (they do the work of lines the IREE column
leaves empty). The IREE rows add up to the dispatches' time per call; the eager rows to the
eager calls' time under the timer, which is near the bare forward's (`eager_ns`), not equal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SHARED = "(shared executables: runs at other lines)"
COLUMNS = ["location", "modules", "dispatches", "iree_ns", "eager_ns", "ratio"]


def compare_eager(table: pd.DataFrame, eager_lines: dict[str, float]) -> pd.DataFrame:
    """One row per source line (module docstring).

    `table`: analysis.iree_dispatches.dispatch_table rows (main_location, per_call_ns, per_call);
    `eager_lines`: {'module file:line': eager ns per call}.
    Columns: location ('file:line', or SHARED), modules (the module paths named there, ','-joined;
    '<top>' for the model's own forward), dispatches (how many dispatches are located there),
    iree_ns and eager_ns (ns per call; NaN: none there), ratio (eager_ns / iree_ns: above 1,
    IREE is faster).
    """
    rows: dict[str, list] = {}  # location -> [modules, dispatches, iree_ns, eager_ns]

    def row(site: str) -> list:
        module, _, where = site.partition(" ")
        r = rows.setdefault(where or site, [[], 0, np.nan, np.nan])
        if where and module not in r[0]:
            r[0].append(module)
        return r

    shared = 0.0
    for d in table.itertuples(index=False):
        if not d.main_location or not np.isfinite(d.per_call_ns) or not d.per_call:
            continue
        r = row(d.main_location)
        run = d.per_call_ns / d.per_call
        r[1] += 1
        r[2] = np.nansum([r[2], run])
        shared += d.per_call_ns - run
    for site, ns in eager_lines.items():
        r = row(site)
        r[3] = np.nansum([r[3], ns])
    ordered = sorted(rows, key=_line_order)
    out = [[loc, ",".join(rows[loc][0]), *rows[loc][1:]] for loc in ordered]
    if shared > 0:
        out.append([SHARED, "", 0, shared, np.nan])
    df = pd.DataFrame(out, columns=COLUMNS[:-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        df["ratio"] = df["eager_ns"] / df["iree_ns"]
    return df


def _line_order(location: str) -> tuple[str, int]:
    where, _, line = location.rpartition(":")
    return (where, int(line)) if line.isdigit() else (location, 0)
