"""The wall-time equation on a hand-built trace whose nanoseconds are worked out below."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.attribution import attribute, equal_shares
from profiler import load_trace
from tests.conftest import write_trace, x


def kernel(name, ts, dur, stream, corr):
    return x(name, "kernel", ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr)


# Times in us. Host thread 1 launches four kernels; stream 7 and stream 8 on gpu0.
EVENTS = [
    x("A", "cpu_op", 0, 5),
    x("cudaLaunchKernel", "cuda_runtime", 1, 1, correlation=1),
    x("B", "cpu_op", 29, 3),
    x("cudaLaunchKernel", "cuda_runtime", 30, 1, correlation=2),
    x("cudaDeviceSynchronize", "cuda_runtime", 41, 19),
    x("C", "cpu_op", 42, 0.5),
    x("cudaLaunchKernel", "cuda_runtime", 42, 0.5, correlation=3),
    x("D", "cpu_op", 43, 0.5),
    x("cudaLaunchKernel", "cuda_runtime", 43, 0.5, correlation=4),
    kernel("K1", 10, 10, 7, 1),  # [10, 20)
    kernel("K2", 32, 8, 7, 2),  # [32, 40)
    kernel("K3", 50, 10, 8, 3),  # [50, 60) on stream 8
    kernel("K4", 52, 6, 7, 4),  # [52, 58), concurrent with K3
]


@pytest.fixture
def trace(tmp_path):
    return load_trace(write_trace(tmp_path / "a.json", EVENTS))


def test_hand_worked_equation(trace):
    ids = dict(zip(trace.events["name"].astype(str), trace.events["id"]))
    bounds = pd.Series({ids["A"]: "compute", ids["B"]: "memory", ids["C"]: "runtime"})  # D: not classified
    row = attribute(trace, bounds).iloc[0]
    # Shares: K1 10 us -> compute; K2 8 us -> memory; K3 and K4 overlap on [52, 58):
    # K3 gets 2 + 6/2 + 2 = 7 us -> runtime, K4 gets 6/2 = 3 us -> unknown. Busy = 10 + 8 + 10 = 28.
    assert (row["compute_ns"], row["memory_ns"], row["runtime_ns"], row["unknown_ns"]) == (10_000, 8_000, 7_000, 3_000)
    assert row["communication_ns"] == 0 and row["busy_ns"] == 28_000
    # Window [10, 60) = 50 us; idle 22 us. Gap [20, 32): K2's launch was issued at 30, so 10 us
    # host-bound, then 2 us other. Gap [40, 50): K3 issued at 42 -> 2 us host; [42, 50) lies
    # inside cudaDeviceSynchronize [41, 60) -> 8 us sync.
    assert row["window_ns"] == 50_000
    assert (row["idle_host_ns"], row["idle_sync_ns"], row["idle_other_ns"]) == (12_000, 8_000, 2_000)
    parts = [
        "compute_ns",
        "memory_ns",
        "communication_ns",
        "runtime_ns",
        "unknown_ns",
        "idle_host_ns",
        "idle_sync_ns",
        "idle_other_ns",
    ]
    assert sum(row[p] for p in parts) == row["window_ns"]


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 30)), min_size=1, max_size=40))
def test_shares_sum_to_the_union(ivs):
    import numpy as np

    from analysis.intervals import union_length

    s = np.array([a for a, _ in ivs], dtype=np.int64)
    e = s + np.array([d for _, d in ivs], dtype=np.int64)
    shares = equal_shares(s, e)
    assert abs(shares.sum() - union_length(s, e)) < 1e-6
    assert (shares <= (e - s) + 1e-9).all() and (shares > 0).all()


@pytest.mark.parametrize("folder", ["b200_eager", "dlrm_8rank_v100", "vllm_graphs_mi300x", "resnet50_legacy_v100"])
def test_equation_holds_on_real_traces(folder):
    from analysis.busy import device_time
    from tests.conftest import real_trace

    t = load_trace(real_trace(folder))
    eq = attribute(t, pd.Series(dtype=object))
    parts = [
        "compute_ns",
        "memory_ns",
        "communication_ns",
        "runtime_ns",
        "unknown_ns",
        "idle_host_ns",
        "idle_sync_ns",
        "idle_other_ns",
    ]
    assert (eq[parts].sum(axis=1) == eq["window_ns"]).all()
    assert (eq["unknown_ns"] == eq["busy_ns"]).all()  # nothing classified: all busy time is unknown
    dt = device_time(t)
    gpu = dt[dt["device"] != "cpu"].reset_index(drop=True)
    assert eq["busy_ns"].tolist() == gpu["busy_ns"].tolist() and eq["window_ns"].tolist() == gpu["window_ns"].tolist()


def test_cpu_threads_share_time_by_self_time(tmp_path):
    # Thread 1: A [0,10) us with child B [2,6), then D [12,14). Thread 2: C [4,8).
    # Self pieces: A [0,2) + [6,10); B [2,6); C [4,8); D [12,14).
    # [0,2) A alone: A 2 | [2,4) B: 2 | [4,6) B and C: 1 each | [6,8) A and C: 1 each | [8,10) A: 2
    # => A 5 (compute), B 3 (memory), C 2 (runtime), D 2 (unknown); busy 12; window 14;
    # [10,12) nothing runs: 2 us of host time (Python between ops).
    events = [x("A", "cpu_op", 0, 10), x("B", "cpu_op", 2, 4), x("D", "cpu_op", 12, 2), x("C", "cpu_op", 4, 4, tid=2)]
    t = load_trace(write_trace(tmp_path / "cpu.json", events))
    ids = dict(zip(t.events["name"].astype(str), t.events["id"]))
    row = attribute(t, pd.Series({ids["A"]: "compute", ids["B"]: "memory", ids["C"]: "runtime"})).iloc[0]
    assert row["device"] == "cpu"
    assert (row["compute_ns"], row["memory_ns"], row["runtime_ns"], row["unknown_ns"]) == (5_000, 3_000, 2_000, 2_000)
    assert (row["busy_ns"], row["window_ns"], row["idle_host_ns"], row["idle_other_ns"]) == (12_000, 14_000, 2_000, 0)


def test_equation_per_iteration(tmp_path):
    # Two ProfilerSteps on the host; each launches one kernel. Step 1: K [10,20) us launched at 2.
    # Step 2: K [60,64) launched at 52, then K [70,74) launched at 53 (idle [64,70): launch
    # issued at 53, so 6 us of "other" idle). Device work belongs to the step that launched it.
    def k(ts, dur, corr):
        return x(f"k{corr}", "kernel", ts, dur, pid=0, tid=7, device=0, stream=7, correlation=corr)

    events = [
        x("ProfilerStep#1", "user_annotation", 0, 50),
        x("A", "cpu_op", 1, 3),
        x("cudaLaunchKernel", "cuda_runtime", 2, 1, correlation=1),
        x("ProfilerStep#2", "user_annotation", 50, 50),
        x("B", "cpu_op", 51, 3),
        x("cudaLaunchKernel", "cuda_runtime", 52, 0.5, correlation=2),
        x("cudaLaunchKernel", "cuda_runtime", 53, 0.5, correlation=3),
        k(10, 10, 1),
        k(60, 4, 2),
        k(70, 4, 3),
    ]
    t = load_trace(write_trace(tmp_path / "steps.json", events))
    per = attribute(t, pd.Series(dtype=object), by_step=True).set_index("step")
    assert per.loc[1, ["window_ns", "busy_ns", "unknown_ns"]].tolist() == [10_000, 10_000, 10_000]
    assert per.loc[2, ["window_ns", "busy_ns", "idle_host_ns", "idle_other_ns"]].tolist() == [14_000, 8_000, 0, 6_000]
    whole = attribute(t, pd.Series(dtype=object)).iloc[0]
    assert whole["busy_ns"] == per["busy_ns"].sum()  # the steps split the work, nothing lost


def test_rank_span_counts_host_time_before_and_after_the_device_work(tmp_path):
    """Times in us. Host op A [0, 30) launches K [22, 32) at 20 (cudaLaunchKernel [20, 21));
    then the host runs B [40, 100). Device window: [22, 32), 10 us busy. Rank span [0, 100):
    before K, 20 us host late (launch issued at 20) + 2 us queued (other); after K, 68 us of
    host time (nothing left to launch). 10 + 20 + 2 + 68 = 100."""
    events = [
        x("A", "cpu_op", 0, 30),
        x("cudaLaunchKernel", "cuda_runtime", 20, 1, correlation=1),
        x("B", "cpu_op", 40, 60),
        kernel("K", 22, 10, 7, 1),
    ]
    t = load_trace(write_trace(tmp_path / "t.json", events))
    device = attribute(t, pd.Series(dtype=object)).iloc[0]
    assert (device["window_ns"], device["idle_host_ns"]) == (10_000, 0)
    row = attribute(t, pd.Series(dtype=object), span="rank").iloc[0]
    assert (row["window_ns"], row["busy_ns"], row["idle_host_ns"], row["idle_sync_ns"], row["idle_other_ns"]) == (
        100_000,
        10_000,
        88_000,
        0,
        2_000,
    )
    with pytest.raises(ValueError):
        attribute(t, pd.Series(dtype=object), by_step=True, span="rank")
