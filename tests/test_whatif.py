"""What-if: other hardware and other precision re-floor the same trace."""

from __future__ import annotations

import pytest

from profiler import analyze, load_trace
from profiler.model.hardware import load_spec
from tests.conftest import real_trace


@pytest.fixture(scope="module")
def b200():
    return load_trace(real_trace("b200_eager"))


def test_dtype_whatif_refloors_gemms_only(b200):
    base, fp8 = analyze(b200), analyze(b200, dtype="fp8")
    gemm = base.units["family"] == "gemm"
    spec = load_spec("b200")
    ratio = spec.peak("bf16", "matrix") / spec.peak("fp8", "matrix")  # 2.25 / 4.5 PFLOP/s dense = 0.5
    got = fp8.units.loc[gemm, "t_compute_ns"].to_numpy() / base.units.loc[gemm, "t_compute_ns"].to_numpy()
    assert got == pytest.approx([ratio] * int(gemm.sum()))
    other = ~gemm & base.units["t_compute_ns"].notna()
    assert (fp8.units.loc[other, "t_compute_ns"] == base.units.loc[other, "t_compute_ns"]).all()
    assert fp8.whatif_dtype == "fp8"


def test_hardware_whatif_lowers_the_floor_total():
    trace = load_trace(real_trace("resnet50_legacy_v100"))
    v100, h100 = analyze(trace), analyze(trace, hardware="h100-sxm")
    assert v100.hardware["rank0/gpu0"] == "v100-sxm2-32gb" and h100.hardware["rank0/gpu0"] == "h100-sxm"
    # the same units at their floors: H100 has 3.7x V100's HBM bandwidth (3.35 vs 0.9 TB/s), and
    # these units are memory bound, so their total floor shrinks by about that much
    ratio = h100.utilization["floor_ns"].iloc[0] / v100.utilization["floor_ns"].iloc[0]
    assert 0.2 < ratio < 0.35
    assert h100.utilization["unknown_ns"].iloc[0] == v100.utilization["unknown_ns"].iloc[0]


def test_utilization_is_achieved_over_peak(b200):
    a = analyze(b200)
    u = a.utilization.set_index("device").loc["gpu0"]
    spec = load_spec("b200")
    window_s = a.equation.set_index("device").loc["gpu0", "window_ns"] / 1e9
    assert u["compute_util"] == pytest.approx(u["flops"] / window_s / spec.peak(u["compute_dtype"], "matrix"))
    assert u["memory_util"] == pytest.approx(u["bytes"] / window_s / spec.bandwidth())
    assert 0 < u["memory_util"] < 1 and 0 < u["compute_util"] < 1
