"""Cost of collectives: message bytes and the bytes each rank moves over its link.

A collective's data movement is communication, never also memory (docs/architecture.md). For a message of
S bytes over a group of n ranks, the bytes one rank sends with the ring algorithms NCCL and gloo
use (NCCL's "bus bandwidth" conventions, nccl-tests/doc/PERFORMANCE.md):

    all_reduce      2 (n-1)/n * S     (reduce-scatter then all-gather)
    all_gather        (n-1)/n * S_out (S_out: the gathered output)
    reduce_scatter    (n-1)/n * S_in
    all_to_all        (n-1)/n * S
    broadcast, reduce, send/recv, gather, scatter:  S
    barrier           0

The latency term counts steps, and takes the fewest any algorithm needs: a tree (or recursive
doubling / halving) finishes in ceil(log2 n) rounds, twice that for all_reduce and barrier
(reduce then broadcast); send/recv is one step. Ring bytes are bandwidth-optimal (Patarasuk and
Yuan 2009) and log-depth steps are latency-optimal, and Rabenseifner's algorithm attains both for
all_reduce (Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication Operations
in MPICH", IJHPCA 2005), so

    t_comm = link.latency + steps * link.hop_latency + algorithm bytes / link.bandwidth

is a floor in the alpha-beta model (latency and hop_latency: NCCL's baseLat and hwLat).

What the trace records: NCCL kernels and record_param_comms ops carry 'Collective name',
'In/Out msg nelems', 'Group size' and 'dtype'; gloo's worker-thread regions ('gloo:all_reduce')
carry only the tensor's shape and dtype, so their group size is the rank's world size.
"""

from __future__ import annotations

import math

import numpy as np
import orjson
import pandas as pd

from analysis.comm_patterns import Patterns, bundled
from profiler.model.dtypes import element_bytes
from profiler.model.strings import distinct as distinct_names

#: collective names as recorded -> our names
_ALIASES = {
    "allreduce": "all_reduce",
    "all_reduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "_allgather_base": "all_gather",
    "allgather": "all_gather",
    "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "alltoall": "all_to_all",
    "all_to_all": "all_to_all",
    "alltoall_base": "all_to_all",
    "all_to_all_single": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send_recv",
    "recv": "send_recv",
    "isend": "send_recv",
    "irecv": "send_recv",
    "sendrecv": "send_recv",
    "barrier": "barrier",
}
_DTYPE = {4: "fp32", 8: "fp64", 2: "bf16", 1: "int8"}
GLOO_PREFIX = "gloo:"


def collective_kind(name: str, collective: str, patterns: Patterns | None = None) -> str | None:
    """Our name of a unit's collective, from 'Collective name' when recorded, else from the unit's
    name through the table of collective names (analysis/collectives.yaml and the user's
    additions: analysis.comm_patterns): NCCL/RCCL kernels, gloo regions, SymmetricMemory and
    custom all-reduce ops and kernels, DeepEP / NVSHMEM kernels. None: not a collective."""
    if collective:
        key = collective.lower()
        return _ALIASES.get(key) or _ALIASES.get(key.lstrip("_")) or "collective"
    return (patterns or bundled()).kind(name, _ALIASES)


def algorithm_bytes(kind: str, in_bytes: float, out_bytes: float, n: int) -> float:
    """Bytes one rank sends for `kind` over a group of n (see the module docstring)."""
    if n <= 1 or kind == "barrier":
        return 0.0
    ring = (n - 1) / n
    return {
        "all_reduce": 2 * ring * in_bytes,
        "all_gather": ring * out_bytes,
        "reduce_scatter": ring * in_bytes,
        "all_to_all": ring * in_bytes,
    }.get(kind, in_bytes)


def algorithm_steps(kind: str, n: int) -> int:
    """Fewest latency steps of `kind` over a group of n (see the module docstring)."""
    if n <= 1:
        return 0
    rounds = math.ceil(math.log2(n))
    return {"all_reduce": 2 * rounds, "barrier": 2 * rounds, "send_recv": 1}.get(kind, rounds)


def comm_table(
    units: pd.DataFrame,
    world_size: dict[int, int],
    patterns: Patterns | None = None,
    work_kinds: pd.Series | None = None,
) -> pd.DataFrame:
    """Collective cost per unit (rows aligned with `units`, from analysis.units.units).

    Columns: collective (our name, '' for other units), comm_bytes (message bytes: the input, or
    the output for all_gather; NaN when unknown), algo_bytes (bytes one rank sends; NaN when
    unknown), algo_steps (latency steps; NaN when unknown), dtype ('' when unknown).
    `world_size` maps rank -> the trace's world size, the group size of collectives that record
    none (gloo regions, custom all-reduce ops). `patterns`: the table of collective names
    (default: the bundled one). `work_kinds` (aligned with `units`, optional): the collective
    kind of each unit's device work (`unit_work_kinds`): an op whose kernel is a collective
    (a DeepEP or custom all-reduce kernel launched under an op the table does not name) is one.
    """
    pats = patterns or bundled()
    n = len(units)
    kinds, comm, algo, dtypes = (
        np.full(n, "", dtype=object),
        np.full(n, np.nan),
        np.full(n, np.nan),
        np.full(n, "", dtype=object),
    )
    steps = np.full(n, np.nan)
    codes, distinct = pd.factorize(units["name"].to_numpy(dtype=object))
    named = [collective_kind(str(n), "", pats) for n in distinct]  # per distinct name
    kind_of = [named[c] for c in codes]
    if work_kinds is not None and n:
        by_work = work_kinds.to_numpy(dtype=object)
        kind_of = [k if k is not None else (by_work[i] or None) for i, k in enumerate(kind_of)]
    maybe = np.flatnonzero(
        (units["collective"].to_numpy(dtype=object) != "") | np.array([k is not None for k in kind_of], dtype=bool)
    )
    cols = [
        "name",
        "collective",
        "msg_in_nelems",
        "msg_out_nelems",
        "group_size",
        "msg_dtype",
        "shapes",
        "dtypes",
        "rank",
    ]
    for i, r in zip(maybe, units.iloc[maybe][cols].itertuples(index=False)):  # collectives only: few
        kind = collective_kind(str(r.name), str(r.collective or ""), pats) if r.collective else kind_of[i]
        if kind is None:
            continue
        kinds[i] = kind
        rule = pats.find(str(r.name))
        elem, in_n, out_n, group = _message(r, world_size, rule.message if rule is not None else None)
        if elem is None or in_n is None or group is None:
            continue
        in_b, out_b = in_n * elem, (out_n if out_n is not None else in_n) * elem
        comm[i] = out_b if kind == "all_gather" else in_b
        algo[i] = algorithm_bytes(kind, in_b, out_b, group)
        steps[i] = algorithm_steps(kind, group)
        dtypes[i] = _DTYPE.get(elem, "")
    return pd.DataFrame(
        {"collective": kinds, "comm_bytes": comm, "algo_bytes": algo, "algo_steps": steps, "dtype": dtypes},
        index=units.index,
    )


def unit_work_kinds(events: pd.DataFrame, units: pd.DataFrame, patterns: Patterns | None = None) -> pd.Series:
    """For each unit (analysis.units.units), the collective kind of the first of its device work
    (in event order) whose name the collective table knows ('' for none and for host units);
    rows aligned with `units`. The table is matched once per distinct work name."""
    from profiler.model.schema import DEVICE_WORK_KINDS

    pats = patterns or bundled()
    work = events["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    op = events["op_id"].to_numpy()[work]
    unit = np.where(op >= 0, op, events["id"].to_numpy()[work])
    codes, distinct = distinct_names(events["name"][work])  # by category code: no string per row
    kind_of_name = np.array([pats.kind(n, _ALIASES) or "" for n in distinct[:-1]] + [""], dtype=object)
    kind = kind_of_name[codes]
    hit = kind != ""
    first = pd.Series(kind[hit]).groupby(unit[hit], sort=False).first()
    return pd.Series(first.reindex(units["unit_id"].to_numpy()).fillna("").to_numpy(dtype=object), index=units.index)


def _message(r, world_size: dict[int, int], arg: int | None) -> tuple[int | None, int | None, int | None, int | None]:
    """(element size, input elements, output elements, group size) of one unit, None when unknown.
    `arg`: the argument that is the message, for collectives known by name (None: not derivable)."""
    if r.msg_in_nelems >= 0:  # recorded by record_param_comms / NCCL kernels
        elem = element_bytes(r.msg_dtype)
        group = int(r.group_size) if r.group_size > 0 else world_size.get(int(r.rank))
        return elem, int(r.msg_in_nelems), int(r.msg_out_nelems) if r.msg_out_nelems >= 0 else None, group
    if arg is None:
        return None, None, None, None
    try:  # a gloo region or a custom all-reduce op: the message argument's shape and dtype
        shapes, dtypes = orjson.loads(r.shapes or "[]"), orjson.loads(r.dtypes or "[]")
    except orjson.JSONDecodeError:
        return None, None, None, None
    if len(shapes) <= arg or len(dtypes) <= arg or not isinstance(shapes[arg], list):
        return None, None, None, None
    first = shapes[arg][0] if shapes[arg] and isinstance(shapes[arg][0], list) else shapes[arg]
    if not first or not all(isinstance(d, int) for d in first):
        return None, None, None, None
    return element_bytes(dtypes[arg]), math.prod(first), None, world_size.get(int(r.rank))


def apply_comm(costs: pd.DataFrame, comm: pd.DataFrame, names: pd.Series) -> pd.DataFrame:
    """`costs` (analysis.cost.cost_table rows) with collectives costed as communication only:
    family 'collective', no FLOPs and no memory bytes, plus `algo_bytes` and `algo_steps` (NaN elsewhere).
    A c10d:: op that records no message (the enqueue of a collective a worker thread runs)
    costs nothing itself: only its dispatch (the runtime floor) remains.
    """
    out = costs.copy()
    out["algo_bytes"] = np.nan
    out["algo_steps"] = np.nan
    is_comm = (comm["collective"] != "").to_numpy()
    codes, distinct = pd.factorize(names.to_numpy(dtype=object))
    enqueue = np.array([str(n).startswith("c10d::") for n in distinct], dtype=bool)[codes] & ~is_comm
    known = is_comm & ~np.isnan(comm["algo_bytes"].to_numpy())
    zero = known | enqueue
    for col in ("flops", "flops_effective", "bytes_read", "bytes_written"):
        out.loc[zero, col] = 0.0
        out.loc[is_comm & ~known, col] = np.nan
    out.loc[is_comm | enqueue, "family"] = "collective"
    out.loc[is_comm, "dtype"] = np.where(
        comm["dtype"].to_numpy(dtype=object)[is_comm] != "", comm["dtype"].to_numpy(dtype=object)[is_comm], "unknown"
    )
    out.loc[known, "algo_bytes"] = comm["algo_bytes"].to_numpy()[known]
    out.loc[known, "algo_steps"] = comm["algo_steps"].to_numpy()[known]
    return out


def comm_groups(classified: pd.DataFrame) -> pd.DataFrame:
    """Collectives of the op table: per (name, shapes) of classified units (analysis.roofline.classify)
    whose family is 'collective': algo_bytes (byte, summed; NaN when any unit's is unknown),
    algo_bw (byte/s: algo_bytes over the units' summed time, NCCL's "bus bandwidth"; NaN when
    unknown), enqueue (True for a c10d:: op that only hands the collective to a backend's
    worker: the run waits on that work, not on this op)."""
    c = classified[classified["family"] == "collective"]
    if c.empty:
        return pd.DataFrame(columns=["name", "shapes", "algo_bytes", "algo_bw", "enqueue"])
    g = (
        c.groupby(["name", "shapes"], sort=False)
        .agg(algo_bytes=("algo_bytes", lambda s: s.sum() if s.notna().all() else np.nan), time_ns=("time_ns", "sum"))
        .reset_index()
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        g["algo_bw"] = np.where(g["time_ns"] > 0, g["algo_bytes"] / g["time_ns"] * 1e9, np.nan)
    kinds = [collective_kind(str(n), "") for n in g["name"]]
    g["enqueue"] = [str(n).startswith("c10d::") and k is None for n, k in zip(g["name"], kinds)]
    return g.drop(columns="time_ns")
