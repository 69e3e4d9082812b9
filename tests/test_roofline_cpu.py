"""Issue 3's checks on this CPU: traces recorded here with torch.profiler, classified on a fixed
spec (generic-x86-cpu, whose numbers are cited in its YAML), so the bound of each op follows from
its FLOPs and bytes alone and no timing decides the outcome. A gloo all_reduce recorded here is
tests/test_cost_comm.py's. How close each op runs to a spec
`perf calibrate` measured here is a measurement: benchmarks/bench_roofline_cpu.py prints it."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from profiler import analyze, load_trace
from profiler.model.hardware import load_spec

SPEC = "generic-x86-cpu"


def record(tmp_path, fn, steps: int = 1):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            fn()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return load_trace(path)


def units_named(a, name):
    u = a.units
    return u[u["name"] == name]


def test_big_matmul_is_compute_bound(tmp_path):
    a_, b_ = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a = analyze(record(tmp_path, lambda: torch.mm(a_, b_), steps=3), hardware=SPEC)
    mm = units_named(a, "aten::mm")
    assert len(mm) == 3 and set(mm["bound"]) == {"compute"}
    assert mm["flops"].iloc[0] == 2 * 1024**3  # 2*M*N*K: one multiply-add is two FLOPs
    spec = load_spec(SPEC)
    # t_compute = 2.15 GFLOP / the fp32 matrix peak; t_memory = 3 x 4 MiB over DRAM: compute is larger
    assert mm["t_compute_ns"].iloc[0] == 2 * 1024**3 / spec.peak("fp32", "matrix") * 1e9
    assert mm["t_compute_ns"].iloc[0] > mm["t_memory_ns"].iloc[0]


def test_large_elementwise_is_memory_bound(tmp_path):
    n = 16 * 2**20  # 16M elements, 64 MiB per fp32 tensor: past the preset's 8 MiB L3
    x, y = torch.randn(n), torch.randn(n)
    a = analyze(record(tmp_path, lambda: (torch.add(x, y), torch.mul(x, y))), hardware=SPEC)
    for name in ("aten::add", "aten::mul"):
        u = units_named(a, name)
        # bytes = 2 inputs + 1 output of 4-byte floats; FLOPs = one per element
        assert u["bytes"].iloc[0] == 3 * 4 * n and u["flops"].iloc[0] == n
        assert set(u["bound"]) == {"memory"} and set(u["memory_level"]) == {"dram"}
        # 201 MB / 20 GB/s = 10.1 ms against 16.8 MFLOP / 192 GFLOP/s = 87 us
        assert u["t_memory_ns"].iloc[0] == 3 * 4 * n / 20e9 * 1e9


def test_thousands_of_tiny_adds_are_runtime_bound(tmp_path):
    x, y = torch.randn(8), torch.randn(8)

    def many():
        for _ in range(3000):
            torch.add(x, y)

    a = analyze(record(tmp_path, many), hardware=SPEC)
    adds = units_named(a, "aten::add")
    assert len(adds) == 3000
    # 8 FLOPs and 96 bytes take under a nanosecond at the preset's peaks; the floor is the
    # dispatch time of an op (min_op_time 50 ns)
    assert (adds["bound"] == "runtime").mean() == 1.0
    cpu = a.equation.iloc[0]
    assert cpu["runtime_ns"] > cpu["compute_ns"] + cpu["memory_ns"]
