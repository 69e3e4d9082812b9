"""The Kineto reader on small hand-built traces whose expected tables are worked out here."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.busy import device_time
from profiler import InputError, load_trace
from tests.conftest import write_trace, x

GPU = dict(pid=0)


def _kernel(name, ts, dur, stream, corr, **extra):
    return x(name, "kernel", ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr, **extra)


EVENTS = [
    x("ProfilerStep#5", "user_annotation", 0, 100),
    x(
        "aten::linear",
        "cpu_op",
        10,
        30,
        **{
            "External id": 1,
            "Input Dims": [[4, 8], [16, 8], [16]],
            "Input type": ["float", "float", "float"],
            "Concrete Inputs": ["", "", ""],
        },
    ),
    x("aten::addmm", "cpu_op", 12, 20, **{"External id": 2}),
    x("cudaLaunchKernel", "cuda_runtime", 14, 5, correlation=100, **{"External id": 2}),
    x("aten::relu", "cpu_op", 50, 10, **{"External id": 3}),
    x("cudaLaunchKernel", "cuda_runtime", 51, 4, correlation=101),
    x("cudaGraphLaunch", "cuda_runtime", 70, 3, correlation=102),
    _kernel("gemm", 20, 10, 7, 100),
    _kernel("relu_kernel", 25, 10, 8, 101),
    _kernel("graph_k1", 80, 5, 7, 102),
    _kernel("graph_k2", 86, 4, 7, 102),
    x(
        "Memcpy DtoD (Device -> Device)",
        "gpu_memcpy",
        95,
        2.5,
        pid=0,
        tid=8,
        device=0,
        stream=8,
        correlation=103,
        bytes=1024,
    ),
]


@pytest.fixture
def trace(tmp_path):
    return load_trace(write_trace(tmp_path / "t.json", EVENTS, distributedInfo={"rank": 0, "world_size": 1}))


def row(trace, name):
    ev = trace.events
    return ev[ev["name"] == name].iloc[0]


def test_kinds_tracks_and_times(trace):
    ev = trace.events
    assert len(ev) == 12  # 7 host + 5 device intervals
    assert row(trace, "aten::addmm")["kind"] == "op"
    assert row(trace, "cudaGraphLaunch")["kind"] == "runtime"
    assert row(trace, "ProfilerStep#5")["kind"] == "annotation"
    assert row(trace, "gemm")["track"] == "rank0/gpu0/stream7"
    assert row(trace, "aten::relu")["track"] == "rank0/cpu/thread1"
    m = row(trace, "Memcpy DtoD (Device -> Device)")
    assert (m["kind"], m["ts"], m["dur"], m["bytes_recorded"]) == ("memcpy", 95_000, 2_500, 1024)  # 2.5 us = 2500 ns
    assert row(trace, "aten::linear")["shapes"] == "[[4,8],[16,8],[16]]"
    assert row(trace, "aten::linear")["dtypes"] == '["float","float","float"]'  # compact JSON
    assert row(trace, "aten::linear")["concrete"] == '["","",""]'
    assert row(trace, "aten::addmm")["concrete"] == ""  # not recorded


def test_nesting(trace):
    def parent(name):
        pid = row(trace, name)["parent_id"]
        return None if pid == -1 else trace.events.set_index("id").loc[pid, "name"]

    assert parent("ProfilerStep#5") is None
    assert parent("aten::linear") == "ProfilerStep#5"
    assert parent("aten::addmm") == "aten::linear"
    assert parent("cudaGraphLaunch") == "ProfilerStep#5"
    depths = {n: int(row(trace, n)["depth"]) for n in ("ProfilerStep#5", "aten::linear", "aten::addmm", "aten::relu")}
    assert depths == {"ProfilerStep#5": 0, "aten::linear": 1, "aten::addmm": 2, "aten::relu": 1}
    launch = trace.events[trace.events["name"] == "cudaLaunchKernel"]
    assert launch["depth"].tolist() == [3, 2]  # under addmm (depth 2) and under relu (depth 1)


def test_launch_links_and_graph_launch(trace):
    ids = dict(zip(trace.events["name"].astype(str), trace.events["id"]))
    assert row(trace, "gemm")["op_id"] == ids["aten::addmm"]  # innermost op above the launch
    assert row(trace, "relu_kernel")["op_id"] == ids["aten::relu"]
    assert row(trace, "graph_k1")["op_id"] == -1  # graph launched from an annotation, no op
    flows = trace.flows[trace.flows["kind"] == "launch"]
    graph = flows[flows["src"] == ids["cudaGraphLaunch"]]
    assert sorted(graph["dst"]) == sorted([ids["graph_k1"], ids["graph_k2"]])  # one launch, two kernels
    assert len(flows) == 4  # gemm, relu_kernel, graph_k1, graph_k2; the memcpy's call was not recorded
    assert trace.problems.counts["device events whose runtime launch was not recorded"] == 1


def test_steps(trace):
    assert set(trace.events["step"]) == {5}  # everything, device work included, ran inside ProfilerStep#5


def test_busy_two_streams(trace):
    dt = device_time(trace).set_index("device")
    # gemm [20,30) and relu_kernel [25,35) overlap on two streams: union [20,35) = 15 us;
    # graph kernels 5 + 4 us; memcpy 2.5 us. busy = 26.5 us; window 20 -> 97.5 us = 77.5 us.
    assert dt.loc["gpu0", "busy_ns"] == 26_500
    assert dt.loc["gpu0", "window_ns"] == 77_500
    assert dt.loc["gpu0", "idle_ns"] == 77_500 - 26_500


def test_devices_from_properties(tmp_path):
    props = [
        {
            "id": 0,
            "name": "NVIDIA A100-SXM4-80GB",
            "numSms": 108,
            "computeMajor": 8,
            "computeMinor": 0,
            "totalGlobalMem": 85_899_345_920,
            "warpSize": 32,
        }
    ]
    t = load_trace(write_trace(tmp_path / "t.json", EVENTS, deviceProperties=props))
    gpu = t.devices[t.devices["device"] == "gpu0"].iloc[0]
    assert (gpu["name"], gpu["sm_count"], gpu["compute_capability"], gpu["memory_bytes"]) == (
        "NVIDIA A100-SXM4-80GB",
        108,
        "8.0",
        85_899_345_920,
    )


def test_legacy_2021_names(tmp_path):
    events = [
        x("aten::conv2d", "Operator", 10, 20, pid=9, tid="9", **{"external id": 4}),
        x("cudaLaunchKernel", "Runtime", 12, 3, pid=9, tid="9", correlation=7, **{"external id": 4}),
        x(
            "implicit_gemm",
            "Kernel",
            15,
            6,
            pid=0,
            tid="stream 7",
            device=0,
            stream=7,
            correlation=7,
            **{"external id": 4},
        ),
        x("Memset (Device)", "Memset", 30, 1, pid=0, tid="stream 7", device=0, stream=7, correlation=8),
    ]
    t = load_trace(write_trace(tmp_path / "legacy.json", events))
    ev = t.events.set_index("name")
    assert ev.loc["aten::conv2d", "kind"] == "op" and ev.loc["aten::conv2d", "thread"] == 9
    assert ev.loc["implicit_gemm", "kind"] == "kernel" and ev.loc["implicit_gemm", "stream"] == 7
    assert ev.loc["implicit_gemm", "op_id"] == ev.loc["aten::conv2d", "id"]
    assert ev.loc["Memset (Device)", "kind"] == "memset"


def test_ranks_aligned_by_base_time(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    one = [x("aten::mm", "cpu_op", 1.5, 1)]
    write_trace(d / "r0.json", one, distributedInfo={"rank": 0}, baseTimeNanoseconds=1_000_000_000)
    write_trace(d / "r1.json", one, distributedInfo={"rank": 1}, baseTimeNanoseconds=1_000_000_700)
    t = load_trace(d)
    ts = dict(zip(t.events["rank"], t.events["ts"]))
    # ts_ns = ts_us * 1000 + baseTimeNanoseconds: 1500 + 1e9 and 1500 + 1e9 + 700
    assert ts == {0: 1_000_001_500, 1: 1_000_002_200}
    assert t.events["id"].is_unique
    assert set(t.events["track"]) == {"rank0/cpu/thread1", "rank1/cpu/thread1"}


def test_duplicate_rank_is_an_error(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for name in ("a.json", "b.json"):
        write_trace(d / name, [x("aten::mm", "cpu_op", 1, 1)], distributedInfo={"rank": 3})
    with pytest.raises(InputError, match="claims rank 3, as does a.json"):
        load_trace(d)


def test_zero_length_and_equal_intervals_nest(tmp_path):
    events = [
        x("outer", "cpu_op", 0, 10),
        x("zero_at_start", "cpu_op", 0, 0),
        x("inner", "cpu_op", 2, 3),
        x("same_as_inner", "cpu_op", 2, 3),
        x("zero_at_end", "cpu_op", 10, 0),
    ]
    t = load_trace(write_trace(tmp_path / "z.json", events))
    ev = t.events.set_index("name")
    name_of = dict(zip(t.events["id"], t.events["name"]))
    parent = {n: name_of.get(ev.loc[n, "parent_id"]) for n in ev.index}
    # zero_at_end starts where outer ends: outside it (half-open intervals)
    assert parent == {
        "outer": None,
        "zero_at_start": "outer",
        "inner": "outer",
        "same_as_inner": "inner",
        "zero_at_end": None,
    }
    assert np.array_equal(ev.loc[["outer", "inner", "same_as_inner"], "depth"].to_numpy(), [0, 1, 2])


def test_ranks_from_file_order_relabel_every_table(tmp_path):
    # No file names its rank: ranks follow file order, and every table says so.
    d = tmp_path / "run"
    d.mkdir()
    mem = {
        "ph": "i",
        "s": "t",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": 3,
        "args": {"Device Type": 0, "Device Id": -1, "Bytes": 64},
    }
    for name in ("a.json", "b.json"):
        write_trace(d / name, [x("aten::mm", "cpu_op", 1, 1), mem])
    t = load_trace(d)
    assert sorted(set(zip(t.events["rank"], t.events["track"]))) == [(0, "rank0/cpu/thread1"), (1, "rank1/cpu/thread1")]
    assert sorted(set(zip(t.counters["rank"], t.counters["track"]))) == [
        (0, "rank0/cpu/memory"),
        (1, "rank1/cpu/memory"),
    ]
    assert t.metadata["ranks"]["1"]["rank_source"] == "file order"
