"""Zero-length events are marks, not work: a device whose only work events last 0 ns did no work
(no device-time row), and an op of 0 ns, having no measured time, is above no ceiling (a
simulated serving trace's `npu::kv_cache_write` ops on its host track)."""

from __future__ import annotations

from tests.conftest import x

from profiler import api


def _trace(tiny):
    """A simulated trace: a 10 µs kernel on npu0, two 0 µs cache-write ops on the host track."""
    events = [
        x("mm", "kernel", 0.0, 10.0, pid=0, tid=0),
        x("npu::kv_cache_write", "cpu_op", 1.0, 0.0, pid=1, tid=0),
        x("npu::kv_cache_write", "cpu_op", 5.0, 0.0, pid=1, tid=0),
    ]
    props = [{"id": 0, "name": "datacenter-npu", "totalGlobalMem": 96 * 2**30}]
    return api.load_trace(tiny(events, traceSource="simulator", deviceProperties=props))


def test_a_device_with_only_zero_length_work_has_no_row(tiny):
    result = api.analyze(_trace(tiny))
    dt = result.device_time
    assert dt["device"].astype(str).tolist() == ["npu0"]
    assert dt["busy_ns"].tolist() == [10_000]


def test_zero_length_ops_are_above_no_ceiling(tiny):
    top = api.analyze(_trace(tiny)).top_ops
    row = top[top["name"] == "npu::kv_cache_write"]
    assert row["count"].tolist() == [2] and row["total_ns"].tolist() == [0]
    assert row["above_ceiling"].dtype == bool and not row["above_ceiling"].any()
