"""Critical path: hand-built traces with the nanoseconds worked out, a property test, and every
real trace (each rank)."""

from __future__ import annotations

import tempfile
import time
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.critical_path import CLASSES, _longest, critical_path, critical_paths
from analysis.critical_path_graph import Graph
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
    x("A", "cpu_op", 0, 30),
    launch(20, 5, 1),
    x("B", "cpu_op", 40, 30),
    launch(60, 5, 2),
    x("C", "cpu_op", 80, 30),
    launch(100, 5, 3),
    kernel("K1", 26, 2, 1),
    kernel("K2", 66, 2, 2),
    kernel("K3", 106, 2, 3),
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
    assert by_class(cp) == {
        "compute": 0,
        "memory": 0,
        "communication": 0,
        "runtime": 15_000,
        "unknown": 0,
        "host": 95_000,
        "waiting": 0,
    }
    assert (cp.on_host_ns, cp.on_device_ns, cp.verdict) == (110_000, 0, "host-bound")
    assert list(cp.segments.loc[cp.segments["kind"] == "untraced", "start_ns"]) == [30_000, 70_000]


# Device-bound: op A launches three 100 us kernels in 12 us, then the host waits in
# cudaDeviceSynchronize until they are done, and runs B.
DEVICE_BOUND = [
    x("A", "cpu_op", 0, 20),
    launch(2, 2, 1),
    launch(6, 2, 2),
    launch(10, 2, 3),
    x("cudaDeviceSynchronize", "cuda_runtime", 20, 287),  # [20, 307)
    x("B", "cpu_op", 310, 5),
    kernel("K1", 5, 100, 1),
    kernel("K2", 105, 100, 2),
    kernel("K3", 205, 100, 3),
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
    assert list(s["name"]) == [
        "A",
        "cudaLaunchKernel",
        "(waiting)",
        "K1",
        "K2",
        "K3",
        "cudaDeviceSynchronize",
        "(untraced host)",
        "B",
    ]
    sync = s[s["name"] == "cudaDeviceSynchronize"].iloc[0]
    assert (sync["start_ns"], sync["end_ns"], sync["class"]) == (305_000, 307_000, "runtime")
    # length 315 us = compute 300 (K1..K3, unit A) + runtime 4 (launch 2 + sync tail 2)
    #   + host 10 (A [0,2) 2 + untraced [307,310) 3 + B 5) + waiting 1 (K1 queued [4, 5))
    assert cp.length_ns == 315_000
    assert by_class(cp) == {
        "compute": 300_000,
        "memory": 0,
        "communication": 0,
        "runtime": 4_000,
        "unknown": 0,
        "host": 10_000,
        "waiting": 1_000,
    }
    assert (cp.on_device_ns, cp.on_host_ns, cp.verdict) == (300_000, 14_000, "device-bound")
    assert set(s.loc[(s["on"] == "device") & (s["kind"] == "kernel"), "unit_id"]) == {ids["A"]}


def test_sync_waits_only_for_work_that_ended_by_its_return(tmp_path):
    # K1 (stream 7) ends inside cudaStreamSynchronize; K2 (stream 8) runs past the call's end,
    # so the call cannot have waited for it.
    events = [
        launch(0, 2, 1),
        launch(4, 2, 2),
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
    events = [
        launch(0, 5, 9, name="hipGraphLaunch"),
        x("after", "cpu_op", 5, 5),
        kernel("G1", 6, 14, 9),
        kernel("G2", 20, 20, 9),
        kernel("G3", 40, 30, 9),
    ]
    cp = critical_path(load(tmp_path, events), 0)
    check_shape(cp)
    # 5 (launch) + 14 + 20 + 30 = 69 us of work; [5, 6) waiting; length 70
    assert (cp.work_ns, cp.length_ns, cp.verdict) == (69_000, 70_000, "device-bound")
    assert list(cp.segments["name"]) == ["hipGraphLaunch", "(waiting)", "G1", "G2", "G3"]


def test_gloo_worker_thread_is_on_the_cpu_path(tmp_path):
    # main thread 1 enqueues an all-reduce that gloo runs on thread 2, then waits (untraced)
    events = [
        x("c10d::allreduce_", "cpu_op", 0, 10),
        x("gloo:all_reduce", "user_annotation", 5, 95, tid=2),
        x("aten::add", "cpu_op", 105, 5),
    ]
    t = load(tmp_path, events)
    ids = ids_of(t)
    units = pd.DataFrame(
        {
            "unit_id": [ids["c10d::allreduce_"], ids["gloo:all_reduce"], ids["aten::add"]],
            "bound": ["runtime", "communication", "memory"],
        }
    )
    cp = critical_path(t, 0, units)
    check_shape(cp)
    # c10d [0,10) = 10; the region follows it: its work is [10, 100) (its first 5 us overlap
    # the op) -> 100; aten::add waits for the region -> 105. Gap [100, 105) is waiting.
    assert (cp.work_ns, cp.length_ns, cp.verdict) == (105_000, 110_000, "cpu-only")
    assert list(cp.segments["name"]) == ["c10d::allreduce_", "gloo:all_reduce", "(waiting)", "aten::add"]
    assert by_class(cp)["communication"] == 90_000 and by_class(cp)["waiting"] == 5_000


def test_python_frames_are_host_time_not_work(tmp_path):
    # python frame f [0, 100) around ops A [10, 30) and B [50, 60); after 20 us of untraced
    # time, frame g [120, 130) around op C [122, 128). One thread, no device (times in us).
    events = [
        x("f", "python_function", 0, 100),
        x("A", "cpu_op", 10, 20),
        x("B", "cpu_op", 50, 10),
        x("g", "python_function", 120, 10),
        x("C", "cpu_op", 122, 6),
    ]
    cp = critical_path(load(tmp_path, events), 0)
    check_shape(cp)
    # Frames are labels, not work: L = A 20 + B 10 + C 6 = 36. The path starts where A's work
    # does (f's first piece [0, 10) is a label on no earlier work) and ends at g's end: 120.
    assert (cp.work_ns, cp.length_ns, cp.wall_ns, cp.verdict) == (36_000, 120_000, 130_000, "cpu-only")
    s = cp.segments
    assert list(zip(s["name"], s["kind"], s["class"], s["start_ns"] // 1000, s["end_ns"] // 1000)) == [
        ("A", "op", "unknown", 10, 30),
        ("f", "python", "host", 30, 50),
        ("B", "op", "unknown", 50, 60),
        ("f", "python", "host", 60, 100),
        ("(untraced host)", "untraced", "host", 100, 120),
        ("g", "python", "host", 120, 122),
        ("C", "op", "unknown", 122, 128),
        ("g", "python", "host", 128, 130),
    ]
    # host: f's self time 40 + untraced 20 + g's self time 4; unknown: the ops (no units table)
    assert by_class(cp) == {
        "compute": 0,
        "memory": 0,
        "communication": 0,
        "runtime": 0,
        "unknown": 36_000,
        "host": 84_000,
        "waiting": 0,
    }


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
        g = Graph(t, rank)  # the optimised DP agrees with the plain one on real graphs (with cycles)
        assert listed(_longest(g)) == reference_longest(g)
        with capsys.disabled():
            print(
                f"\n{folder} rank {rank}: path {cp.length_ns / 1e6:.2f} ms of {cp.wall_ns / 1e6:.2f} ms wall, "
                f"{cp.verdict}, {len(cp.segments)} segments, {took:.2f} s"
            )


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


def ints(xs: list[int]) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def listed(longest: tuple[np.ndarray, np.ndarray, np.ndarray, int]) -> tuple[list[int], list[int], list[int], int]:
    """_longest's arrays as lists, to compare with reference_longest."""
    L, R, P, dropped = longest
    return L.tolist(), R.tolist(), P.tolist(), dropped


def reference_longest(g) -> tuple[list[int], list[int], list[int], int]:
    """The longest-path DP written plainly (Kahn's algorithm, FIFO, every node visited; the
    first implementation): the oracle for the optimised _longest."""
    n = g.n
    preds = [[] for _ in range(n)]
    succs = [[] for _ in range(n)]
    for a, b in zip(g.src.tolist(), g.dst.tolist()):
        preds[b].append(a)
        succs[a].append(b)
    indeg = [len(p) for p in preds]
    end, cs = g.end.tolist(), g.cs.tolist()
    L, R, P, done = [0] * n, [0] * n, [-1] * n, [False] * n
    queue = deque(v for v in range(n) if indeg[v] == 0)
    by_start = sorted(range(n), key=lambda v: g.start[v])
    cursor = processed = dropped = 0
    while processed < n:
        if not queue:  # a cycle: release the earliest unfinished node
            while done[by_start[cursor]]:
                cursor += 1
            queue.append(by_start[cursor])
        v = queue.popleft()
        best, best_r, best_p = end[v] - cs[v], None, -1
        for u in preds[v]:
            if not done[u]:
                dropped += 1
                continue
            cand = L[u] + max(0, end[v] - max(cs[v], R[u]))
            if cand > best or (cand == best and (best_p < 0 or R[u] > best_r)):
                best, best_r, best_p = cand, R[u], u
        L[v], P[v] = best, best_p
        R[v] = max(best_r, end[v]) if best_p >= 0 else end[v]
        done[v], processed, indeg[v] = True, processed + 1, -1
        for s in succs[v]:
            if indeg[s] > 0:
                indeg[s] -= 1
                if indeg[s] == 0:
                    queue.append(s)
    return L, R, P, dropped


@st.composite
def graphs(draw):
    """Nodes in lanes (runs of i -> i+1 edges, like a thread's pieces), random extra edges
    forward and backward in time (cycles, as clock skew makes), duplicates; cs within
    [start, end]. Times in ns."""
    n = draw(st.integers(1, 40))
    start, end, cs, src, dst, t = [], [], [], [], [], 0
    for v in range(n):
        long = not draw(st.integers(0, 2))  # sometimes far back in time, and long
        t += draw(st.integers(-60, 10) if long else st.integers(-3, 10))
        dur = draw(st.integers(0, 100 if long else 12))
        start.append(t)
        end.append(t + dur)
        cs.append(t + draw(st.integers(0, dur)))
        if v and draw(st.integers(0, 5)):  # mostly the lane's program order
            src.append(v - 1)
            dst.append(v)
    for _ in range(draw(st.integers(0, n))):
        src.append(draw(st.integers(0, n - 1)))
        dst.append(draw(st.integers(0, n - 1)))
    ok = [a != b for a, b in zip(src, dst)]
    return SimpleNamespace(n=n, start=ints(start), end=ints(end), cs=ints(cs), src=ints(src)[ok], dst=ints(dst)[ok])


def test_longest_release_inside_a_run():
    """Nodes 1..5 form a run (each one's only predecessor is the previous, which ends by its
    cs). 0 <-> 1 is a cycle, so nothing is ready: node 4 starts earliest and is released first
    (dropping 3 -> 4), then node 0 (dropping 1 -> 0). The run after 0 must stop before 4."""
    g = SimpleNamespace(
        n=6,
        start=ints([10, 11, 12, 13, 0, 20]),
        end=ints([11, 12, 13, 14, 20, 21]),
        cs=ints([10, 11, 12, 13, 14, 20]),
        src=ints([1, 0, 1, 2, 3, 4]),
        dst=ints([0, 1, 2, 3, 4, 5]),
    )
    L, R, P, dropped = listed(_longest(g))
    # 4 alone: its work [14, 20) = 6; 5 follows: + 1. 0 alone: 1; 1..3 follow it: 2, 3, 4.
    assert (L, P, dropped) == ([1, 2, 3, 4, 6, 7], [-1, 0, 1, 2, -1, 4], 2)
    assert (L, R, P, dropped) == reference_longest(g)


@settings(max_examples=1000, deadline=None)
@given(graphs())
def test_longest_matches_the_plain_dp(g):
    assert listed(_longest(g)) == reference_longest(g)
