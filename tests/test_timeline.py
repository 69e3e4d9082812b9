"""Streams, communication overlap and launch delays on a hand-built trace (times in us)."""

from __future__ import annotations

import pytest

from analysis.timeline import communication_overlap, launch_delays, streams
from profiler import analyze, load_trace
from tests.conftest import real_trace, write_trace, x

COLL = {
    "Collective name": "allreduce",
    "In msg nelems": 1 << 20,
    "Out msg nelems": 1 << 20,
    "Group size": 2,
    "dtype": "Float",
}


def kernel(name, ts, dur, stream, corr, **args):
    return x(name, "kernel", ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr, **args)


EVENTS = [
    x("A", "cpu_op", 1, 2),
    x("cudaLaunchKernel", "cuda_runtime", 2, 0.5, correlation=1),
    x("record_param_comms", "cpu_op", 4, 2, **COLL),
    x("cudaLaunchKernel", "cuda_runtime", 5, 0.5, correlation=2),
    x("B", "cpu_op", 6.2, 1),
    x("cudaLaunchKernel", "cuda_runtime", 6.5, 0.5, correlation=3),
    kernel("K1", 10, 20, 7, 1),  # [10, 30) compute stream
    kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 20, 30, 20, 2, **COLL),  # [20, 50) comm stream
    kernel("K2", 40, 5, 7, 3),  # [40, 45)
]


@pytest.fixture
def trace(tmp_path):
    return load_trace(write_trace(tmp_path / "t.json", EVENTS))


def test_streams(trace):
    s = streams(trace).set_index("stream")
    # window [10, 50) = 40 us; stream 7 busy [10,30) + [40,45) = 25; stream 20 busy 30
    assert s.loc["rank0/gpu0/stream7", ["busy_ns", "idle_ns"]].tolist() == [25_000, 15_000]
    assert s.loc["rank0/gpu0/stream20", ["busy_ns", "idle_ns"]].tolist() == [30_000, 10_000]


def test_communication_overlap(trace):
    a = analyze(trace)
    row = communication_overlap(trace, a.units).iloc[0]
    # comm [20,50) = 30; other [10,30) + [40,45) = 25; union [10,50) = 40
    # overlapped = 30 + 25 - 40 = 15 ([20,30) and [40,45)); exposed = 30 - 15 = 15
    assert (row["comm_ns"], row["overlapped_ns"], row["exposed_ns"]) == (30_000, 15_000, 15_000)


def test_launch_delays(trace):
    d = launch_delays(trace).set_index("stream").loc["rank0/gpu0/stream7"]
    # K1 launched at 2 starts at 10 (8 us); K2 launched at 6.5 starts at 40 (33.5 us):
    # p50 = (8 + 33.5) / 2 = 20.75 us, max 33.5 us
    assert (d["launches"], d["delay_p50_ns"], d["delay_max_ns"]) == (2, 20_750, 33_500)
    # at the launch at 2: 1 issued, 0 started; at 6.5: 2 issued, 0 started -> depths 1, 2
    assert (d["queue_mean"], d["queue_max"]) == (1.5, 2)


@pytest.mark.parametrize("folder", ["nccl_meta_a100", "ddp_allreduce_v100", "dlrm_8rank_v100"])
def test_exposed_never_exceeds_total_communication(folder):
    t = load_trace(real_trace(folder))
    a = analyze(t)
    ov = communication_overlap(t, a.units)
    assert ((ov["exposed_ns"] >= 0) & (ov["exposed_ns"] <= ov["comm_ns"])).all()
    st = streams(t)
    assert (st["busy_ns"] <= st["busy_ns"] + st["idle_ns"]).all() and (st["idle_ns"] >= 0).all()
