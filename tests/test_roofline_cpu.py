"""Issue 3's checks on this CPU: traces recorded here with torch.profiler, floored on a spec that
`perf calibrate` measured here. Timing-sensitive, so marked `serial`: `make test` runs them
after the parallel suite, alone on the machine."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from profiler import analyze, load_trace
from profiler.calibrate import Sizes, calibrate
from profiler.hardware import save_spec

pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    spec = calibrate(Sizes(), links=False)[0]  # full sizes: 2048^3 matmul, 128 MiB triad arrays
    return save_spec(spec, tmp_path_factory.mktemp("spec") / "here.yaml")


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


def test_big_matmul_is_compute_bound(tmp_path, spec_path):
    a_, b_ = torch.randn(2048, 2048), torch.randn(2048, 2048)
    torch.mm(a_, b_)  # warm-up outside the trace
    a = analyze(record(tmp_path, lambda: torch.mm(a_, b_), steps=5), hardware=str(spec_path))
    mm = units_named(a, "aten::mm")
    assert len(mm) == 5 and set(mm["bound"]) == {"compute"}
    assert mm["flops"].iloc[0] == 2 * 2048**3  # 2*M*N*K: one multiply-add is two FLOPs
    # the best of five calls against the best the calibration saw: near 1 when the machine is quiet
    assert 0.5 <= mm["efficiency"].max() <= 1.05


def test_large_elementwise_is_memory_bound(tmp_path, spec_path):
    n = 64 * 2**20  # 64M elements, 256 MiB per fp32 tensor: far past every cache
    x, y = torch.randn(n), torch.randn(n)
    a = analyze(record(tmp_path, lambda: (torch.add(x, y), torch.mul(x, y))), hardware=str(spec_path))
    for name in ("aten::add", "aten::mul"):
        u = units_named(a, name)
        # bytes = 2 inputs + 1 output of 4-byte floats; FLOPs = one per element
        assert u["bytes"].iloc[0] == 3 * 4 * n and u["flops"].iloc[0] == n
        assert set(u["bound"]) == {"memory"}


def test_thousands_of_tiny_adds_are_runtime_bound(tmp_path, spec_path):
    x, y = torch.randn(8), torch.randn(8)

    def many():
        for _ in range(3000):
            torch.add(x, y)

    a = analyze(record(tmp_path, many), hardware=str(spec_path))
    adds = units_named(a, "aten::add")
    assert len(adds) == 3000
    assert (adds["bound"] == "runtime").mean() == 1.0
    cpu = a.equation.iloc[0]
    assert cpu["runtime_ns"] > cpu["compute_ns"] + cpu["memory_ns"]
