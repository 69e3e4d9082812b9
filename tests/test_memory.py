"""Allocator timeline and peak (analysis.memory) and the KV-cache footprint (analysis.kv_cache):
on allocations recorded here with torch.profiler, on hand-built samples whose figures are
worked out below, and on the real traces (checked against plain json parsing of the files)."""

from __future__ import annotations

import gzip
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.profiler import ProfilerActivity, profile

from analysis.memory import kv_cache_footprint, memory_summary, memory_timeline
from profiler import InputError, load_trace
from profiler.model.trace import Trace, empty_table
from tests.conftest import real_trace, write_trace, x

MiB = 2**20
GiB = 2**30


def _raw(folder: str) -> list[dict]:
    return json.loads(gzip.decompress(real_trace(folder).read_bytes()))["traceEvents"]


# ---------------------------------------------------------------------------- recorded here


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """4 MiB, then 16 MiB, free the 4, then 8 MiB, free all: fp32 tensors on this CPU."""
    path = tmp_path_factory.mktemp("mem") / "alloc.json"
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
        a = torch.empty(MiB // 4)  # 1 Mi floats * 4 B = 4 MiB
        b = torch.empty(4 * MiB)  # 16 MiB
        del a
        c = torch.empty(2 * MiB)  # 8 MiB
        del b, c
    prof.export_chrome_trace(str(path))
    return load_trace(path)


def test_recorded_peak_is_the_hand_arithmetic(recorded):
    s = memory_summary(recorded)
    row = s[s["device"] == "cpu"].iloc[0]
    # allocated after each event: 4, 4+16=20, 20-4=16, 16+8=24, 24-16=8, 8-8=0 MiB
    assert row["peak_allocated_bytes"] == 24 * MiB
    assert row["final_allocated_bytes"] == 0
    assert row["peak_above_start_bytes"] == 24 * MiB  # recording started at 0 B allocated
    assert math.isnan(row["peak_fraction"])  # a CPU has no recorded capacity
    # the peak is reached inside the third torch.empty, the one of 2 Mi elements
    ev = recorded.events.set_index("id")
    assert row["peak_op"] == "aten::empty" and row["peak_op_note"] == ""
    assert json.loads(ev.loc[row["peak_op_id"], "concrete"])[0] == "[2097152]"
    tl = memory_timeline(recorded)
    cpu = tl[tl["device"] == "cpu"]
    assert cpu["allocated_bytes"].max() == 24 * MiB
    assert (cpu["allocated_bytes"] == cpu["above_start_bytes"]).all()  # totals = running sum of Bytes here


# ---------------------------------------------------------------------------- hand-built


def _mem(
    ts: float, nbytes: int, alloc: int | None, reserved: int | None, dev_type: int = 1, dev_id: int = 0, tid: int = 1
) -> dict:
    args = {"Device Type": dev_type, "Device Id": dev_id, "Addr": 1000 + int(ts), "Bytes": nbytes}
    if alloc is not None:
        args.update({"Total Allocated": alloc, "Total Reserved": reserved})
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": tid, "ts": ts, "args": args}


# gpu0 allocated after each sample (MiB): 4, 20, 16, 24, 8, 0; reserved: 32, 32, 32, 64, 64, 64
GPU_SAMPLES = [(10, 4, 4, 32), (20, 16, 20, 32), (30, -4, 16, 32), (40, 8, 24, 64), (50, -16, 8, 64), (60, -8, 0, 64)]
PROPS = [{"id": 0, "name": "Test GPU", "totalGlobalMem": GiB, "numSms": 10, "computeMajor": 9, "computeMinor": 0}]


def _hand_events(second_thread: bool) -> list[dict]:
    ev = [_mem(t, d * MiB, a * MiB, r * MiB) for t, d, a, r in GPU_SAMPLES]
    ev += [
        x("aten::zeros", "cpu_op", 35, 10),
        x("aten::empty", "cpu_op", 38, 4),  # holds t = 40 inside aten::zeros: the innermost op
        x("cudaLaunchKernel", "cuda_runtime", 43, 1, correlation=7),
        x("fill_kernel", "kernel", 45, 3, pid=0, tid=7, device=0, stream=7, correlation=7),  # makes gpu0 a device
    ]
    if second_thread:
        ev.append(x("aten::mm", "cpu_op", 30, 20, tid=2))  # another thread busy at t = 40
    return ev


@pytest.mark.parametrize("second_thread", [False, True])
def test_hand_built_peak(tmp_path, second_thread):
    trace = load_trace(write_trace(tmp_path / "m.json", _hand_events(second_thread), deviceProperties=PROPS))
    s = memory_summary(trace)
    assert len(s) == 1
    row = s.iloc[0]
    assert (row["rank"], row["device"], row["samples"]) == (0, "gpu0", 6)
    assert row["peak_allocated_bytes"] == 24 * MiB and row["peak_allocated_ts"] == 40_000  # 40 us in ns
    assert row["peak_reserved_bytes"] == 64 * MiB and row["peak_reserved_ts"] == 40_000
    assert (row["final_allocated_bytes"], row["final_reserved_bytes"]) == (0, 64 * MiB)
    assert row["peak_above_start_bytes"] == 24 * MiB  # 4 + 16 - 4 + 8: the running sum of Bytes
    assert row["capacity_bytes"] == GiB
    assert row["peak_fraction"] == pytest.approx(24 / 1024)  # 24 MiB of 1 GiB
    assert row["reserved_fraction"] == pytest.approx(64 / 1024)
    if second_thread:  # the counters do not say which thread allocated: no guess
        assert row["peak_op"] == "" and row["peak_op_id"] == -1 and "2 host threads" in row["peak_op_note"]
    else:
        assert row["peak_op"] == "aten::empty" and row["peak_op_note"] == ""


def test_bytes_only_samples(tmp_path):
    """2021-era traces record Bytes only: totals NaN, the peak above the starting level derivable."""
    deltas = [8, 8, -8, 32, -40]  # running sum: 8, 16, 8, 40, 0 -> peak 40 MiB at the 4th sample
    ev = [_mem(10 * (i + 1), d * MiB, None, None) for i, d in enumerate(deltas)]
    ev.append(x("k", "kernel", 1, 1, pid=0, tid=7, device=0, stream=7))
    trace = load_trace(write_trace(tmp_path / "b.json", ev, deviceProperties=PROPS))
    row = memory_summary(trace).iloc[0]
    assert math.isnan(row["peak_allocated_bytes"]) and row["peak_allocated_ts"] == -1
    assert math.isnan(row["peak_fraction"])
    assert row["peak_above_start_bytes"] == 40 * MiB and row["peak_above_start_ts"] == 40_000
    assert memory_timeline(trace)["above_start_bytes"].tolist() == [v * MiB for v in (8, 16, 8, 40, 0)]


def test_downsampling_keeps_peak_and_order(tmp_path):
    # 2000 samples: +1 MiB then -1 MiB alternately (1, 0, 1, 0 ...), one +100 MiB spike at 1500
    ev, level = [], 0
    for i in range(2000):
        d = (100 if i == 1500 else 1) if level == 0 else -level
        level += d
        ev.append(_mem(i + 1, d * MiB, level * MiB, 128 * MiB))
    ev.append(x("k", "kernel", 1, 1, pid=0, tid=7, device=0, stream=7))
    trace = load_trace(write_trace(tmp_path / "d.json", ev, deviceProperties=PROPS))
    exact = memory_timeline(trace)
    assert len(exact) == 2000
    small = memory_timeline(trace, max_points=100)
    assert len(small) <= 100
    assert small["allocated_bytes"].max() == 100 * MiB  # the spike survives
    assert small["ts"].is_monotonic_increasing
    assert small["ts"].iloc[0] == exact["ts"].iloc[0] and small["ts"].iloc[-1] == exact["ts"].iloc[-1]
    with pytest.raises(InputError, match="max_points"):
        memory_timeline(trace, max_points=1)


def test_no_memory_samples_is_empty_not_an_error():
    trace = load_trace(real_trace("sglang_qwen3_decode_mi300x"))
    assert memory_summary(trace).empty and memory_timeline(trace).empty


# ---------------------------------------------------------------------------- real traces


def test_ddp_peak_matches_the_file_and_fits_the_device():
    trace = load_trace(real_trace("ddp_allreduce_v100"))
    s = memory_summary(trace).set_index("device")
    raw = [
        e["args"] for e in _raw("ddp_allreduce_v100") if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1
    ]
    assert s.loc["gpu1", "samples"] == len(raw)
    assert s.loc["gpu1", "peak_allocated_bytes"] == max(a["Total Allocated"] for a in raw)
    assert s.loc["gpu1", "peak_reserved_bytes"] == max(a["Total Reserved"] for a in raw)
    assert s.loc["gpu1", "final_allocated_bytes"] == raw[-1]["Total Allocated"]  # samples are in time order there
    assert (
        s.loc["gpu1", "peak_allocated_bytes"] <= s.loc["gpu1", "peak_reserved_bytes"] <= s.loc["gpu1", "capacity_bytes"]
    )
    assert 0 < s.loc["gpu1", "peak_fraction"] < 1


def test_resnet_legacy_peak_above_start_fits_the_device():
    trace = load_trace(real_trace("resnet50_legacy_v100"))
    s = memory_summary(trace).set_index("device")
    raw = [e for e in _raw("resnet50_legacy_v100") if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1]
    raw.sort(key=lambda e: e["ts"])  # stable: file order within a microsecond, as the reader keeps it
    running = np.cumsum([e["args"]["Bytes"] for e in raw])
    assert s.loc["gpu0", "peak_above_start_bytes"] == max(0, running.max())
    assert math.isnan(s.loc["gpu0", "peak_allocated_bytes"])  # no totals recorded in 2021
    assert s.loc["gpu0", "peak_above_start_bytes"] <= s.loc["gpu0", "capacity_bytes"]


# ---------------------------------------------------------------------------- KV cache


def _shapes_of(folder: str, op: str) -> tuple[list[dict], dict]:
    calls = [e for e in _raw(folder) if e.get("cat") == "cpu_op" and e["name"] == op]
    return calls, calls[0]["args"]


def test_sglang_kv_cache_footprint():
    calls, args = _shapes_of("sglang_qwen3_prefill_mi300x", "sglang::store_cache")
    (_, e), _, (slots, _), _ = args["Input Dims"][:4]  # key [T, heads*dim], value, key_cache [slots, heads*dim]
    assert args["Input type"][2] == "c10::BFloat16"
    per_layer = 2 * slots * e * 2  # K and V caches, 2 bytes per bf16 element
    layers = len(calls)  # one write per layer in the one step
    kv = kv_cache_footprint(load_trace(real_trace("sglang_qwen3_prefill_mi300x"))).iloc[0]
    assert (kv["per_layer_bytes"], kv["layers"], kv["slots"]) == (per_layer, layers, slots)
    assert kv["per_token_layer_bytes"] == 2 * e * 2
    assert kv["kv_cache_bytes"] == per_layer * layers  # 36 layers x 3.42 GB = 123.3 GB
    assert kv["share"] == pytest.approx(per_layer * layers / 206141652992)  # MI300X totalGlobalMem
    assert 0 < kv["share"] < 1 and kv["note"] == ""


@pytest.mark.parametrize("folder", ["vllm_graphs_mi300x", "b200_eager"])
def test_vllm_layers_share_cache_buffers(folder):
    calls, args = _shapes_of(folder, "_C_cache_ops::reshape_and_cache_flash")
    key, _, cache = args["Input Dims"][:3]
    esize = {"c10::BFloat16": 2, "unsigned char": 1}[args["Input type"][2]]  # fp8 caches are stored as uint8
    per_layer = 2 * math.prod(cache) * esize
    kv = kv_cache_footprint(load_trace(real_trace(folder))).iloc[0]
    assert kv["per_layer_bytes"] == per_layer and kv["layers"] == len(calls)
    assert kv["per_token_layer_bytes"] == 2 * math.prod(key[1:]) * esize
    # per layer x layers exceeds the device: vLLM's allocator shares buffers between layers
    assert per_layer * len(calls) > kv["capacity_bytes"]
    assert math.isnan(kv["kv_cache_bytes"]) and "share cache buffers" in kv["note"]


def test_graph_replay_has_no_kv_shapes():
    kv = kv_cache_footprint(load_trace(real_trace("sglang_qwen3_decode_mi300x"))).iloc[0]
    assert math.isnan(kv["kv_cache_bytes"]) and re.search("no KV-cache write op", kv["note"])


# ---------------------------------------------------------------------------- properties


def _counter_trace(deltas: list[int], ts: list[int]) -> Trace:
    """A trace holding only gpu0 memory counters: allocated = running sum of the deltas."""
    alloc = np.cumsum(deltas).astype(np.float64)
    n = len(deltas)
    rows = {"allocated": alloc, "reserved": np.full(n, float(alloc.max())), "alloc_delta": np.asarray(deltas, float)}
    counters = pd.concat(
        [
            pd.DataFrame(
                {
                    "track": "rank0/gpu0/memory",
                    "rank": np.zeros(n, np.int32),
                    "device": "gpu0",
                    "ts": np.asarray(ts, np.int64),
                    "name": name,
                    "value": v,
                }
            )
            for name, v in rows.items()
        ],
        ignore_index=True,
    )
    counters = counters.astype({"track": "category", "device": "category", "name": "category"})
    empty = {t: empty_table(t) for t in ("events", "flows", "devices")}
    return Trace(events=empty["events"], counters=counters, flows=empty["flows"], devices=empty["devices"]).validate()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-(2**20), 2**20), min_size=1, max_size=400), st.integers(2, 60), st.data())
def test_downsampled_timeline_keeps_extremes_and_ends(deltas, max_points, data):
    ts = sorted(data.draw(st.lists(st.integers(0, 10**6), min_size=len(deltas), max_size=len(deltas))))
    trace = _counter_trace(deltas, ts)
    exact, small = memory_timeline(trace), memory_timeline(trace, max_points=max_points)
    assert len(exact) == len(deltas)
    assert exact["above_start_bytes"].iloc[-1] == sum(deltas)
    assert len(small) <= max(max_points, 2) + 2  # two a bin, plus the first and last sample
    assert small["allocated_bytes"].max() == exact["allocated_bytes"].max()
    assert small["allocated_bytes"].min() == exact["allocated_bytes"].min()
    assert small.iloc[0].equals(exact.iloc[0]) and small.iloc[-1].equals(exact.iloc[-1])
    assert small["ts"].is_monotonic_increasing
    s = memory_summary(trace).iloc[0]
    assert s["peak_allocated_bytes"] == max(np.cumsum(deltas)) and s["samples"] == len(deltas)
