"""A CPU running device work (profiler.model.devices: 'cpu<N>', e.g. IREE's llvm-cpu dispatches):
a device marked `"deviceType": "cpu"` in deviceProperties is labelled cpu0, floored on the CPU's
spec (`--hardware` applies to it: the trace is CPU-only) and costed from the fusion map the
trace carries, so every dispatch gets a floor, a bound and an efficiency. No IREE needed."""

from __future__ import annotations

import pytest

from profiler.api import analyze, load_trace
from profiler.model.devices import device_kind, runs_on_cpu
from tests.conftest import write_trace, x

# one matmul dispatch: 2*M*N*K = 2*16*128*64 = 262,144 FLOP; bytes 16x64 + 128x64 in, 16x128 out, fp32
FLOPS = 2 * 16 * 128 * 64
READ, WRITTEN = 4 * (16 * 64 + 128 * 64), 4 * 16 * 128
NAME = "main$async_dispatch_0_matmul_16x128x64_f32"


def _trace(tmp_path, device_type: str | None):
    props = {"id": 0, "name": "IREE local-task", "totalGlobalMem": 0}
    if device_type:
        props["deviceType"] = device_type
    fusion = [
        {
            "runtime_name": NAME,
            "kind": "iree",
            "flops": FLOPS,
            "bytes_read": READ,
            "bytes_written": WRITTEN,
            "dtype": "fp32",
            "family": "gemm",
        }
    ]
    events = [x(NAME, "kernel", 10 + 20 * i, 10, pid=0, tid=0, device=0, stream=0) for i in range(3)]
    return write_trace(
        tmp_path / "t.json",
        events,
        deviceProperties=[props],
        perfCompile={"tables": {"fusion": fusion}},
    )


def test_labels():
    assert [device_kind(d) for d in ("cpu", "cpu0", "gpu3", "npu1", "tpu0")] == ["host", "cpu", "gpu", "npu", ""]
    assert runs_on_cpu("cpu") and runs_on_cpu("cpu0") and not runs_on_cpu("gpu0")


def test_cpu_device_gets_floors_from_the_cpu_spec(tmp_path):
    trace = load_trace(_trace(tmp_path, "cpu"))
    assert set(trace.events["device"].astype(str)) == {"cpu0"}
    a = analyze(trace)
    assert a.hardware == {"rank0/cpu0": "generic-x86-cpu"}
    u = a.units
    assert len(u) == 3 and (u["flops"] == FLOPS).all() and (u["bound"] == "compute").all()
    # generic-x86-cpu: no matrix peak, vector fp32 192 GFLOP/s: 262,144 / 192e9 s = 1,365.3 ns; min op time 50 ns
    assert u["floor_ns"].to_numpy() == pytest.approx(FLOPS / 192e9 * 1e9)
    assert u["efficiency"].to_numpy() == pytest.approx(FLOPS / 192e9 * 1e9 / 10_000)  # a 10 us run
    # --hardware applies to a CPU-only trace's CPU device (a spec perf calibrate writes, or a preset)
    assert analyze(trace, hardware="h100-sxm").hardware == {"rank0/cpu0": "h100-sxm"}


def test_unmarked_device_stays_a_gpu_without_floors(tmp_path):
    trace = load_trace(_trace(tmp_path, None))
    assert set(trace.events["device"].astype(str)) == {"gpu0"}
    a = analyze(trace)
    assert a.hardware == {"rank0/gpu0": ""} and a.units["floor_ns"].isna().all()
