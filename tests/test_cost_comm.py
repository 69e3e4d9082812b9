"""Collective costs: algorithm bytes by hand, and collectives in real traces."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.cost.comm import algorithm_bytes, algorithm_steps, collective_kind, comm_table
from profiler import analyze, load_trace
from tests.conftest import real_trace


@pytest.mark.parametrize("kind, in_b, out_b, n, want", [
    ("all_reduce", 64e6, 64e6, 2, 64e6),  # 2 (n-1)/n S = 2 * 1/2 * 64 MB
    ("all_reduce", 80e6, 80e6, 8, 140e6),  # 2 * 7/8 * 80 MB
    ("all_gather", 1e6, 8e6, 8, 7e6),  # (n-1)/n * S_out = 7/8 * 8 MB
    ("reduce_scatter", 8e6, 1e6, 8, 7e6),  # (n-1)/n * S_in
    ("all_to_all", 4e6, 4e6, 4, 3e6),  # 3/4 * 4 MB
    ("broadcast", 5e6, 5e6, 8, 5e6),  # the whole message
    ("barrier", 0, 0, 8, 0), ("all_reduce", 1e6, 1e6, 1, 0),  # nothing to send
])
def test_algorithm_bytes(kind, in_b, out_b, n, want):
    assert algorithm_bytes(kind, in_b, out_b, n) == pytest.approx(want)


def test_names():
    assert collective_kind("record_param_comms", "allreduce") == "all_reduce"
    assert collective_kind("x", "_allgather_base") == "all_gather"
    assert collective_kind("gloo:all_reduce", "") == "all_reduce"
    assert collective_kind("aten::mm", "") is None


def test_gloo_region_uses_shape_and_world_size():
    units = pd.DataFrame([{"name": "gloo:all_reduce", "collective": "", "msg_in_nelems": -1, "msg_out_nelems": -1,
                           "group_size": -1, "msg_dtype": "", "shapes": "[[16777216]]", "dtypes": '["float"]', "rank": 0}])
    row = comm_table(units, {0: 2}).iloc[0]
    # 16,777,216 floats = 64 MiB; ring all-reduce over 2 ranks sends 2 * 1/2 of it
    assert (row["collective"], row["comm_bytes"], row["algo_bytes"], row["dtype"]) == ("all_reduce", 4 * 2**24, 4 * 2**24, "fp32")


def test_nccl_collectives_in_a_real_trace_are_communication():
    a = analyze(load_trace(real_trace("nccl_meta_a100")))
    coll = a.units[a.units["family"] == "collective"]
    # the trace's 21 NCCL kernels (15 all_reduce + 6 broadcast; traces README) are all costed
    assert coll["work_events"].sum() == 21
    assert set(coll["bound"]) == {"communication"}
    assert (coll["bytes"] == 0).all() and (coll["flops"] == 0).all()  # never memory, never compute
    eq = a.equation.iloc[0]
    assert eq["communication_ns"] > 0


def test_collectives_known_by_kernel_name_without_metadata():
    # dlrm's 2023 traces record no message sizes for most collectives: the family is still known
    # (so overlap can be measured), the cost stays unknown (never guessed).
    assert collective_kind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", "") == "send_recv"
    assert collective_kind("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "") == "all_gather"
    t = load_trace(real_trace("dlrm_8rank_v100"))
    a = analyze(t, rank=0)
    coll = a.units[a.units["family"] == "collective"]
    assert len(coll) > 0 and set(coll["bound"]) <= {"communication", "unknown", "runtime"}
    from analysis.timeline import communication_overlap

    ov = communication_overlap(t, a.units)
    assert ov["comm_ns"].iloc[0] > 0 and 0 <= ov["exposed_ns"].iloc[0] <= ov["comm_ns"].iloc[0]


@pytest.mark.parametrize("kind, n, want", [
    ("all_reduce", 8, 6),       # reduce then broadcast down a tree: 2 * log2(8)
    ("all_reduce", 6, 6),       # 2 * ceil(log2 6) = 2 * 3
    ("all_gather", 8, 3),       # recursive doubling: log2(8)
    ("broadcast", 2, 1),
    ("send_recv", 64, 1),
    ("barrier", 4, 4),
    ("all_reduce", 1, 0),       # a group of one moves nothing
])
def test_algorithm_steps(kind, n, want):
    assert algorithm_steps(kind, n) == want


def test_comm_floor_counts_latency_steps():
    # 8-rank all_reduce of 64 MiB fp32 on an A100 (NVLink3 300 GB/s per direction, NCCL baseLat
    # 3.6 us + hwLat 0.47 us per step): t = 3.6 + 6 * 0.47 + 2 * 7/8 * 64 MiB / 300 GB/s
    #   = 3.6 + 2.82 + 391.46 us = 397.88 us
    from analysis.roofline import _floors
    from profiler.model.hardware import load_spec

    u = pd.DataFrame({"family": ["collective"], "dtype": ["fp32"], "flops": [0.0], "flops_effective": [0.0],
                      "bytes": [0.0], "algo_bytes": [2 * 7 / 8 * 64 * 2**20], "algo_steps": [6.0]})
    floors, _ = _floors(u, load_spec("a100-sxm-80gb"))
    assert floors[0, 2] == pytest.approx((3.6e-6 + 6 * 0.47e-6 + 2 * 7 / 8 * 64 * 2**20 / 300e9) * 1e9)
    assert floors[0, 2] == pytest.approx(397_880, rel=1e-4)
