"""Cross-rank analysis: the same collective on every rank, side by side.

The i-th collective of a group on each rank is one instance (analysis.collective_instances says
why that matches). A collective cannot start moving data before its last rank arrives, so for
an instance with arrivals a_r (the rank's kernel start) and ends e_r:

    wait_ns      = max_r a_r - min_r a_r        sync skew: how long the earliest rank waited
    transfer_ns  = max_r e_r - max_r a_r        from the last arrival to the last finish
    delay_ns     = max_r a_r - second-largest a_r
                                                what the last rank alone cost: had it arrived
                                                with the next-latest, the collective would have
                                                started that much sooner
    bus_bandwidth = algo_bytes / transfer_ns    bytes/s; algo_bytes is NCCL's "bus bandwidth"
                                                factor times the message (nccl-tests,
                                                doc/PERFORMANCE.md: all_reduce 2(n-1)/n,
                                                all_gather and reduce_scatter (n-1)/n,
                                                all_to_all (n-1)/n, broadcast, reduce and
                                                send/recv 1; analysis.cost.comm.algorithm_bytes)

Clocks: the ranks' timestamps are on one clock (collectors put each file's base time on it);
on a cluster whose clocks drift, the skew includes the drift.

A straggler is a rank that arrives last; its delay is the mean delay_ns over the instances it
was last at. The rank that sets the step time is the one that waits least at collectives
(everyone else waits for it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.columns import columns


def match_collectives(instances: pd.DataFrame, link_bandwidth: dict[int, float]) -> pd.DataFrame:
    """One row per collective instance seen on two ranks or more (columns: analysis/columns.py,
    'collectives'). `instances`: analysis.collective_instances of every rank; `link_bandwidth`:
    rank -> its link's bandwidth, bytes/s per direction (the hardware spec's first link; ranks
    without one are left out of the link figures)."""
    if instances.empty:
        return pd.DataFrame(columns=columns("collectives"))
    g = instances.groupby(["group", "seq"], sort=True)
    ranks = g["rank"].nunique()
    order = instances.sort_values(["group", "seq", "start_ns", "rank"], kind="stable")
    last = order.groupby(["group", "seq"]).tail(1).set_index(["group", "seq"])  # ties: the higher rank
    second = g["start_ns"].agg(lambda s: np.sort(s.to_numpy())[-2] if len(s) > 1 else np.nan)
    first_start, last_start, last_end = g["start_ns"].min(), g["start_ns"].max(), g["end_ns"].max()
    names = g["name"].agg(lambda s: "|".join(sorted(set(s))))  # 'a|b': the ranks disagree on the kind
    out = pd.DataFrame(
        {
            "name": names,
            "ranks": ranks.astype("int64"),
            "bytes": g["bytes"].max(),
            "algo_bytes": g["algo_bytes"].max(),
            "first_arrival_ns": first_start.astype("int64"),
            "last_arrival_ns": last_start.astype("int64"),
            "last_rank": last["rank"].astype("int64"),
            "end_ns": last_end.astype("int64"),
        }
    )
    out = out[out["ranks"] >= 2]
    out["wait_ns"] = out["last_arrival_ns"] - out["first_arrival_ns"]
    out["transfer_ns"] = out["end_ns"] - out["last_arrival_ns"]
    out["delay_ns"] = (out["last_arrival_ns"] - second.reindex(out.index)).fillna(0).astype("int64")
    secs = out["transfer_ns"].to_numpy() * 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        out["bus_bandwidth"] = np.where(secs > 0, out["algo_bytes"].to_numpy() / secs, np.nan)
    link = instances.groupby(["group", "seq"])["rank"].agg(
        lambda r: min((link_bandwidth[x] for x in r if x in link_bandwidth), default=np.nan)
    )  # the slowest link among the ranks bounds the collective
    out["link_bandwidth"] = link.reindex(out.index).astype("float64")
    out["link_share"] = out["bus_bandwidth"] / out["link_bandwidth"]
    out = out.reset_index()
    return out[columns("collectives")]


def per_rank_waits(instances: pd.DataFrame, collectives: pd.DataFrame) -> pd.DataFrame:
    """Each rank's wait at each matched instance: the last arrival minus its own (ns).
    Columns: rank, group, seq, wait_ns."""
    m = instances.merge(collectives[["group", "seq", "last_arrival_ns"]], on=["group", "seq"])
    return pd.DataFrame(
        {
            "rank": m["rank"].to_numpy(),
            "group": m["group"].to_numpy(),
            "seq": m["seq"].to_numpy(),
            "wait_ns": (m["last_arrival_ns"] - m["start_ns"]).to_numpy(dtype="int64"),
        }
    )


def stragglers(collectives: pd.DataFrame) -> pd.DataFrame:
    """Ranks that arrived last at a collective (delay_ns > 0), most total delay first.
    Columns: analysis/columns.py, 'stragglers'."""
    late = collectives[collectives["delay_ns"] > 0]
    if late.empty:
        return pd.DataFrame(columns=columns("stragglers"))
    g = late.groupby("last_rank")["delay_ns"]
    out = pd.DataFrame(
        {
            "rank": g.size().index.astype("int64"),
            "delay_ns": g.mean().round().astype("int64").to_numpy(),
            "collectives": g.size().astype("int64").to_numpy(),
            "total_delay_ns": g.sum().astype("int64").to_numpy(),
        }
    )
    out["share"] = out["collectives"] / len(collectives)
    out = out.sort_values(["total_delay_ns", "rank"], ascending=[False, True], kind="stable")
    return out[columns("stragglers")].reset_index(drop=True)


def rank_summary(instances: pd.DataFrame, collectives: pd.DataFrame, equation: pd.DataFrame) -> pd.DataFrame:
    """Per rank, its accelerators' bound breakdown (analysis.attribution.attribute, summed over
    the rank's accelerators) beside its collectives: how long it waited at them, how much it
    delayed the others, and whether it sets the step time (it waits least).
    Columns: analysis/columns.py, 'rank_summary'."""
    bounds = ["window_ns", "busy_ns", "compute_ns", "memory_ns", "communication_ns", "runtime_ns", "unknown_ns"]
    eq = equation[equation["device"].astype(str) != "cpu"] if len(equation) else equation
    if eq.empty and len(equation):
        eq = equation  # a CPU-only job: its host is the worker
    by_rank = (
        eq.groupby("rank")[bounds].sum() if len(eq) else pd.DataFrame(columns=bounds, index=pd.Index([], name="rank"))
    )
    waits = per_rank_waits(instances, collectives).groupby("rank")["wait_ns"]
    late = collectives[collectives["delay_ns"] > 0].groupby("last_rank")["delay_ns"].sum()
    ranks = sorted(set(by_rank.index.astype(int)) | set(instances["rank"].astype(int)))
    out = pd.DataFrame({"rank": np.array(ranks, dtype="int64")})
    for b in bounds:
        out[b] = by_rank[b].reindex(ranks).fillna(0).astype("int64").to_numpy()
    out["collectives"] = waits.size().reindex(ranks).fillna(0).astype("int64").to_numpy()
    out["wait_ns"] = waits.sum().reindex(ranks).fillna(0).astype("int64").to_numpy()
    out["late_ns"] = late.reindex(ranks).fillna(0).astype("int64").to_numpy()
    matched = out["collectives"] > 0
    setter = int(out.loc[matched, "wait_ns"].idxmin()) if matched.any() else -1
    out["sets_step"] = [i == setter for i in range(len(out))]
    return out[columns("rank_summary")]


def comm_matrix(instances: pd.DataFrame, world: int) -> pd.DataFrame:
    """Bytes each rank sent each other rank, where the trace says: all_to_all over the whole
    world, split evenly (torch's all_to_all_single without split sizes sends bytes/n to each
    rank; Kineto records no split sizes, so uneven splits would be misattributed: an assumption).
    Send/recv record no peer, and are left out. Columns: analysis/columns.py, 'comm_matrix'."""
    a2a = instances[(instances["name"] == "all_to_all") & (instances["group_size"] == world) & (world > 1)]
    a2a = a2a[a2a["bytes"].notna()]
    if a2a.empty:
        return pd.DataFrame(columns=columns("comm_matrix"))
    sent = a2a.groupby("rank").agg(bytes=("bytes", "sum"), collectives=("bytes", "size"))
    rows = [
        (int(src), dst, float(row.bytes) / world, int(row.collectives))
        for src, row in sent.iterrows()
        for dst in range(world)
        if dst != src
    ]
    out = pd.DataFrame(rows, columns=["src", "dst", "bytes", "collectives"])
    return out.astype({"src": "int64", "dst": "int64", "bytes": "float64", "collectives": "int64"})[
        columns("comm_matrix")
    ]
