"""Critical path: hand-built traces with the nanoseconds worked out, a property test, and every
real trace (each rank)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.critical_path import CLASSES, critical_path, critical_paths
from profiler import load_trace
from tests.conftest import TRACES, write_trace, x


def launch(ts, dur, corr, tid=1, name="cudaLaunchKernel"):
    return x(name, "cuda_runtime", ts, dur, tid=tid, correlation=corr)


def kernel(name, ts, dur, corr, stream=7):
    return x(name, "kernel", ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr)


def load(tmp_path: Path, events: list[dict]):
    return load_trace(write_trace(tmp_path / "t.json", events))


def ids_of(trace) -> dict[str, int]:
    return dict(zip(trace.events["name"].astype(str), trace.events["id"]))


def by_class(cp) -> dict[str, int]:
    return dict(zip(cp.by_class["class"], cp.by_class["time_ns"]))


def check_shape(cp) -> None:
    """Segments are contiguous, sum to the length, and the classes sum to it too."""
    s = cp.segments
    assert (s["start_ns"].iloc[1:].to_numpy() == s["end_ns"].iloc[:-1].to_numpy()).all()
    assert int(s["dur_ns"].sum()) == cp.length_ns == int(cp.by_class["time_ns"].sum())
    not_work = s["kind"].isin(["wait", "untraced", "python", "annotation"])
    assert int(s.loc[~not_work, "dur_ns"].sum()) == cp.work_ns
    assert 0 <= cp.work_ns <= cp.length_ns <= cp.wall_ns


# Host-bound: three 30 us ops, each launching a 2 us kernel, with 10 us of untraced Python
# between them (times in us).
HOST_BOUND = [
    x("A", "cpu_op", 0, 30), launch(20, 5, 1),
    x("B", "cpu_op", 40, 30), launch(60, 5, 2),
    x("C", "cpu_op", 80, 30), launch(100, 5, 3),
    kernel("K1", 26, 2, 1), kernel("K2", 66, 2, 2), kernel("K3", 106, 2, 3),
]


def test_host_bound(tmp_path):
    cp = critical_path(load(tmp_path, HOST_BOUND), 0)
    check_shape(cp)
    # Traced host work chained by program order: 3 ops x 30 us = 90 us (L). The best device
    # chain ends in K3: A + B (60) + C up to its launch's end (25) + K3 (2) = 87 < 90.
    assert cp.work_ns == 90_000
    # The path runs from A's start to C's end: 110 us; the two 10 us gaps are untraced host time.
    assert (cp.length_ns, cp.wall_ns) == (110_000, 110_000)
    # runtime: 3 launch calls x 5 us; host: 3 x 25 us op self time + 2 x 10 us untraced
    assert by_class(cp) == {"compute": 0, "memory": 0, "communication": 0, "runtime": 15_000, "unknown": 0,
                            "host": 95_000, "waiting": 0}
    assert (cp.on_host_ns, cp.on_device_ns, cp.verdict) == (110_000, 0, "host-bound")
    assert list(cp.segments.loc[cp.segments["kind"] == "untraced", "start_ns"]) == [30_000, 70_000]


# Device-bound: op A launches three 100 us kernels in 12 us, then the host waits in
# cudaDeviceSynchronize until they are done, and runs B.
DEVICE_BOUND = [
    x("A", "cpu_op", 0, 20), launch(2, 2, 1), launch(6, 2, 2), launch(10, 2, 3),
    x("cudaDeviceSynchronize", "cuda_runtime", 20, 287),  # [20, 307)
    x("B", "cpu_op", 310, 5),
    kernel("K1", 5, 100, 1), kernel("K2", 105, 100, 2), kernel("K3", 205, 100, 3),
]


def test_device_bound(tmp_path):
    t = load(tmp_path, DEVICE_BOUND)
    ids = ids_of(t)
    units = pd.DataFrame({"unit_id": [ids["A"]], "bound": ["compute"]})  # A launched K1..K3: one unit
    cp = critical_path(t, 0, units)
    check_shape(cp)
    # L: A[0,2) + launch [2,4) = 4; K1 +100 = 104; K2, K3 by stream order -> 304; the sync
    # waited for K3 (launched at 10 < 20, ended 305 <= 307): only its tail [305, 307) is work
    # -> 306; B follows by program order -> 311.
    assert cp.work_ns == 311_000
    s = cp.segments
    assert list(s["name"]) == ["A", "cudaLaunchKernel", "(waiting)", "K1", "K2", "K3", "cudaDeviceSynchronize",
                               "(untraced host)", "B"]
    sync = s[s["name"] == "cudaDeviceSynchronize"].iloc[0]
    assert (sync["start_ns"], sync["end_ns"], sync["class"]) == (305_000, 307_000, "runtime")
    # length 315 us = compute 300 (K1..K3, unit A) + runtime 4 (launch 2 + sync tail 2)
    #   + host 10 (A [0,2) 2 + untraced [307,310) 3 + B 5) + waiting 1 (K1 queued [4, 5))
    assert cp.length_ns == 315_000
    assert by_class(cp) == {"compute": 300_000, "memory": 0, "communication": 0, "runtime": 4_000, "unknown": 0,
                            "host": 10_000, "waiting": 1_000}
    assert (cp.on_device_ns, cp.on_host_ns, cp.verdict) == (300_000, 14_000, "device-bound")
    assert set(s.loc[(s["on"] == "device") & (s["kind"] == "kernel"), "unit_id"]) == {ids["A"]}


def test_sync_waits_only_for_work_that_ended_by_its_return(tmp_path):
    # K1 (stream 7) ends inside cudaStreamSynchronize; K2 (stream 8) runs past the call's end,
    # so the call cannot have waited for it.
    events = [
        launch(0, 2, 1), launch(4, 2, 2),
        x("cudaStreamSynchronize", "cuda_runtime", 10, 92),  # [10, 102)
        x("B", "cpu_op", 105, 5),
        kernel("K1", 3, 97, 1, stream=7),  # [3, 100)
        kernel("K2", 7, 97, 2, stream=8),  # [7, 104)
    ]
    cp = critical_path(load(tmp_path, events), 0)
    check_shape(cp)
    # L(K1) = 2 + 97 = 99; the sync's work is [100, 102) -> 101; B -> 106. (Had K2 counted as
    # waited for, the sync would be blocked to its end and the path would run through K2.)
    s = cp.segments
    assert cp.work_ns == 106_000 and "K2" not in set(s["name"])
    sync = s[s["name"] == "cudaStreamSynchronize"].iloc[0]
    assert (sync["start_ns"], sync["end_ns"]) == (100_000, 102_000)
    assert list(s["name"]) == ["cudaLaunchKernel", "(waiting)", "K1", "cudaStreamSynchronize", "(untraced host)", "B"]


def test_graph_launch_reaches_all_its_kernels(tmp_path):
    # one hipGraphLaunch, three kernels sharing its correlation id
    events = [launch(0, 5, 9, name="hipGraphLaunch"), x("after", "cpu_op", 5, 5),
              kernel("G1", 6, 14, 9), kernel("G2", 20, 20, 9), kernel("G3", 40, 30, 9)]
    cp = critical_path(load(tmp_path, events), 0)
    check_shape(cp)
    # 5 (launch) + 14 + 20 + 30 = 69 us of work; [5, 6) waiting; length 70
    assert (cp.work_ns, cp.length_ns, cp.verdict) == (69_000, 70_000, "device-bound")
    assert list(cp.segments["name"]) == ["hipGraphLaunch", "(waiting)", "G1", "G2", "G3"]


def test_gloo_worker_thread_is_on_the_cpu_path(tmp_path):
    # main thread 1 enqueues an all-reduce that gloo runs on thread 2, then waits (untraced)
    events = [x("c10d::allreduce_", "cpu_op", 0, 10), x("gloo:all_reduce", "user_annotation", 5, 95, tid=2),
              x("aten::add", "cpu_op", 105, 5)]
    t = load(tmp_path, events)
    ids = ids_of(t)
    units = pd.DataFrame({"unit_id": [ids["c10d::allreduce_"], ids["gloo:all_reduce"], ids["aten::add"]],
                          "bound": ["runtime", "communication", "memory"]})
    cp = critical_path(t, 0, units)
    check_shape(cp)
    # c10d [0,10) = 10; the region follows it: its work is [10, 100) (its first 5 us overlap
    # the op) -> 100; aten::add waits for the region -> 105. Gap [100, 105) is waiting.
    assert (cp.work_ns, cp.length_ns, cp.verdict) == (105_000, 110_000, "cpu-only")
    assert list(cp.segments["name"]) == ["c10d::allreduce_", "gloo:all_reduce", "(waiting)", "aten::add"]
    assert by_class(cp)["communication"] == 90_000 and by_class(cp)["waiting"] == 5_000


def test_critical_paths_summarises_each_rank(tmp_path):
    t = load(tmp_path, DEVICE_BOUND)
    table = critical_paths(t)
    assert list(table["rank"]) == [0] and table["length_ns"].iloc[0] == 315_000
    assert table[[f"{c}_ns" for c in CLASSES]].sum(axis=1).iloc[0] == 315_000


@st.composite
def traces(draw):
    """Top-level host ops on one or two threads (some launching a kernel), kernels queued on
    two streams after their launch, and top-level synchronize calls. Times in us."""
    events, corr, t_by_thread, stream_free = [], 0, {1: 0, 2: 0}, {7: 0, 8: 0}
    for _ in range(draw(st.integers(1, 12))):
        tid = draw(st.sampled_from([1, 1, 2]))
        start = t_by_thread[tid] + draw(st.integers(0, 20))
        dur = draw(st.integers(1, 60))
        what = draw(st.sampled_from(["op", "launch", "sync"]))
        if what == "sync":
            events.append(x("cudaStreamSynchronize", "cuda_runtime", start, dur, tid=tid))
        else:
            events.append(x(f"op{len(events)}", "cpu_op", start, dur, tid=tid))
        if what == "launch":
            corr += 1
            at = start + draw(st.integers(0, dur - 1))
            events.append(launch(at, 1 if at + 1 <= start + dur else 0, corr, tid=tid))
            stream = draw(st.sampled_from([7, 8]))
            k_start = max(at + draw(st.integers(0, 30)), stream_free[stream])
            k_dur = draw(st.integers(1, 200))
            events.append(kernel(f"k{corr}", k_start, k_dur, corr, stream=stream))
            stream_free[stream] = k_start + k_dur
        t_by_thread[tid] = start + dur
    return events


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_path_lies_between_the_longest_event_and_the_wall(events):
    with tempfile.TemporaryDirectory() as d:
        t = load_trace(write_trace(Path(d) / "p.json", events))
    cp = critical_path(t, 0)
    check_shape(cp)
    ev = t.events
    work = ev[~ev["name"].astype(str).str.contains("Synchronize")]  # a sync call's span is waiting
    longest = int(work["dur"].max()) if len(work) else 0
    assert longest <= cp.work_ns <= cp.length_ns <= cp.wall_ns


REAL = sorted(p.name for p in TRACES.iterdir() if p.is_dir() and p.name != "LICENSES") if TRACES.is_dir() else []


@pytest.mark.parametrize("folder", REAL)
def test_every_real_trace_and_rank(folder, capsys):
    from tests.conftest import real_trace

    t = load_trace(real_trace(folder))
    for rank in t.ranks:
        t0 = time.perf_counter()
        cp = critical_path(t, rank)
        took = time.perf_counter() - t0
        check_shape(cp)
        assert 0 < cp.length_ns <= cp.wall_ns
        with capsys.disabled():
            print(f"\n{folder} rank {rank}: path {cp.length_ns / 1e6:.2f} ms of {cp.wall_ns / 1e6:.2f} ms wall, "
                  f"{cp.verdict}, {len(cp.segments)} segments, {took:.2f} s")


def test_real_trace_classes_come_from_the_units():
    from profiler import analyze
    from tests.conftest import real_trace

    t = load_trace(real_trace("sglang_qwen3_prefill_mi300x"))
    a = analyze(t, sections=("roofline",))
    cp = critical_path(t, 0, a.units)
    dev = cp.segments[(cp.segments["on"] == "device") & (cp.segments["kind"] != "wait")]
    bound = pd.Series(a.units["bound"].to_numpy(), index=a.units["unit_id"].to_numpy())
    assert (dev["class"].to_numpy() == bound.reindex(dev["unit_id"].to_numpy()).to_numpy()).all()
    assert by_class(cp)["compute"] > 0  # its GEMMs have shapes, so they classify
