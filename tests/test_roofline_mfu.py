"""MFU's time base (analysis.mfu): the profiled steps' wall time, never shorter than the work a
step launched, so no MFU exceeds what the units achieved."""

from __future__ import annotations

import pytest

from profiler.api import analyze, load_trace
from profiler.model.hardware import load_spec
from tests.conftest import write_trace, x

V100 = {
    "deviceProperties": [
        {
            "id": 0,
            "name": "Tesla V100-SXM2-32GB",
            "totalGlobalMem": 34089730048,
            "computeMajor": 7,
            "computeMinor": 0,
            "numSms": 80,
            "warpSize": 32,
        }
    ]
}
MM = {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["float", "float"]}


def _trace(tmp_path, kernel_start_us: float, kernel_us: float):
    """One ProfilerStep [0, 10) us launching a 1024^3 fp32 GEMM (2 * 1024^3 FLOPs) at 2 us."""
    events = [
        x("ProfilerStep#0", "user_annotation", 0, 10),
        x("aten::mm", "cpu_op", 1, 8, **MM),
        x("cudaLaunchKernel", "cuda_runtime", 2, 1, correlation=1, **{"External id": 1}),
        x(
            "volta_sgemm_128x64_nn",
            "kernel",
            kernel_start_us,
            kernel_us,
            pid=0,
            tid=7,
            device=0,
            stream=7,
            correlation=1,
        ),
    ]
    return load_trace(write_trace(tmp_path / "t.json", events, **V100))


def test_a_step_whose_work_outlasts_it_is_timed_by_its_work(tmp_path):
    # The kernel runs [5, 505) us, long after the 10 us step annotation ends (launch is async).
    # Over the annotation alone MFU would be 2.147e9 / 10e-6 / 15.7e12 = 13.7 (1,370%): impossible.
    # The step's time base is its work's window, 500 us: MFU = 2 * 1024^3 / (500e-6 * 15.7e12) = 27.4%.
    a = analyze(_trace(tmp_path, 5, 500), top=None)
    peak = load_spec("v100-sxm2-32gb").peak("fp32", "matrix")
    u = a.utilization.set_index("device").loc["gpu0"]
    assert (u["steps"], u["time_ns"], u["time_base"]) == (1, 500_000, "1 step's wall time")
    assert u["compute_util"] == pytest.approx(2 * 1024**3 / (500e-6 * peak))
    step = a.iterations.set_index("step").loc[0]
    assert step["wall_ns"] == 500_000 and step["mfu"] == pytest.approx(u["compute_util"])


def test_a_step_longer_than_its_work_is_timed_by_its_annotation(tmp_path):
    # Kernel [5, 8) us inside the 10 us step: the step's 10 us of wall time is the base, host time
    # included (the kernel's 3 us is a toy time: only the base is checked)
    a = analyze(_trace(tmp_path, 5, 3), top=None)
    u = a.utilization.set_index("device").loc["gpu0"]
    assert (u["steps"], u["time_ns"]) == (1, 10_000)
