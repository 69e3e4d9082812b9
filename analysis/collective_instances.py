"""One rank's collective instances: the small table cross-rank analysis matches (analysis.cross_rank).

Each collective a rank ran on its device is one instance, numbered in order of start within its
group. The trace records no process-group name on the DLRM-era Kineto files (only newer
record_param_comms ops carry 'Process Group Name', which the reader does not keep), so the group
is the device stream the collective's kernel ran on, numbered in order of first use on the rank:
NCCL runs each communicator on its own stream, and every rank issues one communicator's
collectives in the same order (the NCCL contract), so the i-th instance of group g is the same
collective on every rank. A kind that differs across ranks at one (group, seq) is reported by
analysis.cross_rank, not silently matched.

Message bytes come from the collective metadata when recorded (analysis.cost.comm.comm_table),
else from the process-group annotation the op carries ('nccl:all_reduce', 'gloo:all_to_all':
record_function regions whose Input Dims and Input type are the tensor sent).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

from analysis.cost.comm import _ALIASES, algorithm_bytes
from profiler.model.dtypes import element_bytes
from profiler.model.schema import DEVICE_WORK_KINDS
from profiler.model.trace import Trace

#: The process-group annotation inside a collective op: 'nccl:all_reduce', 'gloo:all_to_all'.
_PG_ANNOTATION = re.compile(r"^(?:nccl|gloo|ucc|mpi|xccl):(\w+)$")

INSTANCE_COLUMNS = [
    "rank",
    "group",
    "seq",
    "name",
    "bytes",
    "algo_bytes",
    "group_size",
    "start_ns",
    "end_ns",
]


def collective_instances(
    trace: Trace, units: pd.DataFrame, comm: pd.DataFrame, world_size: dict[int, int]
) -> pd.DataFrame:
    """The collectives each rank ran, one row per instance.

    `units`: analysis.units.units of `trace`; `comm`: analysis.cost.comm.comm_table of them
    (rows aligned); `world_size`: rank -> world size (the group size when none is recorded).
    Columns: rank, group (the collective's device stream, numbered by first use on the rank),
    seq (0, 1, ... within (rank, group) by start), name (our collective name: all_reduce,
    all_to_all, ...), bytes (the message: input bytes, output bytes for all_gather; NaN when
    unknown), algo_bytes (bytes one rank sends, analysis.cost.comm.algorithm_bytes; NaN when
    unknown), group_size (ranks in the collective), start_ns / end_ns (the device work's first
    start and last end: the rank's arrival and its finish).
    """
    on_device = (units["device"] != "cpu").to_numpy(dtype=bool)
    is_comm = (comm["collective"].to_numpy(dtype=object) != "") & on_device
    if not is_comm.any():
        return pd.DataFrame({c: pd.Series(dtype=_DTYPES[c]) for c in INSTANCE_COLUMNS})
    u = units.loc[is_comm]
    c = comm.loc[is_comm]
    ev = trace.events
    notes = _annotations(ev, set(u["unit_id"].tolist()))
    stream = _unit_streams(ev, u["unit_id"].to_numpy())
    rows = []
    for uid, rank, start, end, group_rec, kind, msg in zip(
        u["unit_id"].to_numpy(),
        u["rank"].to_numpy(),
        u["start_ns"].to_numpy(),
        u["end_ns"].to_numpy(),
        u["group_size"].to_numpy(),
        c["collective"].to_numpy(dtype=object),
        c["comm_bytes"].to_numpy(),
        strict=True,
    ):
        n = int(group_rec) if group_rec > 0 else world_size.get(int(rank), 1)
        note = notes.get(int(uid))
        if note is not None and kind in ("collective", "send_recv"):  # NCCL runs all_to_all as send/recv kernels
            kind = note[0]
        in_b = float(msg)
        if math.isnan(in_b) and note is not None:
            in_b = note[1]
        algo = algorithm_bytes(kind, in_b, in_b, n) if not math.isnan(in_b) else math.nan
        rows.append((int(rank), stream.get(int(uid), -1), kind, in_b, algo, n, int(start), int(end)))
    out = pd.DataFrame(
        rows, columns=["rank", "stream", "name", "bytes", "algo_bytes", "group_size", "start_ns", "end_ns"]
    )
    out = out.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)
    first_use = out.groupby(["rank", "stream"], sort=False)["start_ns"].transform("min")
    out["group"] = (
        out.assign(first=first_use).groupby("rank")["first"].rank(method="dense").astype("int64") - 1
    )  # streams numbered by first use: stream ids differ across ranks
    out["seq"] = out.groupby(["rank", "group"]).cumcount().astype("int64")
    return out[INSTANCE_COLUMNS].astype(_DTYPES)


_DTYPES = {
    "rank": "int64",
    "group": "int64",
    "seq": "int64",
    "name": object,
    "bytes": "float64",
    "algo_bytes": "float64",
    "group_size": "int64",
    "start_ns": "int64",
    "end_ns": "int64",
}


def _annotations(ev: pd.DataFrame, unit_ids: set[int]) -> dict[int, tuple[str, float]]:
    """unit id -> (collective name, message bytes) from the first process-group annotation
    ('nccl:all_to_all') nested in the unit's op; bytes NaN when its Input Dims say none."""
    names = ev["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):  # match each distinct name once
        cats = names.cat.categories.astype(str)
        hit_codes = np.flatnonzero(cats.str.match(_PG_ANNOTATION.pattern))
        hit = np.flatnonzero(np.isin(names.cat.codes.to_numpy(), hit_codes))
    else:
        hit = np.flatnonzero(names.astype(str).str.match(_PG_ANNOTATION.pattern).to_numpy())
    if not len(hit):
        return {}
    ids, parents = ev["id"].to_numpy(), ev["parent_id"].to_numpy()
    row_of = pd.Index(ids)
    out: dict[int, tuple[str, float]] = {}
    for i in hit:
        node, row = int(ids[i]), int(i)
        while node not in unit_ids:  # up to the op that is the unit
            node = int(parents[row])
            if node < 0:
                break
            row = int(row_of.get_loc(node))
        if node < 0 or node in out:
            continue
        m = _PG_ANNOTATION.match(str(names.iat[i]))
        assert m is not None
        kind = _ALIASES.get(m.group(1).lower(), "collective")
        out[node] = (kind, _tensor_bytes(str(ev["shapes"].iat[i]), str(ev["dtypes"].iat[i])))
    return out


def _tensor_bytes(shapes: str, dtypes: str) -> float:
    """Bytes of the first tensor of Input Dims / Input type (compact JSON); NaN when unknown."""
    try:
        dims, types = json.loads(shapes or "[]"), json.loads(dtypes or "[]")
    except ValueError:
        return math.nan
    if not dims or not types or not isinstance(dims[0], list) or not dims[0]:
        return math.nan
    elem = element_bytes(types[0])
    return float(math.prod(int(d) for d in dims[0]) * elem) if elem else math.nan


def _unit_streams(ev: pd.DataFrame, unit_ids: np.ndarray) -> dict[int, int]:
    """unit id -> the stream of its first device work (an op-less unit is its own work)."""
    work = ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()
    op = ev["op_id"].to_numpy()[work]
    owner = np.where(op >= 0, op, ev["id"].to_numpy()[work])
    keep = np.isin(owner, unit_ids)
    ts = ev["ts"].to_numpy()[work][keep]
    first = pd.DataFrame({"unit": owner[keep], "ts": ts, "stream": ev["stream"].to_numpy()[work][keep]})
    first = first.sort_values("ts", kind="stable").drop_duplicates("unit")
    return dict(zip(first["unit"].tolist(), first["stream"].astype("int64").tolist()))
