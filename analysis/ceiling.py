"""Ops measured faster than their ceiling: flagged with a likely cause, never a plain efficiency.

A unit's efficiency is floor / time, and its floor is the largest of its compute, memory,
communication and runtime floors; so efficiency <= 1 + TOLERANCE holds exactly when neither its
achieved FLOP/s (flops_effective / time) exceeds the peak nor its achieved bytes/s (bytes at the
binding level / time) the bandwidth by more than TOLERANCE. Above that, a figure the floor rests
on is wrong for this op: the recorded shape or dtype, the preset, or where the data came from.
The tolerance covers clock boost and timestamp rounding (Kineto records microseconds).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Measured up to this much faster than the floor still counts as at the ceiling (10%).
TOLERANCE = 0.10

#: The likely cause of an op above its ceiling, by the bound of its floor.
CAUSES = {
    "compute": "above compute ceiling: fewer operations than counted (Winograd/FFT convolution), a wrong "
    "recorded shape or dtype (e.g. TF32 or a lower precision than recorded), or a wrong preset",
    "memory": "above memory ceiling: data served from a cache level the spec lacks, a wrong recorded shape "
    "or dtype, or a wrong preset (perf calibrate measures the levels)",
    "runtime": "above runtime ceiling: shorter than the spec's minimum op time (a wrong preset; perf calibrate)",
    "communication": "above link ceiling: a faster link or algorithm than the preset's "
    "(wrong preset, in-switch reduction)",
}


def above_ceiling(efficiency: np.ndarray | pd.Series) -> np.ndarray:
    """True where a measured time beats the floor by more than TOLERANCE (efficiency > 1.1)."""
    e = np.asarray(efficiency, dtype=np.float64)
    return np.nan_to_num(e, nan=0.0) > 1 + TOLERANCE


def flag(table: pd.DataFrame) -> pd.DataFrame:
    """`table` (classified units or their groups: columns bound, efficiency) with columns
    `above_ceiling` (bool) and `ceiling_note` (the likely cause where above, else '')."""
    above = above_ceiling(table["efficiency"])
    table["above_ceiling"] = above
    bound = table["bound"].to_numpy(dtype=object)
    note = np.full(len(table), "", dtype=object)
    for i in np.flatnonzero(above):
        note[i] = CAUSES.get(str(bound[i]), "above ceiling: a figure of the floor does not hold for this op")
    table["ceiling_note"] = pd.Series(note, dtype=object, index=table.index)
    return table
