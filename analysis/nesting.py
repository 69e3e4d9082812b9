"""Each FLOP and byte counted once across nested ops (docs/roofline.md, "Nested ops").

The cost model gives a wrapper op the cost of the work it always does through a child
(`aten::linear` carries `aten::addmm`'s FLOPs, `aten::scaled_dot_product_attention` carries
`aten::_scaled_dot_product_flash_attention_for_cpu`'s, `aten::matmul` carries `aten::mm`'s).
The work runs in the innermost costed op, so the cost goes there:

    for an op A with a cost and its nearest costed descendant ops D1..Dk (ops with a cost of
    their own, found by walking down through ops without one):
        residual(A) = max(0, cost(A) - sum_i cost(Di))     per field: flops, flops_effective,
                                                            bytes_read, bytes_written
    A is a pure wrapper when its descendants carry all its FLOPs (FLOPs > 0), or, for an op
    with no FLOPs, all its bytes: its residual is then zero in every field.

A pure wrapper (and, on a CPU, an autograd node with no cost of its own whose work is costed
ops inside it) is shown with its implementation's bound: `carried_by` names the unit that does
the work (the descendant with the largest floor), and on a CPU, where a unit's time is its self
time, the wrapper's efficiency is the floors of the work inside it over its inclusive duration.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from analysis.units import op_parent
from profiler.model.strings import contains

_FIELDS = ("flops", "flops_effective", "bytes_read", "bytes_written")
#: Autograd nodes: no cost of their own, their work is the ATen ops inside them.
_AUTOGRAD = re.compile(r"(Backward\d*$)|(^autograd::engine::evaluate_function: )")


def carry_costs(events: pd.DataFrame, units: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """`costs` (rows aligned with `units`) with each wrapper's cost reduced to its residual, plus
    column `carried_by` (int64): for a pure wrapper or a CPU autograd node, the unit_id of the
    unit that does its work (the nearest costed descendant with the most FLOPs, then bytes);
    -1 otherwise. `events`: the trace's events (id, parent_id, kind)."""
    out = costs.reset_index(drop=True).copy()
    n = len(out)
    out["carried_by"] = np.full(n, -1, dtype=np.int64)
    out["parent_unit"] = np.full(n, -1, dtype=np.int64)
    if n == 0 or "parent_id" not in events:
        return out
    uid = units["unit_id"].to_numpy()
    values = {c: out[c].to_numpy(dtype=np.float64) for c in _FIELDS}
    nbytes = values["bytes_read"] + values["bytes_written"]
    costed = ~np.isnan(values["flops_effective"]) & ((values["flops"] > 0) | (nbytes > 0))
    row_of = pd.Series(np.arange(n), index=uid)
    row_of = row_of[~row_of.index.duplicated()]
    parent = pd.Series(op_parent(events), index=events["id"].to_numpy())
    parent = parent[~parent.index.duplicated()]
    child_rows, anc_rows = _nearest_costed_ancestor(np.flatnonzero(costed), uid, row_of, parent, costed)
    sums = {c: np.bincount(anc_rows, weights=np.nan_to_num(values[c][child_rows]), minlength=n) for c in _FIELDS}
    has_kids = np.bincount(anc_rows, minlength=n) > 0
    wrapper_of = has_kids & costed
    flops = values["flops"]
    covered_f = sums["flops"] >= flops * (1 - 1e-9)
    covered_b = (sums["bytes_read"] + sums["bytes_written"]) >= nbytes * (1 - 1e-9)
    pure = wrapper_of & np.where(flops > 0, covered_f, covered_b)
    for c in _FIELDS:
        residual = np.where(wrapper_of, np.maximum(0.0, values[c] - sums[c]), values[c])
        residual[pure] = 0.0
        out[c] = residual
    # who carries each pure wrapper: the descendant with the most FLOPs (then bytes)
    order = np.lexsort((nbytes[child_rows], flops[child_rows], anc_rows))
    last = _last_of_each(anc_rows[order])
    best_anc, best_child = anc_rows[order][last], child_rows[order][last]
    carried = np.full(n, -1, dtype=np.int64)
    carried[best_anc] = uid[best_child]
    keep = pure.copy()
    cpu = units["device"].to_numpy(dtype=object) == "cpu"
    autograd = cpu & np.isnan(values["flops_effective"]) & contains(units["name"], _AUTOGRAD)  # once per name
    if autograd.any():  # autograd nodes: every costed op anywhere below them
        a_child, a_anc = _every_ancestor(np.flatnonzero(costed), uid, row_of, parent, autograd)
        order = np.lexsort((nbytes[a_child], flops[a_child], a_anc))
        last = _last_of_each(a_anc[order])
        carried[a_anc[order][last]] = uid[a_child[order][last]]
        keep[a_anc[order][last]] = True
    out["carried_by"] = np.where(keep, carried, -1)
    out["parent_unit"] = _parent_unit(uid, row_of, parent)
    return out


def _last_of_each(sorted_keys: np.ndarray) -> np.ndarray:
    """Mask of the last position of each run of equal keys in a sorted array."""
    if not len(sorted_keys):
        return np.zeros(0, dtype=bool)
    return np.r_[sorted_keys[1:] != sorted_keys[:-1], True]


def _every_ancestor(
    rows: np.ndarray, uid: np.ndarray, row_of: pd.Series, parent: pd.Series, target: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(row, ancestor row) pairs: each of `rows` with every enclosing op whose unit row is in `target`."""
    kids, ancs = [], []
    origin = rows
    cur = parent.reindex(uid[rows]).fillna(-1).to_numpy(dtype=np.int64)
    while len(origin):
        alive = cur >= 0
        origin, cur = origin[alive], cur[alive]
        at = row_of.reindex(cur).to_numpy()
        at_rows = np.where(np.isnan(at), 0, at).astype(np.int64)
        hit = ~np.isnan(at) & target[at_rows]
        kids.append(origin[hit])
        ancs.append(at_rows[hit])
        cur = parent.reindex(cur).fillna(-1).to_numpy(dtype=np.int64)
    if not kids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(kids).astype(np.int64), np.concatenate(ancs).astype(np.int64)


def _parent_unit(uid: np.ndarray, row_of: pd.Series, parent: pd.Series) -> np.ndarray:
    """unit_id of each unit's nearest enclosing unit (-1 at the top)."""
    every = np.ones(len(uid), dtype=bool)
    child, anc = _nearest_costed_ancestor(np.arange(len(uid)), uid, row_of, parent, every)
    out = np.full(len(uid), -1, dtype=np.int64)
    out[child] = uid[anc]
    return out


def _nearest_costed_ancestor(
    rows: np.ndarray, uid: np.ndarray, row_of: pd.Series, parent: pd.Series, target: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(child rows, ancestor rows): for each of `rows`, its nearest enclosing op whose unit row
    is marked in `target` (walking up through ops that are not), when there is one."""
    cur = parent.reindex(uid[rows]).fillna(-1).to_numpy(dtype=np.int64)
    todo = rows
    kids, ancs = [], []
    while len(todo):
        alive = cur >= 0
        todo, cur = todo[alive], cur[alive]
        at = row_of.reindex(cur).to_numpy()
        is_unit = ~np.isnan(at)
        at_rows = np.where(is_unit, at, 0).astype(np.int64)
        hit = is_unit & target[at_rows]
        kids.append(todo[hit])
        ancs.append(at_rows[hit])
        todo, cur = todo[~hit], parent.reindex(cur[~hit]).fillna(-1).to_numpy(dtype=np.int64)
    if not kids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(kids).astype(np.int64), np.concatenate(ancs).astype(np.int64)


def inherit_bounds(classified: pd.DataFrame) -> pd.DataFrame:
    """Wrappers (column `carried_by` >= 0) shown with the bound of the unit doing their work
    (followed through chains: aten::to -> aten::_to_copy -> aten::copy_), `carried_by_name`
    its op name, and on a CPU an efficiency over the wrapper's inclusive duration:

        efficiency(wrapper) = sum of floor_ns of the units inside it / (end_ns - start_ns)

    Its own floor and cost (the residual, usually zero) stay, so sums count each FLOP once;
    `nest_floor_ns` is that numerator for CPU wrappers (floor_ns for every other unit).
    """
    out = classified
    if "carried_by" not in out or not (out["carried_by"].to_numpy() >= 0).any():
        if "carried_by" in out:
            out["carried_by_name"] = ""
            out["nest_floor_ns"] = out["floor_ns"]
        return out
    uid = out["unit_id"].to_numpy()
    row_of = pd.Series(np.arange(len(out)), index=uid)
    row_of = row_of[~row_of.index.duplicated()]
    target = out["carried_by"].to_numpy().copy()
    for _ in range(16):  # follow chains of wrappers to the unit doing the work
        at = row_of.reindex(target).to_numpy()
        nxt = np.where(~np.isnan(at), out["carried_by"].to_numpy()[np.nan_to_num(at, nan=0).astype(np.int64)], -1)
        step = (target >= 0) & (nxt >= 0)
        if not step.any():
            break
        target = np.where(step, nxt, target)
    at = row_of.reindex(target).to_numpy()
    ok = (target >= 0) & ~np.isnan(at)
    rows = np.flatnonzero(ok)
    src = at[ok].astype(np.int64)
    bound = out["bound"].to_numpy(dtype=object).copy()
    bound[rows] = out["bound"].to_numpy(dtype=object)[src]
    out["bound"] = pd.Series(bound, dtype=object, index=out.index)
    name = np.full(len(out), "", dtype=object)
    name[rows] = out["name"].to_numpy(dtype=object)[src]
    out["carried_by_name"] = pd.Series(name, dtype=object, index=out.index)
    cpu = (out["device"].to_numpy(dtype=object) == "cpu")[rows]
    out["nest_floor_ns"] = out["floor_ns"]
    if cpu.any():
        inside = _floor_inside(out)
        nest = out["floor_ns"].to_numpy(dtype=np.float64).copy()
        nest[rows[cpu]] = inside[rows[cpu]]
        out["nest_floor_ns"] = nest
        span = (out["end_ns"] - out["start_ns"]).to_numpy(dtype=np.float64)
        eff = out["efficiency"].to_numpy(dtype=np.float64).copy()
        r = rows[cpu]
        with np.errstate(divide="ignore", invalid="ignore"):
            eff[r] = np.where(span[r] > 0, inside[r] / span[r], np.nan)
        out["efficiency"] = eff
    return out


def _floor_inside(u: pd.DataFrame) -> np.ndarray:
    """For each unit, the summed floor_ns of itself and every unit nested below it (column
    `parent_unit`: the unit_id of the nearest enclosing unit, -1 at the top)."""
    floors = np.nan_to_num(u["floor_ns"].to_numpy(dtype=np.float64))
    out = floors.copy()
    if "parent_unit" not in u:
        return out
    row_of = pd.Series(np.arange(len(u)), index=u["unit_id"].to_numpy())
    row_of = row_of[~row_of.index.duplicated()]
    parent_unit = u["parent_unit"].to_numpy()
    src = np.flatnonzero(floors > 0)
    cur = parent_unit[src]
    for _ in range(256):  # one step up the nest per pass; nests are shallow
        at = row_of.reindex(cur).to_numpy()
        ok = ~np.isnan(at)
        if not ok.any():
            break
        src, at_rows = src[ok], at[ok].astype(np.int64)
        np.add.at(out, at_rows, floors[src])
        cur = parent_unit[at_rows]
    return out
